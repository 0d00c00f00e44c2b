package sluice

import (
	"context"
	"fmt"

	"github.com/sluice-go/sluice/engine"
)

// NewPerKey returns a limiter whose limit is looked up for each request:
// lookup returns, for the request's key, a limiter built by one of the
// algorithms' constructors (one per tier or plan, say, made once), whose
// algorithm and configuration ([Limiter.Params]) hold the key. The new
// limiter keeps every key's state in its own store and reads its own
// clock, with its own observer, name and timeout, from opts: the limiters
// lookup returns serve as limits only, and their stores are never used.
//
//	free, _ := sluice.NewGCRA(sluice.PerSecond(1), 5)
//	pro, _ := sluice.NewGCRA(sluice.PerSecond(100), 50)
//	lim, err := sluice.NewPerKey(func(ctx context.Context, key string) (*sluice.Limiter, error) {
//		if isPro(key) {
//			return pro, nil
//		}
//		return free, nil
//	}, sluice.WithStore(st))
//
// A key whose limit changes (an upgrade, a configuration reloaded) keeps
// what it has used, in units of cost, and the new limit decides from it
// at its next request, on every store: a GCRA raised from 10/s to 100/s
// admits at 100/s at once, and one lowered does not forget what was spent
// (see docs/tiers.md for the rule and its bound). The limiters lookup
// returns share one algorithm: the first returned sets it, and one of
// another algorithm fails the request with [ErrInvalidConfig].
//
// A lookup that fails fails the request with its error (never a silent
// default limit); one that returns a nil limiter, or a per-key limiter,
// fails it with [ErrInvalidConfig]. Lookup is called once per decision,
// and for every try of Wait and Acquire, so it should be fast: a map, or
// a cache of its own. A limiter with a fixed limit pays one comparison per
// decision for the feature.
//
// A per-key limiter may be a member of a [Group] for rate limits; a
// group's leases are taken on concurrency limits with a fixed limit only,
// and a group refuses a per-key member whose lookup returns a concurrency
// limit with [ErrUnsupported].
func NewPerKey(lookup func(ctx context.Context, key string) (*Limiter, error), opts ...Option) (*Limiter, error) {
	if lookup == nil {
		return nil, fmt.Errorf("%w: nil lookup", ErrInvalidConfig)
	}
	l, err := build(engine.Params{}, opts, true)
	if err != nil {
		return nil, err
	}
	l.lookup = lookup
	return l, nil
}

// ParamsFor returns the algorithm and configuration that hold key: the
// limiter's own Params, or, for a per-key limiter, those of the limiter its
// lookup returns for key now, with the lookup's error. An HTTP or gRPC
// adapter reads them to describe a key's limit (its RateLimit-Policy).
func (l *Limiter) ParamsFor(ctx context.Context, key string) (engine.Params, error) {
	p, err := l.limitOf(ctx, key)
	if err != nil {
		return engine.Params{}, err
	}
	return *p, nil
}

// Fixed reports whether the limiter decides every request under the same
// Params ([Limiter.Params]): not a per-key limiter ([NewPerKey]), whose
// limit is looked up for each key, nor a calendar window
// ([NewCalendarWindow]), whose windows move with its clock. An adapter
// that describes a limit reads one that is not fixed with
// [Limiter.ParamsFor] for each request.
func (l *Limiter) Fixed() bool { return l.lookup == nil && l.cal == nil }

// limitOf returns the Params that hold key now: the limiter's own, or,
// for a per-key limiter, those of the limiter its lookup returns, with the
// calendar windows around now of a calendar window. Only a limiter that is
// not fixed reads its clock for them.
func (l *Limiter) limitOf(ctx context.Context, key string) (*engine.Params, error) {
	if l.Fixed() {
		return &l.params, nil
	}
	return l.limitFor(ctx, key, l.clock.now())
}

// limitFor is limitOf at now, for a caller that has read its clock.
func (l *Limiter) limitFor(ctx context.Context, key string, now int64) (*engine.Params, error) {
	if l.lookup == nil {
		return l.limitAt(now), nil
	}
	t, err := l.lookup(ctx, key)
	switch {
	case err != nil:
		return nil, fmt.Errorf("sluice: looking up the limit of a key: %w", err)
	case t == nil:
		return nil, fmt.Errorf("%w: the lookup of a per-key limiter returned no limiter", ErrInvalidConfig)
	case t.lookup != nil:
		return nil, fmt.Errorf("%w: the lookup of a per-key limiter returned a per-key limiter", ErrInvalidConfig)
	}
	if k := uint32(t.params.Kind); l.kind.Load() != k && !l.kind.CompareAndSwap(0, k) {
		return nil, fmt.Errorf("%w: the lookup of a per-key limiter of %v returned a %v: its limits share one algorithm",
			ErrInvalidConfig, engine.Kind(l.kind.Load()), t.params.Kind)
	}
	return t.limitAt(now), nil
}

// nowLookedUp is now for a per-key limiter or a calendar window: op
// decided under the key's limit at op.Now, looked up first.
func (l *Limiter) nowLookedUp(ctx context.Context, key string, op engine.Op, d *engine.Decision) error {
	p, err := l.limitFor(ctx, key, op.Now)
	if err != nil {
		return l.refuse(ctx, key, op, d, err)
	}
	if l.mem != nil && l.observer == nil && p.Usual(op.Verb, op.Cost, op.Now) {
		return l.mem.apply(key, p, op, d)
	}
	return l.do(ctx, key, p, op, d)
}

// refuse reports err, a request's that was not decided (its limit could
// not be looked up), to the observer, and returns it.
func (l *Limiter) refuse(ctx context.Context, key string, op engine.Op, d *engine.Decision, err error) error {
	if l.observer != nil {
		l.observe(ctx, key, &l.params, op, d, err, note{})
	}
	return err
}
