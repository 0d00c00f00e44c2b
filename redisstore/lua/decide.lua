-- decide: a limit's decision on its key's state, the algorithm's step
-- with penalties and counted denials around it.
--
-- Depends on: prelude, time, and every algorithm: meter, gcra,
-- intervalrefill, fixedwindow (and its outside), slidinglog,
-- slidingcounter, leases.
-- Translates: Params.decide, decideKind, settle, describe, Records and
-- Frees, and Params.CheckCost's verbs of the concurrency limit and of the
-- algorithms without reservations (engine/params.go), and
-- Params.decideStrict and fillUp (engine/strict.go).

-- The step function and full-at of each engine.Kind; the token bucket's
-- interval refill replaces the meter. Only the algorithms that take
-- reservations have a full-at (Params.Reservable).
local STEPS = {meter, gcra, meter, fixedWindow, slidingLog, slidingCounter, leases}
local FULLATS = {meterFullAt, gcraFullAt, meterFullAt, nil, nil, nil, nil}

-- decides reports whether the limit in use decides verb, as far as
-- Params.CheckCost tells leases from the rest: only the concurrency limit
-- extends and has a line to leave, and it neither fills up, reserves nor
-- grants part of a cost; only the algorithms that take reservations,
-- which have a full-at, are exhausted, charged and refunded (the verbs
-- from EXHAUST on, which the callers have checked go no further than
-- REFUND). Every limit decides an Allow and a check, for which use does
-- not call it. The Go side refuses the others first; the library refuses
-- them too, rather than decide them as another verb.
local function decides(verb)
  if verb >= EXHAUST then return fullAt ~= nil end
  if kind == CONCURRENCY then return verb ~= FILL and verb ~= RESERVE and verb ~= ATMOST end
  return verb ~= EXTEND and verb ~= LEAVE
end

-- use makes limit i (from 1) the one decided: its Params (a calendar
-- window's windows as where they lie in the input) and its step function.
-- It returns the limit's cost and instant, and an error reply if the
-- library refuses the limit for the call's verb: a kind it does not know,
-- a verb the kind does not decide (decides), a calendar window whose
-- windows do not hold now (fixedwindow's outside); nil otherwise.
local function use(i)
  local k, v, cd, cost, atS, atN
  k, v, cd, limit, interval, amount, maxEntries, cost, atS, atN, penS, penN =
    unpack(LIMIT, input, OP_SIZE + (i - 1) * LIMIT_SIZE + 1)
  kind, variant, countDenied, slack = k, v == 1, cd == 1, limit * TOLERANCE
  step, fullAt = STEPS[kind], FULLATS[kind]
  if kind == TOKEN and variant then step, fullAt = intervalRefill, intervalRefillFullAt end
  windowsAt = nil
  if v == CALENDAR then
    -- Its windows follow the limits; a calendar window without them, or
    -- of another kind, is a limit the library does not know.
    if kind == FIXED and windowsFrom then
      windowsAt = windowsFrom + (i - 1) * WINDOWS_SIZE
    else
      step = nil
    end
  end
  if not step then
    return cost, atS, atN, redis.error_reply('UNSUPPORTED sluice: kind ' .. kind)
  elseif verb > CHECK and not decides(verb) then -- every limit decides an Allow and a check
    return cost, atS, atN, redis.error_reply('UNSUPPORTED sluice: kind ' .. kind .. ' does not decide verb ' .. verb)
  elseif windowsAt then
    -- A calendar window counts in the window that holds now, if any.
    return cost, atS, atN, outside(i)
  end
  return cost, atS, atN
end

-- keepLimit keeps in table t the limit that use set (its Params, step
-- function, full-at and windows); setLimit makes the limit kept in t the
-- one decided again, without reading the input a second time.
local function keepLimit(t)
  t[1], t[2], t[3], t[4], t[5], t[6] = kind, variant, countDenied, limit, interval, amount
  t[7], t[8], t[9], t[10], t[11], t[12], t[13] = maxEntries, slack, penS, penN, step, fullAt, windowsAt
end

local function setLimit(t)
  kind, variant, countDenied, limit, interval, amount = t[1], t[2], t[3], t[4], t[5], t[6]
  maxEntries, slack, penS, penN, step, fullAt, windowsAt = t[7], t[8], t[9], t[10], t[11], t[12], t[13]
end

-- records is Go's Params.Records: whether the decision made on verb
-- changed the key's state, so that it is written back (a fill-up, and an
-- exhaust, a charge or a refund: the verbs from EXHAUST on, always).
local function records(verb)
  -- A denied Allow with an instant waits in a concurrency limit's line: At
  -- is its ticket.
  if verb == ALLOW then return dAllowed or dBlocked or countDenied or dAS ~= 0 or dAN ~= 0 end
  if verb == FILL or verb >= EXHAUST then return true end
  if verb == RESERVE then return dAllowed or dBlocked or countDenied end
  if verb == CANCEL or verb == EXTEND or verb == LEAVE then return dAllowed end
  if verb == ATMOST then return dGranted > 0 end
  return false
end

-- frees is Go's Params.Frees: whether the decision made on verb, with the
-- op's instant (atS, atN), may let a waiter of the concurrency limit in
-- use in: a lease released, a waiter leaving the line, or a waiter (an
-- Allow with a ticket) served with room left, after which the next may be
-- first and fit. The caller tells the key's waiters (io's released) after
-- writing the key.
local function frees(verb, atS, atN)
  return kind == CONCURRENCY and dAllowed and
    (verb == CANCEL or verb == LEAVE or verb == ALLOW and (atS ~= 0 or atN ~= 0) and dRemaining > 0)
end

-- decideKind is Go's decideKind on a zero Decision: the algorithm, its
-- decision described (durations as pairs, At as an instant pair), and a
-- state fresh again made the zero State, as a recording decision leaves it.
local function decideKind(verb, cost, atS, atN, mdS, mdN)
  local allowed, used, retryS, retryN, resetS, resetN, waitS, waitN, markS, markN, gcraRemaining =
    step(verb, cost, atS, atN, mdS, mdN)
  if used < 0 then
    used = 0
  elseif used > limit then
    used = limit
  end
  dAllowed, dBlocked, dUsed, dRemaining, dGranted = allowed, false, used, limit - used, 0
  if gcraRemaining and dRemaining > 0 then dRemaining = gcraRemaining end
  -- A nil instant is none: a zero duration.
  if retryS then dRS, dRN = after(retryS, retryN) else dRS, dRN = 0, 0 end
  if resetS then dES, dEN = after(resetS, resetN) else dES, dEN = 0, 0 end
  if waitS then dWS, dWN = after(waitS, waitN) else dWS, dWN = 0, 0 end
  if markS then dAS, dAN = markS, markN else dAS, dAN = 0, 0 end
  if dES == 0 and dEN == 0 and records(verb) then
    stS, stN, stA, stB, stLog, stUS, stUN = 0, 0, 0, 0, '', 0, 0
  end
end

-- countDenial is Go's fillUp: a denied request recorded as far as the
-- limit allows, the key full at now; then the decision says when the
-- request would be admitted from the full key, decided again on a copy of
-- it, and keeps its own verdict, block and booking, and a wait of a
-- nanosecond at least.
local function countDenial(verb, cost, atS, atN, mdS, mdN)
  local allowed, blocked, wS, wN, aS, aN = dAllowed, dBlocked, dWS, dWN, dAS, dAN
  if fullAt then -- the algorithms that take reservations
    fullAt(nowS, nowN)
  elseif kind == COUNTER then
    counterFillUp()
  elseif dRemaining > 0 then -- the fixed window and the sliding log: the room fits
    decideKind(ALLOW, dRemaining, 0, 0, 0, 0)
  end
  local again = verb
  if again == ALLOW then again = CHECK end
  local s, n, a, b, log, us, un = stS, stN, stA, stB, stLog, stUS, stUN
  decideKind(again, cost, atS, atN, mdS, mdN)
  stS, stN, stA, stB, stLog, stUS, stUN = s, n, a, b, log, us, un
  dAllowed, dBlocked, dWS, dWN, dAS, dAN = allowed, blocked, wS, wN, aS, aN
  -- A meter holding more than its limit decided the denial from its
  -- point and decides again from now, which may round the other way: a
  -- denial still waits, a nanosecond.
  if dRS == 0 and dRN == 0 then dRN = 1 end
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
  if never then
    decideKind(CHECK, 0, 0, 0, 0, 0)
    dAllowed = false
    if uS then dRS, dRN = tmax(dRS, dRN, tsub(uS, uN, nowS, nowN)) end
  elseif uS and (verb == ALLOW or verb == CHECK) then
    decideKind(CHECK, cost, 0, 0, 0, 0)
    if dAllowed then
      -- The cost would fit but for the block: the key as it stands.
      local rS, rN = dRS, dRN
      decideKind(CHECK, 0, 0, 0, 0, 0)
      dRS, dRN = rS, rN
    end
    dAllowed = false
    dRS, dRN = tmax(dRS, dRN, tsub(uS, uN, nowS, nowN))
  elseif uS and verb == RESERVE then
    atS, atN = tmax(atS, atN, uS, uN) -- no earlier than the block's end
    decideKind(RESERVE, cost, atS, atN, mdS, mdN)
  else
    decideKind(verb, cost, atS, atN, mdS, mdN)
    if uS and verb == FILL then
      dAllowed = false
      dRS, dRN = tmax(dRS, dRN, tsub(uS, uN, nowS, nowN))
    end
  end
  dBlocked = uS ~= nil
  local overflow = not dAllowed and (verb == ALLOW or verb == RESERVE or verb == FILL)
  if overflow and countDenied and verb ~= FILL and not never then
    -- Decided again as the algorithm decided it: a reservation from the
    -- block's end.
    countDenial(verb, cost, atS, atN, mdS, mdN)
    if uS then
      -- Until the block ends; a reservation as long as this one would
      -- book MaxDelay before that.
      local wS, wN = tsub(uS, uN, nowS, nowN)
      if verb ~= RESERVE then
        dRS, dRN = tmax(dRS, dRN, wS, wN)
      elseif tless(mdS, mdN, wS, wN) then
        dRS, dRN = tmax(dRS, dRN, tsub(wS, wN, mdS, mdN))
      end
    end
  end
  if overflow and (penS > 0 or penN > 0) and not uS then
    uS, uN = tplus(nowS, nowN, penS, penN)
    dBlocked = true
    -- Retry once the block ends; a reservation as long as this one would
    -- book MaxDelay before that.
    if verb ~= RESERVE or never then
      dRS, dRN = tmax(dRS, dRN, penS, penN)
    elseif tless(mdS, mdN, penS, penN) then
      dRS, dRN = tmax(dRS, dRN, tsub(penS, penN, mdS, mdN))
    end
  end
  if uS then
    -- No store forgets a key before its block ends.
    dES, dEN = tmax(dES, dEN, tsub(uS, uN, nowS, nowN))
  end
  if records(verb) then
    stUS, stUN = uS or 0, uN or 0
  else
    stUS, stUN = keptS, keptN -- recording nothing, a step changes nothing
  end
end

-- decide is Go's decide: strict when a penalty or counted denials apply.
local function decide(verb, cost, atS, atN, mdS, mdN)
  if penS > 0 or penN > 0 or countDenied then return decideStrict(verb, cost, atS, atN, mdS, mdN) end
  return decideKind(verb, cost, atS, atN, mdS, mdN)
end
