package sluice

import (
	"errors"

	"github.com/sluice-go/sluice/engine"
)

// Sentinel errors. Errors returned by sluice wrap one of these, with details,
// so callers test them with [errors.Is].
var (
	// ErrInvalidConfig reports a limiter configuration that cannot work: a
	// zero, negative, NaN or infinite rate, period, limit or burst, an
	// option that does not apply to the algorithm, or a rate too slow or too
	// fast to represent in nanoseconds.
	ErrInvalidConfig = engine.ErrInvalidConfig

	// ErrInvalidCost reports a cost that is negative, NaN or infinite.
	ErrInvalidCost = engine.ErrInvalidCost

	// ErrCostExceedsLimit reports a cost larger than the limit: it can never
	// be admitted, however long the caller waits, so it is an error rather
	// than a denial with a RetryAfter.
	ErrCostExceedsLimit = engine.ErrCostExceedsLimit

	// ErrUnsupported reports a verb or algorithm that a limiter or store
	// does not implement.
	ErrUnsupported = engine.ErrUnsupported

	// ErrInvalidDelay reports a reservation's maximum delay that is
	// negative or longer than 2^60 ns (about 36 years).
	ErrInvalidDelay = engine.ErrInvalidDelay

	// ErrNotReserved reports a wait on a reservation that was not booked:
	// its instant lay beyond the maximum delay asked for.
	ErrNotReserved = errors.New("sluice: not reserved")

	// ErrInvalidKey reports a key that a store cannot hold: PostgreSQL's
	// text, for one, takes only valid UTF-8 without NUL bytes. It is bad
	// input, refused before any round trip, never a store failure.
	ErrInvalidKey = engine.ErrInvalidKey

	// ErrStaleTurn reports a reserved turn whose waiter woke, or came to
	// wait, more than the limiter's maximum lateness ([WithMaxLateness])
	// after its instant: a paused process, a long GC pause or a starved
	// scheduler. Its cost is spent, and acting on it now could put more
	// calls in a window than the limit allows, as the other side counts
	// them. [Limiter.Wait] books a new turn instead; [Reservation.Wait]
	// returns it.
	ErrStaleTurn = errors.New("sluice: turn is stale")

	// ErrKeyConflict reports a key whose stored state belongs to a
	// different algorithm: two limiters sharing a store used the same key.
	ErrKeyConflict = errors.New("sluice: key holds another algorithm's state")

	// ErrStoreClosed reports a call on a store after Close.
	ErrStoreClosed = errors.New("sluice: store closed")

	// ErrTimeOutOfRange reports a time before the Unix epoch or after
	// 2116 (2^62 nanoseconds since the epoch): a clock that is far off.
	ErrTimeOutOfRange = engine.ErrTimeOutOfRange

	// ErrTimeout reports a call to a remote store that did not finish in
	// time: within the limiter's timeout ([WithTimeout]) or before its
	// context's deadline. An error wrapping it also wraps
	// context.DeadlineExceeded, and the store's own error.
	ErrTimeout = errors.New("sluice: store call timed out")

	// ErrWouldExceedDeadline reports that Wait would have to sleep past the
	// context's deadline. Wait returns it at once instead of sleeping; it
	// also matches context.DeadlineExceeded.
	ErrWouldExceedDeadline = errors.New("sluice: wait would exceed context deadline")
)
