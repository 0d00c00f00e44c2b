-- gcra: the generic cell rate algorithm, a theoretical arrival time (Time)
-- that runs at most the tolerance, burst times the emission interval,
-- ahead of now, and the emission interval it was computed with (A, zero
-- in a state written before it was recorded).
--
-- Depends on: prelude, time.
-- Translates: Params.stepGCRA, DecideTAT (its Allow and check),
-- describeGCRA, carryOnce, carriedTAT and gcraNanos (engine/gcra.go),
-- arith.Nanos (internal/arith/arith.go), the GCRA's part of
-- Params.fullAt (engine/strict.go), and Params.settleGCRA
-- (engine/settle.go); and, noting each carry in stCarried,
-- Params.Carries and Decide's conversion (engine/params.go).

-- round is Go's math.Round (half away from zero) for x >= 0.
local function round(x)
  local f = floor(x)
  if x - f >= 0.5 then return f + 1 end
  return f
end

-- carry is carriedTAT: the state's TAT, computed with another emission
-- interval, stA, and still ahead of now, carried over to the interval in
-- use: the cost it holds, (TAT - now) / stA units, takes interval per
-- unit from now on (at most MAX_SPAN in all). It notes that it carried
-- (stCarried).
local function carry()
  local backlog = ((stS - nowS) * 1e9 + (stN - nowN)) / stA * interval -- tdiff, inlined
  if backlog >= MAX_SPAN then
    stS, stN = tadd(nowS, nowN, MAX_SPAN)
  else
    stS, stN = tadd(nowS, nowN, round(backlog))
  end
  stA, stCarried = interval, true
end

-- carryOnce is Go's carryOnce for an op that is no check (see
-- Params.Carries): a GCRA state of another interval, still ahead of now,
-- carried over to the interval in use, before a decision whose first
-- change to the state is not a step's (an exhaust's full-at). The steps
-- after it find the interval in use, and carry nothing again.
local function carryOnce()
  if kind == GCRA and stA ~= interval and stA ~= 0 and tless(nowS, nowN, stS, stN) then carry() end
end

-- gcra is stepGCRA, and the conversion Params.Decide makes before it:
-- the first step of a decision carries a state of another interval over,
-- in the state itself, as Decide does for every op but a check; a check's
-- decision, which writes nothing, decides as converted, as stepGCRA does
-- on a copy. Every TAT it records, it records with the interval in use
-- (stA).
local function gcra(verb, cost, atS, atN, mdS, mdN)
  local allowed, retryS, retryN, waitS, waitN, markS, markN = false, nil, nil, nil, nil, nil, nil
  local t = interval -- a local, as it is read more than once
  -- One comparison on the usual path: a state of the interval in use.
  if stA ~= t and stA ~= 0 and tless(nowS, nowN, stS, stN) then carry() end
  -- A whole product is its nanoseconds, with nothing to round (Go's
  -- wholeNanos): no call on the usual path, as below for the cost.
  local tau = limit * t
  if tau % 1 ~= 0 then tau = round(tau) end
  local tatS, tatN = stS, stN
  if tatS < nowS or (tatS == nowS and tatN < nowN) then tatS, tatN = nowS, nowN end -- tmax, inlined
  if verb == CANCEL then
    -- The reservation is the key's last booking iff the TAT is still the
    -- one it left: its instant plus the tolerance. It gives back its cost
    -- less a nanosecond.
    local bs, bn = tadd(atS, atN, tau)
    if tless(nowS, nowN, atS, atN) and stS == bs and stN == bn then
      allowed = true
      stS, stN = tadd(stS, stN, 1 - round(cost * t))
      stA = t
      tatS, tatN = tmax(stS, stN, nowS, nowN)
    end
  else
    local c = cost * t
    if c % 1 ~= 0 then c = round(c) end
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
      if verb ~= CHECK then stS, stN, stA = tatS, tatN, t end
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
        stS, stN, stA = tatS, tatN, t
      else
        retryS, retryN = ms, mn
      end
    end
  end
  local backlog = (tatS - nowS) * 1e9 + (tatN - nowN) -- tdiff, inlined
  local remaining = (tau - backlog) / t
  if remaining > limit then remaining = limit end
  return allowed, backlog / t, retryS, retryN, tatS, tatN, waitS, waitN, markS, markN, remaining
end

-- gcraFullAt is the GCRA's fullAt: full at t, the pair ts, tn, its TAT
-- the later of its own and t plus the tolerance, with the interval in use.
-- (t is at most 2^62 + 2^60 ns, and the TAT 2^60 ns more: pairs.)
local function gcraFullAt(ts, tn)
  local fs, fn = tadd(ts, tn, round(limit * interval))
  stS, stN = tmax(stS, stN, fs, fn)
  stA = interval
end

-- gcraSettle is Go's settleGCRA: the TAT moved by the cost's nanoseconds,
-- later for a charge (verb CHARGE), up to MAX_SPAN past now, earlier for
-- a refund, down to now at the earliest, with the interval in use. It
-- returns the cost moved. The cost may be any finite amount (2^1000, say):
-- times the interval it may overflow to infinity, as in Go, and it is
-- rounded to nanoseconds (gcraNanos) only below what the key holds or has
-- room for, as a whole number a double holds. What a refund finds held,
-- the TAT ahead of now, and what a charge has room for, MAX_SPAN at most,
-- are Go's float64 of their int64 as tdiff gives it (exact below 2^53 ns,
-- rounded once up to 146 years, as gcra's backlog is); the TAT moves by
-- tadd, exactly.
local function gcraSettle(verb, cost)
  local tatS, tatN = tmax(stS, stN, nowS, nowN)
  stA = interval
  if verb == REFUND then
    if not tless(nowS, nowN, stS, stN) then return 0 end -- nothing held
    local held = tdiff(stS, stN, nowS, nowN)
    if cost * interval >= held then
      stS, stN = nowS, nowN
      return held / interval
    end
    -- At most held as a double: a product below it rounds to it at most.
    stS, stN = tadd(stS, stN, -round(cost * interval))
    return cost
  end
  local endS, endN = tadd(nowS, nowN, MAX_SPAN) -- now + MAX_SPAN, the latest TAT
  if not tless(tatS, tatN, endS, endN) then return 0 end -- no room
  local room = tdiff(endS, endN, tatS, tatN)
  if cost * interval >= room then
    stS, stN = endS, endN
    return room / interval
  end
  stS, stN = tadd(tatS, tatN, round(cost * interval))
  return cost
end
