-- leases: the concurrency limit, the live leases, earliest expiry first,
-- each an expiry and a cost, and the latest expiry the key handed out
-- (Time, a high-water mark).
--
-- Depends on: prelude, time, arith (fill), slidinglog (ENTRY, entryAt,
-- costAt: a lease is packed as a sliding log's entry is, its expiry in
-- place of the request's instant).
-- Translates: Params.stepLeases, leaseAt and leaseSum (engine/leases.go).
--
-- The leases are stLog, and the high-water mark stS, stN. Go's live, the
-- log less the leases that have expired, is the entries first to n of the
-- log: Go's index i in live is i - first here. A lease's expiry is its
-- identity: what the step returns as Decision.At for an acquisition or an
-- extension, and the op's instant (atS, atN) that a release (CANCEL) or an
-- extension names. A release that finds its lease is told to the key's
-- waiters by the function that called the step, once it has written the
-- key (io's released).

-- entries returns the packed entries from to to of log, none if to is
-- before from.
local function entries(log, from, to)
  return sub(log, (from - 1) * ENTRY + 1, to * ENTRY)
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

-- leases is stepLeases: markS, markN is Go's mark, and idS, idN the
-- lease's identity it gives as d.At.
local function leases(verb, cost, atS, atN)
  local allowed, retryS, retryN, idS, idN = false, nil, nil, nil, nil
  local log = stLog
  local n = #log / ENTRY
  local first = 1
  while first <= n do
    local es, en = entryAt(log, first)
    if tless(nowS, nowN, es, en) then break end -- expired: its Time <= now
    first = first + 1
  end
  local markS, markN = stS, stN
  local sum
  if verb == CANCEL or verb == EXTEND then
    local i = leaseAt(log, first, n, atS, atN)
    if not i then
      sum = leaseSum(log, first, n)
    else
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
      stLog = kept
      sum = leaseSum(kept, 1, #kept / ENTRY)
    end
  else -- ALLOW, CHECK
    sum = leaseSum(log, first, n)
    local x = sum + cost - limit
    local over = (n - first + 1) - maxEntries -- leases to expire before one more is live
    if cost == 0 then over = -1 end
    if x <= slack and over < 0 then
      allowed = true
      sum = fill(sum, cost)
      if cost > 0 then
        local ttlS, ttlN = tadd(nowS, nowN, interval)
        markS, markN = tmax(ttlS, ttlN, tadd(markS, markN, 1)) -- max(now + Interval, mark + 1)
        if verb == ALLOW then
          idS, idN = markS, markN
          stLog = entries(log, first, n) .. pack('<ddd', markS, markN, cost)
          stS, stN = markS, markN
        end
      end
    else
      -- Admitted once enough of the earliest leases have expired (a
      -- release may come sooner).
      for i = first, n do
        x = x - costAt(log, i)
        if x <= slack and i - first >= over then
          retryS, retryN = entryAt(log, i)
          break
        end
      end
    end
  end
  return allowed, sum, retryS, retryN, markS, markN, nil, nil, idS, idN
end
