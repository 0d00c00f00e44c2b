package storetest

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sluice-go/sluice"

	"github.com/sluice-go/sluice/engine"
)

// RunOverflows requires that, under a penalty, an Allow or a reservation
// whose cost can never fit starts the key's block, as a client that sends
// impossible requests is the client a penalty exists for: the store
// returns [sluice.ErrCostExceedsLimit] with a decision that says Blocked,
// and the next request that would fit is denied until the block ends.
// Without a penalty such a request records nothing.
func RunOverflows(t *testing.T, st engine.Store) {
	ctx := context.Background()
	prefix := uniquePrefix()
	const penalty = 5 * time.Second
	for ai, p := range Algorithms() {
		verbs := []engine.Verb{engine.VerbAllow}
		if p.Reservable() {
			verbs = append(verbs, engine.VerbReserve)
		}
		for _, verb := range verbs {
			t.Run(fmt.Sprintf("%d_%v_%v", ai, p.Kind, verb), func(t *testing.T) {
				never := engine.Op{Verb: verb, Cost: p.Limit + 1, Now: base, MaxDelay: int64(time.Hour)}
				one := engine.Op{Verb: engine.VerbAllow, Cost: 1, Now: base + 1}

				lenient := p
				key := fmt.Sprintf("%so%d.%v.lenient", prefix, ai, verb)
				_, err := st.Apply(ctx, key, &lenient, never)
				require.ErrorIs(t, err, sluice.ErrCostExceedsLimit)
				d, err := st.Apply(ctx, key, &lenient, one)
				require.NoError(t, err)
				require.True(t, d.Allowed, "without a penalty, an impossible cost records nothing")

				strict := p
				strict.Penalty = int64(penalty)
				key = fmt.Sprintf("%so%d.%v.strict", prefix, ai, verb)
				if p.Kind == engine.KindConcurrency {
					_, err = st.Apply(ctx, key, &strict, never)
					require.ErrorIs(t, err, sluice.ErrInvalidConfig, "a concurrency limit takes no penalty")
					return
				}
				d, err = st.Apply(ctx, key, &strict, never)
				require.ErrorIs(t, err, sluice.ErrCostExceedsLimit, "the cost still never fits")
				require.False(t, d.Allowed)
				require.True(t, d.Blocked, "the impossible cost starts the block")
				require.Equal(t, penalty, d.RetryAfter, "retry when the block ends")
				require.Equal(t, p.Limit, d.Remaining, "the key's allowance is untouched")
				d, err = st.Apply(ctx, key, &strict, one)
				require.NoError(t, err)
				require.False(t, d.Allowed, "a cost that fits is denied during the block")
				require.True(t, d.Blocked)
				require.Equal(t, penalty-1, d.RetryAfter)
				d, err = st.Apply(ctx, key, &strict, engine.Op{Verb: engine.VerbAllow, Cost: 1, Now: base + int64(penalty)})
				require.NoError(t, err)
				require.True(t, d.Allowed, "admitted once the block ends")
			})
		}
	}
}

// RunAtMostNothing requires that a partial grant of no cost is not
// admitted: Allowed reports whether the grant is more than zero.
func RunAtMostNothing(t *testing.T, st engine.Store) {
	ctx := context.Background()
	prefix := uniquePrefix()
	for ai, p := range append(Algorithms(), Strict()...) {
		t.Run(fmt.Sprintf("%d_%v", ai, p.Kind), func(t *testing.T) {
			key := fmt.Sprintf("%sz%d", prefix, ai)
			d, err := st.Apply(ctx, key, &p, engine.Op{Verb: engine.VerbAtMost, Cost: 0, Now: base})
			if p.Kind == engine.KindConcurrency {
				require.ErrorIs(t, err, sluice.ErrUnsupported, "a lease is taken whole or not at all")
				return
			}
			require.NoError(t, err)
			require.False(t, d.Allowed, "nothing granted is not admitted")
			require.Zero(t, d.Granted)
			require.Equal(t, p.Limit, d.Remaining, "and nothing is recorded")
		})
	}
}

// RunNilParams requires that a decision without Params is refused with an
// error wrapping [sluice.ErrInvalidConfig], never a panic.
func RunNilParams(t *testing.T, st engine.Store) {
	_, err := st.Apply(context.Background(), uniquePrefix()+"nil", nil, engine.Op{Verb: engine.VerbAllow, Cost: 1, Now: base})
	require.ErrorIs(t, err, sluice.ErrInvalidConfig)
}
