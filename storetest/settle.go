package storetest

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/sluice-go/sluice/engine"
	"github.com/sluice-go/sluice/internal/guarantees"
)

// RunSettleBounds drives every algorithm that settles with random traffic
// on st, by the caller's clock: requests admitted or booked ahead with an
// estimated cost of one unit and settled later with an actual cost drawn
// around it (none, less, the same, more, far more). It checks, on what st
// decided, the guarantee Limiter.Settle states: counting estimates,
// charges when settled and refunds taking back the latest costs recorded,
// the algorithm's guarantee over every interval ending with an admission
// made without a wait; and counting actual costs, that guarantee plus
// the excess not yet settled and what refunds for requests outside the
// interval freed in it.
func RunSettleBounds(t *testing.T, st engine.Store) {
	ctx := context.Background()
	prefix := uniquePrefix()
	for ai, p := range append(Algorithms(), Strict()...) {
		if !p.Reservable() {
			continue
		}
		t.Run(fmt.Sprintf("%d_%v", ai, p.Kind), func(t *testing.T) {
			for trace := range 2 {
				key := fmt.Sprintf("%ssettle.%d.%d", prefix, ai, trace)
				k := guarantees.NewStoreKey(p, func(op engine.Op) (engine.Decision, error) { return st.Apply(ctx, key, &p, op) })
				rng := rand.New(rand.NewPCG(uint64(ai), uint64(trace)))
				require.NoError(t, k.SettleTraffic(rng, base, 1, 200), "trace %d", trace)
				require.NotEmpty(t, k.Settlements(), "trace %d", trace)
				require.NoError(t, k.CheckSettled(1), "trace %d", trace)
			}
		})
	}
}
