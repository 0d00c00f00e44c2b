-- arith: the roundings every store reproduces bit for bit, and integer
-- arithmetic on doubles for operands below 2^53.
--
-- Depends on: prelude (limit, slack, interval, now), time (tadd).
-- Translates: arith.CeilNanos, arith.FloorNanos and arith.FloorDiv
-- (internal/arith/arith.go); Params.fill (engine/bucket.go); Go's min and
-- max of two floats; and alignedStart (engine/slidingwindow.go), the
-- window start that stepFixedWindow and counterWindow compute
-- (engine/fixedwindow.go, engine/slidingwindow.go).

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

local function ceilNanos(ns)
  if not (ns > 0) then return 0 end
  ns = ns - ns * TOLERANCE
  if not (ns < MAX_SPAN) then return MAX_SPAN end
  return ceil(ns)
end

local function floorNanos(ns)
  if not (ns > 0) then return 0 end
  ns = ns + ns * TOLERANCE
  if not (ns < MAX_SPAN) then return MAX_SPAN end
  return floor(ns)
end

-- idiv returns floor(a / b) for a >= 0, b > 0, correcting the same rounding.
local function idiv(a, b)
  local q = floor(a / b)
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

-- tmod returns (s * 1e9 + n) mod m for the pair (s, n), 0 <= s < 2^46,
-- exactly. C's fmod is exact, so it is given exact operands only: each
-- half of s, split at 2^23, times 1e9 stays below 2^53, and the high
-- half's product is then scaled by a power of two, which is exact.
local function tmod(s, n, m)
  local hi = floor(s / 2^23)
  local lo = s - hi * 2^23
  local r = addmod(fmod(hi * 1e9 * 2^23, m), fmod(lo * 1e9, m), m)
  return addmod(r, fmod(n, m), m)
end

-- windowStart returns alignedStart(now, interval), floorDiv(now,
-- interval) * interval.
local function windowStart()
  return tadd(nowS, nowN, -tmod(nowS, nowN, interval))
end

-- alignedStart returns alignedStart(t, interval) for the instant t, the
-- pair s, n, from the epoch on: the start of the window that holds it.
local function alignedStart(s, n)
  return tadd(s, n, -tmod(s, n, interval))
end
