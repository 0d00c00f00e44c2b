-- io: what a call reads and writes: each key's value, and the reply.
--
-- Depends on: prelude, time (tless, tplus), decide (a decision's fields).
-- Translates: nothing in Go: the memory store keeps engine.State as it
-- is, and Decision is decoded from the reply by codec.go.
--
-- Each key holds one string, read with GET and written with SET ... PX: a
-- header packed as '<Bdddddd' (kind; exp_sec, exp_nsec, when the state is
-- fresh again, which tells an expired state of another algorithm from a
-- key conflict; sec, nsec, a, b, the State's Time, A and B); when the key
-- is blocked by a penalty, the kind has 128 added and the header is
-- followed by the block's end (State.Until) as seconds and nanoseconds
-- ('<dd'); then the sliding log's entries, oldest first.
--
-- A decision's reply is a record: a status byte (1 if allowed, plus 2 if
-- blocked, plus 4 if a reservation waits), then doubles: used, remaining,
-- retry after and reset after (each as seconds and nanoseconds); for a
-- reservation that waits, its delay and its instant (Decision.At) as
-- seconds and nanoseconds pairs; for a partial grant (the verb at most),
-- the cost granted. A group's reply is a byte, the index of the limit
-- whose decision the group's is made from, then the group's record and
-- each limit's. On a key conflict, the reply is packed as '<BBB': 128,
-- the stored kind, the index of the key.

-- load reads the state of key i, for the limit in use, and returns
-- whether the key exists and, if it holds the live state of another
-- algorithm, that algorithm. A state of another algorithm is a conflict
-- until it is fresh again; after that the key counts as absent, as in the
-- memory store.
local HEADER, HEADER_SIZE, UNTIL_SIZE = '<Bdddddd', 49, 16
local function load(i)
  stS, stN, stA, stB, stLog, stUS, stUN = 0, 0, 0, 0, '', 0, 0
  local v = redis.call('GET', keys[i])
  if not v then return false end
  local stored, expS, expN, ts, tn, a, b = struct.unpack(HEADER, v)
  local blocked = stored >= BLOCKED
  if blocked then stored = stored - BLOCKED end
  if stored == kind then
    stS, stN, stA, stB = ts, tn, a, b
    local body = HEADER_SIZE + 1
    if blocked then
      stUS, stUN = struct.unpack('<dd', v, body)
      body = body + UNTIL_SIZE
    end
    if kind == LOG then stLog = string.sub(v, body) end
  elseif tless(nowS, nowN, expS, expN) then
    return true, stored
  end
  return true
end

-- write stores the state of key i, which exists if present, as decision
-- d left it, until it is fresh again (Decision.ResetAfter, rounded up to
-- milliseconds, plus the skew margin), or deletes the key once fresh: a
-- fresh state is no key. It returns whether the key exists after.
local function write(i, present, d)
  if d.eS == 0 and d.eN == 0 then
    if present then redis.call('DEL', keys[i]) end
    return false
  end
  local expS, expN = tplus(nowS, nowN, d.eS, d.eN)
  local head, body = kind, stLog
  if stUS ~= 0 or stUN ~= 0 then
    head, body = kind + BLOCKED, struct.pack('<dd', stUS, stUN) .. stLog
  end
  local ttl = d.eS * 1000 + math.ceil(d.eN / 1e6) + marginMs
  redis.call('SET', keys[i], struct.pack(HEADER, head, expS, expN, stS, stN, stA, stB) .. body,
    'PX', string.format('%.0f', ttl))
  return true
end

-- reply packs decision d as its reply record, with the cost granted for a
-- partial grant.
local function reply(d, grant)
  local status = 0
  if d.allowed then status = 1 end
  if d.blocked then status = status + 2 end
  local waits = d.wS > 0 or d.wN > 0
  if waits then status = status + 4 end
  local r = struct.pack('<Bdddddd', status, d.used, d.remaining, d.rS, d.rN, d.eS, d.eN)
  if waits then r = r .. struct.pack('<dddd', d.wS, d.wN, d.aS, d.aN) end
  if grant then r = r .. struct.pack('<d', d.granted) end
  return r
end
