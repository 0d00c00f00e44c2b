package sluice

import "fmt"

// Option configures a limiter when it is built.
type Option interface {
	apply(*settings) error
}

type settings struct {
	params Params
	store  Store
	clock  Clock
}

type optionFunc func(*settings) error

func (f optionFunc) apply(s *settings) error { return f(s) }

// WithStore makes the limiter keep its state in st, which may be shared
// with other limiters and processes. By default each limiter has its own
// [MemStore].
func WithStore(st Store) Option {
	return optionFunc(func(s *settings) error {
		if st == nil {
			return fmt.Errorf("%w: nil store", ErrInvalidConfig)
		}
		s.store = st
		return nil
	})
}

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

// WithBurst sets a token bucket's size, the most tokens it holds; the
// default is the rate's amount. It applies only to [NewTokenBucket].
func WithBurst(burst float64) Option {
	return optionFunc(func(s *settings) error {
		if s.params.Kind != KindTokenBucket {
			return fmt.Errorf("%w: %v: burst option applies only to the token bucket", ErrInvalidConfig, s.params.Kind)
		}
		s.params.Limit = burst
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

// WithMaxEntries bounds a sliding log's entries per key (1 to 2^20). It
// applies only to [NewSlidingLog].
func WithMaxEntries(n int) Option {
	return optionFunc(func(s *settings) error {
		if s.params.Kind != KindSlidingLog {
			return fmt.Errorf("%w: %v: max entries option applies only to the sliding log", ErrInvalidConfig, s.params.Kind)
		}
		s.params.MaxEntries = n
		return nil
	})
}
