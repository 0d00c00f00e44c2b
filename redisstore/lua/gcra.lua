-- gcra: the generic cell rate algorithm, a theoretical arrival time (Time)
-- that runs at most the tolerance, burst times the emission interval,
-- ahead of now.
--
-- Depends on: prelude, time.
-- Translates: Params.stepGCRA and gcraNanos (engine/gcra.go), arith.Nanos
-- (internal/arith/arith.go), and the GCRA's part of Params.fillUp
-- (engine/strict.go).

-- round is Go's math.Round (half away from zero) for x >= 0.
local function round(x)
  local f = floor(x)
  if x - f >= 0.5 then return f + 1 end
  return f
end

-- gcra is stepGCRA.
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
    if allowS < nowS or (allowS == nowS and allowN <= nowN) then -- now >= allowAt
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
  local backlog = (tatS - nowS) * 1e9 + (tatN - nowN) -- tdiff, inlined
  local remaining = (tau - backlog) / interval
  if remaining > limit then remaining = limit end
  return allowed, backlog / interval, retryS, retryN, tatS, tatN, waitS, waitN, markS, markN, remaining
end

-- gcraFillUp: full at now.
local function gcraFillUp()
  local fs, fn = tadd(nowS, nowN, round(limit * interval))
  stS, stN = tmax(stS, stN, fs, fn)
end
