package sluice_test

import (
	"context"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sluice-go/sluice"
)

// floodParams are limits of 10 per hour, of each algorithm: slow enough
// that nothing refills during a flood of simulated microseconds, so that
// each key admits exactly its limit, once.
func floodParams() []sluice.Params {
	h := int64(time.Hour)
	return []sluice.Params{
		{Kind: sluice.KindGCRA, Limit: 10, Interval: h / 10},
		{Kind: sluice.KindLeakyBucket, Limit: 10, Interval: h, Amount: 10},
		{Kind: sluice.KindTokenBucket, Limit: 10, Interval: h, Amount: 10},
		{Kind: sluice.KindFixedWindow, Limit: 10, Interval: h},
		{Kind: sluice.KindSlidingLog, Limit: 10, Interval: h, MaxEntries: 10},
		{Kind: sluice.KindSlidingCounter, Limit: 10, Interval: h},
	}
}

// floodResult is what a flood did to the keys it hammered.
type floodResult struct {
	admitted, allowed float64 // in all, by the store and by Step alone
	worst             float64 // the most one key admitted
}

// runFlood attacks a store bounded to maxKeys as a client that wants one
// limited key lifted would: it sends floodKeys requests on new keys, each
// spending its key's whole limit, and between them hammers keys in turn,
// one request each, a microsecond apart. It compares what the hammered
// keys admitted with what Step admits on them alone, as an unbounded
// store would.
func runFlood(t *testing.T, p sluice.Params, maxKeys, hammered, floodKeys int) floodResult {
	t.Helper()
	st := sluice.NewMemStore(sluice.MemStoreConfig{MaxKeys: maxKeys})
	defer st.Close()
	ctx := context.Background()
	var res floodResult
	states := make([]sluice.State, hammered)
	admitted := make([]float64, hammered)
	now := time.Date(2026, 11, 22, 0, 0, 0, 0, time.UTC).UnixNano()
	for i := range floodKeys {
		now += int64(time.Microsecond)
		_, err := st.Apply(ctx, "flood-"+strconv.Itoa(i), &p, sluice.Op{Verb: sluice.VerbAllow, Cost: p.Limit, Now: now})
		require.NoError(t, err)
		k := i % hammered
		op := sluice.Op{Verb: sluice.VerbAllow, Cost: 1, Now: now}
		d, err := st.Apply(ctx, "hammered-"+strconv.Itoa(k), &p, op)
		require.NoError(t, err)
		next, want, err := p.Step(states[k], op)
		require.NoError(t, err)
		states[k] = next
		if d.Allowed {
			admitted[k]++
			res.admitted++
		}
		if want.Allowed {
			res.allowed++
		}
	}
	for _, a := range admitted {
		res.worst = max(res.worst, a)
	}
	return res
}

// TestKeyFloodDoesNotLiftLimitsOfKeysInUse floods a bounded store with
// new keys, many times its bound, while keys in active use are hammered:
// evicting to make room must forgive the flood's idle keys, never the
// hammered ones, which admit exactly what they would in an unbounded
// store.
func TestKeyFloodDoesNotLiftLimitsOfKeysInUse(t *testing.T) {
	maxKeys, floodKeys := 10_000, 200_000
	if raceEnabled {
		floodKeys /= 4
	}
	for _, p := range floodParams() {
		t.Run(p.Kind.String(), func(t *testing.T) {
			res := runFlood(t, p, maxKeys, 100, floodKeys)
			t.Logf("%v: hammered keys admitted %v against %v allowed (at most %v on one key)", p.Kind, res.admitted, res.allowed, res.worst)
			require.Equal(t, res.allowed, res.admitted)
		})
	}
}

// TestKeyFloodAtAMillionKeys is the flood at the scale it was first seen
// at (MaxKeys 1,000,000, ten million new keys), run with SLUICE_LONG=1; it
// prints its figures.
func TestKeyFloodAtAMillionKeys(t *testing.T) {
	if !longRun() {
		t.Skip("SLUICE_LONG=1 runs the flood at a million keys")
	}
	for _, p := range floodParams()[:1] {
		res := runFlood(t, p, 1_000_000, 100, 10_000_000)
		fmt.Printf("%v, MaxKeys 1,000,000, 10,000,000 new keys: 100 hammered keys admitted %v against %v allowed (at most %v on one key)\n",
			p.Kind, res.admitted, res.allowed, res.worst)
		require.Equal(t, res.allowed, res.admitted)
	}
}
