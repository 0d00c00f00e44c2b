-- group: one decision over several keys, each limit on its own key, the
-- library's function group.
--
-- Depends on: prelude (begin, stCarried), time, decide (use, keepLimit,
-- setLimit, decide, records, frees), io (load, write, released, reply).
-- Translates: DecideGroup, Combine and tighter (engine/group.go), decided
-- in one pass for an Allow as MemStore's group does, and each limit's
-- state written back when its decision records or carries it
-- (memgroup.go's decide and allow).

-- The call's limits, in the group's order, kept in tables that outlive
-- the call (a group has at most engine.MaxGroup limits, and Redis runs one
-- call at a time), whose entries from 1 to the call's count each call
-- overwrites: tables made per limit and per decision were most of what a
-- group cost the server beyond its decisions. For each limit: its Params
-- as use left them, its key's state as the decisions so far left it, the
-- state its Allow made, its decision, whether that decision carried its
-- key's state over to a changed limit and is no check (Params.Carries, see
-- stCarried), whether its key exists, and its cost and instant.
local params, states, made, each, carried = {}, {}, {}, {}, {}
local present, costs, atSs, atNs = {}, {}, {}, {}
local G = {} -- the group's decision

-- slot returns t[i], a table made on first use.
local function slot(t, i)
  local s = t[i]
  if not s then
    s = {}
    t[i] = s
  end
  return s
end

-- save keeps the key's state in st* in table t; restore makes it the
-- state in st* again.
local function save(t)
  t[1], t[2], t[3], t[4], t[5], t[6], t[7] = stS, stN, stA, stB, stLog, stUS, stUN
end

local function restore(t)
  stS, stN, stA, stB, stLog, stUS, stUN = t[1], t[2], t[3], t[4], t[5], t[6], t[7]
end

-- snapshot keeps the decision made in table d, with the limit it was made
-- under; resume makes it the decision made again.
local function snapshot(d)
  d.allowed, d.blocked, d.used, d.remaining, d.granted = dAllowed, dBlocked, dUsed, dRemaining, dGranted
  d.limit, d.rS, d.rN, d.eS, d.eN, d.wS, d.wN, d.aS, d.aN = limit, dRS, dRN, dES, dEN, dWS, dWN, dAS, dAN
end

local function resume(d)
  dAllowed, dBlocked, dUsed, dRemaining, dGranted = d.allowed, d.blocked, d.used, d.remaining, d.granted
  dRS, dRN, dES, dEN, dWS, dWN, dAS, dAN = d.rS, d.rN, d.eS, d.eN, d.wS, d.wN, d.aS, d.aN
end

-- decideOn decides limit i on its key's state as the previous decision
-- on it left it, leaves the state it makes in st*, keeps the decision in
-- each[i], and in carried[i] whether it carried the state over, but for
-- a check.
local function decideOn(i, verb, cost, atS, atN, mdS, mdN)
  setLimit(params[i])
  restore(states[i])
  stCarried = false
  decide(verb, cost, atS, atN, mdS, mdN)
  snapshot(slot(each, i))
  carried[i] = stCarried and verb ~= CHECK
end

-- keep writes the state that limit i's decision on verb, the decision
-- made, left in st* back to its key (the limit in use), if the decision
-- records or carries the state over to a changed limit.
local function keep(i, verb)
  if records(verb) or carried[i] then
    present[i] = write(i, present[i])
    save(states[i])
  end
end

-- run decides limit i and keeps what it records.
local function run(i, verb, cost, atS, atN, mdS, mdN)
  decideOn(i, verb, cost, atS, atN, mdS, mdN)
  keep(i, verb)
end

-- combine is Go's Combine: the group's decision, in G, from the n limits'
-- in each, and the index of the limit it was made from.
local function combine(n)
  local best = 0
  local allowed, blocked = true, false
  local rS, rN, wS, wN = 0, 0, 0, 0
  for i = 1, n do
    local d = each[i]
    allowed = allowed and d.allowed
    blocked = blocked or d.blocked
    rS, rN = tmax(rS, rN, d.rS, d.rN)
    wS, wN = tmax(wS, wN, d.wS, d.wN)
    -- tighter: less of its limit left
    if best == 0 or d.remaining * each[best].limit < each[best].remaining * d.limit then best = i end
  end
  local d = each[best]
  if not allowed then
    for i = 1, n do -- the longest denial
      local e = each[i]
      if not e.allowed and (d.allowed or tless(d.rS, d.rN, e.rS, e.rN)) then d, best = e, i end
    end
  end
  G.allowed, G.limit, G.used, G.remaining, G.blocked, G.granted = d.allowed, d.limit, d.used, d.remaining, blocked, d.granted
  G.rS, G.rN, G.eS, G.eN, G.wS, G.wN, G.aS, G.aN = rS, rN, d.eS, d.eN, d.wS, d.wN, d.aS, d.aN
  if not allowed then
    G.allowed, G.wS, G.wN, G.aS, G.aN = false, 0, 0, 0, 0
  elseif verb == RESERVE and (wS > 0 or wN > 0) then
    G.wS, G.wN = wS, wN
    G.aS, G.aN = tplus(nowS, nowN, wS, wN)
  end
  return best
end

-- allowAll decides an Allow in one pass, as the memory store does: an
-- Allow admits exactly when a check of it would (DecideGroup's check
-- keeps a concurrency limit's ticket, and a waiter's patience changes
-- what a denial records, not whether it admits), so every limit is
-- decided as Allow on its state, and what each made is kept only where
-- DecideGroup's second pass would run that same Allow: everywhere if all
-- admit, else on the limits that deny, where a concurrency limit's waiter
-- takes or keeps its place in line. The others check a zero cost on their
-- key as it was, with their ticket. A waiter served is told to its key's
-- waiters, the next of whom may now be first.
local function allowAll(n)
  local all = true
  for i = 1, n do
    decideOn(i, ALLOW, costs[i], atSs[i], atNs[i], delayS, delayN)
    save(slot(made, i))
    all = all and each[i].allowed
  end
  for i = 1, n do
    if all or not each[i].allowed then
      setLimit(params[i])
      restore(made[i])
      resume(each[i])
      keep(i, ALLOW)
      if frees(ALLOW, atSs[i], atNs[i]) then released(i) end
    else
      -- Admitted by this limit, not by the group: its decision
      -- describes the key as the request leaves it, untouched.
      run(i, CHECK, 0, atSs[i], atNs[i], 0, 0)
    end
  end
  return combine(n)
end

-- reserveAll books every limit at the instant the last of them would
-- book, if that lies within the maximum delay; lS, lN is until every
-- limit would admit, as each one's check said.
local function reserveAll(n, lS, lN)
  local fits = not tless(delayS, delayN, lS, lN)
  local retryS, retryN = 0, 0 -- until the group would book: latest - MaxDelay
  if not fits then retryS, retryN = tsub(lS, lN, delayS, delayN) end
  local bookS, bookN = tplus(nowS, nowN, lS, lN) -- the instant every limit books
  for i = 1, n do
    local atS, atN, mdS, mdN = atSs[i], atNs[i], delayS, delayN
    if fits then
      atS, atN, mdS, mdN = bookS, bookN, lS, lN
    end
    -- Unless it fits, a limit that would have booked on its own records
    -- nothing.
    if fits or tless(delayS, delayN, each[i].rS, each[i].rN) then
      run(i, RESERVE, costs[i], atS, atN, mdS, mdN)
      retryS, retryN = tmax(retryS, retryN, each[i].rS, each[i].rN)
    end
  end
  local best = combine(n)
  if not fits then G.rS, G.rN = retryS, retryN end
  return best
end

-- decideAll is Go's DecideGroup on the n limits of the call: it leaves
-- each limit's decision in each and the group's in G, and returns the
-- index of the limit the group's is made from.
local function decideAll(n)
  if verb == CANCEL or verb == EXTEND then
    -- Each limit by its own rule: a cancel gives its reservation back or
    -- releases its lease, an extension extends its lease. Each lease
    -- released is told to its key's waiters.
    for i = 1, n do
      run(i, verb, costs[i], atSs[i], atNs[i], 0, 0)
      if frees(verb, atSs[i], atNs[i]) then released(i) end
    end
    return combine(n)
  elseif verb == ALLOW then
    return allowAll(n)
  end
  -- Check every limit, with its instant (a concurrency limit's ticket)
  -- but for a reservation; latest is until every one would admit.
  local all = true
  local lS, lN = 0, 0
  for i = 1, n do
    local atS, atN = atSs[i], atNs[i]
    if verb == RESERVE then atS, atN = 0, 0 end
    run(i, CHECK, costs[i], atS, atN, 0, 0)
    all = all and each[i].allowed
    lS, lN = tmax(lS, lN, each[i].rS, each[i].rN)
  end
  if verb == RESERVE then return reserveAll(n, lS, lN) end
  -- A check decides as Allow would, recording nothing.
  for i = 1, n do
    if not all and each[i].allowed then run(i, CHECK, 0, atSs[i], atNs[i], 0, 0) end
  end
  return combine(n)
end

-- group decides the op of args on every key of ks, each limit's key in
-- the group's order, and replies with the index of the limit the group's
-- decision is made from, the group's record and each limit's. The verbs
-- engine.CheckGroup takes are the only ones it decides: a fill-up, a
-- partial grant, a leaving, an exhaust, a charge or a refund is refused
-- before any key is read.
local function group(ks, args)
  local failed = begin(ks, args)
  if failed then return failed end
  if verb ~= ALLOW and verb ~= CHECK and verb ~= RESERVE and verb ~= CANCEL and verb ~= EXTEND then
    return redis.error_reply('UNSUPPORTED sluice: a group does not decide verb ' .. verb)
  end
  local n = #keys
  for i = 1, n do
    -- A limit refused, a calendar window's among them, refuses the
    -- group: no key has been written yet.
    local cost, atS, atN, refused = use(i)
    if refused then return refused end
    local p, conflict = load(i)
    if conflict then return pack('<BBB', CONFLICT, conflict, i) end
    keepLimit(slot(params, i))
    save(slot(states, i))
    present[i], costs[i], atSs[i], atNs[i] = p, cost, atS, atN
  end
  local best = decideAll(n)
  resume(G)
  local out = {pack('<B', best), reply(false)}
  for i = 1, n do
    resume(each[i])
    out[i + 2] = reply(false)
  end
  return table.concat(out)
end
