// Package metricstest is the sequence of decisions that the metrics
// adapters' tests (sluiceprom, sluiceotel) replay, so that both read back
// their metrics after exactly the same events.
package metricstest

import (
	"context"
	"math"
	"testing"
	"time"

	"github.com/benbjohnson/clock"
	"github.com/stretchr/testify/require"

	"github.com/sluice-go/sluice"
	"github.com/sluice-go/sluice/engine"
)

// DecisionTime is how long each decision of limiter "api" takes on the
// sequence's fake clock.
const DecisionTime = 3 * time.Millisecond

// Run reports to o, through two limiters on a fake clock:
//
//   - "api", a GCRA of 1/s and burst 2 on a store whose decisions take
//     DecisionTime: 2 allowed and 1 denied Allows, 1 CanAccept (denied:
//     the burst is spent), and 1 invalid Allow (a NaN cost, refused
//     before the store, in no time);
//   - "broken", a token bucket on a closed store: 2 Allows that fail with
//     ErrStoreClosed, in no time.
func Run(t testing.TB, o sluice.Observer) {
	t.Helper()
	mock := clock.NewMock()
	mock.Set(time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC))
	mem := sluice.NewMemStore(sluice.MemStoreConfig{})
	defer mem.Close()
	api, err := sluice.NewGCRA(sluice.PerSecond(1), 2, sluice.WithName("api"), sluice.WithObserver(o),
		sluice.WithClock(mock), sluice.WithStore(slowStore{mem, mock}))
	require.NoError(t, err)
	closed := sluice.NewMemStore(sluice.MemStoreConfig{})
	require.NoError(t, closed.Close())
	broken, err := sluice.NewTokenBucket(sluice.PerSecond(1), 1, sluice.WithName("broken"), sluice.WithObserver(o),
		sluice.WithClock(mock), sluice.WithStore(closed))
	require.NoError(t, err)

	ctx := context.Background()
	for range 3 { // two admitted, one denied
		_, err = api.Allow(ctx, "client-1", 1)
		require.NoError(t, err)
	}
	_, err = api.CanAccept(ctx, "client-1", 1)
	require.NoError(t, err)
	_, err = api.Allow(ctx, "client-1", math.NaN())
	require.ErrorIs(t, err, sluice.ErrInvalidCost)
	for range 2 {
		_, err = broken.Allow(ctx, "client-2", 1)
		require.ErrorIs(t, err, sluice.ErrStoreClosed)
	}
}

// LeaseTTL is the time to live of the leases of limiter "jobs", and
// LeaseWait how long its Acquire waits, in RunLeases.
const (
	LeaseTTL  = 10 * time.Second
	LeaseWait = 250 * time.Millisecond
)

// RunLeases reports to o the decisions of "jobs", a concurrency limit of
// one lease per key with a time to live of LeaseTTL on a MemStore and a
// fake clock, on which decisions take no time:
//
//   - on key job-1, a lease taken (TryAcquire), refused to another,
//     extended, and released;
//   - a TryAcquire of cost zero, granted, which holds nothing: its
//     release is not decided (ErrNotHeld);
//   - a lease taken, and released after it expired (ErrNotHeld);
//   - a lease taken whose extension found it expired (ErrNotHeld), and
//     released then (ErrNotHeld, not decided);
//   - on key job-2, a lease taken, and an Acquire that waits LeaseWait
//     behind it (one attempt denied), granted when it is released; that
//     lease is held still at the end.
//
// That is 6 acquisitions granted (5 that took a lease) and 2 denied, 1
// extension granted and 1 denied, 2 releases granted and 1 denied: 1
// lease held, 2 expiries, and 1 wait of LeaseWait.
func RunLeases(t testing.TB, o sluice.Observer) {
	t.Helper()
	mock := clock.NewMock()
	mock.Set(time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC))
	mem := sluice.NewMemStore(sluice.MemStoreConfig{})
	defer mem.Close()
	waiting := make(chan struct{}, 2) // the Acquire on job-2 was denied
	tell := func(ctx context.Context, e sluice.Event) {
		o(ctx, e)
		if e.Key == "job-2" && e.Outcome() == "denied" {
			select {
			case waiting <- struct{}{}:
			default:
			}
		}
	}
	jobs, err := sluice.NewConcurrencyLimit(1, LeaseTTL, sluice.WithName("jobs"), sluice.WithObserver(tell),
		sluice.WithClock(mock), sluice.WithStore(mem))
	require.NoError(t, err)

	ctx := context.Background()
	a, err := jobs.TryAcquire(ctx, "job-1", 1)
	require.NoError(t, err)
	require.True(t, a.Allowed)
	refused, err := jobs.TryAcquire(ctx, "job-1", 1)
	require.NoError(t, err)
	require.False(t, refused.Allowed)
	require.NoError(t, a.Extend(ctx))
	require.NoError(t, a.Release(ctx))

	none, err := jobs.TryAcquire(ctx, "job-1", 0)
	require.NoError(t, err)
	require.True(t, none.Allowed)
	require.ErrorIs(t, none.Release(ctx), sluice.ErrNotHeld)

	b, err := jobs.TryAcquire(ctx, "job-1", 1)
	require.NoError(t, err)
	require.True(t, b.Allowed)
	mock.Add(LeaseTTL + time.Second)
	require.ErrorIs(t, b.Release(ctx), sluice.ErrNotHeld)

	c, err := jobs.TryAcquire(ctx, "job-1", 1)
	require.NoError(t, err)
	require.True(t, c.Allowed)
	mock.Add(LeaseTTL + time.Second)
	require.ErrorIs(t, c.Extend(ctx), sluice.ErrNotHeld)
	require.ErrorIs(t, c.Release(ctx), sluice.ErrNotHeld)

	d, err := jobs.TryAcquire(ctx, "job-2", 1)
	require.NoError(t, err)
	require.True(t, d.Allowed)
	type acquired struct {
		lease sluice.Lease
		err   error
	}
	done := make(chan acquired, 1)
	go func() {
		ls, err := jobs.Acquire(ctx, "job-2", 1)
		done <- acquired{ls, err}
	}()
	// Denied twice: Acquire asks, and asks again once it watches for
	// releases.
	<-waiting
	<-waiting
	// Less than the lease poll and d's time to live: nothing but d's
	// release wakes the waiter, which asks once more and is granted.
	mock.Add(LeaseWait)
	require.NoError(t, d.Release(ctx))
	e := <-done
	require.NoError(t, e.err)
	require.True(t, e.lease.Allowed)
}

// LeaseRound is the events of a round of leases of limiter "jobs", each
// as its holder's decision would report it: three leases taken (the first
// after a wait of a second), one extended and released, one whose
// extension found it expired, one whose release found it expired. It
// leaves as many leases held as it found.
func LeaseRound() []sluice.Event {
	lease := func(verb engine.Verb, allowed bool, at int64, waited time.Duration) sluice.Event {
		return sluice.Event{Limiter: "jobs", Kind: engine.KindConcurrency, Verb: verb, Key: "job-1", Cost: 1,
			Decision: sluice.Decision{Allowed: allowed, At: at}, Lease: true, Waited: waited}
	}
	return []sluice.Event{
		lease(engine.VerbAllow, true, 1, time.Second),
		lease(engine.VerbExtend, true, 2, 0),
		lease(engine.VerbCancel, true, 0, 0),
		lease(engine.VerbAllow, true, 3, 0),
		lease(engine.VerbExtend, false, 0, 0),
		lease(engine.VerbAllow, true, 4, 0),
		lease(engine.VerbCancel, false, 0, 0),
	}
}

// slowStore is a MemStore whose decisions take DecisionTime on a fake
// clock.
type slowStore struct {
	*sluice.MemStore
	mock *clock.Mock
}

func (s slowStore) Apply(ctx context.Context, key string, p *engine.Params, op engine.Op) (engine.Decision, error) {
	s.mock.Add(DecisionTime)
	return s.MemStore.Apply(ctx, key, p, op)
}
