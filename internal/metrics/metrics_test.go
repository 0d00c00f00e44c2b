package metrics_test

import (
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/sluice-go/sluice"
	"github.com/sluice-go/sluice/engine"
	"github.com/sluice-go/sluice/internal/metrics"
)

func TestAlgorithmNamesAreLabelValues(t *testing.T) {
	for k, want := range map[engine.Kind]string{
		engine.KindLeakyBucket:    "leaky_bucket",
		engine.KindGCRA:           "gcra",
		engine.KindTokenBucket:    "token_bucket",
		engine.KindFixedWindow:    "fixed_window",
		engine.KindSlidingLog:     "sliding_log",
		engine.KindSlidingCounter: "sliding_counter",
		engine.Kind(0):            "unknown",
		engine.Kind(200):          "unknown",
	} {
		require.Equal(t, want, metrics.Algorithm(k))
	}
}

func TestTableResolvesEachKeyOnceUnderConcurrency(t *testing.T) {
	var made atomic.Int64
	table := metrics.NewTable(func(k metrics.Key) string {
		made.Add(1)
		return k.Limiter + "/" + k.Outcome.String()
	})
	keys := []metrics.Key{
		{Limiter: "a", Kind: engine.KindGCRA, Verb: engine.VerbAllow, Outcome: sluice.OutcomeAllowed},
		{Limiter: "a", Kind: engine.KindGCRA, Verb: engine.VerbAllow, Outcome: sluice.OutcomeDenied},
		{Limiter: "b", Kind: engine.KindGCRA, Verb: engine.VerbCheck, Outcome: sluice.OutcomeAllowed},
	}
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 1000 {
				k := keys[(g+i)%len(keys)]
				require.Equal(t, k.Limiter+"/"+k.Outcome.String(), table.Get(k))
			}
		})
	}
	wg.Wait()
	require.Equal(t, int64(len(keys)), made.Load())
}
