-- fixedwindow: a count (A) in the window that starts at Time, aligned to
-- the epoch, or anchored at its first request.
--
-- Depends on: prelude, time, arith (fill, windowStart, alignedStart).
-- Translates: Params.stepFixedWindow (engine/fixedwindow.go).

-- fixedWindow is stepFixedWindow.
local function fixedWindow(verb, cost)
  local allowed, retryS, retryN, resetS, resetN = false, nil, nil, nil, nil
  local startS, startN, count = stS, stN, stA
  if variant then
    if count <= 0 or tdiff(nowS, nowN, startS, startN) >= interval then
      startS, startN = tmax(nowS, nowN, startS, startN)
      count = 0
    end
  else
    -- A clock that stepped back stays in the stored window; a window
    -- counted under another length counts in the one that holds its
    -- start.
    local ws, wn = windowStart()
    if ws ~= startS or wn ~= startN then
      startS, startN = alignedStart(startS, startN)
      if tless(startS, startN, ws, wn) then startS, startN, count = ws, wn, 0 end
    end
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
