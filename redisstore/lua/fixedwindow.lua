-- fixedwindow: a count (A) in the window that starts at Time, aligned to
-- the epoch, or anchored at its first request; or, for a calendar window,
-- in the window of the caller's calendar that ends at Time.
--
-- Depends on: prelude, time, arith (fill, windowStart, alignedStart).
-- Translates: Params.stepFixedWindow and stepCalendarWindow
-- (engine/fixedwindow.go), and Params.window and CheckWindows
-- (engine/params.go).
--
-- A calendar window's times, and its lengths (a year exceeds 2^53 ns), are
-- compared and kept as pairs only: it never reads interval.

-- window is Params.window: the start and end, as pairs, of the calendar
-- window among the three of the limit in use that holds now, which
-- outside found in them.
local function window()
  local w0S, w0N, w1S, w1N, w2S, w2N, w3S, w3N = unpack(WINDOWS, input, windowsAt)
  if tless(nowS, nowN, w1S, w1N) then return w0S, w0N, w1S, w1N end
  if tless(nowS, nowN, w2S, w2N) then return w1S, w1N, w2S, w2N end
  return w2S, w2N, w3S, w3N
end

-- outside is Params.CheckWindows for limit i, the calendar window in use:
-- an error reply if its windows do not hold now, else nil. The caller
-- computed them around its own clock; on the server's clock (the Go side
-- checks the caller's) a time outside them has no window to count in, and
-- deciding by the caller's clock instead would count in a window the
-- server is not in, so the call is refused before any key is read.
-- codec.go's outOfRangeReply parses the reply.
local function outside(i)
  local w0S, w0N, _, _, _, _, w3S, w3N = unpack(WINDOWS, input, windowsAt)
  if tless(nowS, nowN, w0S, w0N) or not tless(nowS, nowN, w3S, w3N) then
    local whose = "server's"
    if callerClock == 1 then whose = "caller's" end
    return redis.error_reply('OUTOFRANGE sluice: limit ' .. i .. ': the ' .. whose .. ' time ' .. nowS .. ' s ' ..
      nowN .. ' ns lies outside its calendar windows, from ' .. w0S .. ' s ' .. w0N .. ' ns to ' ..
      w3S .. ' s ' .. w3N .. ' ns')
  end
end

-- calendarWindow is stepCalendarWindow: the count of the calendar window
-- that holds now. The state's Time is that window's end, not its start:
-- the end is what a decision needs, and a later window than now's (a
-- clock that stepped back, another caller's clock ahead) is one the
-- windows may not hold.
local function calendarWindow(verb, cost)
  local allowed, retryS, retryN, resetS, resetN = false, nil, nil, nil, nil
  local startS, startN, endS, endN = window()
  local count = stA
  if not tless(startS, startN, stS, stN) then -- s.Time <= start
    count = 0 -- an earlier window's count, or none
  elseif tless(endS, endN, stS, stN) then -- s.Time > end
    endS, endN = stS, stN -- a clock that stepped back stays in the stored window
  end
  -- Otherwise the stored window ends within now's (it is now's, or one
  -- of another calendar's windows): its count goes on in now's.
  if count + cost - limit <= slack then
    allowed = true
    count = fill(count, cost)
    if verb == ALLOW then stS, stN, stA, stB, stUS, stUN = endS, endN, count, 0, 0, 0 end
  else
    retryS, retryN = endS, endN -- after(end, now), as decideKind takes it
  end
  if count > 0 then resetS, resetN = endS, endN end
  return allowed, count, retryS, retryN, resetS, resetN
end

-- fixedWindow is stepFixedWindow.
local function fixedWindow(verb, cost)
  if windowsAt then return calendarWindow(verb, cost) end
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
