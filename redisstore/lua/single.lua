-- single: one decision on one key, the library's function apply.
--
-- Depends on: prelude (begin, serverNow, decoded, stCarried, fullAt),
-- time (tplus, tless), arith (fmin), meter (meterSettle), gcra
-- (carryOnce, gcraSettle), intervalrefill (intervalRefillSettle), decide
-- (use, keepLimit, setLimit, decide, decideKind, decideStrict, records,
-- frees), io (load, write, released, reply).
-- Translates: Params.Decide, decideOther and stepExhaust
-- (engine/params.go), Params.stepAtMost, fits and grant
-- (engine/atmost.go), Params.stepSettle and emptied (engine/settle.go),
-- and what MemStore writes back after a decision (memstore.go's apply:
-- Records or Carries).

-- fits reports whether cost c would be admitted now.
local function fits(c)
  decide(CHECK, c, 0, 0, 0, 0)
  return dAllowed
end

-- grant admits cost c, which fits, as a partial grant.
local function grant(c)
  decide(ALLOW, c, 0, 0, 0, 0)
  dGranted = c
end

-- atMost is Go's stepAtMost: the whole cost if it fits; else the whole
-- units the allowance left now holds, one less, or one unit, the first
-- that fits, admitted as an allow; else the decision on the least cost
-- worth granting. Checks record nothing, so only the grant changes the
-- state.
local function atMost(cost)
  if cost == 0 then -- nothing to grant: a check, not admitted
    decide(CHECK, 0, 0, 0, 0, 0)
    dAllowed = false
    return
  end
  local whole = ceil(cost) - 1
  if cost <= limit and fits(cost) then return grant(cost) end
  decide(CHECK, 0, 0, 0, 0, 0) -- what is left
  local g = fmin(fmin(floor(dRemaining + slack), whole), floor(limit))
  for _, c in ipairs({g, g - 1, 1}) do
    if c >= 1 and c <= whole and fits(c) then return grant(c) end
  end
  decide(CHECK, fmin(cost, 1), 0, 0, 0, 0)
end

-- exhaust is Go's stepExhaust: a GCRA state of another interval carried
-- over first, the key full at MaxDelay (mdS, mdN) from now, its block kept
-- (a bucket's full-at writes a whole new State), then described as a
-- check of the cost would describe it, strict or not (the check neither
-- starts nor ends a block). It always records. Now is at most 2^62 ns and
-- MaxDelay 2^60 ns: their sum is a pair, exact.
local function exhaust(cost, mdS, mdN)
  carryOnce()
  local uS, uN = stUS, stUN
  fullAt(tplus(nowS, nowN, mdS, mdN))
  stUS, stUN = uS, uN
  decide(CHECK, cost, 0, 0, 0, 0)
end

-- settleCost is Go's stepSettle: a GCRA state of another interval carried
-- over first, the cost charged (verb CHARGE) or refunded at the key's
-- latest point by the algorithm's settle function, forgotten if that left
-- it fresh again, its block kept (a bucket's settle function writes a
-- whole new State), then described as a check of a zero cost would
-- describe it, strict or not (the check neither starts nor ends a block),
-- with the cost moved as the cost granted. It always records. The settle function is chosen as Go's
-- switch chooses it, among the algorithms that take reservations, the
-- only ones decides lets through.
local function settleCost(verb, cost)
  carryOnce()
  local uS, uN = stUS, stUN
  local moved
  if kind == GCRA then
    moved = gcraSettle(verb, cost)
  elseif kind == TOKEN and variant then -- the interval refill
    moved = intervalRefillSettle(verb, cost)
  else
    moved = meterSettle(verb, cost)
  end
  -- Go's emptied: a state the settlement left fresh again at now (the
  -- GCRA's TAT, or a bucket's point holding no more than the slack, not
  -- after now) is forgotten, the zero State, even under a block.
  if not tless(nowS, nowN, stS, stN) and (kind == GCRA or stA <= slack) then
    stS, stN, stA, stB, stLog = 0, 0, 0, 0, ''
  end
  stUS, stUN = uS, uN
  decide(CHECK, 0, 0, 0, 0, 0)
  dGranted = moved
end

-- memo keeps in decoded what begin and use read from the input (the
-- limit as keepLimit keeps it, then the op's fields), and the limit's
-- cost and instant, for apply to set again on a call of the same input.
local function memo(cost, atS, atN)
  if decodedCount == 256 then decoded, decodedCount = {}, 0 end
  decodedCount = decodedCount + 1
  local t = {}
  keepLimit(t)
  t[14], t[15], t[16], t[17], t[18], t[19], t[20] = verb, marginMs, delayS, delayN, cost, atS, atN
  decoded[input] = t
end

-- apply decides the op of args on the key ks[1], writes the key back if
-- the decision records or carries its state over to a changed limit, and
-- replies with the decision's record.
local function apply(ks, args)
  local cost, atS, atN
  local m = decoded[args[1]]
  if m and #ks == 1 then
    keys, input, cost, atS, atN = ks, args[1], m[18], m[19], m[20]
    if input ~= current then -- begin's and use's fields as they read them
      current, callerClock, windowsFrom = input, 0, nil
      setLimit(m)
      verb, marginMs, delayS, delayN = m[14], m[15], m[16], m[17]
    end
    serverNow()
  else
    local failed = begin(ks, args)
    if failed then return failed end
    if verb < ALLOW or verb > REFUND then
      return redis.error_reply('UNSUPPORTED sluice: verb ' .. verb)
    end
    local refused
    cost, atS, atN, refused = use(1)
    if refused then return refused end
    -- Not a calendar window's: whether its windows hold now is asked at
    -- each call (use's outside); nor one on the caller's clock, whose
    -- input holds its now.
    if callerClock == 0 and not windowsAt then
      memo(cost, atS, atN)
      current = input
    end
  end
  local present, conflict = load(1)
  if conflict then return pack('<BBB', CONFLICT, conflict, 1) end
  -- Decide's switch, with decide's own made here: a call fewer on the
  -- usual path, and one comparison for the other verbs.
  if verb < ATMOST or verb == EXTEND or verb == LEAVE then
    if penS > 0 or penN > 0 or countDenied then
      decideStrict(verb, cost, atS, atN, delayS, delayN)
    else
      decideKind(verb, cost, atS, atN, delayS, delayN)
    end
  elseif verb == ATMOST then
    atMost(cost)
  elseif verb == EXHAUST then
    exhaust(cost, delayS, delayN)
  else -- CHARGE or REFUND, the last verbs
    settleCost(verb, cost)
  end
  if records(verb) or stCarried and verb ~= CHECK then
    write(1, present)
    -- A lease released, a waiter that left the line or was served: each
    -- records. (The kind first: a rate limit's decision calls nothing more.)
    if kind == CONCURRENCY and frees(verb, atS, atN) then released(1) end
  end
  return reply(verb >= ATMOST and (verb == ATMOST or verb >= CHARGE)) -- one comparison on the usual path
end
