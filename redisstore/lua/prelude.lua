-- prelude: the constants, each call's inputs, and the limit and the key's
-- state being decided, which the files after it read and set.
--
-- Depends on: nothing; the Go side puts the library's shebang and
-- LIBRARY, its versioned name, before it.
-- Translates: engine.Kind and engine.Verb (engine/params.go,
-- engine/decision.go), and arith.Tolerance and arith.MaxSpan
-- (internal/arith/arith.go).
--
-- A call's input, its one argument: the op's fields (struct format
-- '<BBddddd'): verb, clock (1 for the caller's), now in seconds and
-- nanoseconds, the TTL margin in milliseconds (the callers' clock skew),
-- and a reservation's or an exhaust's MaxDelay or a concurrency limit's
-- waiter's patience in seconds and nanoseconds; then, for each key, its
-- limit's ('<BBBddddddddd'): kind, variant, counted denials (1 for
-- Params.CountDenied), limit, interval, amount, max entries, cost, the op's
-- instant (Op.At: a cancel's reservation, the instant before which a
-- reservation is not booked, the expiry of the lease that a release or an
-- extension names, or a waiter's ticket in a concurrency limit's line) in
-- seconds and nanoseconds, and the penalty in seconds and nanoseconds. A
-- ticket (at most 2^53) goes as seconds and nanoseconds too, as if it were
-- nanoseconds. Packed doubles read back exactly and without parsing text.
-- A call whose limits include a calendar window carries, after all the
-- limit records, one more record per limit, in the same order
-- ('<dddddddd'): its windows' four boundaries (Params.Windows) as seconds
-- and nanoseconds each, zeros for a limit that is no calendar window. A
-- call without calendar windows has no such records, so begin accepts
-- either length.
--
-- Kinds and verbs are engine.Kind and engine.Verb as numbers. The variant
-- is 1 for the token bucket's interval refill and anchored fixed windows,
-- and 2 for a calendar window (Params.Calendar), whose interval the
-- library never reads: it is the middle window's length, which may exceed
-- 2^53 ns (a year), so that its double is rounded.
-- In server-clock mode the now fields are ignored: begin reads TIME once,
-- for every limit the call decides, and a cancel's or an extension's
-- instant is on the server's clock, as the reply that booked the
-- reservation or took the lease gave it; an exhaust's MaxDelay stays
-- relative, from the server's now. The Go side has validated all; the
-- library still refuses a verb or kind it does not know, an extension or
-- a leaving of a limit other than the concurrency limit, an exhaust, a
-- charge or a refund of a limit that takes no reservations (it has no
-- full-at), and a verb the concurrency limit does not decide, with an
-- error reply starting "UNSUPPORTED". A calendar window whose windows do
-- not hold now (on the server's clock, the Go side's check being on the
-- caller's) is refused with an error reply starting "OUTOFRANGE", before
-- any key is read or written (fixedwindow's outside).
--
-- Lua numbers are doubles, like Go's float64: amounts go through the same
-- operations in the same order as in Go, so they come out bit-identical.
-- Times are kept as (seconds, nanoseconds) pairs, because nanoseconds since
-- the epoch exceed 2^53, and so are the durations of a decision. Spans
-- (intervals, drain times) and differences of times are single numbers,
-- exact below 2^53 ns, which is all the algorithms need: the Go side
-- refuses Params with longer spans, but for calendar windows, which
-- compute with pairs alone. Where a difference can be longer (a state
-- booked far ahead, a clock that stepped far back), the functions say how
-- they stay exact.
--
-- The library's top level runs once, when it is loaded; a library cannot
-- set globals, so what a call reads and decides lives in the locals below,
-- which every registered function sets on entry (Redis runs one call at a
-- time).

local LEAKY, GCRA, TOKEN, FIXED, LOG, COUNTER, CONCURRENCY = 1, 2, 3, 4, 5, 6, 7 -- engine.Kind
local ALLOW, CHECK, FILL, RESERVE, CANCEL, ATMOST, EXTEND, LEAVE, EXHAUST, CHARGE, REFUND =
  1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11 -- engine.Verb
local TOLERANCE = 2^-48
local MAX_SPAN = 2^60
local EXACT = 2^53 -- doubles hold every integer up to here
local CONFLICT = 128 -- a conflict reply's first byte
local BLOCKED = 128 -- added to a stored kind: the block's end follows

-- The library functions a call uses, looked up once rather than in the
-- globals on every use (unpack is struct.unpack).
local floor, ceil, fmod, pack, unpack, sub, format, call

-- bind looks them up, on a call: Redis gives a library's load no globals
-- but redis.
local function bind()
  floor, ceil, fmod = math.floor, math.ceil, math.fmod
  pack, unpack, sub, format, call = struct.pack, struct.unpack, string.sub, string.format, redis.call
end

local OP, OP_SIZE = '<BBddddd', 42
local LIMIT, LIMIT_SIZE = '<BBBddddddddd', 75
local WINDOWS, WINDOWS_SIZE = '<dddddddd', 64
local CALENDAR = 2 -- the variant of a calendar window

-- The call: its keys and input, the offset in the input of the first
-- limit's windows (nil for a call without calendar windows), and the op's
-- fields (callerClock 1 for the caller's clock, 0 for the server's).
local keys, input, windowsFrom
local verb, callerClock, nowS, nowN, marginMs, delayS, delayN

-- decoded holds, for each input of a single decision on the server's
-- clock that apply decoded lately, what begin and use read from it (see
-- single's memo), forgotten all at once when it holds 256 of them; and
-- current is the input whose fields the locals here and use's hold, until
-- begin reads another. A limiter's calls on the server's clock send one
-- input again and again, the same op on the same limit (TIME gives the
-- time), and unpacking it and working the limit out cost more than a
-- GCRA decision. Lua keeps one string of given bytes, hashed once, so
-- that finding or comparing an input reads none of its bytes.
local decoded, decodedCount, current = {}, 0, nil

-- TIME's digits of the seconds that nowS holds, as serverNow read them
-- last; nil once begin has read nowS from an op (an op's now fields are
-- zeros on the server's clock).
local timeDigits

-- The limit being decided: its Params, set by use, its algorithm's step
-- function and full-at, and its key's state (Time as stS, stN; A; B; the
-- sliding log's entries or the concurrency limit's leases and waiters;
-- Until as stUS, stUN, zero for none).
--
-- A step is a function of the verb, the cost, the op's instant (Op.At)
-- and a reservation's maximum delay or a waiter's patience (pairs), since
-- a decision may run several of them (a partial grant, a penalty, a
-- group); each updates the state as the Go step does (clearing Until
-- where Go writes a whole new State), and returns: allowed, used (before
-- clamping), the instants retry and reset as pairs (nil for zero), for a
-- booked reservation that waits the instant it may act, and the instant a
-- cancel gives it back by, the expiry of a lease taken or extended or a
-- waiter's ticket (Decision.At, nil for none), as pairs, and GCRA's
-- remaining. A full-at, Go's fullAt, of the algorithms that take
-- reservations (nil for the others), records the whole limit as in use at
-- the instant it is given as a pair, keeping what the key holds beyond it
-- (and clearing Until where Go writes a whole new State, as a step does):
-- the key full at now for counted denials (decide's countDenial), full at
-- MaxDelay from now for an exhaust (single's exhaust).
local kind, variant, countDenied, limit, interval, amount, maxEntries, slack, penS, penN
local step, fullAt
-- windowsAt, for a calendar window, is the offset of its windows in the
-- input, which fixedwindow's window reads; nil for any other limit.
local windowsAt
local stS, stN, stA, stB, stLog, stUS, stUN = 0, 0, 0, 0, '', 0, 0

-- Whether a GCRA step carried over the state that load (or a group's
-- decideOn) set, computed with another emission interval and still ahead
-- of now (gcra's carry): Go's Params.Carries but for its verb, learnt
-- during the decision rather than asked before it. Every decision runs a
-- step; each finds the state as it was set, or as an earlier step carried
-- or recorded it, with the interval in use, or the zero State: so the
-- first step carries exactly when Carries says so of the state as set,
-- and no other step does. A store writes the key back after a decision
-- that records or, but for a check, carried, as MemStore does, without
-- testing the state again.
local stCarried = false

-- The decision being made, Go's Decision: allowed, blocked, used and
-- remaining; retry after, reset after and a booked reservation's delay
-- as pairs (dR*, dE*, dW*); its instant At as a pair (dA*, zero for
-- none); a partial grant's cost. Locals, not a table: a decision is made
-- on every call, and a table per decision, with its garbage, costs the
-- server about what a GCRA step does. decideKind makes each decision
-- afresh, as Go's callers pass a zero Decision; a caller that needs an
-- earlier one copies what it needs first.
local dAllowed, dBlocked, dUsed, dRemaining, dGranted = false, false, 0, 0, 0
local dRS, dRN, dES, dEN, dWS, dWN, dAS, dAN = 0, 0, 0, 0, 0, 0, 0, 0

-- serverNow reads the server's clock into nowS and nowN.
local function serverNow()
  local t = call('TIME')
  -- Arithmetic reads the digits as tonumber does, and in half its time.
  -- The seconds' are read again only when they change: Lua keeps one
  -- string of given bytes, so that comparing strings compares pointers.
  if t[1] ~= timeDigits then timeDigits, nowS = t[1], t[1] + 0 end
  nowN = t[2] * 1000
end

-- begin starts a call on the keys ks with the input args[1]: it reads the
-- op, and the server's clock unless the caller's is used. It returns an
-- error reply for an input whose length does not fit the keys, with
-- calendar windows or without.
local function begin(ks, args)
  if not call then bind() end
  keys, input, current = ks, args[1], nil
  local records = OP_SIZE + #keys * LIMIT_SIZE
  windowsFrom = nil
  if #input ~= records then
    if #input ~= records + #keys * WINDOWS_SIZE then
      return redis.error_reply('ERR sluice: ' .. #input .. ' bytes of input for ' .. #keys .. ' keys')
    end
    windowsFrom = records + 1 -- the windows follow the limits
  end
  verb, callerClock, nowS, nowN, marginMs, delayS, delayN = unpack(OP, input)
  timeDigits = nil -- nowS is the op's
  if callerClock == 0 then serverNow() end
end
