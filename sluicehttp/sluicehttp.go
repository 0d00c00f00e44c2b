// Package sluicehttp limits the rate of HTTP requests with a sluice
// limiter.
//
// [Middleware] wraps an http.Handler. It works with net/http and with any
// router that takes func(http.Handler) http.Handler middleware: chi
// directly, echo through echo.WrapMiddleware, gin through an adapter for
// net/http middleware.
//
// For each request the middleware computes a key ([ClientIP] by default)
// and a cost (1 by default, see [WithCost]) and asks the limiter to Allow
// it. An admitted request goes on to the wrapped handler; a denied one is
// answered 429 Too Many Requests with Retry-After.
//
// # Headers
//
// Every decided response, admitted or denied, carries the two fields of
// draft-ietf-httpapi-ratelimit-headers-11 (RateLimit header fields for
// HTTP, May 2026), serialized as RFC 9651 Structured Fields:
//
//	RateLimit-Policy: "default";q=100;w=60
//	RateLimit: "default";r=42;t=18
//
// The policy name is set by [WithPolicyName]. q is the limiter's limit in
// whole units, w its window in seconds ([WithWindow]), r the units left
// after this request (rounded down) and t the seconds until the key's
// allowance is whole again (rounded up; for a denied request never before
// Retry-After). Retry-After is in whole seconds, rounded up and at least
// 1, so a client that waits that long is admitted unless it (or another
// client with its key) spends the allowance meanwhile. [WithLegacyHeaders]
// adds the X-RateLimit-* fields for older clients.
//
// # Errors
//
// A request whose key or cost cannot be computed is answered 400 Bad
// Request, and one that costs more than the limit 413 Content Too Large:
// retrying it can never help, so it is not a 429. When the limiter itself
// fails (its store is down, say), the middleware fails closed by default:
// it answers 503 Service Unavailable. That is the safe default for login
// and payment endpoints, where an outage of the store must not lift the
// limit on password guessing or card testing. [WithFailOpen] serves the
// request instead, for endpoints where availability matters more. Either
// way [WithErrorHook] sees the error, for logs and metrics.
//
// # Dry run
//
// [WithDryRun] decides and reports every request (headers and
// [WithDecisionHook]) but never blocks one, so that a limit can be tried
// on production traffic before it is enforced.
package sluicehttp

import (
	"errors"
	"fmt"
	"math"
	"net/http"
	"strconv"
	"time"

	"github.com/sluice-go/sluice"
)

// Errors reported to the error handler and hook. The error of a key or
// cost function is wrapped, so errors.Is finds both.
var (
	// ErrKey reports that the key function failed: the request has no
	// key to be limited by.
	ErrKey = errors.New("sluicehttp: no key for request")
	// ErrCost reports that the cost function failed or returned a
	// negative, NaN or infinite cost.
	ErrCost = errors.New("sluicehttp: no cost for request")
)

// CostFunc returns the cost of a request, in the limiter's units: for
// example the number of records in a batch. An error makes the middleware
// answer 400 Bad Request. A CostFunc that reads the body must leave an
// equivalent body in r.Body for the handler.
type CostFunc func(r *http.Request) (float64, error)

// Option configures the middleware.
type Option interface {
	apply(*config) error
}

type optionFunc func(*config) error

func (f optionFunc) apply(c *config) error { return f(c) }

type config struct {
	key          KeyFunc
	cost         CostFunc
	name         string
	window       time.Duration
	windowSet    bool
	legacy       bool
	failOpen     bool
	dryRun       bool
	deny         func(http.ResponseWriter, *http.Request, sluice.Decision)
	onError      func(http.ResponseWriter, *http.Request, error)
	errorHook    func(*http.Request, error)
	decisionHook func(*http.Request, sluice.Decision)
}

// WithKey makes the middleware key requests with f; nil restores the
// default, [ClientIP]{}.Key.
func WithKey(f KeyFunc) Option {
	return optionFunc(func(c *config) error {
		c.key = f
		return nil
	})
}

// WithCost makes the middleware charge each request the cost f returns,
// instead of 1; nil restores the default.
func WithCost(f CostFunc) Option {
	return optionFunc(func(c *config) error {
		c.cost = f
		return nil
	})
}

// WithPolicyName names the policy in the RateLimit and RateLimit-Policy
// fields; the default is "default". The name must be printable ASCII
// (characters 0x20 to 0x7E), which is all a Structured Field String can
// hold.
func WithPolicyName(name string) Option {
	return optionFunc(func(c *config) error {
		if _, err := sfString(name); err != nil {
			return err
		}
		c.name = name
		return nil
	})
}

// WithWindow sets the policy's window, the w parameter of
// RateLimit-Policy, rounded to the nearest second; zero (or less than
// half a second) leaves w out, and a negative window is invalid.
//
// By default the window comes from the limiter's Params, when it has a
// Params method as every sluice limiter does: the window length of the
// window algorithms, and for GCRA and the buckets the time in which the
// limit drains (or refills), so that q/w is the long-run rate.
func WithWindow(d time.Duration) Option {
	return optionFunc(func(c *config) error {
		if d < 0 {
			return fmt.Errorf("%w: negative policy window %v", sluice.ErrInvalidConfig, d)
		}
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
// store errors fail open: a request without a key or cost, or costing
// more than the limit, is still refused.
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

// WithDryRun makes the middleware decide and report every request (the
// RateLimit fields, [WithDecisionHook], [WithErrorHook]) but serve it
// whatever the decision or error. A would-be denial gets no Retry-After.
// Requests that would have been denied record nothing, as denied requests
// never do, so the reported allowance is what enforcement would report.
func WithDryRun() Option {
	return optionFunc(func(c *config) error {
		c.dryRun = true
		return nil
	})
}

// WithDenyHandler makes f write the response to a denied request, instead
// of a 429 with a short text body. Retry-After and the RateLimit fields
// are already set when f is called; f should answer 429 or 503 and keep
// them. nil restores the default.
func WithDenyHandler(f func(w http.ResponseWriter, r *http.Request, d sluice.Decision)) Option {
	return optionFunc(func(c *config) error {
		c.deny = f
		return nil
	})
}

// WithErrorHandler makes f write the response to a request that could not
// be decided, instead of the status [ErrorStatus] gives with a short text
// body. It is not called for errors the middleware serves the request
// despite ([WithFailOpen], [WithDryRun]). nil restores the default.
func WithErrorHandler(f func(w http.ResponseWriter, r *http.Request, err error)) Option {
	return optionFunc(func(c *config) error {
		c.onError = f
		return nil
	})
}

// WithErrorHook makes the middleware call f with every error, before the
// response is written and whether or not the request is then served: key
// and cost errors, costs above the limit, limiter and store errors. Use
// it for logs and metrics; f must not write to the response.
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

// ErrorStatus returns the status code the middleware answers err with by
// default: 400 Bad Request for [ErrKey] and [ErrCost], 413 Content Too
// Large for [sluice.ErrCostExceedsLimit], 500 Internal Server Error for
// [sluice.ErrInvalidConfig], and 503 Service Unavailable for any other
// (limiter or store) error.
func ErrorStatus(err error) int {
	switch {
	case errors.Is(err, ErrKey), errors.Is(err, ErrCost):
		return http.StatusBadRequest
	case errors.Is(err, sluice.ErrCostExceedsLimit):
		return http.StatusRequestEntityTooLarge
	case errors.Is(err, sluice.ErrInvalidConfig):
		return http.StatusInternalServerError
	}
	return http.StatusServiceUnavailable
}

// New returns middleware that limits requests with lim, configured by
// opts, or an error wrapping [sluice.ErrInvalidConfig] if lim is nil or an
// option is invalid.
func New(lim sluice.Limiter, opts ...Option) (func(http.Handler) http.Handler, error) {
	m, err := newMiddleware(lim, opts)
	if err != nil {
		return nil, err
	}
	return m.wrap, nil
}

// Middleware returns middleware that limits requests with lim, configured
// by opts. It is [New] for configurations known to be valid: if New would
// fail, the middleware refuses every request, passing the error (which
// wraps [sluice.ErrInvalidConfig]) to the error hook and handler, so the
// default answer is 500 Internal Server Error. Under [WithDryRun] it
// serves them instead.
func Middleware(lim sluice.Limiter, opts ...Option) func(http.Handler) http.Handler {
	m, err := newMiddleware(lim, opts)
	if err == nil {
		return m.wrap
	}
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			m.fail(next, w, r, err, false)
		})
	}
}

// middleware is a configured limiter for requests.
type middleware struct {
	config
	lim sluice.Limiter
	// quotedName is the policy name serialized as a Structured Field
	// String.
	quotedName string
	// windowSeconds is w, or 0 to leave it out.
	windowSeconds int64
	// policy is the serialized RateLimit-Policy, and quota its q, when the
	// limit is known in advance; otherwise both come from each decision.
	policy string
	quota  int64
}

// newMiddleware applies every option, even after one fails, so that a
// misconfigured [Middleware] still reports to the configured hooks.
func newMiddleware(lim sluice.Limiter, opts []Option) (*middleware, error) {
	m := &middleware{lim: lim, config: config{name: "default"}}
	var errs []error
	if lim == nil {
		errs = append(errs, fmt.Errorf("%w: nil limiter", sluice.ErrInvalidConfig))
	}
	for _, o := range opts {
		errs = append(errs, o.apply(&m.config))
	}
	if m.key == nil {
		m.key = ClientIP{}.Key
	}
	if m.deny == nil {
		m.deny = deny
	}
	if m.onError == nil {
		m.onError = writeError
	}
	if err := errors.Join(errs...); err != nil {
		return m, err
	}
	m.quotedName, _ = sfString(m.name) // validated by WithPolicyName
	p, known := lim.(interface{ Params() sluice.Params })
	window := m.window
	if known && !m.windowSet {
		window = policyWindow(p.Params())
	}
	m.windowSeconds = roundSeconds(window)
	if known {
		m.quota = wholeUnits(p.Params().Limit, p.Params().Limit)
		m.policy = m.policyField(m.quota)
	}
	return m, nil
}

func (m *middleware) wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		m.serve(next, w, r)
	})
}

func (m *middleware) serve(next http.Handler, w http.ResponseWriter, r *http.Request) {
	d, limiterErr, err := m.decide(r)
	if err != nil {
		m.fail(next, w, r, err, limiterErr)
		return
	}
	m.setFields(w.Header(), d)
	if m.decisionHook != nil {
		m.decisionHook(r, d)
	}
	if d.Allowed || m.dryRun {
		next.ServeHTTP(w, r)
		return
	}
	w.Header().Set("Retry-After", strconv.FormatInt(max(ceilSeconds(d.RetryAfter), 1), 10))
	m.deny(w, r, d)
}

// decide returns the limiter's decision on r. limiterErr reports whether
// err came from the limiter or its store, rather than from the request.
func (m *middleware) decide(r *http.Request) (d sluice.Decision, limiterErr bool, err error) {
	key, err := m.key(r)
	if err != nil {
		return d, false, fmt.Errorf("%w: %w", ErrKey, err)
	}
	cost := 1.0
	if m.cost != nil {
		if cost, err = m.cost(r); err != nil {
			return d, false, fmt.Errorf("%w: %w", ErrCost, err)
		}
	}
	d, err = m.lim.Allow(r.Context(), key, cost)
	switch {
	case err == nil:
		return d, false, nil
	case errors.Is(err, sluice.ErrInvalidCost):
		return d, false, fmt.Errorf("%w: %w", ErrCost, err)
	case errors.Is(err, sluice.ErrCostExceedsLimit):
		return d, false, err
	}
	return d, true, err
}

// fail reports err and serves the request if the configuration says so,
// or answers it with the error handler.
func (m *middleware) fail(next http.Handler, w http.ResponseWriter, r *http.Request, err error, limiterErr bool) {
	if m.errorHook != nil {
		m.errorHook(r, err)
	}
	if m.policy != "" {
		w.Header().Add("RateLimit-Policy", m.policy)
	}
	if m.dryRun || m.failOpen && limiterErr {
		next.ServeHTTP(w, r)
		return
	}
	m.onError(w, r, err)
}

// setFields adds the RateLimit fields that describe d to h.
func (m *middleware) setFields(h http.Header, d sluice.Decision) {
	policy, q := m.policy, m.quota
	if policy == "" {
		q = wholeUnits(d.Limit, d.Limit)
		policy = m.policyField(q)
	}
	r := wholeUnits(d.Remaining, d.Limit)
	reset := d.ResetAfter
	if !d.Allowed {
		reset = max(reset, d.RetryAfter)
	}
	t := clampInteger(ceilSeconds(reset))
	h.Add("RateLimit-Policy", policy)
	h.Add("RateLimit", m.quotedName+";r="+strconv.FormatInt(r, 10)+";t="+strconv.FormatInt(t, 10))
	if m.legacy {
		h.Set("X-RateLimit-Limit", strconv.FormatInt(q, 10))
		h.Set("X-RateLimit-Remaining", strconv.FormatInt(r, 10))
		h.Set("X-RateLimit-Reset", strconv.FormatInt(t, 10))
	}
}

// policyField serializes the RateLimit-Policy item for quota q.
func (m *middleware) policyField(q int64) string {
	s := m.quotedName + ";q=" + strconv.FormatInt(q, 10)
	if m.windowSeconds > 0 {
		s += ";w=" + strconv.FormatInt(m.windowSeconds, 10)
	}
	return s
}

// policyWindow returns the window over which p's limit applies: the window
// length, or the time the whole limit takes to drain or refill.
func policyWindow(p sluice.Params) time.Duration {
	var ns float64
	switch p.Kind {
	case sluice.KindFixedWindow, sluice.KindSlidingLog, sluice.KindSlidingCounter:
		return time.Duration(p.Interval)
	case sluice.KindGCRA:
		ns = p.Limit * float64(p.Interval)
	case sluice.KindLeakyBucket, sluice.KindTokenBucket:
		periods := p.Limit / p.Amount
		if p.IntervalRefill {
			periods = math.Ceil(periods)
		}
		ns = periods * float64(p.Interval)
	}
	return time.Duration(ns)
}

func deny(w http.ResponseWriter, _ *http.Request, _ sluice.Decision) {
	http.Error(w, "rate limit exceeded", http.StatusTooManyRequests)
}

func writeError(w http.ResponseWriter, _ *http.Request, err error) {
	code := ErrorStatus(err)
	http.Error(w, http.StatusText(code), code)
}
