package outcome_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/sluice-go/sluice/internal/outcome"
)

func TestOnlyTimeoutsAndStoreErrorsAreFailuresOfTheStore(t *testing.T) {
	for name, want := range map[string]bool{
		"allowed":     false,
		"denied":      false,
		"invalid":     false,
		"canceled":    false,
		"timeout":     true,
		"store_error": true,
	} {
		require.Equal(t, want, outcome.Of(name).Failed(), name)
	}
}

func TestEachClassIsFoundByItsNameAndNoOtherNameFindsOne(t *testing.T) {
	for c := outcome.Allowed; c <= outcome.StoreError; c++ {
		require.NotEmpty(t, c.String())
		require.Equal(t, c, outcome.Of(c.String()))
	}
	for _, name := range []string{"", "Allowed", "store-error", "outcome(7)"} {
		require.Zero(t, outcome.Of(name), "%q", name)
	}
}
