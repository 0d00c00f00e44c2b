package sluicehttp

import (
	"context"
	"fmt"
	"net/http"

	"github.com/sluice-go/sluice"
)

// serveLeased serves r, of key and cost, holding a lease of the
// concurrency limit whose fields are f for as long as next runs.
func (m *middleware) serveLeased(next http.Handler, w http.ResponseWriter, r *http.Request, f *Fields, key string, cost float64, costErr error) {
	lease, err := m.acquire(r.Context(), key, cost, costErr)
	if err != nil {
		m.leaseFailed(next, w, r, err, m.listed(f))
		return
	}
	if lease.Allowed {
		// Deferred first: whatever follows (a hook, the handler) may
		// panic, and the slot must come back all the same.
		defer m.release(r, &lease)
	}
	if m.decisionHook != nil {
		m.decisionHook(r, lease.Decision)
	}
	f.write(w.Header(), lease.Decision)
	switch {
	case !lease.Allowed && !m.dryRun:
		each, fields := [1]sluice.Decision{lease.Decision}, [1]*Fields{f}
		if s, ok := retryAfter(fields[:], each[:]); ok {
			setRetryAfter(w.Header(), s)
		}
		m.full(w, r, lease.Decision)
	case costErr != nil:
		m.fail(next, w, r, costErr, false, nil)
	default:
		next.ServeHTTP(w, r)
	}
}

// acquire takes a lease of cost on key: at once, or, under WithMaxDelay,
// waiting for it at most the delay. A wait that times out is a denial,
// which describes the key as it stands then.
func (m *middleware) acquire(ctx context.Context, key string, cost float64, costErr error) (sluice.Lease, error) {
	if m.maxDelay == 0 || costErr != nil || m.dryRun {
		return m.lim.TryAcquire(ctx, key, cost)
	}
	wait, cancel := context.WithTimeout(ctx, m.maxDelay)
	defer cancel()
	lease, err := m.lim.Acquire(wait, key, cost)
	if err == nil || ctx.Err() != nil || wait.Err() == nil {
		return lease, err
	}
	d, err := m.lim.CanAccept(ctx, key, cost)
	lease.Decision = waitedInVain(d)
	return lease, err
}

// waitedInVain returns d, what CanAccept says of a request that waited its
// whole delay for a slot, as the denial it is: a slot freed in the
// instant since is not the request's, whose wait is over.
func waitedInVain(d sluice.Decision) sluice.Decision {
	if d.Allowed {
		d.Allowed, d.RetryAfter = false, 0 // no bound known: the hint alone
	}
	return d
}

// leaseFailed answers a request whose lease could not be taken because of
// err: a client that went away is reported to the error hook, anything
// else is the limiter's failure, answered as such, listing policies.
func (m *middleware) leaseFailed(next http.Handler, w http.ResponseWriter, r *http.Request, err error, policies []*Fields) {
	if r.Context().Err() != nil {
		m.canceled(r, "lease", err)
		return
	}
	m.limiterFailed(next, w, r, err, policies)
}

// A releaser is a lease: one limiter's or a group's.
type releaser interface {
	Release(ctx context.Context) error
}

// release gives back the lease of r once it has been answered, even if
// r's context has ended or its handler panicked, and reports a lease that
// could not be given back to the error hook.
func (m *middleware) release(r *http.Request, lease releaser) {
	if err := lease.Release(r.Context()); err != nil && m.errorHook != nil {
		m.errorHook(r, fmt.Errorf("%w: %w", ErrRelease, err))
	}
}

// serveLeased serves r, of keys and cost, holding the group's leases for
// as long as next runs. fields are each policy's.
func (g *groupMiddleware) serveLeased(next http.Handler, w http.ResponseWriter, r *http.Request, fields []*Fields, keys []string, cost float64, costErr error) {
	lease, err := g.acquire(r.Context(), fields, keys, cost, costErr)
	if err != nil {
		g.leaseFailed(next, w, r, err, fields)
		return
	}
	if lease.Allowed {
		defer g.release(r, &lease) // first, as for one limiter
	}
	if g.decisionHook != nil {
		g.decisionHook(r, lease.Decision)
	}
	each := lease.Limits()
	full := false // whether a concurrency limit denied the request
	for i, f := range fields {
		f.write(w.Header(), each[i])
		full = full || !each[i].Allowed && f.policy.Concurrent()
	}
	switch {
	case !lease.Allowed && !g.dryRun:
		if s, ok := retryAfter(fields, each); ok {
			setRetryAfter(w.Header(), s)
		}
		if full {
			g.full(w, r, lease.Decision)
		} else {
			g.deny(w, r, lease.Decision)
		}
	case costErr != nil:
		g.fail(next, w, r, costErr, false, nil)
	default:
		next.ServeHTTP(w, r)
	}
}

// acquire takes the group's leases for cost on keys, as the lone
// limiter's acquire does. fields are each policy's.
func (g *groupMiddleware) acquire(ctx context.Context, fields []*Fields, keys []string, cost float64, costErr error) (sluice.GroupLease, error) {
	if g.maxDelay == 0 || costErr != nil || g.dryRun {
		return g.group.TryAcquire(ctx, keys, cost)
	}
	wait, cancel := context.WithTimeout(ctx, g.maxDelay)
	defer cancel()
	lease, err := g.group.Acquire(wait, keys, cost)
	if err == nil || ctx.Err() != nil || wait.Err() == nil {
		return lease, err
	}
	d, err := g.group.CanAccept(ctx, keys, cost)
	if d.Allowed {
		// Every policy admits it in the instant since: the concurrency
		// limits are what it waited for in vain.
		d.Decision = waitedInVain(d.Decision)
		for i, each := range d.Limits() {
			if fields[i].policy.Concurrent() {
				d.Limits()[i] = waitedInVain(each)
			}
		}
	}
	lease.GroupDecision = d
	return lease, err
}
