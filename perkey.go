package sluice

import (
	"context"
	"fmt"

	"github.com/sluice-go/sluice/engine"
)

// NewPerKey returns a limiter whose limit is looked up for each request:
// lookup returns the key's limit, a limiter built by one of the algorithms'
// constructors (one per tier, say, made once) of which only the algorithm
// and configuration ([Limiter.Params]) are used: the new limiter keeps
// every key's state in its own store, with its own clock, observer, name
// and timeout, from opts. A key whose limit changes keeps what it has used,
// in units of cost, and the new limit decides from it at its next request
// (docs/tiers.md).
//
// The limiters lookup returns share the algorithm of the first returned. A
// lookup that fails fails the request with its error, never a silent
// default; one that returns a nil limiter, a per-key limiter or one of
// another algorithm fails it with [ErrInvalidConfig], and in a [Group] one
// that returns a concurrency limit fails it with [ErrUnsupported]. Lookup
// runs once per decision, each try of Wait and Acquire included, so it
// should be fast (a map, or a cache). A limiter with a fixed limit pays one
// comparison per decision for the feature.
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
// limiter's own Params or, for a per-key limiter, those its lookup returns
// for key now, with the lookup's error.
func (l *Limiter) ParamsFor(ctx context.Context, key string) (engine.Params, error) {
	p, err := l.limitOf(ctx, key)
	if err != nil {
		return engine.Params{}, err
	}
	return *p, nil
}

// limitOf returns the Params that hold key now: the limiter's own, or,
// for a per-key limiter, those of the limiter its lookup returns, with the
// calendar windows around now of a calendar window. Only a limiter that is
// not fixed reads its clock for them.
func (l *Limiter) limitOf(ctx context.Context, key string) (*engine.Params, error) {
	if l.fixed() {
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
