package sluice_test

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sluice-go/sluice/internal/guarantees"
)

// TestSettledCostStaysWithinTheGuarantee drives each algorithm that
// settles with random traffic whose requests are admitted (or booked
// ahead) with an estimated cost and settled later with an actual cost
// drawn around it, and checks the guarantee Limiter.Settle states
// (guarantees.Key.CheckSettled), counting estimates, charges and
// refunds, and counting actual costs.
func TestSettledCostStaysWithinTheGuarantee(t *testing.T) {
	start := time.Date(2026, 11, 29, 12, 0, 0, 123456789, time.UTC).UnixNano()
	for ai, alg := range reservingAlgorithms(t) {
		p := alg.params
		t.Run(alg.name, func(t *testing.T) {
			t.Parallel()
			var refunded, charged int
			for _, cost := range boundCosts(p) {
				for trace := range traceCount(4) {
					rng := rand.New(rand.NewPCG(uint64(ai), uint64(trace)))
					k := guarantees.NewKey(p)
					where := fmt.Sprintf("cost %v, trace %d", cost, trace)
					require.NoError(t, k.SettleTraffic(rng, start, cost, 400), where)
					require.NoError(t, k.CheckSettled(cost), where)
					for _, s := range k.Settlements() {
						refunded += b2i(s.Moved < 0)
						charged += b2i(s.Moved > 0)
					}
				}
			}
			require.Positive(t, refunded, "refunds given")
			require.Positive(t, charged, "charges recorded")
		})
	}
}
