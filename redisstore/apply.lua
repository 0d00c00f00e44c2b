-- One sluice decision, run atomically by Redis: an exact translation of
-- sluice's Go step functions (params.go, bucket.go, gcra.go, tokenbucket.go,
-- atmost.go, fixedwindow.go, slidingwindow.go), which are the specification.
--
-- KEYS[1]  the key
-- ARGV[1]  the decision's inputs, packed as little-endian bytes and
--          doubles (struct format '<BBBBdddddddddd'): kind, variant, verb,
--          clock (1 for the caller's), limit, interval, amount, max
--          entries, cost, now seconds, now nanoseconds, TTL margin in
--          milliseconds (the callers' clock skew), and the verb's own
--          time in seconds and nanoseconds: a reservation's MaxDelay, or
--          the instant (Op.At) of the reservation a cancel gives back
--
-- Kinds and verbs are sluice.Kind and sluice.Verb as numbers. The variant
-- is 1 for the token bucket's interval refill and anchored fixed windows.
-- In server-clock mode the now fields are ignored, and a cancel's instant
-- is on the server's clock, as the reservation's reply gave it. The Go side
-- has validated all. Packed doubles read back exactly and without parsing
-- text.
--
-- Lua numbers are doubles, like Go's float64: amounts go through the same
-- operations in the same order as in Go, so they come out bit-identical.
-- Times are kept as (seconds, nanoseconds) pairs, because nanoseconds since
-- the epoch exceed 2^53. Spans (intervals, drain times) and differences of
-- times are single numbers, exact below 2^53 ns, which is all the
-- algorithms need: the Go side refuses Params with longer spans. Where a
-- difference can be longer (a state booked far ahead, a clock that stepped
-- far back), the functions below say how they stay exact. Numbers leave
-- the script packed as doubles, which read back exactly, and durations and
-- instants as (seconds, nanoseconds) pairs.
--
-- The key holds one string, read with GET and written with SET ... PX: a
-- header packed as '<Bdddddd' (kind; exp_sec, exp_nsec, when the state is
-- fresh again, which tells an expired state of another algorithm from a
-- key conflict; sec, nsec, a, b, the State's Time, A and B), followed by
-- the sliding log's entries, oldest first, packed as below.
--
-- Reply: one string packed as '<Bdddddd': 1 if allowed and 0 if not, then
-- used, remaining, retry after and reset after (each a seconds and
-- nanoseconds pair); for a partial grant (the verb at most), one double
-- more, the cost granted; for a reservation that waits, four more, its
-- delay and its instant (Decision.At) as seconds and nanoseconds pairs. On
-- a key conflict, the reply is packed as '<BB': 2, then the stored kind.

-- The file is made of sections, each starting with a line "-- @section
-- name": the Go side builds one script per algorithm from the prelude
-- before the first section, the sections the algorithm needs, and the
-- main section, so that a call defines only the functions it runs (Redis
-- runs a script's body, function definitions included, on every call).
-- Each algorithm's section ends by naming its step function step.

local LOG = 5 -- the sliding log: sluice.KindSlidingLog
local ALLOW, CHECK, FILL, RESERVE, CANCEL, ATMOST = 1, 2, 3, 4, 5, 6 -- sluice.Verb
local TOLERANCE = 2^-48
local MAX_SPAN = 2^60
local EXACT = 2^53 -- doubles hold every integer up to here

local key = KEYS[1]
local kind, variant, verb, callerClock, limit, interval, amount, maxEntries, cost, nowS, nowN, marginMs, argS, argN =
  struct.unpack('<BBBBdddddddddd', ARGV[1])
variant = variant == 1
if callerClock == 0 then
  local t = redis.call('TIME')
  nowS, nowN = tonumber(t[1]), tonumber(t[2]) * 1000
end
local slack = limit * TOLERANCE

-- Time pairs: s seconds and n nanoseconds, 0 <= n < 1e9. Seconds may be
-- negative: an instant computed before the epoch compares and subtracts
-- as any other.

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

-- after returns Go's after(t, now), the time from now until t and never
-- negative, as a seconds and nanoseconds pair. A nil ts is no instant, a
-- zero duration.
local function after(ts, tn)
  if ts == nil or not tless(nowS, nowN, ts, tn) then return 0, 0 end
  return tsub(ts, tn, nowS, nowN)
end

-- Read the state: its time stS, stN, its amounts stA, stB, and the
-- sliding log's entries. A state of another algorithm is a conflict until
-- it is fresh again; after that the key counts as absent, as in the memory
-- store.
local HEADER = '<Bdddddd'
local HEADER_SIZE = 49
local v = redis.call('GET', key)
local stS, stN, stA, stB, stLog = 0, 0, 0, 0, ''
if v then
  local stored, expS, expN, ts, tn, a, b = struct.unpack(HEADER, v)
  if stored == kind then
    stS, stN, stA, stB = ts, tn, a, b
    if kind == LOG then stLog = string.sub(v, HEADER_SIZE + 1) end
  elseif tless(nowS, nowN, expS, expN) then
    return struct.pack('<BB', 2, stored)
  end
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

-- The algorithms. Each is a function of the verb and the cost, for the
-- partial grant runs several decisions; each updates the state as the Go
-- step does, and returns the decision: allowed, used (before clamping),
-- the instants retry and reset as pairs (nil for zero), a booked
-- reservation's instant as a pair (nil if it need not wait), and GCRA's
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

-- imod returns a mod m in [0, m). a / m rounds at most up to the next
-- whole quotient, which leaves a negative remainder.
local function imod(a, m)
  local r = a - math.floor(a / m) * m
  if r < 0 then r = r + m end
  return r
end

-- addmod returns (x + y) mod m for x, y in [0, m) without forming x + y,
-- which may exceed 2^53.
local function addmod(x, y, m)
  local gap = m - y
  if x >= gap then return x - gap end
  return x + y
end

-- mulmod returns a * b mod m for a in [0, m) and an integer b >= 1, by
-- doubling, which is exact.
local function mulmod(a, b, m)
  local bit = 1
  while bit * 2 <= b do bit = bit * 2 end
  local r = 0
  while bit >= 1 do
    r = addmod(r, r, m)
    if b >= bit then
      b = b - bit
      r = addmod(r, a, m)
    end
    bit = bit / 2
  end
  return r
end

-- tmod returns (s * 1e9 + n) mod m for the pair (s, n), s >= 0, exactly.
local function tmod(s, n, m)
  return addmod(mulmod(imod(s, m), 1e9, m), imod(n, m), m)
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
local function meter(verb, cost)
  if verb == CANCEL then
    -- Given back, the point moves one nanosecond earlier on its line.
    local allowed = false
    if tless(nowS, nowN, argS, argN) and stS == argS and stN == argN then
      allowed = true
      local ps, pn = tadd(argS, argN, -1)
      stS, stN, stA, stB = ps, pn, levelAt(argS, argN, fmax(stA - cost, 0), ps, pn), 0
    end
    local resetS, resetN = emptyAt(stS, stN, stA)
    return allowed, levelAt(stS, stN, stA, nowS, nowN), nil, nil, resetS, resetN
  end
  -- A fill-up may cost more than the capacity: that never fits, and then
  -- the instant it would fit is never used.
  local fitS, fitN, fits = nil, nil, false
  if cost <= limit then
    fitS, fitN = tadd(stS, stN, span(stA + cost - limit))
    fits = not tless(nowS, nowN, fitS, fitN)
  end
  local allowed, retryS, retryN, atS, atN = false, nil, nil, nil, nil
  local recS, recN = nowS, nowN -- when the cost is recorded
  if fits then
    allowed = true
  elseif verb == RESERVE then
    -- Booked iff fitAt - now <= MaxDelay, that is now >= fitAt - MaxDelay,
    -- which is also the instant a retry would be booked.
    local ms, mn = tsub(fitS, fitN, argS, argN)
    if not tless(nowS, nowN, ms, mn) then
      allowed, atS, atN, recS, recN = true, fitS, fitN, fitS, fitN
    else
      retryS, retryN = ms, mn
    end
  elseif verb ~= FILL then
    retryS, retryN = fitS, fitN
  end
  if verb == FILL or allowed then
    local ls, ln = tmax(stS, stN, recS, recN)
    local filled = fill(levelAt(stS, stN, stA, ls, ln), cost)
    if verb ~= CHECK then stS, stN, stA, stB = ls, ln, filled, 0 end
    local resetS, resetN = tadd(ls, ln, drain(filled))
    return allowed, levelAt(ls, ln, filled, nowS, nowN), retryS, retryN, resetS, resetN, atS, atN
  end
  local resetS, resetN = emptyAt(stS, stN, stA)
  return allowed, levelAt(stS, stN, stA, nowS, nowN), retryS, retryN, resetS, resetN
end

local step = meter

-- @section gcra

-- round is Go's math.Round (half away from zero) for x >= 0.
local function round(x)
  local f = math.floor(x)
  if x - f >= 0.5 then return f + 1 end
  return f
end

local function gcra(verb, cost)
  local allowed, retryS, retryN, atS, atN = false, nil, nil, nil, nil
  local tau = round(limit * interval)
  local tatS, tatN = tmax(stS, stN, nowS, nowN)
  if verb == CANCEL then
    -- The reservation is the key's last booking iff the TAT is still the
    -- one it left: its instant plus the tolerance.
    local bs, bn = tadd(argS, argN, tau)
    if tless(nowS, nowN, argS, argN) and stS == bs and stN == bn then
      allowed = true
      stS, stN = tadd(stS, stN, -round(cost * interval))
      tatS, tatN = tmax(stS, stN, nowS, nowN)
    end
  else
    local nextS, nextN = tadd(tatS, tatN, round(cost * interval))
    local fitS, fitN = tadd(nextS, nextN, -tau)
    if not tless(nowS, nowN, fitS, fitN) then
      allowed = true
      tatS, tatN = nextS, nextN
      if verb ~= CHECK then stS, stN = tatS, tatN end
    elseif verb ~= RESERVE then
      retryS, retryN = fitS, fitN
    else
      local ms, mn = tsub(fitS, fitN, argS, argN)
      if not tless(nowS, nowN, ms, mn) then
        allowed, atS, atN = true, fitS, fitN
        tatS, tatN = nextS, nextN
        stS, stN = tatS, tatN
      else
        retryS, retryN = ms, mn
      end
    end
  end
  local backlog = tdiff(tatS, tatN, nowS, nowN)
  return allowed, backlog / interval, retryS, retryN, tatS, tatN, atS, atN, fmin((tau - backlog) / interval, limit)
end

local step = gcra

-- @section intervalRefill

-- tplus returns the pair a + b, exactly.
local function tplus(as, an, bs, bn)
  local s, n = as + bs, an + bn
  if n >= 1e9 then n, s = n - 1e9, s + 1 end
  return s, n
end

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
local function intervalRefill(verb, cost)
  if verb == CANCEL then
    -- Given back, the point moves one refill earlier on its line, with the
    -- tokens that refill brings still in use.
    local allowed = false
    if tless(nowS, nowN, argS, argN) and stS == argS and stN == argN then
      allowed = true
      local ps, pn = tadd(argS, argN, -interval)
      stS, stN, stA, stB = ps, pn, fmax(stA - cost, 0) + amount, 0
    end
    local used, ls, ln = refillPoint(stA, stS, stN, nowS, nowN)
    local resetS, resetN = taddTimes(ls, ln, refills(used), interval)
    return allowed, usedAt(used, ls, ln), nil, nil, resetS, resetN
  end
  local used, ls, ln = refillPoint(stA, stS, stN, nowS, nowN)
  -- Go's refillsTo: refills after the point until the cost fits.
  local fitS, fitN = taddTimes(ls, ln, math.ceil((used + cost - limit - slack) / amount), interval)
  local allowed, retryS, retryN, atS, atN = false, nil, nil, nil, nil
  local recS, recN = nowS, nowN -- when the cost is recorded
  if not tless(nowS, nowN, fitS, fitN) then
    allowed = true
  elseif verb == RESERVE then
    local ms, mn = tsub(fitS, fitN, argS, argN)
    if not tless(nowS, nowN, ms, mn) then
      allowed, atS, atN, recS, recN = true, fitS, fitN, fitS, fitN
    else
      retryS, retryN = ms, mn
    end
  else
    retryS, retryN = fitS, fitN
  end
  if allowed then
    if not tless(recS, recN, ls, ln) then used, ls, ln = refillPoint(used, ls, ln, recS, recN) end
    used = fill(used, cost)
    if verb ~= CHECK and used > 0 then stS, stN, stA, stB = ls, ln, used, 0 end
  end
  local resetS, resetN = taddTimes(ls, ln, refills(used), interval)
  return allowed, usedAt(used, ls, ln), retryS, retryN, resetS, resetN, atS, atN
end

local step = intervalRefill

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
    if verb == ALLOW then stS, stN, stA, stB = startS, startN, count, 0 end
  else
    retryS, retryN = tadd(startS, startN, interval)
  end
  if count > 0 then resetS, resetN = tadd(startS, startN, interval) end
  return allowed, count, retryS, retryN, resetS, resetN
end

local step = fixedWindow

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
        -- it into the newest entry when the log is full.
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

local step = slidingLog

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

local function slidingCounter(verb, cost)
  local allowed, retryS, retryN, resetS, resetN = false, nil, nil, nil, nil
  local w = interval
  local startS, startN, cur, prev = stS, stN, stA, stB
  local ws, wn = windowStart()
  if tless(startS, startN, ws, wn) then
    if tdiff(ws, wn, startS, startN) == w then
      prev = cur
    else
      prev = 0
    end
    startS, startN, cur = ws, wn, 0
  end
  local elapsed = fmax(tdiff(nowS, nowN, startS, startN), 0)
  local estimate = cur + prev * (w - elapsed) / w
  local atS, atN = counterAdmitAt(startS, startN, cur, prev, cost)
  local ms, mn = tmax(nowS, nowN, startS, startN) -- start + elapsed
  if not tless(ms, mn, atS, atN) then
    allowed = true
    estimate = estimate + cost
    cur = cur + cost
    if verb == ALLOW then stS, stN, stA, stB = startS, startN, cur, prev end
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

local step = slidingCounter

-- @section main

-- decide runs verb for cost and describes the decision: Go's decide and
-- describe. Forgetting a state that is fresh again is left to the write.
local function decide(verb, c)
  local allowed, used, retryS, retryN, resetS, resetN, atS, atN, gcraRemaining = step(verb, c)
  if used < 0 then
    used = 0
  elseif used > limit then
    used = limit
  end
  local remaining = limit - used
  if gcraRemaining and remaining > 0 then remaining = gcraRemaining end
  return allowed, used, remaining, retryS, retryN, resetS, resetN, atS, atN
end

local allowed, used, remaining, retryS, retryN, resetS, resetN, atS, atN
local granted = 0
if verb == ATMOST then
  -- stepAtMost: the whole cost if it fits; else the whole units the
  -- allowance left now holds, one less, or one unit, the first that fits,
  -- admitted as an allow; else the decision on the least cost worth
  -- granting. Checks record nothing, so only the grant changes the state.
  local whole = math.ceil(cost) - 1
  local function try(c)
    if c >= 1 and c <= whole and decide(CHECK, c) then return c end
  end
  local c = nil
  if cost <= limit and decide(CHECK, cost) then
    c = cost
  else
    local _, _, left = decide(CHECK, 0)
    local g = fmin(fmin(math.floor(left + slack), whole), math.floor(limit))
    c = try(g) or try(g - 1) or try(1)
  end
  if c then
    granted = c
    allowed, used, remaining, retryS, retryN, resetS, resetN, atS, atN = decide(ALLOW, c)
  else
    allowed, used, remaining, retryS, retryN, resetS, resetN, atS, atN = decide(CHECK, fmin(cost, 1))
  end
else
  allowed, used, remaining, retryS, retryN, resetS, resetN, atS, atN = decide(verb, cost)
end
local resetAfterS, resetAfterN = after(resetS, resetN)

-- Store the new state when the decision records (Go's records) until it
-- is fresh again: a fresh state is no key. A state booked ahead is fresh
-- only after its point, which ResetAfter counts in.
local records
if verb == FILL then
  records = true
elseif verb == ATMOST then
  records = granted > 0
else
  records = allowed and verb ~= CHECK
end
if records then
  if resetAfterS == 0 and resetAfterN == 0 then
    if v then redis.call('DEL', key) end
  else
    -- The TTL is the time until fresh, rounded up to milliseconds.
    local ttl = resetAfterS * 1000 + math.ceil(resetAfterN / 1e6) + marginMs
    redis.call('SET', key, struct.pack(HEADER, kind, resetS, resetN, stS, stN, stA, stB) .. stLog,
      'PX', string.format('%.0f', ttl))
  end
end

local retryAfterS, retryAfterN = after(retryS, retryN)
local reply = struct.pack('<Bdddddd', allowed and 1 or 0, used, remaining, retryAfterS, retryAfterN, resetAfterS, resetAfterN)
if verb == ATMOST then
  return reply .. struct.pack('<d', granted)
elseif atS then
  local delayS, delayN = after(atS, atN)
  return reply .. struct.pack('<dddd', delayS, delayN, atS, atN)
end
return reply
