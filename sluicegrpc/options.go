package sluicegrpc

import (
	"context"
	"fmt"
	"time"

	"github.com/sluice-go/sluice"
	"github.com/sluice-go/sluice/internal/requestcost"
)

// Option configures an [Interceptor].
type Option interface {
	apply(*config) error
}

type optionFunc func(*config) error

func (f optionFunc) apply(c *config) error { return f(c) }

type config struct {
	key          KeyFunc
	cost         CostFunc
	minCost      float64
	skip         func(ctx context.Context, fullMethod string) bool
	name         string
	unit         string
	window       time.Duration
	windowSet    bool
	failOpen     bool
	dryRun       bool
	unavailable  time.Duration
	busy         time.Duration // retry hint of a full concurrency limit; 0 sends none
	errorHook    func(ctx context.Context, fullMethod string, err error)
	decisionHook func(ctx context.Context, fullMethod string, d sluice.Decision)
}

func defaults() config {
	return config{name: "default", minCost: 1, unavailable: time.Second, busy: time.Second}
}

// WithKey makes the interceptor key calls with f; nil restores the
// default, [ClientIP]{}.Key. [Keys] combines several.
func WithKey(f KeyFunc) Option {
	return optionFunc(func(c *config) error {
		c.key = f
		return nil
	})
}

// WithCost makes the interceptor charge each call the cost f returns,
// instead of 1; nil restores the default. A cost below the minimum
// ([WithMinCost]) is charged the minimum.
func WithCost(f CostFunc) Option {
	return optionFunc(func(c *config) error {
		c.cost = f
		return nil
	})
}

// WithMinCost sets the least a call is charged, whatever its cost function
// says or whether it fails; the default is 1, so that a flood of calls the
// cost function finds free (an empty batch) or cannot price is limited
// like any other. The minimum must be finite, not negative, and no more
// than the limiter's limit.
func WithMinCost(cost float64) Option {
	return optionFunc(func(c *config) error {
		if err := requestcost.CheckMin(cost); err != nil {
			return err
		}
		c.minCost = cost
		return nil
	})
}

// WithSkip makes the interceptor serve the calls for which skip returns
// true undecided and unreported: health checks, reflection, or an
// allow-list of clients. nil restores the default, skipping nothing.
func WithSkip(skip func(ctx context.Context, fullMethod string) bool) Option {
	return optionFunc(func(c *config) error {
		c.skip = skip
		return nil
	})
}

// WithPolicyName names the policy in the RateLimit fields and in the
// QuotaFailure detail's quota id; the default is "default". The name must
// be printable ASCII.
func WithPolicyName(name string) Option {
	return optionFunc(func(c *config) error {
		c.name = name
		return nil
	})
}

// WithQuotaUnit sets the policy's quota unit, the qu parameter of the
// ratelimit-policy field, for limits whose cost is not calls. The default
// leaves qu out. The unit must be printable ASCII.
func WithQuotaUnit(unit string) Option {
	return optionFunc(func(c *config) error {
		c.unit = unit
		return nil
	})
}

// WithWindow sets the policy's window, the w parameter, rounded to the
// nearest second; zero leaves w out, and a negative window is invalid. By
// default it comes from the limiter, as for the HTTP middleware.
func WithWindow(d time.Duration) Option {
	return optionFunc(func(c *config) error {
		c.window, c.windowSet = d, true
		return nil
	})
}

// WithFailOpen makes the interceptor serve a call when the limiter fails,
// instead of answering codes.Unavailable. Only limiter and store errors
// fail open; a call whose context has ended is never served.
func WithFailOpen() Option {
	return optionFunc(func(c *config) error {
		c.failOpen = true
		return nil
	})
}

// WithUnavailableRetryAfter sets the retry delay of the RetryInfo detail
// sent with codes.Unavailable when the limiter fails; the default is 1
// second, and 0 sends no RetryInfo.
func WithUnavailableRetryAfter(d time.Duration) Option {
	return optionFunc(func(c *config) error {
		if d < 0 {
			return fmt.Errorf("%w: negative retry delay %v", sluice.ErrInvalidConfig, d)
		}
		c.unavailable = d
		return nil
	})
}

// WithConcurrencyRetryAfter sets the retry delay of the RetryInfo detail
// sent with codes.ResourceExhausted when a concurrency limit
// ([sluice.NewConcurrencyLimit]) is full: a hint of how soon a slot
// usually comes back, capped at when the earliest lease held on the key
// expires, by which the store gives a slot back even if no call ends. The
// default is 1 second, and 0 sends no RetryInfo.
//
// A concurrency limit cannot say when a slot comes back: each comes back
// when a call in flight ends, which may be a millisecond away, while the
// only time the store knows, the earliest expiry, is a bound for holders
// that died, as far off as the limit's time to live; a client that
// honours RetryInfo would wait that long for nothing.
func WithConcurrencyRetryAfter(d time.Duration) Option {
	return optionFunc(func(c *config) error {
		if d < 0 {
			return fmt.Errorf("%w: negative retry delay %v", sluice.ErrInvalidConfig, d)
		}
		c.busy = d
		return nil
	})
}

// WithDryRun makes the interceptor decide and report every call (the
// RateLimit metadata and both hooks) but serve it whatever the decision
// or error, so that a limit can be tried on production traffic. Under a
// concurrency limit a call that gets a slot holds it while it is served,
// as under enforcement, so that r counts the calls in flight; one that
// gets none is served without one.
func WithDryRun() Option {
	return optionFunc(func(c *config) error {
		c.dryRun = true
		return nil
	})
}

// WithErrorHook makes the interceptor call f with every error, whether or
// not the call is then served: key and cost errors, costs above the
// limit, limiter and store errors, and [ErrCallCanceled]; and, once the
// call has ended, a lease of a concurrency limit that could not be given
// back ([ErrRelease]). Use it for logs and metrics.
func WithErrorHook(f func(ctx context.Context, fullMethod string, err error)) Option {
	return optionFunc(func(c *config) error {
		c.errorHook = f
		return nil
	})
}

// WithDecisionHook makes the interceptor call f with every decision,
// admitted or denied, before the call is served or refused.
func WithDecisionHook(f func(ctx context.Context, fullMethod string, d sluice.Decision)) Option {
	return optionFunc(func(c *config) error {
		c.decisionHook = f
		return nil
	})
}
