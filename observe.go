package sluice

import (
	"context"
	"errors"
	"time"

	"github.com/sluice-go/sluice/engine"
	"github.com/sluice-go/sluice/internal/outcome"
)

// Observer receives every decision a limiter makes, for metrics, logs or
// traces. Set one with [WithObserver]; the adapters in the modules
// github.com/sluice-go/sluice/sluiceprom and .../sluiceotel export
// Prometheus and OpenTelemetry metrics from it: pass their Observe method.
//
// An Observer is called once per decision (Allow, CanAccept, Fillup, and
// each attempt of Wait), after the decision, on the caller's goroutine: it
// must be safe for concurrent use and quick, since the caller waits for
// it. Reset is not a decision and is not observed. ctx is the decision's
// context, for tracing; its values are the caller's.
//
// A limiter without an Observer pays one comparison per decision for the
// feature: it reads the clock no more often and allocates nothing more.
type Observer func(ctx context.Context, e Event)

// Event is one decision, as an [Observer] sees it.
type Event struct {
	// Limiter is the limiter's name, set with [WithName]; "" if unset.
	Limiter string
	// Kind is the limiter's algorithm.
	Kind engine.Kind
	// Verb is what the decision did: VerbAllow for Allow (and Wait on the
	// window algorithms), VerbCheck for CanAccept, VerbFill for Fillup,
	// VerbReserve for Reserve (and Wait on the others), VerbCancel for a
	// reservation given back, VerbAtMost for AllowAtMost, VerbExhaust for
	// Exhaust, VerbCharge or VerbRefund for Settle (Cost is then the
	// excess charged, or the cost given back); for a lease (see Lease),
	// VerbAllow, VerbCancel and VerbExtend.
	Verb engine.Verb
	// Key is the key decided on. Its values are unbounded: never use it as
	// a metric label.
	Key string
	// Cost is the cost requested.
	Cost float64
	// Decision is the decision returned to the caller.
	Decision Decision
	// Latency is the time the decision took, on the limiter's clock: the
	// store's call, and the validation before it. A fake clock that does
	// not move gives zero.
	Latency time.Duration
	// Err is the error returned to the caller, or nil.
	Err error
	// Lease reports a decision on a lease of a concurrency limit
	// ([NewConcurrencyLimit]): taken by [Limiter.TryAcquire] or
	// [Limiter.Acquire] (VerbAllow), given back by [Lease.Release]
	// (VerbCancel: denied when the lease had expired) or extended by
	// [Lease.Extend] (VerbExtend: denied when it had expired). An
	// adapter counts the leases its process holds from these: each
	// granted lease until its release is attempted, or until an
	// extension finds it expired. Allow on a concurrency limit takes a
	// lease that nobody releases, and is not a lease's decision.
	Lease bool
	// Waited is, for a decision of [Limiter.Acquire], how long its caller
	// had waited when it was made, on the limiter's clock: for the one
	// that granted the lease, how long the lease took. Zero otherwise.
	Waited time.Duration

	outcome outcome.Class // classified when the limiter made the event; 0 if not
}

// Outcome classifies the decision, or its error, for metrics: its values
// are few and fixed, so they make good label values.
//
//   - "allowed": a request admitted (or, for CanAccept, that would be), a
//     Fillup whose whole cost fitted, a reservation booked, a cancel that
//     gave its cost back, a partial grant of something.
//   - "denied": a request refused, a Fillup that reached capacity before
//     its whole cost fitted, a reservation beyond its maximum delay, a
//     cancel that gave nothing back, a partial grant of nothing.
//   - "invalid": an error in the request itself: an invalid cost, a cost
//     above the limit, a verb the algorithm does not support, a time out
//     of range, a key the store cannot hold or that holds another
//     algorithm's state. The store is healthy; the request is wrong.
//   - "canceled": a decision abandoned because the caller's context was
//     canceled: a client that went away, not a failing store.
//   - "timeout": a store call that did not finish within the limiter's
//     timeout ([WithTimeout]) or before the context's deadline.
//   - "store_error": any other error of the store: a connection refused
//     or reset, a server error, a store closed.
//
// Only "timeout" and "store_error" are failures of the store. A limiter
// classifies its Event when it makes it, knowing the decision's context;
// an Event made otherwise (a test's literal) is classified from Decision
// and Err alone, and is "canceled" only if Err wraps context.Canceled.
func (e *Event) Outcome() string {
	if e.outcome == 0 {
		return outcome.Names[classify(nil, e.Decision.Allowed, e.Err)]
	}
	return outcome.Names[e.outcome]
}

// classify returns the outcome of a decision that returned allowed and
// err, on a call whose context was ctx, or nil for an Event that no
// limiter made (nil keeps Event.Outcome small enough to be inlined where
// an adapter reads it per decision).
func classify(ctx context.Context, allowed bool, err error) outcome.Class {
	switch {
	case err == nil && allowed:
		return outcome.Allowed
	case err == nil:
		return outcome.Denied
	case errors.Is(err, ErrTimeout) || errors.Is(err, context.DeadlineExceeded):
		return outcome.Timeout
	case errors.Is(err, ErrInvalidCost), errors.Is(err, ErrCostExceedsLimit),
		errors.Is(err, ErrUnsupported), errors.Is(err, ErrTimeOutOfRange),
		errors.Is(err, ErrKeyConflict), errors.Is(err, ErrInvalidKey):
		// Before the context's state: a request refused as wrong was
		// decided, not abandoned, even if its caller has gone since.
		return outcome.Invalid
	case errors.Is(err, context.Canceled) || ctx != nil && ctx.Err() != nil:
		// A client whose caller went away may say so in its own words.
		return outcome.Canceled
	}
	return outcome.StoreError
}

// note is what an Event says beyond the decision: whether it is a lease's,
// and how long Acquire waited for it.
type note struct {
	lease  bool
	waited time.Duration
}

// observe hands the decision just made to the limiter's observer. op.Now
// is the limiter's time when the decision began: the latency costs one
// more reading of the clock, and only here.
func (l *Limiter) observe(ctx context.Context, key string, p *engine.Params, op engine.Op, d *engine.Decision, err error, n note) {
	l.observer(ctx, Event{
		Limiter:  l.name,
		Kind:     p.Kind,
		Verb:     op.Verb,
		Key:      key,
		Cost:     op.Cost,
		Decision: Decision(*d),
		Latency:  time.Duration(max(l.clock.now()-op.Now, 0)),
		Err:      err,
		Lease:    n.lease,
		Waited:   n.waited,
		outcome:  classify(ctx, d.Allowed, err),
	})
}

// together returns an observer that calls os in turn, or nil if there is
// none.
func together(os []Observer) Observer {
	switch len(os) {
	case 0:
		return nil
	case 1:
		return os[0]
	}
	return func(ctx context.Context, e Event) {
		for _, o := range os {
			o(ctx, e)
		}
	}
}
