-- leases: the concurrency limit, the live leases, earliest expiry first,
-- each an expiry and a cost, then the line of waiters, first come first,
-- each a deadline and minus its ticket; the latest expiry the key handed
-- out (Time, a high-water mark) and the latest ticket (A).
--
-- Depends on: prelude, time, arith (fill), slidinglog (ENTRY, entryAt,
-- costAt: a lease or a waiter is packed as a sliding log's entry is, its
-- expiry or deadline in place of the request's instant).
-- Translates: Params.stepLeases, splitLeases, waits, place, waiting,
-- leaseAt and leaseSum (engine/leases.go).
--
-- The log is stLog, the high-water mark stS, stN, and the latest ticket
-- stA. Go's held and line, the log split by splitLeases, are the entries
-- 1 to n of the log and n + 1 to its end; Go's held less the leases that
-- have expired is the entries first to n: Go's index i in it is i - first
-- here. A lease's expiry is its identity: what the step returns as
-- Decision.At for an acquisition or an extension, and the op's instant
-- (atS, atN) that a release (CANCEL) or an extension names. A waiter's
-- ticket is a whole number up to 2^53, which a double holds exactly: the
-- op's instant for ALLOW, CHECK and LEAVE, atS * 1e9 + atN (the Go side
-- splits Op.At as it splits an instant), and Decision.At of a denied
-- acquisition that waits, returned as such a pair; they start from 1
-- again once the key is fresh (stA is then taken as 0, as if the key had
-- been forgotten). A release that finds its lease, a waiter's leaving and
-- a waiter served are told to the key's waiters by the function that
-- called the step, once it has written the key (decide's frees, io's
-- released).

-- MAX_TICKET is maxTicket, the last ticket a line hands out.
local MAX_TICKET = EXACT

-- entries returns the packed entries from to to of log, none if to is
-- before from.
local function entries(log, from, to)
  return sub(log, (from - 1) * ENTRY + 1, to * ENTRY)
end

-- splitLeases is splitLeases: it returns n, the count of the leases that
-- start the log of count entries; the waiters, whose costs are negative,
-- are the entries after them.
local function splitLeases(log, count)
  local i = count
  while i > 0 and costAt(log, i) < 0 do i = i - 1 end
  return i
end

-- waits is waits: whether any waiter of the line, the entries from to to
-- of log, is still waiting at now.
local function waits(log, from, to)
  for i = from, to do
    local ws, wn = entryAt(log, i)
    if tless(nowS, nowN, ws, wn) then return true end
  end
  return false
end

-- place is place: where the caller of ticket stands in the line, the
-- entries from to to of log, at now: how many live waiters are ahead of
-- it, whether ticket is a live waiter's (if not, every live waiter is
-- ahead), and the earliest deadline of those ahead (nil for none).
local function place(log, from, to, ticket)
  local ahead, firstS, firstN = 0, nil, nil
  for i = from, to do
    local ws, wn, c = entryAt(log, i)
    if tless(nowS, nowN, ws, wn) then -- else it left the line at its deadline
      if -c == ticket then return ahead, true, firstS, firstN end
      if ahead == 0 or tless(ws, wn, firstS, firstN) then firstS, firstN = ws, wn end
      ahead = ahead + 1
    end
  end
  return ahead, false, firstS, firstN
end

-- waiting is waiting: kept, packed entries, followed by the waiters of
-- the line, the entries from to to of log, that are still waiting at now,
-- with the deadline of ticket's set to (dlS, dlN), or ticket's left out if
-- dlS is nil.
local function waiting(kept, log, from, to, ticket, dlS, dlN)
  local out = {kept}
  for i = from, to do
    local ws, wn, c = entryAt(log, i)
    if tless(nowS, nowN, ws, wn) then -- else it left the line at its deadline
      if -c ~= ticket then
        out[#out + 1] = entries(log, i, i)
      elseif dlS then
        out[#out + 1] = pack('<ddd', dlS, dlN, c)
      end
    end
  end
  return table.concat(out)
end

-- leaseAt returns the index in log, from first to n, of the lease that
-- expires at (atS, atN), or nil if none does.
local function leaseAt(log, first, n, atS, atN)
  for i = first, n do
    local es, en = entryAt(log, i)
    if es == atS and en == atN then return i end
  end
  return nil
end

-- leaseSum is the cost of the leases first to n of log, summed in order.
local function leaseSum(log, first, n)
  local sum = 0
  for i = first, n do sum = sum + costAt(log, i) end
  return sum
end

-- leases is stepLeases: markS, markN is Go's mark, idS, idN Go's d.At (a
-- lease's identity or a waiter's ticket), and mdS, mdN the op's patience
-- (Op.MaxDelay).
local function leases(verb, cost, atS, atN, mdS, mdN)
  local allowed, retryS, retryN, idS, idN = false, nil, nil, nil, nil
  local log = stLog
  local count = #log / ENTRY
  local n = splitLeases(log, count) -- held: 1 to n; the line: n + 1 to count
  local first = 1
  while first <= n do
    local es, en = entryAt(log, first)
    if tless(nowS, nowN, es, en) then break end -- expired: its Time <= now
    first = first + 1
  end
  local markS, markN = stS, stN
  local sum = leaseSum(log, first, n)
  local gone = 0 -- the ticket of a waiter that leaves the line, served or not
  local tickets = stA -- handed out: none once the key is fresh again, as if forgotten
  if not tless(nowS, nowN, markS, markN) and not waits(log, n + 1, count) then
    tickets = 0
  end
  if verb == CANCEL or verb == EXTEND then
    local i = leaseAt(log, first, n, atS, atN)
    if i then
      allowed = true
      local lease = costAt(log, i)
      local kept = entries(log, first, i - 1) .. entries(log, i + 1, n)
      if verb == EXTEND then
        local ttlS, ttlN = tadd(nowS, nowN, interval)
        markS, markN = tmax(ttlS, ttlN, tadd(markS, markN, 1)) -- max(now + Interval, mark + 1)
        idS, idN = markS, markN
        kept = kept .. pack('<ddd', markS, markN, lease)
        stS, stN = markS, markN
      end
      sum = leaseSum(kept, 1, #kept / ENTRY)
      stLog = waiting(kept, log, n + 1, count, 0, nil, nil)
    end
  elseif verb == LEAVE then
    local ticket = atS * 1e9 + atN
    local _, mine = place(log, n + 1, count, ticket)
    if mine then
      allowed, gone = true, ticket
      stLog = waiting(entries(log, first, n), log, n + 1, count, ticket, nil, nil)
    end
  else -- ALLOW, CHECK
    local ticket = atS * 1e9 + atN
    local ahead, mine, firstS, firstN = place(log, n + 1, count, ticket)
    local x = sum + cost - limit
    local over = (n - first + 1) - maxEntries -- leases to expire before one more is live
    if cost == 0 then over = -1 end
    if x <= slack and over < 0 and ahead == 0 then
      allowed = true
      sum = fill(sum, cost)
      if cost > 0 then
        local ttlS, ttlN = tadd(nowS, nowN, interval)
        markS, markN = tmax(ttlS, ttlN, tadd(markS, markN, 1)) -- max(now + Interval, mark + 1)
      end
      if mine then gone = ticket end
      if verb == ALLOW and (cost > 0 or mine) then
        local kept = entries(log, first, n)
        if cost > 0 then
          idS, idN = markS, markN
          kept = kept .. pack('<ddd', markS, markN, cost)
          stS, stN = markS, markN
        end
        stLog = waiting(kept, log, n + 1, count, ticket, nil, nil)
        stA = tickets
      end
    else
      retryS, retryN = firstS, firstN -- when the first waiter ahead could have left
      if not (x <= slack and over < 0) then
        -- The leases alone admit once enough of the earliest have
        -- expired.
        for i = first, n do
          x = x - costAt(log, i)
          if x <= slack and i - first >= over then
            local es, en = entryAt(log, i)
            if retryS then es, en = tmax(retryS, retryN, es, en) end
            retryS, retryN = es, en
            break
          end
        end
      end
      if verb == ALLOW and (mdS > 0 or mdN > 0) then
        local dlS, dlN = tplus(nowS, nowN, mdS, mdN) -- the deadline: now + its patience
        local kept = entries(log, first, n)
        if mine then
          idS, idN = atS, atN
          stLog = waiting(kept, log, n + 1, count, ticket, dlS, dlN)
        elseif ahead < maxEntries and tickets < MAX_TICKET then
          stA = tickets + 1
          idS, idN = tadd(0, 0, stA)
          stLog = waiting(kept, log, n + 1, count, 0, nil, nil) .. pack('<ddd', dlS, dlN, -stA)
        end
      end
    end
  end
  -- Fresh once the latest deadline has passed too, of the waiters as the
  -- op leaves them (a check, as an admission would): the log it wrote, or
  -- the line it found. stLog is either: only an op that records sets it.
  local out = stLog
  count = #out / ENTRY
  for i = splitLeases(out, count) + 1, count do
    local ws, wn, c = entryAt(out, i)
    if -c ~= gone then markS, markN = tmax(markS, markN, ws, wn) end
  end
  return allowed, sum, retryS, retryN, markS, markN, nil, nil, idS, idN
end
