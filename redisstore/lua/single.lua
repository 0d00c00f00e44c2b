-- single: one decision on one key, the library's function apply.
--
-- Depends on: prelude (begin, stCarried, fullAt), time (tplus), arith
-- (fmin), gcra (carryOnce), fixedwindow (outside), decide (decide,
-- records, frees), io (load, write, released, reply).
-- Translates: Params.Decide and stepExhaust (engine/params.go),
-- Params.stepAtMost, fits and grant (engine/atmost.go), and what MemStore
-- writes back after a decision (memstore.go's apply: Records or Carries).

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

-- apply decides the op of args on the key ks[1], writes the key back if
-- the decision records or carries its state over to a changed limit, and
-- replies with the decision's record.
local function apply(ks, args)
  local failed = begin(ks, args)
  if failed then return failed end
  if verb < ALLOW or verb > EXHAUST then
    return redis.error_reply('UNSUPPORTED sluice: verb ' .. verb)
  end
  local cost, atS, atN = use(1)
  if not step then
    return redis.error_reply('UNSUPPORTED sluice: kind ' .. kind)
  elseif not decides(verb) then
    return redis.error_reply('UNSUPPORTED sluice: kind ' .. kind .. ' does not decide verb ' .. verb)
  end
  if windowsAt then
    -- A calendar window counts in the window that holds now, if any.
    local refused = outside(1)
    if refused then return refused end
  end
  local present, conflict = load(1)
  if conflict then return pack('<BBB', CONFLICT, conflict, 1) end
  if verb == ATMOST then
    atMost(cost)
  elseif verb == EXHAUST then
    exhaust(cost, delayS, delayN)
  else
    decide(verb, cost, atS, atN, delayS, delayN)
  end
  if records(verb) or stCarried and verb ~= CHECK then
    write(1, present)
    -- A lease released, a waiter that left the line or was served: each
    -- records. (The kind first: a rate limit's decision calls nothing more.)
    if kind == CONCURRENCY and frees(verb, atS, atN) then released(1) end
  end
  return reply(verb == ATMOST)
end
