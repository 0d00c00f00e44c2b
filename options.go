package sluice

import (
	"fmt"
	"time"

	"github.com/sluice-go/sluice/engine"
)

// Option configures a limiter when it is built.
type Option interface {
	apply(*settings) error
}

type settings struct {
	params    engine.Params
	store     engine.Store
	clock     Clock
	name      string
	observers []Observer
	timeout   time.Duration
	lateness  time.Duration

	leasePoll time.Duration

	cal *calendarWindows // of a calendar window ([NewCalendarWindow])
}

// defaultMaxLateness is the default of [WithMaxLateness], whose comment
// says why.
const defaultMaxLateness = 20 * time.Millisecond

type optionFunc func(*settings) error

func (f optionFunc) apply(s *settings) error { return f(s) }

// WithClock makes the limiter read time from c instead of the system clock;
// Wait sleeps on c too.
func WithClock(c Clock) Option {
	return optionFunc(func(s *settings) error {
		if c == nil {
			return fmt.Errorf("%w: nil clock", ErrInvalidConfig)
		}
		s.clock = c
		return nil
	})
}

// WithIntervalRefill makes a token bucket add its tokens once per whole
// elapsed interval of its rate, rate.Amount at a time, instead of
// continuously. It applies only to [NewTokenBucket].
func WithIntervalRefill() Option {
	return optionFunc(func(s *settings) error {
		s.params.IntervalRefill = true
		return nil
	})
}

// WithAnchoredWindows makes a fixed window start at each key's first
// request instead of at multiples of the window length since the Unix
// epoch. It applies only to [NewFixedWindow].
func WithAnchoredWindows() Option {
	return optionFunc(func(s *settings) error {
		s.params.Anchored = true
		return nil
	})
}

// WithMaxEntries bounds a sliding log's entries per key, or a concurrency
// limit's leases per key (1 to 2^20). It applies only to [NewSlidingLog]
// and [NewConcurrencyLimit].
func WithMaxEntries(n int) Option {
	return optionFunc(func(s *settings) error {
		if !s.params.Kind.Logs() {
			return fmt.Errorf("%w: %v: max entries option applies only to the sliding log and the concurrency limit", ErrInvalidConfig, s.params.Kind)
		}
		s.params.MaxEntries = n
		return nil
	})
}

// WithName names the limiter, for its [Observer]: metrics carry the name
// as a label, so give each limiter of a process its own, fixed, name
// ("login", "api"), never one made from a key.
func WithName(name string) Option {
	return optionFunc(func(s *settings) error {
		if name == "" {
			return fmt.Errorf("%w: empty limiter name", ErrInvalidConfig)
		}
		s.name = name
		return nil
	})
}

// WithObserver makes the limiter report each decision to o. Given more
// than once, it adds observers, called in the order given. A limiter
// without one pays a comparison per decision for the feature, and no
// allocation.
func WithObserver(o Observer) Option {
	return optionFunc(func(s *settings) error {
		if o == nil {
			return fmt.Errorf("%w: nil observer", ErrInvalidConfig) // not a panic at the first decision
		}
		s.observers = append(s.observers, o)
		return nil
	})
}

// WithTimeout bounds each call the limiter makes to its store (Allow,
// CanAccept, Fillup, Reset, and each attempt of Wait) to d, or less if the
// context's deadline comes first. A call cut short returns an error
// wrapping [ErrTimeout] and context.DeadlineExceeded.
//
// The bound is the context's: the store's client must honour context
// deadlines, as pgx does and go-redis does with ContextTimeoutEnabled set
// (see docs/operations.md). The in-memory store never waits on anything
// but its shard's lock, and ignores the timeout, which then costs nothing.
func WithTimeout(d time.Duration) Option {
	return withDuration("timeout", d, func(s *settings) { s.timeout = d })
}

// WithMaxLateness sets how late after its instant a reserved turn may be
// acted on: Wait and Reservation.Wait that wake (or are called) more than
// d after the turn's instant treat it as stale ([ErrStaleTurn]), so that
// a process paused past its turns does not act on all of them at once.
// Counting each call at the instant it is made, the algorithm's bound then
// holds for any interval of length t as its bound for t+d. The time a
// remote store takes to answer does not count as lateness. The default is
// 20 ms: more than a timer's usual lateness on a busy machine, less than
// a pause worth noticing. d must be positive.
func WithMaxLateness(d time.Duration) Option {
	return withDuration("max lateness", d, func(s *settings) { s.lateness = d })
}

// WithPenalty blocks a key for d once a request overflows it (an Allow
// denied, a reservation beyond its maximum delay, a fill-up past
// capacity, an Allow or a reservation whose cost exceeds the limit, which
// still returns [ErrCostExceedsLimit]): until the block ends, every
// request on the key is denied,
// with RetryAfter at the block's end at the earliest and Decision.Blocked
// set, and a reservation is booked no earlier than the end. Requests
// during the block do not extend it. Reset lifts it. Every algorithm
// supports it; d is at most 2^60 ns (about 36 years).
func WithPenalty(d time.Duration) Option {
	return withDuration("penalty", d, func(s *settings) { s.params.Penalty = int64(d) })
}

// withDuration is the option that sets d, named what, with set: d must be
// positive.
func withDuration(what string, d time.Duration, set func(*settings)) Option {
	return optionFunc(func(s *settings) error {
		if d <= 0 {
			return fmt.Errorf("%w: %s %v is not positive", ErrInvalidConfig, what, d)
		}
		set(s)
		return nil
	})
}

// WithCountDenied makes denied requests count too ("no relaxation"): a
// denied Allow or reservation fills the key up to its limit. Nothing more
// is ever admitted, so every algorithm's guarantee holds as stated; but a
// client that keeps overflowing stays limited: under the GCRA, the leaky
// bucket and the continuously refilled token bucket, a client whose
// requests come faster than the rate frees one of them is admitted nothing
// until it slows down, where without the option it gets one through at
// each instant the limit allows. docs/limits.md says what it does to each
// of the others.
func WithCountDenied() Option {
	return optionFunc(func(s *settings) error {
		s.params.CountDenied = true
		return nil
	})
}

// WithLeasePoll bounds how long [Limiter.Acquire] waits for a release
// before asking the store again (a second unless set): what a wake-up
// that is lost costs a waiter at most. It applies only to
// [NewConcurrencyLimit].
func WithLeasePoll(d time.Duration) Option {
	return optionFunc(func(s *settings) error {
		if s.params.Kind != engine.KindConcurrency {
			return fmt.Errorf("%w: %v: lease poll applies only to the concurrency limit", ErrInvalidConfig, s.params.Kind)
		}
		if d <= 0 {
			return fmt.Errorf("%w: lease poll %v is not positive", ErrInvalidConfig, d)
		}
		s.leasePoll = d
		return nil
	})
}
