-- slidingcounter: the counts of the current window (A, starting at Time)
-- and of the previous one (B), the previous weighted by how much of it
-- still lies within an interval of now.
--
-- Depends on: prelude, time, arith (ceilNanos, fmax, windowStart,
-- alignedStart).
-- Translates: Params.stepSlidingCounter, counterWindow and counterAdmitAt
-- (engine/slidingwindow.go), and the sliding counter's part of
-- Params.fillUp (engine/strict.go).

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

-- counterWindow is Go's counterWindow: the state's window as seen now,
-- its start, and its count and the previous window's, rolled over to
-- now's window. A state whose start is not a multiple of the window,
-- counted under another window length, counts in the window that holds
-- its start.
local function counterWindow()
  local startS, startN, cur, prev = stS, stN, stA, stB
  local ws, wn = windowStart()
  if ws ~= startS or wn ~= startN then
    startS, startN = alignedStart(startS, startN)
    if tless(startS, startN, ws, wn) then
      if tdiff(ws, wn, startS, startN) == interval then
        prev = cur
      else
        prev = 0
      end
      startS, startN, cur = ws, wn, 0
    end
  end
  return startS, startN, cur, prev
end

-- slidingCounter is stepSlidingCounter.
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

-- counterFillUp: the room left, added to the current window.
local function counterFillUp()
  if dRemaining > 0 then
    local startS, startN, cur, prev = counterWindow()
    stS, stN, stA, stB, stUS, stUN = startS, startN, cur + dRemaining, prev, 0, 0
  end
end
