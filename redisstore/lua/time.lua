-- time: instants and durations as pairs of s seconds and n nanoseconds,
-- 0 <= n < 1e9, since nanoseconds since the epoch exceed 2^53. Seconds
-- may be negative: an instant computed before the epoch compares and
-- subtracts as any other. Durations are pairs too, never negative.
--
-- Depends on: prelude (now).
-- Translates: Go's int64 comparisons and sums of times, and after
-- (engine/params.go).

local function tless(as, an, bs, bn)
  return as < bs or (as == bs and an < bn)
end

local function tmax(as, an, bs, bn)
  if as < bs or (as == bs and an < bn) then return bs, bn end -- tless, inlined
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
-- below 2^53, and larger ones a double holds. Its remainder r = d % 1e9
-- is Lua's d - q * 1e9 with q = floor(d / 1e9), computed by the VM rather
-- than by a call of floor: q stays below 2^53 / 1953125, so q * 1e9 is
-- exact, and so is d - q * 1e9, the difference of two doubles within a
-- factor of two of each other; d - r is then q * 1e9, exactly, and its
-- quotient by 1e9 is q.
local function tadd(s, n, d)
  local r = d % 1e9
  n = n + r
  s = s + (d - r) / 1e9
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
-- negative, as a pair.
local function after(ts, tn)
  if ts < nowS or (ts == nowS and tn <= nowN) then return 0, 0 end
  local s, n = ts - nowS, tn - nowN -- tsub, inlined
  if n < 0 then n, s = n + 1e9, s - 1 end
  return s, n
end
