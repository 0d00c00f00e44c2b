-- meter: the leaky bucket and the continuous token bucket, a level that
-- leaks amount per interval from its point (Time, A).
--
-- Depends on: prelude, time, arith (ceilNanos, floorNanos, fill, fmax,
-- fmin).
-- Translates: Params.stepMeter, emptyAfter, drain, span and levelAt
-- (engine/bucket.go), the meter's part of Params.fullAt
-- (engine/strict.go), and Params.settleMeter (engine/settle.go).

local function drain(x)
  if x <= slack then return 0 end
  return ceilNanos(x * interval / amount)
end

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

-- meter is stepMeter.
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

-- meterFullAt is the meter's fullAt: full at t, the pair ts, tn, on the
-- level's line through (t, limit), kept at the point if that lies after t
-- and the line is higher there. (A difference of t and the point of
-- 2^53 ns or more, which t up to 2^62 + 2^60 ns allows, rounds once in
-- levelAt, as Go's float64 of it does.)
local function meterFullAt(ts, tn)
  if not tless(ts, tn, stS, stN) then
    stA = fmax(levelAt(stS, stN, stA, ts, tn), limit)
    stS, stN, stB, stUS, stUN = ts, tn, 0, 0, 0
  else
    stA = fmax(stA, levelAt(ts, tn, limit, stS, stN))
  end
end

-- meterSettle is Go's settleMeter: the level at the key's latest point,
-- now or the point if that lies after now, moved by the cost, up for a
-- charge (verb CHARGE), to what leaks in MAX_SPAN at most, down for a
-- refund, to zero at the least; the point moves there (a whole new State,
-- as Go writes it). It returns the cost moved. Go's min(cost, x) is
-- fmin(x, cost), the cost second: a cost of -0, refunded from an empty key
-- or charged to one as full as it may be, is moved as -0, as Go's min
-- gives it, where fmin(cost, x) would give x's +0.
local function meterSettle(verb, cost)
  local ts, tn = tmax(stS, stN, nowS, nowN)
  local level = levelAt(stS, stN, stA, ts, tn)
  local moved = fmin(level, cost)
  if verb == CHARGE then
    moved = fmin(fmax(MAX_SPAN * amount / interval - level, 0), cost)
    level = level + moved
  else
    level = level - moved
  end
  stS, stN, stA, stB, stUS, stUN = ts, tn, level, 0, 0, 0
  return moved
end
