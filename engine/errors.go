package engine

import "errors"

// Sentinel errors of the algorithms and of the store contract. Package
// sluice exports the same values, so callers test either with [errors.Is].
var (
	// ErrInvalidConfig reports a limiter configuration that cannot work: a
	// zero, negative, NaN or infinite rate, period, limit or burst, an
	// option that does not apply to the algorithm, or a rate too slow or too
	// fast to represent in nanoseconds.
	ErrInvalidConfig = errors.New("sluice: invalid configuration")

	// ErrInvalidCost reports a cost that is negative, NaN or infinite.
	ErrInvalidCost = errors.New("sluice: invalid cost")

	// ErrCostExceedsLimit reports a cost larger than the limit: it can never
	// be admitted, however long the caller waits, so it is an error rather
	// than a denial with a RetryAfter.
	ErrCostExceedsLimit = errors.New("sluice: cost exceeds limit")

	// ErrUnsupported reports a verb or algorithm that a limiter or store
	// does not implement.
	ErrUnsupported = errors.New("sluice: unsupported")

	// ErrInvalidDelay reports a reservation's maximum delay that is
	// negative or longer than 2^60 ns (about 36 years).
	ErrInvalidDelay = errors.New("sluice: invalid delay")

	// ErrInvalidKey reports a key that a store cannot hold: PostgreSQL's
	// text, for one, takes only valid UTF-8 without NUL bytes. It is bad
	// input, refused before any round trip, never a store failure.
	ErrInvalidKey = errors.New("sluice: invalid key")

	// ErrTimeOutOfRange reports a time before the Unix epoch or after
	// 2116 (2^62 nanoseconds since the epoch): a clock that is far off.
	ErrTimeOutOfRange = errors.New("sluice: time out of range")
)
