package allowance_test

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/sluice-go/sluice"
	"github.com/sluice-go/sluice/internal/allowancetest"
)

// TestProcessesAdmitWithinTheBoundOfTheIntervalAndTheLeaseTime drives
// several processes' Stores over one in-memory store, alone and each over
// a near-cache, and checks that all of them together admitted over every
// interval at most what the algorithm admits in the interval and a lease
// time; and that some interval took more than the bound for its length
// alone, so that the check can fail.
func TestProcessesAdmitWithinTheBoundOfTheIntervalAndTheLeaseTime(t *testing.T) {
	var needed float64
	for _, cached := range []bool{false, true} {
		for i, p := range allowancetest.Limits {
			t.Run(fmt.Sprintf("%v/%d/nearcache=%v", p.Kind, i, cached), func(t *testing.T) {
				var leased float64
				for seed := range uint64(3) {
					remote := sluice.NewMemStore(sluice.MemStoreConfig{})
					t.Cleanup(func() { remote.Close() })
					beyond, st := allowancetest.Bound(t, remote, p, 4, cached, seed, 3000)
					needed = max(needed, beyond)
					leased += st.Leased
				}
				require.Positive(t, leased, "no block was leased")
			})
		}
	}
	require.Positive(t, needed, "no trace spent units leased before an interval in it: the check would pass without leases")
}

func TestBlocksHeldAcrossAnIntervalStayWithinTheLeaseTime(t *testing.T) {
	remote := sluice.NewMemStore(sluice.MemStoreConfig{})
	t.Cleanup(func() { remote.Close() })
	allowancetest.Adversary(t, remote)
}
