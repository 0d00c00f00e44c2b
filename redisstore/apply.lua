-- One sluice decision, run atomically by Redis: an exact translation of
-- sluice's Go step functions (params.go, bucket.go, gcra.go, tokenbucket.go,
-- fixedwindow.go, slidingwindow.go), which are the specification.
--
-- KEYS[1]  the key
-- ARGV[1]  the decision's inputs, packed as little-endian bytes and
--          doubles (struct format '<BBBBdddddddd'): kind, variant, verb,
--          clock (1 for the caller's), limit, interval, amount, max
--          entries, cost, now seconds, now nanoseconds, TTL margin in
--          milliseconds (the callers' clock skew)
--
-- Kinds and verbs are sluice.Kind and sluice.Verb as numbers. The variant
-- is 1 for the token bucket's interval refill and anchored fixed windows.
-- In server-clock mode the now fields are ignored. The Go side has
-- validated all. Packed doubles read back exactly and without parsing text.
--
-- Lua numbers are doubles, like Go's float64: amounts go through the same
-- operations in the same order as in Go, so they come out bit-identical.
-- Times are kept as (seconds, nanoseconds) pairs, because nanoseconds since
-- the epoch exceed 2^53. Spans (intervals, drain times) and differences of
-- times are single numbers, exact below 2^53 ns, which is all the
-- algorithms need: the Go side refuses Params with longer spans. Numbers
-- leave the script packed as doubles, which read back exactly, and
-- durations as (seconds, nanoseconds) pairs.
--
-- The key holds one string, read with GET and written with SET ... PX: a
-- header packed as '<Bdddddd' (kind; exp_sec, exp_nsec, when the state is
-- fresh again, which tells an expired state of another algorithm from a
-- key conflict; sec, nsec, a, b, the State's Time, A and B), followed by
-- the sliding log's entries, oldest first, packed as below.
--
-- Reply: one string packed as '<Bdddddd': 1 if allowed and 0 if not, then
-- used, remaining, retry after and reset after (each a seconds and
-- nanoseconds pair); or, on a key conflict, packed as '<BB': 2, then the
-- stored kind.

-- The file is made of sections, each starting with a line "-- @section
-- name": the Go side builds one script per algorithm from the prelude
-- before the first section, the sections the algorithm needs, and the
-- main section, so that a call defines only the functions it runs (Redis
-- runs a script's body, function definitions included, on every call).
-- Each algorithm's section ends by naming its step function step.

local LOG = 5 -- the sliding log: sluice.KindSlidingLog
local ALLOW, FILL = 1, 3 -- and 2, check, which records nothing
local TOLERANCE = 2^-48
local MAX_SPAN = 2^60
local EXACT = 2^53 -- doubles hold every integer up to here

local key = KEYS[1]
local kind, variant, verb, callerClock, limit, interval, amount, maxEntries, cost, nowS, nowN, marginMs =
  struct.unpack('<BBBBdddddddd', ARGV[1])
variant = variant == 1
if callerClock == 0 then
  local t = redis.call('TIME')
  nowS, nowN = tonumber(t[1]), tonumber(t[2]) * 1000
end
local slack = limit * TOLERANCE

-- Time pairs: s seconds and n nanoseconds, 0 <= n < 1e9.

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

-- tadd returns s, n plus d nanoseconds, d an integer of at most 2^53.
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

-- after returns Go's after(t, now), the time from now until t and never
-- negative, as a seconds and nanoseconds pair. A nil ts is no instant, a
-- zero duration.
local function after(ts, tn)
  if ts == nil or not tless(nowS, nowN, ts, tn) then return 0, 0 end
  local ds, dn = ts - nowS, tn - nowN
  if dn < 0 then ds, dn = ds - 1, dn + 1e9 end
  return ds, dn
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

local function fill(level, c)
  level = level + c
  if level >= limit - slack then return limit end
  return level
end

-- The algorithms. Each updates the state as the Go step does, and returns
-- the decision: allowed, used (before clamping), the instants retry and
-- reset as pairs (nil for zero), and GCRA's remaining.

-- @section ceilNanos

local function ceilNanos(ns)
  if not (ns > 0) then return 0 end
  ns = ns - ns * TOLERANCE
  if ns >= MAX_SPAN then return MAX_SPAN end
  return math.ceil(ns)
end

-- @section drain

local function drain(x)
  if x <= slack then return 0 end
  return ceilNanos(x * interval / amount)
end

local function leaked(a, elapsed)
  if elapsed <= 0 then return a end
  if elapsed >= drain(a) then return 0 end
  return fmax(a - elapsed * amount / interval, 0)
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

-- @section window

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

-- windowStart returns floorDiv(now, interval) * interval.
local function windowStart()
  local r = addmod(mulmod(imod(nowS, interval), 1e9, interval), imod(nowN, interval), interval)
  return tadd(nowS, nowN, -r)
end

-- @section meter

-- meter is stepMeter: the leaky bucket and the continuous token bucket.
local function meter()
  local allowed, retryS, retryN = false, nil, nil
  local elapsed = tdiff(nowS, nowN, stS, stN)
  local level = leaked(stA, elapsed)
  local ls, ln = tmax(stS, stN, nowS, nowN)
  local fits = cost <= limit and fmax(elapsed, 0) >= drain(stA + cost - limit)
  if verb == FILL then
    allowed = fits
    level = fill(level, cost)
    stS, stN, stA, stB = ls, ln, level, 0
  elseif fits then
    allowed = true
    level = fill(level, cost)
    if verb == ALLOW then stS, stN, stA, stB = ls, ln, level, 0 end
  else
    retryS, retryN = tadd(stS, stN, drain(stA + cost - limit))
  end
  local resetS, resetN = tadd(ls, ln, drain(level))
  return allowed, level, retryS, retryN, resetS, resetN
end

local step = meter

-- @section gcra

-- round is Go's math.Round (half away from zero) for x >= 0.
local function round(x)
  local f = math.floor(x)
  if x - f >= 0.5 then return f + 1 end
  return f
end

local function fmin(x, y)
  if x < y then return x end
  return y
end

local function gcra()
  local allowed, retryS, retryN = false, nil, nil
  local tau = round(limit * interval)
  local tatS, tatN = tmax(stS, stN, nowS, nowN)
  local nextS, nextN = tadd(tatS, tatN, round(cost * interval))
  local atS, atN = tadd(nextS, nextN, -tau)
  if not tless(nowS, nowN, atS, atN) then
    allowed = true
    tatS, tatN = nextS, nextN
    if verb == ALLOW then stS, stN = tatS, tatN end
  else
    retryS, retryN = atS, atN
  end
  local backlog = tdiff(tatS, tatN, nowS, nowN)
  return allowed, backlog / interval, retryS, retryN, tatS, tatN, fmin((tau - backlog) / interval, limit)
end

local step = gcra

-- @section intervalRefill

-- intervalRefill is stepIntervalRefill, the token bucket's interval refill.
local function intervalRefill()
  local allowed, retryS, retryN = false, nil, nil
  local used, ls, ln = stA, stS, stN
  if used > 0 and tless(ls, ln, nowS, nowN) then
    local elapsed = tdiff(nowS, nowN, ls, ln)
    if elapsed >= EXACT then
      -- Whole refills then cover the limit, since the time to refill it is
      -- below 2^53 ns, and Go's step goes on as from a full bucket.
      used = 0
    else
      local k = idiv(elapsed, interval)
      used = fmax(used - k * amount, 0)
      ls, ln = tadd(ls, ln, k * interval)
    end
  end
  if used <= slack then
    used = 0
    ls, ln = tmax(nowS, nowN, stS, stN)
  end
  local x = used + cost - limit
  if x <= slack then
    allowed = true
    used = fill(used, cost)
    if verb == ALLOW and used > 0 then stS, stN, stA, stB = ls, ln, used, 0 end
  else
    retryS, retryN = tadd(ls, ln, refills(x) * interval)
  end
  local resetS, resetN = tadd(ls, ln, refills(used) * interval)
  return allowed, used, retryS, retryN, resetS, resetN
end

local step = intervalRefill

-- @section fixedWindow

local function fixedWindow()
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

local function slidingLog()
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
local function counterAdmitAt(startS, startN, cur, prev)
  if cur + cost - limit <= slack then
    if prev <= 0 then return startS, startN end
    local r = fmax((limit - cur - cost) / prev, 0)
    if r >= 1 then return startS, startN end
    return tadd(startS, startN, ceilNanos(interval * (1 - r)))
  end
  local r = (limit - cost) / cur
  return tadd(startS, startN, interval + ceilNanos(interval * (1 - r)))
end

local function slidingCounter()
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
  local atS, atN = counterAdmitAt(startS, startN, cur, prev)
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

local allowed, used, retryS, retryN, resetS, resetN, gcraRemaining = step()

-- describe
if used < 0 then
  used = 0
elseif used > limit then
  used = limit
end
local remaining = limit - used
if gcraRemaining and remaining > 0 then remaining = gcraRemaining end
local resetAfterS, resetAfterN = after(resetS, resetN)

-- Store the new state until it is fresh again: a fresh state is no key.
if verb == FILL or verb == ALLOW and allowed then
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
return struct.pack('<Bdddddd', allowed and 1 or 0, used, remaining, retryAfterS, retryAfterN, resetAfterS, resetAfterN)
