package sluice

import (
	"context"
	"fmt"
	"math"
	"time"

	"github.com/sluice-go/sluice/engine"
)

// Exhaust records key's whole allowance as spent for the next d: no request
// on key is admitted before d from now (by the store's clock, for a store
// that reads its own), and from then the key frees its allowance as after a
// burst. It never frees anything: a key that holds more keeps it. The
// decision describes the key afterwards, as CanAccept(ctx, key, 0) would.
// The GCRA, the leaky bucket and the token bucket support it; the others
// return an error wrapping [ErrUnsupported]. A d outside 0 to 2^60 ns
// (about 36 years) returns an error wrapping [ErrInvalidDelay].
func (l *Limiter) Exhaust(ctx context.Context, key string, d time.Duration) (dec Decision, err error) {
	op := engine.Op{Verb: engine.VerbExhaust, Now: l.clock.now(), MaxDelay: int64(d)}
	p, err := l.limitFor(ctx, key, op.Now)
	if err != nil {
		return dec, l.refuse(ctx, key, op, decided(&dec), err)
	}
	return dec, l.do(ctx, key, p, op, decided(&dec))
}

// Slowed returns a limiter that decides as l does, on the same store and
// keys, at share of l's rate (the GCRA's emission interval divided by
// share, the buckets' leak or refill amount multiplied by it) and with l's
// limit. A key's state is one for both: a request admitted by either counts
// for both, and the GCRA carries a key's use over between the two rates as
// for any change of limit (package engine's "Limits that change"). share
// must be in (0, 1], and l a GCRA, a leaky bucket or a token bucket with a
// fixed limit; otherwise Slowed returns an error wrapping
// [ErrInvalidConfig] or [ErrUnsupported]. Closing the slowed limiter does
// not close l's store.
func (l *Limiter) Slowed(share float64) (*Limiter, error) {
	switch {
	case !(share > 0 && share <= 1):
		return nil, fmt.Errorf("%w: share %v is not in (0, 1]", ErrInvalidConfig, share)
	case !l.fixed() || !l.params.Reservable():
		return nil, fmt.Errorf("%w: only a GCRA or a bucket with a fixed limit can be slowed", ErrUnsupported)
	}
	p := l.params
	if p.Kind == engine.KindGCRA {
		interval := math.Round(float64(p.Interval) / share)
		if interval > math.MaxInt64/2 {
			return nil, fmt.Errorf("%w: %v of %v's rate is an emission interval of %v ns", ErrInvalidConfig, share, l.params, interval)
		}
		p.Interval = int64(interval)
	} else {
		p.Amount *= share
	}
	if err := p.Validate(); err != nil {
		return nil, fmt.Errorf("slowing %v to %v of its rate: %w", l.params, share, err)
	}
	return &Limiter{params: p, store: l.store, clock: l.clock, mem: l.mem, fast: l.fast,
		name: l.name, observer: l.observer, timeout: l.timeout, lateness: l.lateness, leasePoll: l.leasePoll}, nil
}
