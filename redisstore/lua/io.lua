-- io: what a call reads and writes: each key's value, the notice of a
-- lease released, and the reply.
--
-- Depends on: prelude, decide (a decision's fields).
-- Translates: nothing in Go: the memory store keeps engine.State as it
-- is, and wakes its waiters itself (MemStore.released, memwatch.go);
-- Decision is decoded from the reply by codec.go, and the notices are
-- received by watch.go.
--
-- Each key holds one string, read with GET and written with SET ... PX: a
-- header packed as '<Bdddddd' (kind; exp_sec, exp_nsec, when the state is
-- fresh again, from which it is read as fresh whatever the limit, and an
-- expired state of another algorithm is no key conflict; sec, nsec, a, b,
-- the State's Time, A and B); when the key is blocked by a penalty, the
-- kind has 128 added and the header is followed by the block's end
-- (State.Until) as seconds and nanoseconds ('<dd'); then the sliding log's
-- entries, oldest first, or the concurrency limit's leases, earliest
-- expiry first, and its waiters, first come first (A is the latest ticket
-- its line handed out; GCRA's A is its emission interval). The key
-- lives until its state is fresh again (Decision.ResetAfter): for the
-- concurrency limit, until its high-water mark and its waiters' deadlines
-- have passed.
--
-- A decision's reply is a record: a status byte (1 if allowed, plus 2 if
-- blocked, plus 4 if a reservation waits, plus 8 if it has an instant but
-- no wait: a lease taken or extended, or a denied acquisition's place in
-- the concurrency limit's line), then doubles: used, remaining, retry
-- after and reset after (each as seconds and nanoseconds); for a
-- reservation that waits, its delay and its instant (Decision.At) as
-- seconds and nanoseconds pairs; for an instant without a wait, the
-- instant (Decision.At: the lease's expiry, or the waiter's ticket, which
-- is split as nanoseconds are) as seconds and nanoseconds; for a partial
-- grant (the verb at most), a charge or a refund, the cost granted,
-- recorded or given back (Decision.Granted). A group's
-- reply is a byte, the index of the limit whose decision the group's is
-- made from, then the group's record and each limit's. On a key conflict, the reply is packed as '<BBB': 128,
-- the stored kind, the index of the key.

-- load reads the state of key i, for the limit in use (none carried yet),
-- and returns whether the key exists and, if it holds the live state of
-- another algorithm, that algorithm. From its expiry on, a state is fresh
-- whatever the limit in use, as engine's "State and time" says: the key
-- counts as absent, as in the memory store, and a state of another
-- algorithm is a conflict only until then.
local HEADER, HEADER_SIZE, UNTIL_SIZE = '<Bdddddd', 49, 16
local function load(i)
  stLog, stUS, stUN, stCarried = '', 0, 0, false
  local v = call('GET', keys[i])
  if v then
    local stored, expS, expN, ts, tn, a, b = unpack(HEADER, v)
    if nowS < expS or (nowS == expS and nowN < expN) then -- live: now before its expiry
      local blocked = stored >= BLOCKED
      if blocked then stored = stored - BLOCKED end
      if stored ~= kind then
        stS, stN, stA, stB = 0, 0, 0, 0
        return true, stored
      end
      stS, stN, stA, stB = ts, tn, a, b
      local body = HEADER_SIZE + 1
      if blocked then
        stUS, stUN = unpack('<dd', v, body)
        body = body + UNTIL_SIZE
      end
      if #v >= body then stLog = sub(v, body) end -- a sliding log's or a concurrency limit's
      return true
    end
  end
  stS, stN, stA, stB = 0, 0, 0, 0 -- none, or fresh again: the zero State
  return v ~= false
end

-- write stores the state of key i, which exists if present, as the
-- decision made left it, until it is fresh again (Decision.ResetAfter,
-- rounded up to milliseconds, plus the skew margin), or deletes the key
-- once fresh: a fresh state is no key. It returns whether the key exists
-- after.
local function write(i, present)
  if dES == 0 and dEN == 0 then
    if present then call('DEL', keys[i]) end
    return false
  end
  local expS, expN = nowS + dES, nowN + dEN -- tplus, inlined
  if expN >= 1e9 then expS, expN = expS + 1, expN - 1e9 end
  local head, body = kind, stLog
  if stUS ~= 0 or stUN ~= 0 then
    head, body = kind + BLOCKED, pack('<dd', stUS, stUN) .. stLog
  end
  local value = pack(HEADER, head, expS, expN, stS, stN, stA, stB)
  if body ~= '' then value = value .. body end -- a copy even when empty
  -- A whole number of milliseconds below 2^41 (2^60 ns), written out by
  -- %d: the full digits that Redis writes of a number argument (with
  -- %.17g), in fewer instructions. The nanoseconds round up to
  -- milliseconds by the VM's %, not a call of ceil: whole numbers below
  -- 2^53 throughout, exact.
  local part = dEN % 1e6
  local ttl = dES * 1000 + (dEN - part) / 1e6 + marginMs
  if part > 0 then ttl = ttl + 1 end
  call('SET', keys[i], value, 'PX', format('%d', ttl))
  return true
end

-- released tells the waiters of key i that a lease on it was released,
-- or that its line moved (a waiter left it or was served, decide's
-- frees): SPUBLISH on the sharded channel named as the key itself, with
-- an empty message, so that the waiters subscribed to it
-- (Store.WatchReleases, in any process) try again. Channels and keys are
-- separate namespaces, and a channel hashes to its slot as a key of the
-- same name does: the notice stays in the key's slot, which a Cluster
-- requires of a function (a channel of another slot fails the call), and
-- goes out only if the call that released the lease (or moved the line)
-- completes, in the same atomic step.
local function released(i)
  call('SPUBLISH', keys[i], '')
end

-- reply packs the decision made as its reply record, with the cost
-- granted (Decision.Granted) if grant: for a partial grant, a charge or a
-- refund.
local function reply(grant)
  local status, tail = 0, ''
  if dAllowed then status = 1 end
  if dBlocked then status = status + 2 end
  if dWS > 0 or dWN > 0 then -- a reservation that waits
    status, tail = status + 4, pack('<dddd', dWS, dWN, dAS, dAN)
  elseif dAS ~= 0 or dAN ~= 0 then -- a lease's expiry, a ticket
    status, tail = status + 8, pack('<dd', dAS, dAN)
  end
  if grant then tail = tail .. pack('<d', dGranted) end
  return pack('<Bdddddd', status, dUsed, dRemaining, dRS, dRN, dES, dEN) .. tail
end
