package sluice

import (
	"errors"

	"github.com/sluice-go/sluice/engine"
)

// Sentinel errors. Errors returned by sluice wrap one of these, with details,
// so callers test them with [errors.Is].
var (
	// ErrInvalidConfig reports a configuration that cannot work: a rate,
	// period, limit or burst not finite and positive, an option the
	// algorithm does not take, or a rate too slow or fast for nanoseconds.
	ErrInvalidConfig = engine.ErrInvalidConfig

	// ErrInvalidCost reports a cost that is negative, NaN or infinite.
	ErrInvalidCost = engine.ErrInvalidCost

	// ErrCostExceedsLimit reports a cost larger than the limit, which no
	// wait can admit: an error, not a denial with a RetryAfter.
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

	// ErrInvalidKey reports a key that a store cannot hold (PostgreSQL's
	// text takes only valid UTF-8 without NUL bytes): bad input, refused
	// before any round trip, never a store failure.
	ErrInvalidKey = engine.ErrInvalidKey

	// ErrStaleTurn reports a reserved turn whose waiter woke, or came to
	// wait, more than the limiter's maximum lateness ([WithMaxLateness])
	// after its instant: its cost is spent, and it must not be acted on.
	// [Limiter.Wait] books a new turn instead; [Reservation.Wait] returns it.
	ErrStaleTurn = errors.New("sluice: turn is stale")

	// ErrKeyConflict reports a key whose stored state belongs to a
	// different algorithm: two limiters sharing a store used the same key.
	ErrKeyConflict = errors.New("sluice: key holds another algorithm's state")

	// ErrStoreClosed reports a call on a store after Close.
	ErrStoreClosed = errors.New("sluice: store closed")

	// ErrTimeOutOfRange reports a time before the Unix epoch or after
	// 2116 (2^62 nanoseconds since the epoch): a clock that is far off.
	ErrTimeOutOfRange = engine.ErrTimeOutOfRange

	// ErrTimeout reports a remote store call not finished within the
	// limiter's timeout ([WithTimeout]) or its context's deadline; the
	// error also wraps context.DeadlineExceeded and the store's own.
	ErrTimeout = errors.New("sluice: store call timed out")
)
