-- One sluice decision, run atomically by Redis: an exact translation of
-- sluice's Go step functions (params.go, bucket.go, gcra.go, tokenbucket.go,
-- fixedwindow.go, slidingwindow.go), which are the specification.
--
-- KEYS[1]  the key's hash
-- ARGV     kind, limit, interval, amount, variant, max entries, verb, cost,
--          now seconds, now nanoseconds, TTL margin in milliseconds (the
--          callers' clock skew)
--
-- Kinds and verbs are sluice.Kind and sluice.Verb as numbers. The variant
-- is 1 for the token bucket's interval refill and anchored fixed windows.
-- Empty now fields mean the server's clock. The Go side has validated all.
--
-- Lua numbers are doubles, like Go's float64: amounts go through the same
-- operations in the same order as in Go, so they come out bit-identical.
-- Times are kept as (seconds, nanoseconds) pairs, because nanoseconds since
-- the epoch exceed 2^53. Spans (intervals, drain times) and differences of
-- times are single numbers, exact below 2^53 ns, which is all the
-- algorithms need: the Go side refuses Params with longer spans. Floats
-- leave the script formatted with %.17g, which round-trips, and durations
-- as exact integer nanoseconds, both as strings, since Redis truncates a
-- number reply.
--
-- The hash holds kind, sec, nsec, a, b (the State's Time, A and B), log (the
-- sliding log's entries, oldest first, packed as below) and exp_sec,
-- exp_nsec: when the state is fresh again, which tells an expired state of
-- another algorithm from a key conflict.
--
-- Reply: {"ok", allowed ("1" or "0"), used, remaining, retry after ns,
-- reset after ns}, or {"conflict", stored kind}.

local LEAKY, GCRA, TOKEN, FIXED, LOG = 1, 2, 3, 4, 5 -- and 6, the sliding counter
local ALLOW, FILL = 1, 3 -- and 2, check, which records nothing
local TOLERANCE = 2^-48
local MAX_SPAN = 2^60
local EXACT = 2^53 -- doubles hold every integer up to here

local key = KEYS[1]
local kind = tonumber(ARGV[1])
local limit = tonumber(ARGV[2])
local interval = tonumber(ARGV[3])
local amount = tonumber(ARGV[4])
local variant = ARGV[5] == '1'
local maxEntries = tonumber(ARGV[6])
local verb = tonumber(ARGV[7])
local cost = tonumber(ARGV[8])
local nowS, nowN
if ARGV[9] == '' then
  local t = redis.call('TIME')
  nowS, nowN = tonumber(t[1]), tonumber(t[2]) * 1000
else
  nowS, nowN = tonumber(ARGV[9]), tonumber(ARGV[10])
end
local marginMs = tonumber(ARGV[11])
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

-- after formats Go's after(t, now), the time from now until t and never
-- negative, as exact nanoseconds, whatever its size. t is a pair {s, n};
-- nil is no instant, a zero duration.
local function after(t)
  if t == nil or not tless(nowS, nowN, t[1], t[2]) then return '0' end
  local ds, dn = t[1] - nowS, t[2] - nowN
  if dn < 0 then ds, dn = ds - 1, dn + 1e9 end
  if ds == 0 then return string.format('%.0f', dn) end
  return string.format('%.0f%09.0f', ds, dn)
end

-- Integer arithmetic on doubles, for operands below 2^53.

-- imod returns a mod m in [0, m). a / m rounds at most up to the next
-- whole quotient, which leaves a negative remainder.
local function imod(a, m)
  local r = a - math.floor(a / m) * m
  if r < 0 then r = r + m end
  return r
end

-- idiv returns floor(a / b) for a >= 0, b > 0, correcting the same rounding.
local function idiv(a, b)
  local q = math.floor(a / b)
  if a - q * b < 0 then q = q - 1 end
  return q
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

-- Go's helpers, in the same operations and order.

local function fmax(x, y)
  if x > y then return x end
  return y
end

local function fmin(x, y)
  if x < y then return x end
  return y
end

-- round is Go's math.Round (half away from zero) for x >= 0.
local function round(x)
  local f = math.floor(x)
  if x - f >= 0.5 then return f + 1 end
  return f
end

local function ceilNanos(ns)
  if not (ns > 0) then return 0 end
  ns = ns - ns * TOLERANCE
  if ns >= MAX_SPAN then return MAX_SPAN end
  return math.ceil(ns)
end

local function fill(level, c)
  level = level + c
  if level >= limit - slack then return limit end
  return level
end

local function drain(x)
  if x <= slack then return 0 end
  return ceilNanos(x * interval / amount)
end

local function leaked(a, elapsed)
  if elapsed <= 0 then return a end
  if elapsed >= drain(a) then return 0 end
  return fmax(a - elapsed * amount / interval, 0)
end

local function refills(x)
  if x <= slack then return 0 end
  return math.ceil((x - slack) / amount)
end

-- The algorithms. Each takes the state s (ts, tn, a, b, log), updates it
-- as the Go step does, and returns the decision d: allowed, used (before
-- clamping), gcraRemaining, and the instants retry and reset as pairs
-- (nil for zero).

-- meter is stepMeter: the leaky bucket and the continuous token bucket.
local function meter(s)
  local d = {}
  local elapsed = tdiff(nowS, nowN, s.ts, s.tn)
  local level = leaked(s.a, elapsed)
  local ls, ln = tmax(s.ts, s.tn, nowS, nowN)
  local fits = cost <= limit and fmax(elapsed, 0) >= drain(s.a + cost - limit)
  if verb == FILL then
    d.allowed = fits
    level = fill(level, cost)
    s.ts, s.tn, s.a, s.b = ls, ln, level, 0
  elseif fits then
    d.allowed = true
    level = fill(level, cost)
    if verb == ALLOW then s.ts, s.tn, s.a, s.b = ls, ln, level, 0 end
  else
    d.retry = {tadd(s.ts, s.tn, drain(s.a + cost - limit))}
  end
  d.used = level
  d.reset = {tadd(ls, ln, drain(level))}
  return d
end

local function gcra(s)
  local d = {}
  local tau = round(limit * interval)
  local tatS, tatN = tmax(s.ts, s.tn, nowS, nowN)
  local nextS, nextN = tadd(tatS, tatN, round(cost * interval))
  local atS, atN = tadd(nextS, nextN, -tau)
  if not tless(nowS, nowN, atS, atN) then
    d.allowed = true
    tatS, tatN = nextS, nextN
    if verb == ALLOW then s.ts, s.tn = tatS, tatN end
  else
    d.retry = {atS, atN}
  end
  local backlog = tdiff(tatS, tatN, nowS, nowN)
  d.used = backlog / interval
  d.gcraRemaining = fmin((tau - backlog) / interval, limit)
  d.reset = {tatS, tatN}
  return d
end

-- intervalRefill is stepIntervalRefill, the token bucket's interval refill.
local function intervalRefill(s)
  local d = {}
  local used, ls, ln = s.a, s.ts, s.tn
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
    ls, ln = tmax(nowS, nowN, s.ts, s.tn)
  end
  local x = used + cost - limit
  if x <= slack then
    d.allowed = true
    used = fill(used, cost)
    if verb == ALLOW and used > 0 then s.ts, s.tn, s.a, s.b = ls, ln, used, 0 end
  else
    d.retry = {tadd(ls, ln, refills(x) * interval)}
  end
  d.used = used
  d.reset = {tadd(ls, ln, refills(used) * interval)}
  return d
end

local function fixedWindow(s)
  local d = {}
  local startS, startN, count = s.ts, s.tn, s.a
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
    d.allowed = true
    count = fill(count, cost)
    if verb == ALLOW then s.ts, s.tn, s.a, s.b = startS, startN, count, 0 end
  else
    d.retry = {tadd(startS, startN, interval)}
  end
  d.used = count
  if count > 0 then d.reset = {tadd(startS, startN, interval)} end
  return d
end

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

local function slidingLog(s)
  local d = {}
  local log = s.log
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
    d.allowed = true
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
          s.log = struct.pack('<ddd', nowS, nowN, cost)
        else
          local ts, tn = tmax(nowS, nowN, lastS, lastN)
          if live >= maxEntries then
            s.log = string.sub(keep, 1, -ENTRY - 1) .. struct.pack('<ddd', ts, tn, newC + cost)
          else
            s.log = keep .. struct.pack('<ddd', ts, tn, cost)
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
        d.retry = {tadd(es, en, interval)}
        break
      end
    end
  end
  d.used = sum
  if not empty then d.reset = {tadd(newS, newN, interval)} end
  return d
end

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

local function slidingCounter(s)
  local d = {}
  local w = interval
  local startS, startN, cur, prev = s.ts, s.tn, s.a, s.b
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
    d.allowed = true
    estimate = estimate + cost
    cur = cur + cost
    if verb == ALLOW then s.ts, s.tn, s.a, s.b = startS, startN, cur, prev end
  else
    d.retry = {atS, atN}
  end
  d.used = estimate
  if cur > 0 then
    d.reset = {tadd(startS, startN, 2 * w)}
  elseif prev > 0 then
    d.reset = {tadd(startS, startN, w)}
  end
  return d
end

-- Read the state. A state of another algorithm is a conflict until it is
-- fresh again; after that the key counts as absent, as in the memory store.
local f = redis.call('HMGET', key, 'kind', 'sec', 'nsec', 'a', 'b', 'log', 'exp_sec', 'exp_nsec')
local stored = f[1] and tonumber(f[1])
local s = {ts = 0, tn = 0, a = 0, b = 0, log = ''}
if stored == kind then
  if kind == LOG then
    s.log = f[6]
  else
    s.ts, s.tn, s.a, s.b = tonumber(f[2]), tonumber(f[3]), tonumber(f[4]), tonumber(f[5])
  end
elseif stored and tless(nowS, nowN, tonumber(f[7]), tonumber(f[8])) then
  return {'conflict', f[1]}
end

local d
if kind == LEAKY or kind == TOKEN and not variant then
  d = meter(s)
elseif kind == GCRA then
  d = gcra(s)
elseif kind == TOKEN then
  d = intervalRefill(s)
elseif kind == FIXED then
  d = fixedWindow(s)
elseif kind == LOG then
  d = slidingLog(s)
else
  d = slidingCounter(s)
end

-- describe
local used = d.used
if used < 0 then
  used = 0
elseif used > limit then
  used = limit
end
local remaining = limit - used
if d.gcraRemaining and remaining > 0 then remaining = d.gcraRemaining end
local resetAfter = after(d.reset)

-- Store the new state until it is fresh again: a fresh state is no key.
if verb == FILL or verb == ALLOW and d.allowed then
  if resetAfter == '0' then
    if stored then redis.call('DEL', key) end
  else
    local xs, xn = d.reset[1], d.reset[2]
    local fields = {'kind', ARGV[1], 'exp_sec', string.format('%.0f', xs), 'exp_nsec', string.format('%.0f', xn)}
    if kind == LOG then
      fields[7], fields[8] = 'log', s.log
    else
      fields[7], fields[8] = 'sec', string.format('%.0f', s.ts)
      fields[9], fields[10] = 'nsec', string.format('%.0f', s.tn)
      fields[11], fields[12] = 'a', string.format('%.17g', s.a)
      fields[13], fields[14] = 'b', string.format('%.17g', s.b)
    end
    if stored and stored ~= kind then redis.call('DEL', key) end
    redis.call('HSET', key, unpack(fields))
    -- The TTL is the time until fresh, rounded up to milliseconds.
    local ds, dn = xs - nowS, xn - nowN
    if dn < 0 then ds, dn = ds - 1, dn + 1e9 end
    redis.call('PEXPIRE', key, string.format('%.0f', ds * 1000 + math.ceil(dn / 1e6) + marginMs))
  end
end

return {'ok', d.allowed and '1' or '0', string.format('%.17g', used), string.format('%.17g', remaining), after(d.retry), resetAfter}
