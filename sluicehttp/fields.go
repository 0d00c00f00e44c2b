package sluicehttp

import (
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/sluice-go/sluice"
	"github.com/sluice-go/sluice/internal/ratelimitheader"
)

// Fields writes the RateLimit header fields of a limiter's decisions, for
// handlers that decide themselves (a limit that depends on the parsed
// request, or several limiters per request) and answer as the middleware
// would. A Fields is safe for concurrent use.
type Fields struct {
	policy *ratelimitheader.Policy
	legacy bool
	busy   time.Duration // Retry-After hint of a full concurrency limit
}

// NewFields returns the fields of decisions made by lim, or an error
// wrapping [sluice.ErrInvalidConfig]. Of the options, those that say how
// the policy is reported apply: [WithPolicyName], [WithQuotaUnit],
// [WithWindow], [WithLegacyHeaders], [WithConcurrencyRetryAfter] and
// [WithMinCost] (checked against the limit); the others have no effect
// here.
func NewFields(lim *sluice.Limiter, opts ...Option) (*Fields, error) {
	c := defaults()
	var errs []error
	for _, o := range opts {
		errs = append(errs, o.apply(&c))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return newFields(lim, &c)
}

func newFields(lim *sluice.Limiter, c *config) (*Fields, error) {
	if lim == nil {
		return nil, fmt.Errorf("%w: nil limiter", sluice.ErrInvalidConfig)
	}
	p, err := ratelimitheader.New(lim, ratelimitheader.Config{
		Name:      c.name,
		Unit:      c.unit,
		Window:    c.window,
		WindowSet: c.windowSet,
		MinCost:   c.minCost,
	})
	if err != nil {
		return nil, err
	}
	return &Fields{policy: p, legacy: c.legacy, busy: c.busy}, nil
}

// Write adds to h the RateLimit-Policy and RateLimit fields that describe
// d (and the X-RateLimit-* fields under [WithLegacyHeaders]); for a
// denial it also sets Retry-After, in whole seconds rounded up and at
// least 1. Call it before writing the status code. Stacked policies each
// add their own item.
//
// The fields of a concurrency limit ([sluice.NewConcurrencyLimit]) carry
// no t, nor X-RateLimit-Reset, and the Retry-After of its denial is
// [WithConcurrencyRetryAfter]'s hint, capped at when the earliest lease
// expires, or none: see the package's Concurrency section.
func (f *Fields) Write(h http.Header, d sluice.Decision) {
	f.write(h, d)
	if !d.Allowed {
		each := [1]sluice.Decision{d}
		if s, ok := retryAfter([]*Fields{f}, each[:]); ok {
			setRetryAfter(h, s)
		}
	}
}

func (f *Fields) write(h http.Header, d sluice.Decision) {
	v := f.policy.Fields(d)
	h.Add("RateLimit-Policy", v.Policy)
	h.Add("RateLimit", v.RateLimit)
	if f.legacy {
		h.Set("X-RateLimit-Limit", strconv.FormatInt(v.Quota, 10))
		h.Set("X-RateLimit-Remaining", strconv.FormatInt(v.Remaining, 10))
		if v.HasReset {
			h.Set("X-RateLimit-Reset", strconv.FormatInt(v.Reset, 10))
		} else {
			h.Del("X-RateLimit-Reset") // no stacked policy's: the three describe one
		}
	}
}

// retryAfter returns the Retry-After of a denial whose policies, fields,
// decided each: the whole seconds until every policy that denied it would
// admit it, as far as each can tell (see
// [ratelimitheader.Policy.RetryDelay]), and whether any can tell.
func retryAfter(fields []*Fields, each []sluice.Decision) (int64, bool) {
	var delay time.Duration
	send := false
	for i, d := range each {
		if d.Allowed {
			continue
		}
		if wait, ok := fields[i].policy.RetryDelay(d, fields[i].busy); ok {
			delay, send = max(delay, wait), true
		}
	}
	if !send {
		return 0, false
	}
	return ratelimitheader.RetryAfter(delay), true
}

// writePolicy adds RateLimit-Policy to h, which is known without a
// decision.
func (f *Fields) writePolicy(h http.Header) {
	h.Add("RateLimit-Policy", f.policy.Field())
}

func setRetryAfter(h http.Header, seconds int64) {
	h.Set("Retry-After", strconv.FormatInt(seconds, 10))
}
