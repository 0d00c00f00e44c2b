-- decide: a limit's decision on its key's state, the algorithm's step
-- with penalties and counted denials around it.
--
-- Depends on: prelude, time, and every algorithm: meter, gcra,
-- intervalrefill, fixedwindow, slidinglog, slidingcounter.
-- Translates: Params.decide, decideKind, describe and Records
-- (engine/params.go), and Params.decideStrict and fillUp
-- (engine/strict.go).

-- The step function and fill-up of each engine.Kind; the token bucket's
-- interval refill replaces the meter.
local STEPS = {meter, gcra, meter, fixedWindow, slidingLog, slidingCounter}
local FILLUPS = {meterFillUp, gcraFillUp, meterFillUp, nil, nil, counterFillUp}

-- use makes limit i (from 1) the one decided: its Params and its step
-- function, nil for a kind the library does not know. It returns the
-- limit's cost and instant.
local function use(i)
  local k, v, cd, cost, atS, atN
  k, v, cd, limit, interval, amount, maxEntries, cost, atS, atN, penS, penN =
    struct.unpack(LIMIT, input, OP_SIZE + (i - 1) * LIMIT_SIZE + 1)
  kind, variant, countDenied, slack = k, v == 1, cd == 1, limit * TOLERANCE
  step, fillUp = STEPS[kind], FILLUPS[kind]
  if kind == TOKEN and variant then step, fillUp = intervalRefill, intervalRefillFillUp end
  return cost, atS, atN
end

-- records is Go's Params.Records: whether decision d on verb changed the
-- key's state, so that it is written back.
local function records(verb, d)
  if verb == FILL then return true end
  if verb == ALLOW or verb == RESERVE then return d.allowed or d.blocked or countDenied end
  if verb == CANCEL then return d.allowed end
  if verb == ATMOST then return d.granted > 0 end
  return false
end

-- decideKind is Go's decideKind: the algorithm, its decision described
-- (durations as pairs, At as an instant pair), and a state fresh again
-- made the zero State, as a recording decision leaves it.
local function decideKind(verb, cost, atS, atN, mdS, mdN)
  local allowed, used, retryS, retryN, resetS, resetN, waitS, waitN, markS, markN, gcraRemaining =
    step(verb, cost, atS, atN, mdS, mdN)
  if used < 0 then
    used = 0
  elseif used > limit then
    used = limit
  end
  local remaining = limit - used
  if gcraRemaining and remaining > 0 then remaining = gcraRemaining end
  local rS, rN = after(retryS, retryN)
  local eS, eN = after(resetS, resetN)
  local wS, wN = after(waitS, waitN)
  -- One constructor: the table is sized once for every field.
  local d = {allowed = allowed, limit = limit, used = used, remaining = remaining,
    blocked = false, granted = 0, rS = rS, rN = rN, eS = eS, eN = eN, wS = wS, wN = wN,
    aS = markS or 0, aN = markN or 0}
  if d.eS == 0 and d.eN == 0 and records(verb, d) then
    stS, stN, stA, stB, stLog, stUS, stUN = 0, 0, 0, 0, '', 0, 0
  end
  return d
end

-- countDenial is Go's fillUp: a denied request recorded as far as the
-- limit allows, the key full at now; then d says when the request would
-- be admitted from the full key, decided again on a copy of it.
local function countDenial(verb, cost, atS, atN, mdS, mdN, d)
  if fillUp then
    fillUp(d)
  elseif d.remaining > 0 then -- the fixed window and the sliding log: the room fits
    decideKind(ALLOW, d.remaining, 0, 0, 0, 0)
  end
  local again = verb
  if again == ALLOW then again = CHECK end
  local s, n, a, b, log, us, un = stS, stN, stA, stB, stLog, stUS, stUN
  local e = decideKind(again, cost, atS, atN, mdS, mdN)
  stS, stN, stA, stB, stLog, stUS, stUN = s, n, a, b, log, us, un
  d.used, d.remaining, d.rS, d.rN, d.eS, d.eN = e.used, e.remaining, e.rS, e.rN, e.eS, e.eN
end

-- decideStrict is Go's decideStrict: the algorithm behind a penalty's
-- block, with denials counted. While a block lasts, an Allow or a check
-- is denied, describing the key as it stands; a reservation books no
-- earlier than the block's end; a fill-up records but does not fit. A
-- step that records nothing leaves the block as it was. An Allow or a
-- reservation above the limit never fits: denied, describing the key as
-- it stands, it starts the block.
local function decideStrict(verb, cost, atS, atN, mdS, mdN)
  local uS, uN = stUS, stUN
  if not tless(nowS, nowN, uS, uN) then uS, uN = nil, nil end -- ended: not blocked
  local keptS, keptN = stUS, stUN
  local never = cost > limit and (verb == ALLOW or verb == RESERVE)
  local d
  if never then
    d = decideKind(CHECK, 0, 0, 0, 0, 0)
    d.allowed = false
    if uS then d.rS, d.rN = tmax(d.rS, d.rN, tsub(uS, uN, nowS, nowN)) end
  elseif uS and (verb == ALLOW or verb == CHECK) then
    d = decideKind(CHECK, cost, 0, 0, 0, 0)
    if d.allowed then
      -- The cost would fit but for the block: the key as it stands.
      local rS, rN = d.rS, d.rN
      d = decideKind(CHECK, 0, 0, 0, 0, 0)
      d.rS, d.rN = rS, rN
    end
    d.allowed = false
    d.rS, d.rN = tmax(d.rS, d.rN, tsub(uS, uN, nowS, nowN))
  elseif uS and verb == RESERVE then
    atS, atN = tmax(atS, atN, uS, uN) -- no earlier than the block's end
    d = decideKind(RESERVE, cost, atS, atN, mdS, mdN)
  else
    d = decideKind(verb, cost, atS, atN, mdS, mdN)
    if uS and verb == FILL then
      d.allowed = false
      d.rS, d.rN = tmax(d.rS, d.rN, tsub(uS, uN, nowS, nowN))
    end
  end
  d.blocked = uS ~= nil
  local overflow = not d.allowed and (verb == ALLOW or verb == RESERVE or verb == FILL)
  if overflow and countDenied and verb ~= FILL and not never then
    -- Decided again as the algorithm decided it: a reservation from the
    -- block's end.
    countDenial(verb, cost, atS, atN, mdS, mdN, d)
    if uS then
      -- Until the block ends; a reservation as long as this one would
      -- book MaxDelay before that.
      local wS, wN = tsub(uS, uN, nowS, nowN)
      if verb ~= RESERVE then
        d.rS, d.rN = tmax(d.rS, d.rN, wS, wN)
      elseif tless(mdS, mdN, wS, wN) then
        d.rS, d.rN = tmax(d.rS, d.rN, tsub(wS, wN, mdS, mdN))
      end
    end
  end
  if overflow and (penS > 0 or penN > 0) and not uS then
    uS, uN = tplus(nowS, nowN, penS, penN)
    d.blocked = true
    -- Retry once the block ends; a reservation as long as this one would
    -- book MaxDelay before that.
    if verb ~= RESERVE or never then
      d.rS, d.rN = tmax(d.rS, d.rN, penS, penN)
    elseif tless(mdS, mdN, penS, penN) then
      d.rS, d.rN = tmax(d.rS, d.rN, tsub(penS, penN, mdS, mdN))
    end
  end
  if uS then
    -- No store forgets a key before its block ends.
    d.eS, d.eN = tmax(d.eS, d.eN, tsub(uS, uN, nowS, nowN))
  end
  if records(verb, d) then
    stUS, stUN = uS or 0, uN or 0
  else
    stUS, stUN = keptS, keptN -- recording nothing, a step changes nothing
  end
  return d
end

-- decide is Go's decide: strict when a penalty or counted denials apply.
local function decide(verb, cost, atS, atN, mdS, mdN)
  if penS > 0 or penN > 0 or countDenied then return decideStrict(verb, cost, atS, atN, mdS, mdN) end
  return decideKind(verb, cost, atS, atN, mdS, mdN)
end
