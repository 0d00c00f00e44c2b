package storetest

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/sluice-go/sluice/engine"
	"github.com/sluice-go/sluice/storetest/internal/vectors"
)

// RunChanges replays random traces in which each key's limit changes at
// random instants, among limits of the same algorithm with other numbers
// ([Variants]), against st and against the specification, which carries
// a key's state over to its new limit (see "Limits that change" in package
// engine): every store must carry it alike.
func RunChanges(t *testing.T, st engine.Store, opts ...Option) {
	c := configure(opts)
	prefix := uniquePrefix()
	ps := Algorithms()
	if !c.noStrict {
		ps = append(ps, Strict()...)
	}
	for ai, p := range append(ps, c.extra...) {
		limits := Variants(p)
		if ai >= len(ps) {
			// A store's own extremes are at the edge of what it computes:
			// vary them only within it.
			limits = slices.DeleteFunc(limits, func(q engine.Params) bool { return vectors.LongestSpan(q) > vectors.LongestSpan(p) })
		}
		for oi, origin := range origins {
			traces := max(c.traces/2, 2)
			if oi > 0 {
				traces = max(traces/10, 2)
			}
			t.Run(fmt.Sprintf("%d_%v_from_%s", ai, p.Kind, origin.name), func(t *testing.T) {
				keyPrefix := fmt.Sprintf("%s%d.%s.", prefix, ai, origin.name)
				replay(t, st, limits, c.exact, keyPrefix, 1<<63|uint64(ai)<<40|uint64(oi)<<32, origin.at, traces)
			})
		}
	}
}

// Variants returns p and limits of its algorithm and mode with other
// numbers: a limit three times higher and half as high, a longer interval
// (a window of another length, not a multiple of p's) and a shorter one, a
// faster rate, fewer entries; those that are valid.
func Variants(p engine.Params) []engine.Params {
	out := []engine.Params{p}
	for _, f := range []func(q *engine.Params){
		func(q *engine.Params) { q.Limit *= 3 },
		func(q *engine.Params) { q.Limit /= 2 },
		func(q *engine.Params) { q.Interval = 2*q.Interval + 7 },
		func(q *engine.Params) { q.Interval /= 3 },
		func(q *engine.Params) { q.Amount *= 2.5 },
		func(q *engine.Params) { q.MaxEntries /= 2 },
	} {
		q := p
		f(&q)
		if q != p && q.Validate() == nil {
			out = append(out, q)
		}
	}
	return out
}

// change returns one of p's variants, other than p when it has any.
func change(rng *rand.Rand, p engine.Params) engine.Params {
	vs := Variants(p)
	if len(vs) == 1 {
		return p
	}
	return vs[1+rng.IntN(len(vs)-1)]
}

// RunConcurrentChanges requires that callers goroutines deciding one key
// at one instant, each under one of two limits of the key's algorithm
// (the second three times the first's, and for GCRA ten times as fast),
// as two processes would during a rolling change of configuration, admit
// exactly the larger limit's burst: what each admits counts against the
// other, converted exactly, and no decision is lost between them.
func RunConcurrentChanges(t *testing.T, st engine.Store, callers int) {
	prefix := uniquePrefix()
	for ai, p := range Algorithms() {
		q := p
		q.Limit *= 3
		if p.Kind == engine.KindGCRA {
			q.Interval /= 10
		}
		require.NoError(t, q.Validate())
		limits := [2]engine.Params{p, q}
		t.Run(fmt.Sprintf("%d_%v", ai, p.Kind), func(t *testing.T) {
			key := fmt.Sprintf("%scc%d", prefix, ai)
			want := max(burstFromRest(t, p), burstFromRest(t, q))
			admitted := admitConcurrently(t, st, key, limits[:], callers, 2*want/callers+2) // more than enough calls
			require.Equal(t, want, admitted)
		})
	}
}
