-- sluice decisions, run atomically by Redis: an exact translation of
-- the Go step functions of package engine (engine/params.go, strict.go,
-- bucket.go, gcra.go, tokenbucket.go, atmost.go, fixedwindow.go,
-- slidingwindow.go) and of its group decision (engine/group.go), which are
-- the specification.
--
-- KEYS     the keys decided: one, or one per limit of a group
-- ARGV[1]  the inputs, packed as little-endian bytes and doubles: first
--          the op's (struct format '<BBddddd'): verb, clock (1 for the
--          caller's), now in seconds and nanoseconds, the TTL margin in
--          milliseconds (the callers' clock skew), and a reservation's
--          MaxDelay in seconds and nanoseconds; then, for each key, its
--          limit's ('<BBBddddddddd'): kind, variant, counted denials (1
--          for Params.CountDenied), limit, interval, amount, max entries,
--          cost, the op's instant (Op.At: a cancel's reservation, or the
--          instant before which a reservation is not booked) in seconds
--          and nanoseconds, and the penalty in seconds and nanoseconds
--
-- Kinds and verbs are engine.Kind and engine.Verb as numbers. The variant
-- is 1 for the token bucket's interval refill and anchored fixed windows.
-- In server-clock mode the now fields are ignored: the script reads TIME
-- once, for every limit it decides, and a cancel's instant is on the
-- server's clock, as the reservation's reply gave it. The Go side has
-- validated all; the script still refuses a verb or kind it does not
-- know, with an error reply starting "UNSUPPORTED". Packed doubles read
-- back exactly and without parsing text.
--
-- Lua numbers are doubles, like Go's float64: amounts go through the same
-- operations in the same order as in Go, so they come out bit-identical.
-- Times are kept as (seconds, nanoseconds) pairs, because nanoseconds since
-- the epoch exceed 2^53, and so are the durations of a decision. Spans
-- (intervals, drain times) and differences of times are single numbers,
-- exact below 2^53 ns, which is all the algorithms need: the Go side
-- refuses Params with longer spans. Where a difference can be longer (a
-- state booked far ahead, a clock that stepped far back), the functions
-- below say how they stay exact.
--
-- Each key holds one string, read with GET and written with SET ... PX: a
-- header packed as '<Bdddddd' (kind; exp_sec, exp_nsec, when the state is
-- fresh again, which tells an expired state of another algorithm from a
-- key conflict; sec, nsec, a, b, the State's Time, A and B); when the key
-- is blocked by a penalty, the kind has 128 added and the header is
-- followed by the block's end (State.Until) as seconds and nanoseconds
-- ('<dd'); then the sliding log's entries, oldest first, packed as below.
--
-- A decision's reply is a record: a status byte (1 if allowed, plus 2 if
-- blocked, plus 4 if a reservation waits), then doubles: used, remaining,
-- retry after and reset after (each as seconds and nanoseconds); for a
-- reservation that waits, its delay and its instant (Decision.At) as
-- seconds and nanoseconds pairs; for a partial grant (the verb at most),
-- the cost granted. A group's reply is a byte, the index of the limit
-- whose decision the group's is made from, then the group's record and
-- each limit's. On a key conflict, the reply is packed as '<BBB': 128,
-- the stored kind, the index of the key.

-- The file is made of sections, each starting with a line "-- @section
-- name": the Go side builds each script from the prelude before the first
-- section, the sections its algorithms need, the decide section and the
-- single or group section, so that a call defines only the functions it
-- runs (Redis runs a script's body, function definitions included, on
-- every call). Each algorithm's section ends by registering its step
-- function in steps.

local LEAKY, GCRA, TOKEN, FIXED, LOG, COUNTER = 1, 2, 3, 4, 5, 6 -- engine.Kind
local ALLOW, CHECK, FILL, RESERVE, CANCEL, ATMOST = 1, 2, 3, 4, 5, 6 -- engine.Verb
local TOLERANCE = 2^-48
local MAX_SPAN = 2^60
local EXACT = 2^53 -- doubles hold every integer up to here
local CONFLICT = 128 -- a conflict reply's first byte
local BLOCKED = 128 -- added to a stored kind: the block's end follows

local OP, OP_SIZE = '<BBddddd', 42
local LIMIT, LIMIT_SIZE = '<BBBddddddddd', 75
if #ARGV[1] ~= OP_SIZE + #KEYS * LIMIT_SIZE then
  return redis.error_reply('ERR sluice: ' .. #ARGV[1] .. ' bytes of input for ' .. #KEYS .. ' keys')
end
local verb, callerClock, nowS, nowN, marginMs, delayS, delayN = struct.unpack(OP, ARGV[1])
if callerClock == 0 then
  local t = redis.call('TIME')
  nowS, nowN = tonumber(t[1]), tonumber(t[2]) * 1000
end

-- The limit being decided: its Params, set by use, its algorithm's step
-- function, and its key's state (Time as stS, stN; A; B; the sliding
-- log's entries; Until as stUS, stUN, zero for none).
local kind, variant, countDenied, limit, interval, amount, maxEntries, slack, penS, penN
local step, fillUp
local steps, fillUps = {}, {}
local stS, stN, stA, stB, stLog, stUS, stUN = 0, 0, 0, 0, '', 0, 0

-- Time pairs: s seconds and n nanoseconds, 0 <= n < 1e9. Seconds may be
-- negative: an instant computed before the epoch compares and subtracts
-- as any other. Durations are pairs too, never negative.

local function tless(as, an, bs, bn)
  return as < bs or (as == bs and an < bn)
end

local function tmax(as, an, bs, bn)
  if tless(as, an, bs, bn) then return bs, bn end
  return as, an
end

-- tdiff returns a - b in nanoseconds as Go's float64(a - b): exact below
-- 2^53 ns, and otherwise rounded once, like Go's conversion, since
-- (as - bs) * 1e9 = (as - bs) * 1953125 * 2^9 is exact for differences of
-- less than 2^53 / 1953125 s (146 years).
local function tdiff(as, an, bs, bn)
  return (as - bs) * 1e9 + (an - bn)
end

-- tadd returns s, n plus d nanoseconds, d a whole number held exactly: any
-- below 2^53, and larger ones a double holds (the quotient by 1e9 stays
-- below 2^53 / 1953125, so q * 1e9 is exact, and d - q * 1e9 is the
-- difference of two doubles within a factor of two of each other).
local function tadd(s, n, d)
  local q = math.floor(d / 1e9)
  n = n + (d - q * 1e9)
  s = s + q
  -- The division may have rounded up to a whole quotient, and n may carry.
  if n < 0 then
    n, s = n + 1e9, s - 1
  elseif n >= 1e9 then
    n, s = n - 1e9, s + 1
  end
  return s, n
end

-- tsub returns the pair a - b, exactly.
local function tsub(as, an, bs, bn)
  local s, n = as - bs, an - bn
  if n < 0 then n, s = n + 1e9, s - 1 end
  return s, n
end

-- tplus returns the pair a + b, exactly.
local function tplus(as, an, bs, bn)
  local s, n = as + bs, an + bn
  if n >= 1e9 then n, s = n - 1e9, s + 1 end
  return s, n
end

-- after returns Go's after(t, now), the time from now until t and never
-- negative, as a pair. A nil ts is no instant, a zero duration.
local function after(ts, tn)
  if ts == nil or not tless(nowS, nowN, ts, tn) then return 0, 0 end
  return tsub(ts, tn, nowS, nowN)
end

-- Go's helpers, in the same operations and order.

local function fmax(x, y)
  if x > y then return x end
  return y
end

local function fmin(x, y)
  if x < y then return x end
  return y
end

local function fill(level, c)
  level = level + c
  if level >= limit - slack then return limit end
  return level
end

-- The algorithms. Each section registers its step function in steps and,
-- for counted denials, the function that fills a key up to its limit in
-- fillUps (the fixed window and the sliding log have none: an Allow of
-- what is left fills them).
--
-- A step is a function of the verb, the cost, the op's
-- instant (Op.At) and a reservation's maximum delay (pairs), since a
-- decision may run several of them (a partial grant, a penalty, a
-- group); each updates the state as the Go step does (clearing Until
-- where Go writes a whole new State), and returns: allowed, used (before
-- clamping), the instants retry and reset as pairs (nil for zero), for a
-- booked reservation that waits the instant it may act and the instant a
-- cancel gives it back by (Decision.At, nil for none) as pairs, and GCRA's
-- remaining.

-- @section ceilNanos

local function ceilNanos(ns)
  if not (ns > 0) then return 0 end
  ns = ns - ns * TOLERANCE
  if not (ns < MAX_SPAN) then return MAX_SPAN end
  return math.ceil(ns)
end

-- @section floorNanos

local function floorNanos(ns)
  if not (ns > 0) then return 0 end
  ns = ns + ns * TOLERANCE
  if not (ns < MAX_SPAN) then return MAX_SPAN end
  return math.floor(ns)
end

-- @section drain

local function drain(x)
  if x <= slack then return 0 end
  return ceilNanos(x * interval / amount)
end

-- @section refills

local function refills(x)
  if x <= slack then return 0 end
  return math.ceil((x - slack) / amount)
end

-- @section idiv

-- Integer arithmetic on doubles, for operands below 2^53.

-- idiv returns floor(a / b) for a >= 0, b > 0, correcting the same rounding.
local function idiv(a, b)
  local q = math.floor(a / b)
  if a - q * b < 0 then q = q - 1 end
  return q
end

-- @section mod

-- Integer arithmetic on doubles, for operands below 2^53.

-- addmod returns (x + y) mod m for x, y in [0, m) without forming x + y,
-- which may exceed 2^53.
local function addmod(x, y, m)
  local gap = m - y
  if x >= gap then return x - gap end
  return x + y
end

-- tmod returns (s * 1e9 + n) mod m for the pair (s, n), 0 <= s < 2^46,
-- exactly. C's fmod is exact, so it is given exact operands only: each
-- half of s, split at 2^23, times 1e9 stays below 2^53, and the high
-- half's product is then scaled by a power of two, which is exact.
local function tmod(s, n, m)
  local hi = math.floor(s / 2^23)
  local lo = s - hi * 2^23
  local r = addmod(math.fmod(hi * 1e9 * 2^23, m), math.fmod(lo * 1e9, m), m)
  return addmod(r, math.fmod(n, m), m)
end

-- @section window

-- windowStart returns floorDiv(now, interval) * interval.
local function windowStart()
  return tadd(nowS, nowN, -tmod(nowS, nowN, interval))
end

-- @section meter

-- levelAt is Go's levelAt: the level at t of the point a at p, leaked
-- after it, and before it higher by what leaks from t to the point.
local function levelAt(ps, pn, a, ts, tn)
  if ts == ps and tn == pn then return a end
  local elapsed = tdiff(ts, tn, ps, pn)
  if elapsed < 0 then return a + (-elapsed) * amount / interval end
  if elapsed >= drain(a) then return 0 end
  return fmax(a - elapsed * amount / interval, 0)
end

-- span is Go's span: when, relative to a point, an excess of x over the
-- limit has leaked.
local function span(x)
  if x >= -slack then return drain(x) end
  return -floorNanos(-x * interval / amount)
end

-- emptyAt returns the instant at which the point a at p has leaked to
-- zero: Go's emptyAfter before it is made relative to now.
local function emptyAt(ps, pn, a)
  if tless(nowS, nowN, ps, pn) then return tadd(ps, pn, drain(a)) end
  return tadd(nowS, nowN, drain(levelAt(ps, pn, a, nowS, nowN)))
end

-- meter is stepMeter: the leaky bucket and the continuous token bucket.
local function meter(verb, cost, atS, atN, mdS, mdN)
  if verb == CANCEL then
    -- Given back a nanosecond late: the point moves to the next
    -- nanosecond, holding the level less the cost.
    local allowed = false
    if tless(nowS, nowN, atS, atN) and stS == atS and stN == atN then
      allowed = true
      stS, stN = tadd(atS, atN, 1)
      stA, stB, stUS, stUN = fmax(stA - cost, 0), 0, 0, 0
    end
    local resetS, resetN = emptyAt(stS, stN, stA)
    return allowed, levelAt(stS, stN, stA, nowS, nowN), nil, nil, resetS, resetN
  end
  -- A fill-up may cost more than the capacity: that never fits, and then
  -- the instant it would fit is never used.
  local fitS, fitN, fits = nil, nil, false
  if cost <= limit then
    fitS, fitN = tadd(stS, stN, span(stA + cost - limit))
    if verb == RESERVE then
      local ls, ln = tmax(fitS, fitN, nowS, nowN)
      if tless(ls, ln, atS, atN) then fitS, fitN = atS, atN end -- booked no earlier than At
    end
    fits = not tless(nowS, nowN, fitS, fitN)
  end
  local allowed, retryS, retryN, waitS, waitN = false, nil, nil, nil, nil
  local recS, recN = nowS, nowN -- when the cost is recorded
  if fits then
    allowed = true
  elseif verb == RESERVE then
    -- Booked iff fitAt - now <= MaxDelay, that is now >= fitAt - MaxDelay,
    -- which is also the instant a retry would be booked.
    local ms, mn = tsub(fitS, fitN, mdS, mdN)
    if not tless(nowS, nowN, ms, mn) then
      allowed, waitS, waitN, recS, recN = true, fitS, fitN, fitS, fitN
    else
      retryS, retryN = ms, mn
    end
  elseif verb ~= FILL then
    retryS, retryN = fitS, fitN
  end
  if verb == FILL or allowed then
    local ls, ln = tmax(stS, stN, recS, recN)
    local filled = fill(levelAt(stS, stN, stA, ls, ln), cost)
    if verb ~= CHECK then stS, stN, stA, stB, stUS, stUN = ls, ln, filled, 0, 0, 0 end
    local resetS, resetN = tadd(ls, ln, drain(filled))
    return allowed, levelAt(ls, ln, filled, nowS, nowN), retryS, retryN, resetS, resetN, waitS, waitN, waitS, waitN
  end
  local resetS, resetN = emptyAt(stS, stN, stA)
  return allowed, levelAt(stS, stN, stA, nowS, nowN), retryS, retryN, resetS, resetN
end

steps.meter = meter

-- fillUp is the meter's part of Go's fillUp: full at now, on the level's
-- line through (now, limit), kept at the point if that lies after now and
-- the line is higher there.
fillUps.meter = function()
  if not tless(nowS, nowN, stS, stN) then
    stA = fmax(levelAt(stS, stN, stA, nowS, nowN), limit)
    stS, stN, stB, stUS, stUN = nowS, nowN, 0, 0, 0
  else
    stA = fmax(stA, levelAt(nowS, nowN, limit, stS, stN))
  end
end

-- @section gcra

-- round is Go's math.Round (half away from zero) for x >= 0.
local function round(x)
  local f = math.floor(x)
  if x - f >= 0.5 then return f + 1 end
  return f
end

local function gcra(verb, cost, atS, atN, mdS, mdN)
  local allowed, retryS, retryN, waitS, waitN, markS, markN = false, nil, nil, nil, nil, nil, nil
  local tau = round(limit * interval)
  local tatS, tatN = tmax(stS, stN, nowS, nowN)
  if verb == CANCEL then
    -- The reservation is the key's last booking iff the TAT is still the
    -- one it left: its instant plus the tolerance. It gives back its cost
    -- less a nanosecond.
    local bs, bn = tadd(atS, atN, tau)
    if tless(nowS, nowN, atS, atN) and stS == bs and stN == bn then
      allowed = true
      stS, stN = tadd(stS, stN, 1 - round(cost * interval))
      tatS, tatN = tmax(stS, stN, nowS, nowN)
    end
  else
    local c = round(cost * interval)
    local nextS, nextN = tadd(tatS, tatN, c)
    local allowS, allowN = tadd(nextS, nextN, -tau)
    local later = false
    if verb == RESERVE then
      local ls, ln = tmax(allowS, allowN, nowS, nowN)
      if tless(ls, ln, atS, atN) then
        -- Booked no earlier than At, as an arrival then.
        local fs, fn = tmax(stS, stN, atS, atN)
        later, allowS, allowN = true, atS, atN
        nextS, nextN = tadd(fs, fn, c)
      end
    end
    if not tless(nowS, nowN, allowS, allowN) then
      allowed = true
      tatS, tatN = nextS, nextN
      if verb ~= CHECK then stS, stN = tatS, tatN end
    elseif verb ~= RESERVE then
      retryS, retryN = allowS, allowN
    else
      local ms, mn = tsub(allowS, allowN, mdS, mdN)
      if not tless(nowS, nowN, ms, mn) then
        -- Booked later than the GCRA needed, it has no instant to give
        -- back: its TAT is not its instant plus the tolerance.
        allowed, waitS, waitN = true, allowS, allowN
        if not later then markS, markN = allowS, allowN end
        tatS, tatN = nextS, nextN
        stS, stN = tatS, tatN
      else
        retryS, retryN = ms, mn
      end
    end
  end
  local backlog = tdiff(tatS, tatN, nowS, nowN)
  return allowed, backlog / interval, retryS, retryN, tatS, tatN, waitS, waitN, markS, markN,
    fmin((tau - backlog) / interval, limit)
end

steps.gcra = gcra

-- fillUp is the GCRA's part of Go's fillUp: full at now.
fillUps.gcra = function()
  local fs, fn = tadd(nowS, nowN, round(limit * interval))
  stS, stN = tmax(stS, stN, fs, fn)
end

-- @section intervalRefill

-- tmul returns k * d nanoseconds as a pair, for whole numbers k >= 0 and
-- d > 0, exactly, by doubling: the product may exceed 2^53.
local function tmul(k, d)
  local bit = 1
  while bit * 2 <= k do bit = bit * 2 end
  local s, n = 0, 0
  while bit >= 1 do
    s, n = s + s, n + n
    if n >= 1e9 then n, s = n - 1e9, s + 1 end
    if k >= bit then
      k = k - bit
      s, n = tadd(s, n, d)
    end
    bit = bit / 2
  end
  return s, n
end

-- taddTimes returns s, n plus k times d nanoseconds, exactly, for a whole
-- number k and d > 0: whole refills after a point that holds more than
-- the burst (a cancel leaves the refill it moves back over in use) can
-- take 2^53 ns or more.
local function taddTimes(s, n, k, d)
  local x = k * d
  if x > -EXACT and x < EXACT then return tadd(s, n, x) end
  if k > 0 then return tplus(s, n, tmul(k, d)) end
  return tsub(s, n, tmul(-k, d))
end

-- refillPoint is Go's refillPoint: the point (used, last) as seen at t,
-- advanced by the whole refills since it, or itself if it lies after t.
local function refillPoint(used, ls, ln, ts, tn)
  if tless(ts, tn, ls, ln) then return used, ls, ln end
  if used > 0 and tless(ls, ln, ts, tn) then
    local elapsed = tdiff(ts, tn, ls, ln)
    local k
    if elapsed < EXACT then
      k = idiv(elapsed, interval)
      ls, ln = tadd(ls, ln, k * interval)
    else
      -- k whole refills, from 2^53 ns: the last refill instant is t less
      -- elapsed mod interval, exactly. k is what used - k * amount needs:
      -- start from a bound below it; if that frees all in use, so does k
      -- (as in Go, where the products of k and amount grow with k);
      -- otherwise count up to k exactly. (Only a state holding more than
      -- 2^51 refills, which a cancel adds one at a time, would need k
      -- beyond 2^51, where this stops counting.)
      local es, en = tsub(ts, tn, ls, ln)
      local rs, rn = tadd(ts, tn, -tmod(es, en, interval))
      k = math.floor(elapsed / interval * (1 - 2^-50))
      if used > k * amount and k < 2^51 then
        local cs, cn = taddTimes(ls, ln, k, interval)
        while tless(cs, cn, rs, rn) do
          k = k + 1
          cs, cn = tadd(cs, cn, interval)
        end
      end
      ls, ln = rs, rn
    end
    used = fmax(used - k * amount, 0)
  end
  if used <= slack then return 0, ts, tn end
  return used, ls, ln
end

-- usedAt is Go's usedAt: the tokens in use at now of the point (used,
-- last), more by the refills still to come before it. From 2^53 ns ahead
-- those are more refills than the burst holds (Params take less than
-- 2^53 ns to refill it), so the tokens in use exceed the limit however
-- they round, and describe clamps them to it.
local function usedAt(used, ls, ln)
  if not tless(nowS, nowN, ls, ln) then return used end
  local ahead = tdiff(ls, ln, nowS, nowN)
  if ahead >= EXACT then return limit end
  return used + (idiv(ahead - 1, interval) + 1) * amount
end

-- intervalRefill is stepIntervalRefill, the token bucket's interval refill.
local function intervalRefill(verb, cost, atS, atN, mdS, mdN)
  if verb == CANCEL then
    -- Given back a nanosecond late: the point moves to a nanosecond after
    -- the refill before it, with the tokens its instant's refill brings
    -- still in use.
    local allowed = false
    if tless(nowS, nowN, atS, atN) and stS == atS and stN == atN then
      allowed = true
      stS, stN = tadd(atS, atN, 1 - interval)
      stA, stB, stUS, stUN = fmax(stA - cost, 0) + amount, 0, 0, 0
    end
    local used, ls, ln = refillPoint(stA, stS, stN, nowS, nowN)
    local resetS, resetN = taddTimes(ls, ln, refills(used), interval)
    return allowed, usedAt(used, ls, ln), nil, nil, resetS, resetN
  end
  local used, ls, ln = refillPoint(stA, stS, stN, nowS, nowN)
  -- Go's refillsTo: refills after the point until the cost fits.
  local fitS, fitN = taddTimes(ls, ln, math.ceil((used + cost - limit - slack) / amount), interval)
  local later = false
  if verb == RESERVE then
    local ms, mn = tmax(fitS, fitN, nowS, nowN)
    if tless(ms, mn, atS, atN) then later, fitS, fitN = true, atS, atN end -- booked no earlier than At
  end
  local allowed, retryS, retryN, waitS, waitN, markS, markN = false, nil, nil, nil, nil, nil, nil
  local recS, recN = nowS, nowN -- when the cost is recorded
  if not tless(nowS, nowN, fitS, fitN) then
    allowed = true
  elseif verb == RESERVE then
    local ms, mn = tsub(fitS, fitN, mdS, mdN)
    if not tless(nowS, nowN, ms, mn) then
      allowed, waitS, waitN, markS, markN, recS, recN = true, fitS, fitN, fitS, fitN, fitS, fitN
    else
      retryS, retryN = ms, mn
    end
  else
    retryS, retryN = fitS, fitN
  end
  if allowed then
    if not tless(recS, recN, ls, ln) then used, ls, ln = refillPoint(used, ls, ln, recS, recN) end
    -- Booked between refills, its point lies before its instant, where a
    -- cancel could not tell it from a later booking: it has no instant to
    -- give back.
    if later then markS, markN = nil, nil end
    used = fill(used, cost)
    -- A point after now is kept, even empty.
    if verb ~= CHECK and (used > 0 or tless(nowS, nowN, ls, ln)) then
      stS, stN, stA, stB, stUS, stUN = ls, ln, used, 0, 0, 0
    end
  end
  local resetS, resetN = taddTimes(ls, ln, refills(used), interval)
  return allowed, usedAt(used, ls, ln), retryS, retryN, resetS, resetN, waitS, waitN, markS, markN
end

steps.intervalRefill = intervalRefill

-- fillUp is the interval refill's part of Go's fillUp: full at now, never
-- lowering what is in use (a cancel may leave more than the burst).
fillUps.intervalRefill = function()
  local used, ls, ln = refillPoint(stA, stS, stN, nowS, nowN)
  if not tless(nowS, nowN, ls, ln) then
    stS, stN, stA, stB, stUS, stUN = ls, ln, fmax(used, limit), 0, 0, 0
  else
    stA = fmax(used, limit - usedAt(0, ls, ln))
  end
end

-- @section fixedWindow

local function fixedWindow(verb, cost)
  local allowed, retryS, retryN, resetS, resetN = false, nil, nil, nil, nil
  local startS, startN, count = stS, stN, stA
  if variant then
    if count <= 0 or tdiff(nowS, nowN, startS, startN) >= interval then
      startS, startN = tmax(nowS, nowN, startS, startN)
      count = 0
    end
  else
    local ws, wn = windowStart()
    if tless(startS, startN, ws, wn) then startS, startN, count = ws, wn, 0 end
  end
  if count + cost - limit <= slack then
    allowed = true
    count = fill(count, cost)
    if verb == ALLOW then stS, stN, stA, stB, stUS, stUN = startS, startN, count, 0, 0, 0 end
  else
    retryS, retryN = tadd(startS, startN, interval)
  end
  if count > 0 then resetS, resetN = tadd(startS, startN, interval) end
  return allowed, count, retryS, retryN, resetS, resetN
end

steps.fixedWindow = fixedWindow

-- @section slidingLog

-- The sliding log's entries are packed records of three little-endian
-- doubles (seconds, nanoseconds, cost), which read back exactly and without
-- parsing text.
local ENTRY = 24

local function entryAt(log, i)
  return struct.unpack('<ddd', log, (i - 1) * ENTRY + 1)
end

local function costAt(log, i)
  return (struct.unpack('<d', log, (i - 1) * ENTRY + 17))
end

local function slidingLog(verb, cost)
  local allowed, retryS, retryN, resetS, resetN = false, nil, nil, nil, nil
  local log = stLog
  local n = #log / ENTRY
  local first = 1
  while first <= n do
    local es, en = entryAt(log, first)
    local exS, exN = tadd(es, en, interval)
    if tless(nowS, nowN, exS, exN) then break end
    first = first + 1
  end
  local sum = 0
  for i = first, n do sum = sum + costAt(log, i) end
  local empty = first > n
  local newS, newN, newC = 0, 0, 0
  if not empty then newS, newN, newC = entryAt(log, n) end
  local x = sum + cost - limit
  if x <= slack then
    allowed = true
    sum = fill(sum, cost)
    if cost > 0 then
      local lastS, lastN = newS, newN
      if empty or tless(newS, newN, nowS, nowN) then newS, newN = nowS, nowN end
      empty = false
      if verb == ALLOW then
        -- record: keep the live entries, and append the request, or merge
        -- it into the newest entry when the log is full. As in Go, only
        -- the log changes.
        local live = n - first + 1
        local keep = string.sub(log, (first - 1) * ENTRY + 1)
        if live == 0 then
          stLog = struct.pack('<ddd', nowS, nowN, cost)
        else
          local ts, tn = tmax(nowS, nowN, lastS, lastN)
          if live >= maxEntries then
            stLog = string.sub(keep, 1, -ENTRY - 1) .. struct.pack('<ddd', ts, tn, newC + cost)
          else
            stLog = keep .. struct.pack('<ddd', ts, tn, cost)
          end
        end
      end
    end
  else
    -- Admitted once enough of the oldest entries have left the window.
    for i = first, n do
      x = x - costAt(log, i)
      if x <= slack then
        local es, en = entryAt(log, i)
        retryS, retryN = tadd(es, en, interval)
        break
      end
    end
  end
  if not empty then resetS, resetN = tadd(newS, newN, interval) end
  return allowed, sum, retryS, retryN, resetS, resetN
end

steps.slidingLog = slidingLog

-- @section slidingCounter

-- counterAdmitAt is the first instant at which cost fits, given the window
-- starting at start with counts cur and prev.
local function counterAdmitAt(startS, startN, cur, prev, cost)
  if cur + cost - limit <= slack then
    if prev <= 0 then return startS, startN end
    local r = fmax((limit - cur - cost) / prev, 0)
    if r >= 1 then return startS, startN end
    return tadd(startS, startN, ceilNanos(interval * (1 - r)))
  end
  local r = (limit - cost) / cur
  return tadd(startS, startN, interval + ceilNanos(interval * (1 - r)))
end

-- counterWindow returns the state's window as seen now: its start, and
-- its count and the previous window's, rolled over to now's window.
local function counterWindow()
  local startS, startN, cur, prev = stS, stN, stA, stB
  local ws, wn = windowStart()
  if tless(startS, startN, ws, wn) then
    if tdiff(ws, wn, startS, startN) == interval then
      prev = cur
    else
      prev = 0
    end
    startS, startN, cur = ws, wn, 0
  end
  return startS, startN, cur, prev
end

local function slidingCounter(verb, cost)
  local allowed, retryS, retryN, resetS, resetN = false, nil, nil, nil, nil
  local w = interval
  local startS, startN, cur, prev = counterWindow()
  local elapsed = fmax(tdiff(nowS, nowN, startS, startN), 0)
  local estimate = cur + prev * (w - elapsed) / w
  local atS, atN = counterAdmitAt(startS, startN, cur, prev, cost)
  local ms, mn = tmax(nowS, nowN, startS, startN) -- start + elapsed
  if not tless(ms, mn, atS, atN) then
    allowed = true
    estimate = estimate + cost
    cur = cur + cost
    if verb == ALLOW then stS, stN, stA, stB, stUS, stUN = startS, startN, cur, prev, 0, 0 end
  else
    retryS, retryN = atS, atN
  end
  if cur > 0 then
    resetS, resetN = tadd(startS, startN, 2 * w)
  elseif prev > 0 then
    resetS, resetN = tadd(startS, startN, w)
  end
  return allowed, estimate, retryS, retryN, resetS, resetN
end

steps.slidingCounter = slidingCounter

-- fillUp is the sliding counter's part of Go's fillUp: the room left,
-- added to the current window.
fillUps.slidingCounter = function(d)
  if d.remaining > 0 then
    local startS, startN, cur, prev = counterWindow()
    stS, stN, stA, stB, stUS, stUN = startS, startN, cur + d.remaining, prev, 0, 0
  end
end

-- @section decide

-- use makes limit i (from 1) the one decided: its Params and its step
-- function, nil if this script lacks its algorithm. It returns the limit's
-- cost and instant.
local STEPS = {'meter', 'gcra', 'meter', 'fixedWindow', 'slidingLog', 'slidingCounter'}
local function use(i)
  local k, v, cd, cost, atS, atN
  k, v, cd, limit, interval, amount, maxEntries, cost, atS, atN, penS, penN =
    struct.unpack(LIMIT, ARGV[1], OP_SIZE + (i - 1) * LIMIT_SIZE + 1)
  kind, variant, countDenied, slack = k, v == 1, cd == 1, limit * TOLERANCE
  local name = STEPS[kind]
  if kind == TOKEN and variant then name = 'intervalRefill' end
  step, fillUp = name and steps[name], name and fillUps[name]
  return cost, atS, atN
end

-- load reads the state of key i, for the limit in use, and returns
-- whether the key exists and, if it holds the live state of another
-- algorithm, that algorithm. A state of another algorithm is a conflict
-- until it is fresh again; after that the key counts as absent, as in the
-- memory store.
local HEADER, HEADER_SIZE, UNTIL_SIZE = '<Bdddddd', 49, 16
local function load(i)
  stS, stN, stA, stB, stLog, stUS, stUN = 0, 0, 0, 0, '', 0, 0
  local v = redis.call('GET', KEYS[i])
  if not v then return false end
  local stored, expS, expN, ts, tn, a, b = struct.unpack(HEADER, v)
  local blocked = stored >= BLOCKED
  if blocked then stored = stored - BLOCKED end
  if stored == kind then
    stS, stN, stA, stB = ts, tn, a, b
    local body = HEADER_SIZE + 1
    if blocked then
      stUS, stUN = struct.unpack('<dd', v, body)
      body = body + UNTIL_SIZE
    end
    if kind == LOG then stLog = string.sub(v, body) end
  elseif tless(nowS, nowN, expS, expN) then
    return true, stored
  end
  return true
end

-- records is Go's Params.Records: whether decision d on verb changed the
-- key's state, so that it is written back.
local function records(verb, d)
  if verb == FILL then return true end
  if verb == ALLOW or verb == RESERVE then return d.allowed or d.blocked or countDenied end
  if verb == CANCEL then return d.allowed end
  if verb == ATMOST then return d.granted > 0 end
  return false
end

-- decideKind is Go's decideKind: the algorithm, its decision described
-- (durations as pairs, At as an instant pair), and a state fresh again
-- made the zero State, as a recording decision leaves it.
local function decideKind(verb, cost, atS, atN, mdS, mdN)
  local allowed, used, retryS, retryN, resetS, resetN, waitS, waitN, markS, markN, gcraRemaining =
    step(verb, cost, atS, atN, mdS, mdN)
  if used < 0 then
    used = 0
  elseif used > limit then
    used = limit
  end
  local remaining = limit - used
  if gcraRemaining and remaining > 0 then remaining = gcraRemaining end
  local rS, rN = after(retryS, retryN)
  local eS, eN = after(resetS, resetN)
  local wS, wN = after(waitS, waitN)
  -- One constructor: the table is sized once for every field.
  local d = {allowed = allowed, limit = limit, used = used, remaining = remaining,
    blocked = false, granted = 0, rS = rS, rN = rN, eS = eS, eN = eN, wS = wS, wN = wN,
    aS = markS or 0, aN = markN or 0}
  if d.eS == 0 and d.eN == 0 and records(verb, d) then
    stS, stN, stA, stB, stLog, stUS, stUN = 0, 0, 0, 0, '', 0, 0
  end
  return d
end

-- countDenial is Go's fillUp: a denied request recorded as far as the
-- limit allows, the key full at now; then d says when the request would
-- be admitted from the full key, decided again on a copy of it.
local function countDenial(verb, cost, atS, atN, mdS, mdN, d)
  if fillUp then
    fillUp(d)
  elseif d.remaining > 0 then -- the fixed window and the sliding log: the room fits
    decideKind(ALLOW, d.remaining, 0, 0, 0, 0)
  end
  local again = verb
  if again == ALLOW then again = CHECK end
  local s, n, a, b, log, us, un = stS, stN, stA, stB, stLog, stUS, stUN
  local e = decideKind(again, cost, atS, atN, mdS, mdN)
  stS, stN, stA, stB, stLog, stUS, stUN = s, n, a, b, log, us, un
  d.used, d.remaining, d.rS, d.rN, d.eS, d.eN = e.used, e.remaining, e.rS, e.rN, e.eS, e.eN
end

-- decideStrict is Go's decideStrict: the algorithm behind a penalty's
-- block, with denials counted. While a block lasts, an Allow or a check
-- is denied, describing the key as it stands; a reservation books no
-- earlier than the block's end; a fill-up records but does not fit. A
-- step that records nothing leaves the block as it was. An Allow or a
-- reservation above the limit never fits: denied, describing the key as
-- it stands, it starts the block.
local function decideStrict(verb, cost, atS, atN, mdS, mdN)
  local uS, uN = stUS, stUN
  if not tless(nowS, nowN, uS, uN) then uS, uN = nil, nil end -- ended: not blocked
  local keptS, keptN = stUS, stUN
  local never = cost > limit and (verb == ALLOW or verb == RESERVE)
  local d
  if never then
    d = decideKind(CHECK, 0, 0, 0, 0, 0)
    d.allowed = false
    if uS then d.rS, d.rN = tmax(d.rS, d.rN, tsub(uS, uN, nowS, nowN)) end
  elseif uS and (verb == ALLOW or verb == CHECK) then
    d = decideKind(CHECK, cost, 0, 0, 0, 0)
    if d.allowed then
      -- The cost would fit but for the block: the key as it stands.
      local rS, rN = d.rS, d.rN
      d = decideKind(CHECK, 0, 0, 0, 0, 0)
      d.rS, d.rN = rS, rN
    end
    d.allowed = false
    d.rS, d.rN = tmax(d.rS, d.rN, tsub(uS, uN, nowS, nowN))
  elseif uS and verb == RESERVE then
    atS, atN = tmax(atS, atN, uS, uN) -- no earlier than the block's end
    d = decideKind(RESERVE, cost, atS, atN, mdS, mdN)
  else
    d = decideKind(verb, cost, atS, atN, mdS, mdN)
    if uS and verb == FILL then
      d.allowed = false
      d.rS, d.rN = tmax(d.rS, d.rN, tsub(uS, uN, nowS, nowN))
    end
  end
  d.blocked = uS ~= nil
  local overflow = not d.allowed and (verb == ALLOW or verb == RESERVE or verb == FILL)
  if overflow and countDenied and verb ~= FILL and not never then
    -- Decided again as the algorithm decided it: a reservation from the
    -- block's end.
    countDenial(verb, cost, atS, atN, mdS, mdN, d)
    if uS then
      -- Until the block ends; a reservation as long as this one would
      -- book MaxDelay before that.
      local wS, wN = tsub(uS, uN, nowS, nowN)
      if verb ~= RESERVE then
        d.rS, d.rN = tmax(d.rS, d.rN, wS, wN)
      elseif tless(mdS, mdN, wS, wN) then
        d.rS, d.rN = tmax(d.rS, d.rN, tsub(wS, wN, mdS, mdN))
      end
    end
  end
  if overflow and (penS > 0 or penN > 0) and not uS then
    uS, uN = tplus(nowS, nowN, penS, penN)
    d.blocked = true
    -- Retry once the block ends; a reservation as long as this one would
    -- book MaxDelay before that.
    if verb ~= RESERVE or never then
      d.rS, d.rN = tmax(d.rS, d.rN, penS, penN)
    elseif tless(mdS, mdN, penS, penN) then
      d.rS, d.rN = tmax(d.rS, d.rN, tsub(penS, penN, mdS, mdN))
    end
  end
  if uS then
    -- No store forgets a key before its block ends.
    d.eS, d.eN = tmax(d.eS, d.eN, tsub(uS, uN, nowS, nowN))
  end
  if records(verb, d) then
    stUS, stUN = uS or 0, uN or 0
  else
    stUS, stUN = keptS, keptN -- recording nothing, a step changes nothing
  end
  return d
end

-- decide is Go's decide: strict when a penalty or counted denials apply.
local function decide(verb, cost, atS, atN, mdS, mdN)
  if penS > 0 or penN > 0 or countDenied then return decideStrict(verb, cost, atS, atN, mdS, mdN) end
  return decideKind(verb, cost, atS, atN, mdS, mdN)
end

-- write stores the state of key i, which exists if present, as decision
-- d left it, until it is fresh again (Decision.ResetAfter, rounded up to
-- milliseconds, plus the skew margin), or deletes the key once fresh: a
-- fresh state is no key. It returns whether the key exists after.
local function write(i, present, d)
  if d.eS == 0 and d.eN == 0 then
    if present then redis.call('DEL', KEYS[i]) end
    return false
  end
  local expS, expN = tplus(nowS, nowN, d.eS, d.eN)
  local head, body = kind, stLog
  if stUS ~= 0 or stUN ~= 0 then
    head, body = kind + BLOCKED, struct.pack('<dd', stUS, stUN) .. stLog
  end
  local ttl = d.eS * 1000 + math.ceil(d.eN / 1e6) + marginMs
  redis.call('SET', KEYS[i], struct.pack(HEADER, head, expS, expN, stS, stN, stA, stB) .. body,
    'PX', string.format('%.0f', ttl))
  return true
end

-- reply packs decision d as its reply record, with the cost granted for a
-- partial grant.
local function reply(d, grant)
  local status = 0
  if d.allowed then status = 1 end
  if d.blocked then status = status + 2 end
  local waits = d.wS > 0 or d.wN > 0
  if waits then status = status + 4 end
  local r = struct.pack('<Bdddddd', status, d.used, d.remaining, d.rS, d.rN, d.eS, d.eN)
  if waits then r = r .. struct.pack('<dddd', d.wS, d.wN, d.aS, d.aN) end
  if grant then r = r .. struct.pack('<d', d.granted) end
  return r
end

-- @section single

-- One decision on KEYS[1].

if verb < ALLOW or verb > ATMOST then
  return redis.error_reply('UNSUPPORTED sluice: verb ' .. verb)
end
local cost, atS, atN = use(1)
if not step then
  return redis.error_reply('UNSUPPORTED sluice: kind ' .. kind .. ' in this script')
end
local present, conflict = load(1)
if conflict then return struct.pack('<BBB', CONFLICT, conflict, 1) end

-- atMost is Go's stepAtMost: the whole cost if it fits; else the whole
-- units the allowance left now holds, one less, or one unit, the first
-- that fits, admitted as an allow; else the decision on the least cost
-- worth granting. Checks record nothing, so only the grant changes the
-- state.
local function atMost()
  if cost == 0 then -- nothing to grant: a check, not admitted
    local d = decide(CHECK, 0, 0, 0, 0, 0)
    d.allowed = false
    return d
  end
  local whole = math.ceil(cost) - 1
  local function fits(c) return decide(CHECK, c, 0, 0, 0, 0).allowed end
  local function grant(c)
    local d = decide(ALLOW, c, 0, 0, 0, 0)
    d.granted = c
    return d
  end
  if cost <= limit and fits(cost) then return grant(cost) end
  local left = decide(CHECK, 0, 0, 0, 0, 0)
  local g = fmin(fmin(math.floor(left.remaining + slack), whole), math.floor(limit))
  for _, c in ipairs({g, g - 1, 1}) do
    if c >= 1 and c <= whole and fits(c) then return grant(c) end
  end
  return decide(CHECK, fmin(cost, 1), 0, 0, 0, 0)
end

local d
if verb == ATMOST then
  d = atMost()
else
  d = decide(verb, cost, atS, atN, delayS, delayN)
end
if records(verb, d) then write(1, present, d) end
return reply(d, verb == ATMOST)

-- @section group

-- A group decision on every key, Go's DecideGroup: each limit's key in
-- KEYS, in the group's order.

if verb ~= ALLOW and verb ~= CHECK and verb ~= RESERVE and verb ~= CANCEL then
  return redis.error_reply('UNSUPPORTED sluice: a group does not decide verb ' .. verb)
end
local n = #KEYS
local states, present, costs, ats = {}, {}, {}, {}
for i = 1, n do
  local cost, atS, atN = use(i)
  if not step then
    return redis.error_reply('UNSUPPORTED sluice: kind ' .. kind .. ' in this script')
  end
  local p, conflict = load(i)
  if conflict then return struct.pack('<BBB', CONFLICT, conflict, i) end
  states[i] = {stS, stN, stA, stB, stLog, stUS, stUN}
  present[i], costs[i], ats[i] = p, cost, {atS, atN}
end

-- decideOn decides limit i on its key's state as the previous decision
-- on it left it, and leaves the state it makes in st*.
local function decideOn(i, verb, cost, atS, atN, mdS, mdN)
  use(i)
  stS, stN, stA, stB, stLog, stUS, stUN = unpack(states[i])
  return decide(verb, cost, atS, atN, mdS, mdN)
end

-- keep writes the state that decision d on verb left in st* back to key
-- i (the limit in use), if d records.
local function keep(i, verb, d)
  if records(verb, d) then
    present[i] = write(i, present[i], d)
    states[i] = {stS, stN, stA, stB, stLog, stUS, stUN}
  end
end

-- run decides limit i and keeps what it records.
local function run(i, verb, cost, atS, atN, mdS, mdN)
  local d = decideOn(i, verb, cost, atS, atN, mdS, mdN)
  keep(i, verb, d)
  return d
end

-- combine is Go's combine: the group's decision from each limit's, and
-- the index of the limit it was made from.
local function combine(each)
  local best = 0
  local allowed, blocked = true, false
  local rS, rN, wS, wN = 0, 0, 0, 0
  for i, d in ipairs(each) do
    allowed = allowed and d.allowed
    blocked = blocked or d.blocked
    rS, rN = tmax(rS, rN, d.rS, d.rN)
    wS, wN = tmax(wS, wN, d.wS, d.wN)
    -- tighter: less of its limit left
    if best == 0 or d.remaining * each[best].limit < each[best].remaining * d.limit then best = i end
  end
  local d = each[best]
  if not allowed then
    for i, e in ipairs(each) do -- the longest denial
      if not e.allowed and (d.allowed or tless(d.rS, d.rN, e.rS, e.rN)) then d, best = e, i end
    end
  end
  local g = {}
  for k, x in pairs(d) do g[k] = x end
  if not allowed then
    g.allowed, g.wS, g.wN, g.aS, g.aN = false, 0, 0, 0, 0
  elseif verb == RESERVE and (wS > 0 or wN > 0) then
    g.wS, g.wN = wS, wN
    g.aS, g.aN = tplus(nowS, nowN, wS, wN)
  end
  g.rS, g.rN, g.blocked = rS, rN, blocked
  return g, best
end

local each = {}
local group, best
if verb == CANCEL then
  for i = 1, n do each[i] = run(i, CANCEL, costs[i], ats[i][1], ats[i][2], 0, 0) end
  group, best = combine(each)
elseif verb == ALLOW then
  -- In one pass, as the memory store decides it: an Allow admits exactly
  -- when a check of it would, so every limit is decided as Allow on its
  -- state, and what each made is kept only where DecideGroup's second
  -- pass would run that same Allow: everywhere if all admit, else on the
  -- limits that deny. The others check a zero cost on their key as it was.
  local all, made = true, {}
  for i = 1, n do
    each[i] = decideOn(i, ALLOW, costs[i], ats[i][1], ats[i][2], delayS, delayN)
    made[i] = {stS, stN, stA, stB, stLog, stUS, stUN}
    all = all and each[i].allowed
  end
  for i = 1, n do
    if all or not each[i].allowed then
      use(i)
      stS, stN, stA, stB, stLog, stUS, stUN = unpack(made[i])
      keep(i, ALLOW, each[i])
    else
      -- Admitted by this limit, not by the group: its decision
      -- describes the key as the request leaves it, untouched.
      each[i] = run(i, CHECK, 0, 0, 0, 0, 0)
    end
  end
  group, best = combine(each)
else
  -- Check every limit; latest is until every one would admit.
  local all = true
  local lS, lN = 0, 0
  for i = 1, n do
    each[i] = run(i, CHECK, costs[i], 0, 0, 0, 0)
    all = all and each[i].allowed
    lS, lN = tmax(lS, lN, each[i].rS, each[i].rN)
  end
  if verb == RESERVE then
    local fits = not tless(delayS, delayN, lS, lN)
    local retryS, retryN = 0, 0 -- until the group would book: latest - MaxDelay
    if not fits then retryS, retryN = tsub(lS, lN, delayS, delayN) end
    local bookS, bookN = tplus(nowS, nowN, lS, lN) -- the instant every limit books
    for i = 1, n do
      local atS, atN, mdS, mdN = ats[i][1], ats[i][2], delayS, delayN
      if fits then
        atS, atN, mdS, mdN = bookS, bookN, lS, lN
      end
      -- Unless it fits, a limit that would have booked on its own records
      -- nothing.
      if fits or tless(delayS, delayN, each[i].rS, each[i].rN) then
        each[i] = run(i, RESERVE, costs[i], atS, atN, mdS, mdN)
        retryS, retryN = tmax(retryS, retryN, each[i].rS, each[i].rN)
      end
    end
    group, best = combine(each)
    if not fits then group.rS, group.rN = retryS, retryN end
  else
    -- A check decides as Allow would, recording nothing.
    for i = 1, n do
      if not all and each[i].allowed then each[i] = run(i, CHECK, 0, 0, 0, 0, 0) end
    end
    group, best = combine(each)
  end
end
local out = {struct.pack('<B', best), reply(group, false)}
for i = 1, n do out[i + 2] = reply(each[i], false) end
return table.concat(out)
