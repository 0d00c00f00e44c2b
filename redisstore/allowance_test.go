package redisstore_test

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/sluice-go/sluice/internal/allowancetest"
	"github.com/sluice-go/sluice/internal/testserver"
	"github.com/sluice-go/sluice/redisstore"
)

// TestAllowanceStaysWithinItsBound runs the allowance Store's bound
// checks on real Redis: four processes' Stores over one Redis store
// (and each over a near-cache), on every algorithm that grants part of a
// cost, and the adversary that spends blocks leased before an instant.
func TestAllowanceStaysWithinItsBound(t *testing.T) {
	c := newClient(t, testserver.StartRedis(t).Addr)
	var needed float64
	for _, cached := range []bool{false, true} {
		for i, p := range allowancetest.Limits {
			t.Run(fmt.Sprintf("%v/%d/nearcache=%v", p.Kind, i, cached), func(t *testing.T) {
				beyond, st := allowancetest.Bound(t, newStore(t, c, redisstore.WithCallerClock(testSkew)), p, 4, cached, uint64(i), 600)
				require.Positive(t, st.Leased, "no block was leased")
				needed = max(needed, beyond)
			})
		}
	}
	require.Positive(t, needed, "no trace spent units leased before an interval in it")
	allowancetest.Adversary(t, newStore(t, c, redisstore.WithCallerClock(testSkew)))
}
