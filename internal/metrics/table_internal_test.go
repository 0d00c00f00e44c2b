package metrics

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/sluice-go/sluice/engine"
	"github.com/sluice-go/sluice/internal/outcome"
)

func TestTableGivesKeysThatShareACacheSlotEachTheirOwnSeries(t *testing.T) {
	resolved := map[Key]int{}
	table := NewTable(func(k Key) string {
		resolved[k]++
		return k.Limiter
	})
	// The same length, outer bytes and small fields: the same slot.
	a := Key{Limiter: "api-1", Kind: engine.KindGCRA, Verb: engine.VerbAllow, Outcome: outcome.Allowed}
	b := a
	b.Limiter = "api+1"
	require.Equal(t, spot(&a), spot(&b))
	for range 3 {
		require.Equal(t, "api-1", *table.Get(a))
		require.Equal(t, "api+1", *table.Get(b))
	}
	require.Equal(t, map[Key]int{a: 1, b: 1}, resolved)
}

func TestTableGetAllocatesNothingOnceAKeyIsResolved(t *testing.T) {
	table := NewTable(func(k Key) [4]int { return [4]int{int(k.Verb)} })
	keys := []Key{
		{Limiter: "api-1", Kind: engine.KindGCRA, Verb: engine.VerbAllow, Outcome: outcome.Allowed},
		{Limiter: "api+1", Kind: engine.KindGCRA, Verb: engine.VerbAllow, Outcome: outcome.Allowed},
		{Limiter: "api-1", Kind: engine.KindGCRA, Verb: engine.VerbCheck, Outcome: outcome.Denied, Lease: true},
	}
	for _, k := range keys {
		table.Get(k)
	}
	sum := 0
	require.Zero(t, testing.AllocsPerRun(100, func() {
		for _, k := range keys {
			sum += table.Get(k)[0]
		}
	}))
}
