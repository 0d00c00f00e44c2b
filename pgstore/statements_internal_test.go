package pgstore

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/sluice-go/sluice"
	"github.com/sluice-go/sluice/engine"
)

// TestStatementsAreBuiltOnceWhenFirstNeeded requires a store's statements
// of each variant to be built on the first decision that needs them, once,
// and to be the text the variant's builder writes.
func TestStatementsAreBuiltOnceWhenFirstNeeded(t *testing.T) {
	for _, callerClock := range []bool{false, true} {
		set := newStatementSet(`"sluice_buckets"`, callerClock)
		for i, v := range variants {
			require.Nil(t, set.built[i].Load(), "%+v: built before it was needed", v)
			first, err := set.of(v)
			require.NoError(t, err)
			again, err := set.of(v)
			require.NoError(t, err)
			require.Same(t, first, again, "%+v: built twice", v)
			require.Equal(t, buildStatements(`"sluice_buckets"`, v, callerClock), *first)
		}
	}
}

// TestStatementsOfAnUnknownVariantAreAnError requires a variant no valid
// Params has to give an error rather than an empty statement.
func TestStatementsOfAnUnknownVariantAreAnError(t *testing.T) {
	set := newStatementSet(`"sluice_buckets"`, true)
	_, err := set.of(variant{kind: engine.KindGCRA, intervalRefill: true})
	require.ErrorIs(t, err, sluice.ErrInvalidConfig)
}
