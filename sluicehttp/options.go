package sluicehttp

import (
	"fmt"
	"net/http"
	"time"

	"github.com/sluice-go/sluice"
	"github.com/sluice-go/sluice/internal/requestcost"
)

// Option configures the middleware, or the [Fields] a handler writes.
type Option interface {
	apply(*config) error
}

type optionFunc func(*config) error

func (f optionFunc) apply(c *config) error { return f(c) }

type config struct {
	key          KeyFunc
	cost         CostFunc
	minCost      float64
	skip         func(*http.Request) bool
	name         string
	unit         string
	window       time.Duration
	windowSet    bool
	legacy       bool
	failOpen     bool
	dryRun       bool
	maxDelay     time.Duration // 0 holds nothing
	unavailable  time.Duration
	busy         time.Duration // Retry-After hint of a full concurrency limit; 0 sends none
	deny         func(http.ResponseWriter, *http.Request, sluice.Decision)
	onError      func(http.ResponseWriter, *http.Request, error)
	errorHook    func(*http.Request, error)
	decisionHook func(*http.Request, sluice.Decision)

	// groupLeases says that the middleware is a group's that holds
	// leases: it waits with Acquire, whatever its limiters' kinds.
	groupLeases bool
}

// defaults returns the configuration options start from.
func defaults() config {
	return config{minCost: 1, unavailable: time.Second, busy: time.Second}
}

// WithKey makes the middleware key requests with f; nil restores the
// default, [ClientIP]{}.Key. [Keys] combines several.
func WithKey(f KeyFunc) Option {
	return optionFunc(func(c *config) error {
		c.key = f
		return nil
	})
}

// WithCost makes the middleware charge each request the cost f returns,
// instead of 1; nil restores the default. A cost below the minimum
// ([WithMinCost]) is charged the minimum.
func WithCost(f CostFunc) Option {
	return optionFunc(func(c *config) error {
		c.cost = f
		return nil
	})
}

// WithMinCost sets the least a request is charged, whatever its cost
// function says or whether it fails; the default is 1, so that a flood of
// requests the cost function finds free (an empty batch) or cannot price
// is limited like any other. A minimum of 0 lets free requests through
// whatever the key's allowance. The minimum must be finite, not negative,
// and no more than the limiter's limit (for a per-key limiter, than each
// key's: a request whose key's limit is below it is answered 500).
func WithMinCost(cost float64) Option {
	return optionFunc(func(c *config) error {
		if err := requestcost.CheckMin(cost); err != nil {
			return err
		}
		c.minCost = cost
		return nil
	})
}

// WithSkip makes the middleware pass the requests for which skip returns
// true straight to the wrapped handler, undecided and unreported: health
// checks, or an allow-list of clients. skip runs before the key and cost
// functions; nil restores the default, skipping nothing.
func WithSkip(skip func(*http.Request) bool) Option {
	return optionFunc(func(c *config) error {
		c.skip = skip
		return nil
	})
}

// WithPolicyName names the policy in the RateLimit and RateLimit-Policy
// fields; the default is "default". The name must be printable ASCII
// (characters 0x20 to 0x7E), which is all a Structured Field String can
// hold.
func WithPolicyName(name string) Option {
	return optionFunc(func(c *config) error {
		c.name = name
		return nil
	})
}

// WithQuotaUnit sets the policy's quota unit, the qu parameter of
// RateLimit-Policy, for limits whose cost is not requests: "content-bytes"
// for a cost of body bytes, or a unit of your own. The default leaves qu
// out, which the draft reads as "requests". The unit must be printable
// ASCII.
func WithQuotaUnit(unit string) Option {
	return optionFunc(func(c *config) error {
		c.unit = unit
		return nil
	})
}

// WithWindow sets the policy's window, the w parameter of
// RateLimit-Policy, rounded to the nearest second; zero (or less than
// half a second) leaves w out, and a negative window is invalid.
//
// By default the window comes from the limiter's Params: the window
// length of the window algorithms, and for GCRA and the buckets the time
// in which q units drain (or refill), so that q/w is the long-run rate.
func WithWindow(d time.Duration) Option {
	return optionFunc(func(c *config) error {
		c.window, c.windowSet = d, true
		return nil
	})
}

// WithLegacyHeaders adds X-RateLimit-Limit, X-RateLimit-Remaining and
// X-RateLimit-Reset to each decided response, with the values of q, r and
// t. X-RateLimit-Reset is delta-seconds, the seconds until the allowance
// is whole again, not a Unix time as some servers send. When several
// middlewares are stacked, the innermost one's values win.
func WithLegacyHeaders() Option {
	return optionFunc(func(c *config) error {
		c.legacy = true
		return nil
	})
}

// WithFailOpen makes the middleware serve a request when the limiter
// fails, instead of answering 503 Service Unavailable. Only limiter and
// store errors fail open: a request without a key, costing more than the
// limit, or with a key the store cannot hold ([sluice.ErrInvalidKey]) is
// still refused, as is every request when the limiter or its store cannot
// do what it is configured for ([sluice.ErrUnsupported]), and a request
// whose client has gone is not served at all.
//
// Failing closed is the default, and the safe choice for login and
// payment endpoints: a store outage must not lift the limit on password
// guessing or card testing. Fail open where availability matters more,
// and watch [WithErrorHook].
func WithFailOpen() Option {
	return optionFunc(func(c *config) error {
		c.failOpen = true
		return nil
	})
}

// WithUnavailableRetryAfter sets the Retry-After of the 503 Service
// Unavailable the middleware answers when the limiter fails, rounded up to
// whole seconds; the default is 1 second, and 0 leaves Retry-After out.
// Clients that honour it space their retries while the store recovers.
func WithUnavailableRetryAfter(d time.Duration) Option {
	return optionFunc(func(c *config) error {
		if d < 0 {
			return fmt.Errorf("%w: negative Retry-After %v", sluice.ErrInvalidConfig, d)
		}
		c.unavailable = d
		return nil
	})
}

// WithConcurrencyRetryAfter sets the Retry-After of a 429 answered
// because a concurrency limit ([sluice.NewConcurrencyLimit]) is full: a
// hint of how soon a slot usually comes back, rounded up to whole
// seconds, and capped at when the earliest lease held on the key expires,
// by which the store gives a slot back even if no request ends. The
// default is 1 second; 0 leaves Retry-After out (unless a rate limit of
// the same group denied the request too, whose Retry-After is exact).
//
// A concurrency limit cannot say when a slot comes back: each comes back
// when a request in flight ends, which may be a millisecond away, and the
// only time the store knows, the earliest expiry, is a bound for holders
// that died, as far off as the limit's time to live. Sent as it is, it
// would keep clients that honour Retry-After away for that long, for
// nothing; so the middleware sends this hint instead, and no t in the
// RateLimit field (see the package's Concurrency section).
func WithConcurrencyRetryAfter(d time.Duration) Option {
	return optionFunc(func(c *config) error {
		if d < 0 {
			return fmt.Errorf("%w: negative Retry-After %v", sluice.ErrInvalidConfig, d)
		}
		c.busy = d
		return nil
	})
}

// WithDryRun makes the middleware decide and report every request (the
// RateLimit fields, [WithDecisionHook], [WithErrorHook]) but serve it
// whatever the decision or error. A would-be denial gets no Retry-After.
// Requests that would have been denied record nothing, as denied requests
// never do, so the reported allowance is what enforcement would report.
// Under [WithMaxDelay] nothing is held: a request that would be held books
// its turn, as it would under enforcement, and is served at once. Under a
// concurrency limit a request that gets a slot holds it while it is
// served, as under enforcement, so that r counts the requests in flight;
// one that gets none is served without one, and waits for none.
func WithDryRun() Option {
	return optionFunc(func(c *config) error {
		c.dryRun = true
		return nil
	})
}

// WithDenyHandler makes f write the response to a denied request, instead
// of a 429 with a short text body. Retry-After and the RateLimit fields
// are already set when f is called; f should answer 429 or 503 and keep
// them. nil restores the default. For a full concurrency limit, f is
// where to answer 503 Service Unavailable as nginx's limit_conn does by
// default, where the limit guards the server's capacity rather than a
// client's share of it (see the package's Concurrency section).
func WithDenyHandler(f func(w http.ResponseWriter, r *http.Request, d sluice.Decision)) Option {
	return optionFunc(func(c *config) error {
		c.deny = f
		return nil
	})
}

// WithErrorHandler makes f write the response to a request that could not
// be decided, or whose cost could not be computed, instead of the status
// [ErrorStatus] gives with a short text body. It is not called for errors
// the middleware serves the request despite ([WithFailOpen],
// [WithDryRun]), nor for [ErrRequestCanceled]. nil restores the default.
func WithErrorHandler(f func(w http.ResponseWriter, r *http.Request, err error)) Option {
	return optionFunc(func(c *config) error {
		c.onError = f
		return nil
	})
}

// WithErrorHook makes the middleware call f with every error, before the
// response is written and whether or not the request is then served: key
// and cost errors, costs above the limit, limiter and store errors, and
// [ErrRequestCanceled]; and, once the handler has returned, a lease of a
// concurrency limit that could not be given back ([ErrRelease]). Use it
// for logs and metrics; f must not write to the response.
func WithErrorHook(f func(r *http.Request, err error)) Option {
	return optionFunc(func(c *config) error {
		c.errorHook = f
		return nil
	})
}

// WithDecisionHook makes the middleware call f with every decision,
// admitted or denied, before the request is served or refused. Use it for
// metrics, and with [WithDryRun] to see what enforcement would do.
func WithDecisionHook(f func(r *http.Request, d sluice.Decision)) Option {
	return optionFunc(func(c *config) error {
		c.decisionHook = f
		return nil
	})
}
