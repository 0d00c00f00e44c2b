package sluicehttp

import (
	"context"
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
// here. A per-key limiter ([sluice.NewPerKey]) is refused: its fields
// differ per key, and the middleware writes them.
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

// isFixed reports whether lim decides every request under the same Params
// (see sluice.Limiter.Params).
func isFixed(lim *sluice.Limiter) bool {
	_, fixed := lim.Params()
	return fixed
}

func newFields(lim *sluice.Limiter, c *config) (*Fields, error) {
	switch {
	case lim == nil:
		return nil, fmt.Errorf("%w: nil limiter", sluice.ErrInvalidConfig)
	case !isFixed(lim):
		return nil, fmt.Errorf("%w: the fields of a per-key limiter or a calendar window differ per key or per window: the middleware writes them (New, NewGroup)", sluice.ErrInvalidConfig)
	}
	p, err := ratelimitheader.New(lim, policyConfig(c))
	if err != nil {
		return nil, err
	}
	return &Fields{policy: p, legacy: c.legacy, busy: c.busy}, nil
}

// policyConfig returns what the configuration says of the policy.
func policyConfig(c *config) ratelimitheader.Config {
	return ratelimitheader.Config{
		Name:      c.name,
		Unit:      c.unit,
		Window:    c.window,
		WindowSet: c.windowSet,
		MinCost:   c.minCost,
	}
}

// perKeyFields are the fields of a per-key limiter ([sluice.NewPerKey]):
// those of the limit its lookup returns for a request's key, one Fields
// per limit, kept in a bounded cache.
type perKeyFields struct {
	lim      *sluice.Limiter
	cache    *ratelimitheader.Cache[*Fields]
	maxDelay time.Duration
	// groupLeases says that a group holds leases and waits with
	// Acquire: any limit can wait then.
	groupLeases bool
}

func newPerKeyFields(lim *sluice.Limiter, c *config) (*perKeyFields, error) {
	cache, err := ratelimitheader.NewCache(policyConfig(c), func(p *ratelimitheader.Policy) *Fields {
		return &Fields{policy: p, legacy: c.legacy, busy: c.busy}
	})
	if err != nil {
		return nil, err
	}
	return &perKeyFields{lim: lim, cache: cache, maxDelay: c.maxDelay, groupLeases: c.groupLeases}, nil
}

// forKey returns the fields of key's limit as the lookup returns it now.
// A lookup that fails returns its error, which is answered as a store's
// failure is. A limit the configuration cannot serve returns a *misfit:
// one whose RateLimit-Policy cannot be stated (less than one whole unit,
// or below the minimum cost), or that cannot hold requests as
// [WithMaxDelay] asks; for a limiter with a fixed limit, [New] refuses
// those.
func (pk *perKeyFields) forKey(ctx context.Context, key string) (*Fields, error) {
	p, err := pk.lim.ParamsFor(ctx, key)
	if err != nil {
		return nil, err
	}
	f, err := pk.cache.Get(p)
	if err == nil {
		err = checkDelay(&p, pk.maxDelay, pk.groupLeases)
	}
	if err != nil {
		return nil, &misfit{err: err}
	}
	return f, nil
}

// A misfit is a limit, looked up for a request's key, that the
// middleware's configuration cannot serve. It wraps
// [sluice.ErrInvalidConfig].
type misfit struct{ err error }

func (e *misfit) Error() string {
	return "sluicehttp: the limit looked up for the request's key does not fit the middleware: " + e.err.Error()
}

func (e *misfit) Unwrap() error { return e.err }

// perKeyFailed answers a request whose key's fields could not be had
// because of err, listing policies: a limit that does not fit is refused
// as a misconfigured [Middleware] refuses (never served under
// fail-open), and a lookup that failed is answered as the limiter's
// failure.
func (m *middleware) perKeyFailed(next http.Handler, w http.ResponseWriter, r *http.Request, err error, policies []*Fields) {
	var bad *misfit
	if errors.As(err, &bad) {
		m.fail(next, w, r, err, false, policies)
		return
	}
	m.limiterFailed(next, w, r, err, policies)
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
