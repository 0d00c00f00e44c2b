package pgstore_test

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/sluice-go/sluice/internal/allowancetest"
	"github.com/sluice-go/sluice/internal/testserver"
	"github.com/sluice-go/sluice/pgstore"
)

// TestAllowanceStaysWithinItsBound runs the allowance Store's bound
// checks on a real PostgreSQL: four processes' Stores over one table, on
// every algorithm that grants part of a cost, and the adversary that
// spends blocks leased before an instant.
func TestAllowanceStaysWithinItsBound(t *testing.T) {
	pool := newPool(t, testserver.StartPostgres(t).URL, 4)
	var needed float64
	for i, p := range allowancetest.Limits {
		t.Run(fmt.Sprintf("%v/%d", p.Kind, i), func(t *testing.T) {
			st, _ := newStore(t, pool, pgstore.WithCallerClock())
			beyond, counts := allowancetest.Bound(t, st, p, 4, false, uint64(i), 300)
			require.Positive(t, counts.Leased, "no block was leased")
			needed = max(needed, beyond)
		})
	}
	require.Positive(t, needed, "no trace spent units leased before an interval in it")
	st, _ := newStore(t, pool, pgstore.WithCallerClock())
	allowancetest.Adversary(t, st)
}
