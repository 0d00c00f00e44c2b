-- group: one decision over several keys, each limit on its own key, the
-- library's function group.
--
-- Depends on: prelude (begin), time, decide, io.
-- Translates: DecideGroup, Combine and tighter (engine/group.go), decided
-- in one pass for an Allow as MemStore's group does (memgroup.go).

-- The call's limits, in the group's order: each key's state as the
-- decisions so far left it (st* packed in a table), whether the key
-- exists, and each limit's cost and instant (a pair in a table).
local states, present, costs, ats

-- snapshot returns the decision made as a table, as the group keeps one
-- for each limit; resume makes such a table the decision made again.
local function snapshot()
  return {allowed = dAllowed, blocked = dBlocked, used = dUsed, remaining = dRemaining,
    granted = dGranted, limit = limit, rS = dRS, rN = dRN, eS = dES, eN = dEN,
    wS = dWS, wN = dWN, aS = dAS, aN = dAN}
end

local function resume(d)
  dAllowed, dBlocked, dUsed, dRemaining, dGranted = d.allowed, d.blocked, d.used, d.remaining, d.granted
  dRS, dRN, dES, dEN, dWS, dWN, dAS, dAN = d.rS, d.rN, d.eS, d.eN, d.wS, d.wN, d.aS, d.aN
end

-- state returns the key's state in st* as a table; restore makes such a
-- table the state in st* again.
local function state()
  return {stS, stN, stA, stB, stLog, stUS, stUN}
end

local function restore(t)
  stS, stN, stA, stB, stLog, stUS, stUN = t[1], t[2], t[3], t[4], t[5], t[6], t[7]
end

-- decideOn decides limit i on its key's state as the previous decision
-- on it left it, leaves the state it makes in st*, and returns the
-- decision.
local function decideOn(i, verb, cost, atS, atN, mdS, mdN)
  use(i)
  restore(states[i])
  decide(verb, cost, atS, atN, mdS, mdN)
  return snapshot()
end

-- keep writes the state that decision d on verb left in st* back to key
-- i (the limit in use), if d records.
local function keep(i, verb, d)
  resume(d)
  if records(verb) then
    present[i] = write(i, present[i])
    states[i] = state()
  end
end

-- run decides limit i and keeps what it records.
local function run(i, verb, cost, atS, atN, mdS, mdN)
  local d = decideOn(i, verb, cost, atS, atN, mdS, mdN)
  keep(i, verb, d)
  return d
end

-- combine is Go's Combine: the group's decision from each limit's, and
-- the index of the limit it was made from.
local function combine(each)
  local best = 0
  local allowed, blocked = true, false
  local rS, rN, wS, wN = 0, 0, 0, 0
  for i, d in ipairs(each) do
    allowed = allowed and d.allowed
    blocked = blocked or d.blocked
    rS, rN = tmax(rS, rN, d.rS, d.rN)
    wS, wN = tmax(wS, wN, d.wS, d.wN)
    -- tighter: less of its limit left
    if best == 0 or d.remaining * each[best].limit < each[best].remaining * d.limit then best = i end
  end
  local d = each[best]
  if not allowed then
    for i, e in ipairs(each) do -- the longest denial
      if not e.allowed and (d.allowed or tless(d.rS, d.rN, e.rS, e.rN)) then d, best = e, i end
    end
  end
  -- A copy, made by one constructor: the table is sized once.
  local g = {allowed = d.allowed, limit = d.limit, used = d.used, remaining = d.remaining,
    blocked = blocked, granted = d.granted, rS = rS, rN = rN, eS = d.eS, eN = d.eN,
    wS = d.wS, wN = d.wN, aS = d.aS, aN = d.aN}
  if not allowed then
    g.allowed, g.wS, g.wN, g.aS, g.aN = false, 0, 0, 0, 0
  elseif verb == RESERVE and (wS > 0 or wN > 0) then
    g.wS, g.wN = wS, wN
    g.aS, g.aN = tplus(nowS, nowN, wS, wN)
  end
  return g, best
end

-- allowAll decides an Allow in one pass, as the memory store does: an
-- Allow admits exactly when a check of it would, so every limit is decided
-- as Allow on its state, and what each made is kept only where
-- DecideGroup's second pass would run that same Allow: everywhere if all
-- admit, else on the limits that deny. The others check a zero cost on
-- their key as it was.
local function allowAll(n, each)
  local all, made = true, {}
  for i = 1, n do
    each[i] = decideOn(i, ALLOW, costs[i], ats[i][1], ats[i][2], delayS, delayN)
    made[i] = state()
    all = all and each[i].allowed
  end
  for i = 1, n do
    if all or not each[i].allowed then
      use(i)
      restore(made[i])
      keep(i, ALLOW, each[i])
    else
      -- Admitted by this limit, not by the group: its decision
      -- describes the key as the request leaves it, untouched.
      each[i] = run(i, CHECK, 0, 0, 0, 0, 0)
    end
  end
  return combine(each)
end

-- reserveAll books every limit at the instant the last of them would
-- book, if that lies within the maximum delay; lS, lN is until every
-- limit would admit, as each one's check said.
local function reserveAll(n, each, lS, lN)
  local fits = not tless(delayS, delayN, lS, lN)
  local retryS, retryN = 0, 0 -- until the group would book: latest - MaxDelay
  if not fits then retryS, retryN = tsub(lS, lN, delayS, delayN) end
  local bookS, bookN = tplus(nowS, nowN, lS, lN) -- the instant every limit books
  for i = 1, n do
    local atS, atN, mdS, mdN = ats[i][1], ats[i][2], delayS, delayN
    if fits then
      atS, atN, mdS, mdN = bookS, bookN, lS, lN
    end
    -- Unless it fits, a limit that would have booked on its own records
    -- nothing.
    if fits or tless(delayS, delayN, each[i].rS, each[i].rN) then
      each[i] = run(i, RESERVE, costs[i], atS, atN, mdS, mdN)
      retryS, retryN = tmax(retryS, retryN, each[i].rS, each[i].rN)
    end
  end
  local g, best = combine(each)
  if not fits then g.rS, g.rN = retryS, retryN end
  return g, best
end

-- decideAll is Go's DecideGroup on the n limits of the call: it leaves
-- each limit's decision in each, and returns the group's and the index of
-- the limit it was made from.
local function decideAll(n, each)
  if verb == CANCEL then
    for i = 1, n do each[i] = run(i, CANCEL, costs[i], ats[i][1], ats[i][2], 0, 0) end
    return combine(each)
  elseif verb == ALLOW then
    return allowAll(n, each)
  end
  -- Check every limit; latest is until every one would admit.
  local all = true
  local lS, lN = 0, 0
  for i = 1, n do
    each[i] = run(i, CHECK, costs[i], 0, 0, 0, 0)
    all = all and each[i].allowed
    lS, lN = tmax(lS, lN, each[i].rS, each[i].rN)
  end
  if verb == RESERVE then return reserveAll(n, each, lS, lN) end
  -- A check decides as Allow would, recording nothing.
  for i = 1, n do
    if not all and each[i].allowed then each[i] = run(i, CHECK, 0, 0, 0, 0, 0) end
  end
  return combine(each)
end

-- group decides the op of args on every key of ks, each limit's key in
-- the group's order, and replies with the index of the limit the group's
-- decision is made from, the group's record and each limit's.
local function group(ks, args)
  local failed = begin(ks, args)
  if failed then return failed end
  if verb ~= ALLOW and verb ~= CHECK and verb ~= RESERVE and verb ~= CANCEL then
    return redis.error_reply('UNSUPPORTED sluice: a group does not decide verb ' .. verb)
  end
  local n = #keys
  states, present, costs, ats = {}, {}, {}, {}
  for i = 1, n do
    local cost, atS, atN = use(i)
    if not step then
      return redis.error_reply('UNSUPPORTED sluice: kind ' .. kind)
    end
    local p, conflict = load(i)
    if conflict then return pack('<BBB', CONFLICT, conflict, i) end
    states[i] = state()
    present[i], costs[i], ats[i] = p, cost, {atS, atN}
  end
  local each = {}
  local g, best = decideAll(n, each)
  resume(g)
  local out = {pack('<B', best), reply(false)}
  for i = 1, n do
    resume(each[i])
    out[i + 2] = reply(false)
  end
  return table.concat(out)
end
