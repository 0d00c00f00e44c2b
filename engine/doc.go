// Package engine is sluice's store contract: each algorithm as a pure
// function ([Params.Step]), the records a store keeps ([State]), the
// requests it decides ([Op]) and group decisions ([DecideGroup]). Users of
// sluice need none of it; it is for those who write a store (a type that
// implements engine.Store) and for the stores of this repository, which
// package storetest proves bit for bit against Step.
//
// # The contract
//
// A limiter never reads state, decides, and writes it back in separate
// steps: that is a check-then-act race between two callers. Instead it hands
// the whole decision to the store in one call to Apply, with the algorithm's
// Params, the verb, the cost and the caller's time. The store must run
// [Params.Step] (or an exact translation of it) on the key's state and write
// the result back as one atomic step:
//
//   - the in-memory store (sluice.MemStore) holds the key's shard lock;
//   - a Redis store runs the step as one server-side Lua script call;
//   - a PostgreSQL store runs it as one INSERT ... ON CONFLICT ... RETURNING
//     statement.
//
// No compare-and-swap retry loop is needed on any of them, so a hot key under
// contention is limited, never failed.
//
// The Go step functions are the specification. A store that implements an
// algorithm natively must give the same decisions as Params.Step for the same
// state, time and cost, and must return an error wrapping [ErrUnsupported] for
// a Kind it cannot run: never a silent fallback.
//
// A store that keeps a GCRA key's state as its theoretical arrival time
// alone, at the interval of the limit deciding it, may decide the usual
// request on it with [Params.DecideTAT], wherever [Params.DecidesTAT]
// holds: the function the GCRA's step runs for those requests, which
// sluice's in-memory store calls on its GCRA table.
//
// # State and time
//
// Every algorithm except the sliding log keeps a fixed-shape [State]: one
// int64 time in nanoseconds and at most two float64 amounts. The sliding log
// also keeps a list of (time, cost) entries. The zero State is a fresh key.
// Step reports when a key it recorded is fresh again, now +
// Decision.ResetAfter: its expiry, which a store keeps with the state. From
// its expiry on, a store treats the key as fresh, whether it has forgotten
// it or not, and whatever Params the next request brings: under the Params
// that recorded it the state then decides as a fresh one does, and under
// others (see "Limits that change") every store must decide alike.
//
// Times are int64 nanoseconds since the Unix epoch. Stores must keep them
// exact:
//
//   - Go: int64. A limiter derives them from its sluice.Clock so that elapsed time
//     in one process is monotonic.
//   - Lua: numbers are IEEE doubles, exact only up to 2^53, and nanoseconds
//     since the epoch (about 1.8e18) are above that. Scripts keep a time as a
//     pair (seconds, nanoseconds) and return times and amounts as strings,
//     because Redis truncates a Lua number to an integer reply.
//   - SQL: bigint nanoseconds, since PostgreSQL timestamps have only
//     microsecond resolution; amounts are float8.
//
// Amounts (costs, levels, tokens, counts) are float64 everywhere.
//
// A store either uses the time in [Op].Now (the caller's clock) or its own
// clock (Redis TIME, PostgreSQL clock_timestamp()), chosen when the store is
// built and never mixed within one store. Whatever the source, a step never
// stores a time earlier than the one it read, and a clock that steps
// backwards never loosens a limit (see "Clocks that step back" below).
//
// # Keys
//
// Keys are opaque strings. Limiters that share a store share its key space:
// give each limiter's keys their own prefix (for example "login:" + user).
// A store may report sluice.ErrKeyConflict when a key holds the state of a
// different algorithm.
//
// # Limits that change
//
// Params travel with every request, so a key's limit may change from one
// request to the next (a per-key limit, a tier changed, a configuration
// reloaded). The rule, the same on every store: what a key has used
// carries over, in units of cost, and the new limit decides from it at
// once, until the key's expiry (see "State and time"), from which it is
// fresh whatever the new limit. The buckets' level or tokens in use, a
// window's count, the log's entries and the leases held are read as they
// stand, under the new limit; the time since the state's point (a
// bucket's last update, or the interval refill's last refill) counts at
// the new rate. A window counted under another length counts in the
// window of the new length that holds its start. GCRA's state is a time,
// not a cost: it records the emission interval its theoretical arrival
// time was computed with (State.A), and the first decision under another
// interval converts the cost it holds, (TAT - now) / A units, to the new
// interval at that instant, and records it (see [Params.Carries]): a GCRA
// raised from 10/s to 100/s admits at 100/s at once, and one lowered
// keeps what was used. A state written before the interval was recorded
// (A zero) is read as computed with the current one. A calendar window's
// count, kept with its window's end, counts in the window of another
// calendar (a daily quota made monthly) that holds its end, and is fresh
// from that end on if the new window ends first. The algorithm and its
// mode (Kind, Anchored, IntervalRefill, calendar windows or not) are the
// key's own: a limit that changes them reads the state as it stands.
//
// Step cannot see a key's expiry: a decision under a new limit that
// records nothing may tell a RetryAfter or ResetAfter past it, when the
// key is fresh, and admits, earlier. Until the key's next recorded
// decision they are upper bounds.
//
// Two limits in force for one key at once (a rolling deploy of a new
// configuration) alternate without loss for GCRA, the buckets, the
// sliding log and the concurrency limit, and for the windows when only
// their limit differs. Two window lengths at once make a request that
// flips between them count in a window of its own length, which the
// other may take as past and forget: change a window's length under new
// keys when both may be in force.
//
// # Calendar windows
//
// A calendar window (see [Params.Windows]) is a fixed window whose
// windows are the calendar's in a time zone: days of 23 to 25 hours,
// months of 28 to 31 days. Neither Lua nor SQL knows the time zone
// database, so the caller computes the windows and sends three of them
// with every request: the one holding its time, the one before and the
// one after. A store deciding by the caller's clock counts in the middle
// one. A store that reads its own clock counts in the one of the three
// that holds its time, exactly, whenever its clock and the caller's differ
// by less than a window (23 hours at the least); otherwise the request
// fails with [ErrTimeOutOfRange], recording nothing. It never falls back
// to the caller's clock. The state keeps the end of the window it counted
// in (State.Time), not its start: a window later than the caller's, which
// a store's clock ahead or a clock stepped back leaves behind, ends where
// the state says, whatever windows the next request brings.
//
// # Clocks that step back
//
// A clock that steps backwards never loosens a limit: A request at an
// earlier instant than the key's state is decided at that instant, against
// what the key held then: a request δ earlier is never admitted where the
// later one would be denied, and when both are denied they are told to
// retry at the same instant (RetryAfter δ longer). GCRA, the buckets, the
// sliding log and the sliding counter are stricter by the step: GCRA's
// theoretical arrival time, the log's entries and the counter's previous
// window weigh more against an earlier now, and a bucket's state is a point
// on its level over time (a reservation may place it in the future) before
// which the level was higher by what leaks, or the tokens in use more by
// the refills still to come, between then and the point. The fixed window
// and the sliding counter never return to an earlier window. No step moves
// a key's state back in time, except a cancel, which gives a reservation's
// cost back by moving the state to the line the key would have followed
// without it, a nanosecond later, and a limit that changed (a GCRA's
// theoretical arrival time converted to a shorter interval, a window's
// start to the window of the new length that holds it).
package engine
