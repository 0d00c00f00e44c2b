package metrics_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sluice-go/sluice"
	"github.com/sluice-go/sluice/engine"
	"github.com/sluice-go/sluice/internal/metrics"
	"github.com/sluice-go/sluice/internal/outcome"
)

func TestAlgorithmNamesAreLabelValues(t *testing.T) {
	for k, want := range map[engine.Kind]string{
		engine.KindLeakyBucket:    "leaky_bucket",
		engine.KindGCRA:           "gcra",
		engine.KindTokenBucket:    "token_bucket",
		engine.KindFixedWindow:    "fixed_window",
		engine.KindSlidingLog:     "sliding_log",
		engine.KindSlidingCounter: "sliding_counter",
		engine.KindConcurrency:    "concurrency",
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
		{Limiter: "a", Kind: engine.KindGCRA, Verb: engine.VerbAllow, Outcome: outcome.Allowed},
		{Limiter: "a", Kind: engine.KindGCRA, Verb: engine.VerbAllow, Outcome: outcome.Denied},
		{Limiter: "b", Kind: engine.KindGCRA, Verb: engine.VerbCheck, Outcome: outcome.Allowed},
	}
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 1000 {
				k := keys[(g+i)%len(keys)]
				require.Equal(t, k.Limiter+"/"+k.Outcome.String(), *table.Get(k))
			}
		})
	}
	wg.Wait()
	require.Equal(t, int64(len(keys)), made.Load())
}

func TestALeasesVerbsAreNamedForWhatTheHolderDid(t *testing.T) {
	for i, tc := range []struct {
		verb  engine.Verb
		lease bool
		want  string
	}{
		0: {engine.VerbAllow, true, "acquire"},
		1: {engine.VerbCancel, true, "release"},
		2: {engine.VerbExtend, true, "extend"},
		// Not a lease's decision: the verb's own name.
		3: {engine.VerbAllow, false, "allow"}, // Allow on a concurrency limit
		4: {engine.VerbCheck, false, "check"},
		5: {engine.VerbCancel, false, "cancel"}, // a reservation given back
		6: {engine.VerbFill, false, "fill"},
		7: {engine.VerbReserve, false, "reserve"},
	} {
		require.Equal(t, tc.want, metrics.Verb(tc.verb, tc.lease), "row %d", i)
	}
}

func TestALeaseIsHeldFromItsGrantUntilItsHolderLetsGoOfIt(t *testing.T) {
	const at = 1_795_348_810_000_000_000 // a lease's identity: its expiry
	// errs is an error of each outcome that has one, as a limiter returns.
	errs := map[string]error{"invalid": sluice.ErrInvalidCost, "timeout": sluice.ErrTimeout, "store_error": sluice.ErrStoreClosed}
	lease := func(verb engine.Verb, outcome string, at int64, waited time.Duration) sluice.Event {
		e := sluice.Event{Limiter: "jobs", Kind: engine.KindConcurrency, Verb: verb, Err: errs[outcome],
			Decision: sluice.Decision{Allowed: outcome == "allowed", At: at}, Lease: true, Waited: waited}
		require.Equal(t, outcome, e.Outcome())
		return e
	}
	for name, tc := range map[string]struct {
		e    sluice.Event
		want metrics.LeaseChange
	}{
		"granted at once": {
			lease(engine.VerbAllow, "allowed", at, 0),
			metrics.LeaseChange{Held: 1},
		},
		"granted to an Acquire after a wait": {
			lease(engine.VerbAllow, "allowed", at, 250*time.Millisecond),
			metrics.LeaseChange{Held: 1, Waited: 250 * time.Millisecond},
		},
		"denied to an Acquire still waiting": {
			lease(engine.VerbAllow, "denied", 0, 250*time.Millisecond),
			metrics.LeaseChange{},
		},
		"granted at a cost of zero, which holds nothing": {
			lease(engine.VerbAllow, "allowed", 0, 0),
			metrics.LeaseChange{},
		},
		"acquisition failed in the store": {
			lease(engine.VerbAllow, "store_error", 0, 0),
			metrics.LeaseChange{},
		},
		"acquisition refused as invalid": {
			lease(engine.VerbAllow, "invalid", 0, 0),
			metrics.LeaseChange{},
		},
		"released": {
			lease(engine.VerbCancel, "allowed", 0, 0),
			metrics.LeaseChange{Held: -1},
		},
		"release found it expired": {
			lease(engine.VerbCancel, "denied", 0, 0),
			metrics.LeaseChange{Held: -1, Expired: true},
		},
		"release failed in the store: still held, and may be released again": {
			lease(engine.VerbCancel, "store_error", 0, 0),
			metrics.LeaseChange{},
		},
		"release timed out: still held, and may be released again": {
			lease(engine.VerbCancel, "timeout", 0, 0),
			metrics.LeaseChange{},
		},
		"extended": {
			lease(engine.VerbExtend, "allowed", at+1, 0),
			metrics.LeaseChange{},
		},
		"extension found it expired": {
			lease(engine.VerbExtend, "denied", 0, 0),
			metrics.LeaseChange{Held: -1, Expired: true},
		},
		"extension failed in the store": {
			lease(engine.VerbExtend, "store_error", 0, 0),
			metrics.LeaseChange{},
		},
		"Allow on a concurrency limit, not a lease's": {
			sluice.Event{Kind: engine.KindConcurrency, Verb: engine.VerbAllow,
				Decision: sluice.Decision{Allowed: true, At: at}},
			metrics.LeaseChange{},
		},
		"a reservation given back, not a lease's": {
			sluice.Event{Kind: engine.KindGCRA, Verb: engine.VerbCancel, Decision: sluice.Decision{Allowed: true}},
			metrics.LeaseChange{},
		},
	} {
		t.Run(name, func(t *testing.T) {
			require.Equal(t, tc.want, metrics.LeaseChangeOf(&tc.e))
		})
	}
}

func TestLeaseChangeOfAllocatesNothing(t *testing.T) {
	e := sluice.Event{Kind: engine.KindConcurrency, Verb: engine.VerbAllow,
		Decision: sluice.Decision{Allowed: true, At: 1}, Lease: true, Waited: time.Second}
	var held int64
	require.Zero(t, testing.AllocsPerRun(100, func() {
		held += metrics.LeaseChangeOf(&e).Held
	}))
}

func TestOutcomeOfIsTheClassOfTheEventsOutcome(t *testing.T) {
	for _, e := range []sluice.Event{
		{Decision: sluice.Decision{Allowed: true}},
		{},
		{Err: sluice.ErrInvalidCost},
		{Err: context.Canceled},
		{Err: sluice.ErrTimeout},
		{Err: errors.New("connection refused")},
		{Decision: sluice.Decision{Allowed: true}, Err: errors.New("connection reset")},
	} {
		require.Equal(t, outcome.Of(e.Outcome()), metrics.OutcomeOf(&e), "%+v", e)
		require.NotZero(t, metrics.OutcomeOf(&e), "%+v", e)
	}
}
