package sluice_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"
	"testing"
	"time"

	"github.com/benbjohnson/clock"
	"github.com/stretchr/testify/require"

	"github.com/sluice-go/sluice"

	"github.com/sluice-go/sluice/engine"
)

// recorder is an Observer that keeps the events it sees.
type recorder struct {
	mu     sync.Mutex
	events []sluice.Event
}

func (r *recorder) Observe(_ context.Context, e sluice.Event) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events = append(r.events, e)
}

// slowStore is a MemStore whose decisions take a fixed time on a fake
// clock, or fail with err.
type slowStore struct {
	*sluice.MemStore
	mock *clock.Mock
	took time.Duration
	err  error
}

func (s *slowStore) Apply(ctx context.Context, key string, p *engine.Params, op engine.Op) (engine.Decision, error) {
	s.mock.Add(s.took)
	if s.err != nil {
		return engine.Decision{Limit: p.Limit}, s.err
	}
	return s.MemStore.Apply(ctx, key, p, op)
}

func TestObserverSeesEveryDecisionWithItsOutcomeAndLatency(t *testing.T) {
	mock := newMock()
	rec := &recorder{}
	st := &slowStore{MemStore: sluice.NewMemStore(sluice.MemStoreConfig{}), mock: mock, took: 3 * time.Millisecond}
	lim, err := sluice.NewLeakyBucket(2, sluice.PerSecond(1),
		sluice.WithClock(mock), sluice.WithStore(st), sluice.WithName("spend"), sluice.WithObserver(rec.Observe))
	require.NoError(t, err)
	ctx := context.Background()

	_, err = lim.Allow(ctx, "a", 2)
	require.NoError(t, err)
	_, err = lim.Allow(ctx, "a", 1)
	require.NoError(t, err)
	_, err = lim.CanAccept(ctx, "a", 0)
	require.NoError(t, err)
	_, err = lim.Fillup(ctx, "a", 0.5)
	require.NoError(t, err)
	_, err = lim.Allow(ctx, "a", math.NaN())
	require.ErrorIs(t, err, sluice.ErrInvalidCost)
	_, err = lim.Allow(ctx, "a", 3)
	require.ErrorIs(t, err, sluice.ErrCostExceedsLimit)
	st.err = errors.New("connection refused")
	_, err = lim.Allow(ctx, "a", 1)
	require.Error(t, err)

	type seen struct {
		verb    engine.Verb
		cost    float64
		allowed bool
		latency time.Duration
		outcome string
	}
	want := []seen{
		{engine.VerbAllow, 2, true, 3 * time.Millisecond, "allowed"},
		{engine.VerbAllow, 1, false, 3 * time.Millisecond, "denied"},
		{engine.VerbCheck, 0, true, 3 * time.Millisecond, "allowed"},
		{engine.VerbFill, 0.5, false, 3 * time.Millisecond, "denied"},
		{engine.VerbAllow, math.NaN(), false, 0, "invalid"}, // refused before the store
		{engine.VerbAllow, 3, false, 0, "invalid"},
		{engine.VerbAllow, 1, false, 3 * time.Millisecond, "store_error"},
	}
	require.Len(t, rec.events, len(want))
	for i, w := range want {
		e := rec.events[i]
		require.Equal(t, "spend", e.Limiter, i)
		require.Equal(t, engine.KindLeakyBucket, e.Kind, i)
		require.Equal(t, "a", e.Key, i)
		require.Equal(t, w.verb, e.Verb, i)
		if !math.IsNaN(w.cost) {
			require.Equal(t, w.cost, e.Cost, i)
		}
		require.Equal(t, w.allowed, e.Decision.Allowed, i)
		require.Equal(t, 2.0, e.Decision.Limit, i)
		require.Equal(t, w.latency, e.Latency, i)
		require.Equal(t, w.outcome, e.Outcome(), i)
		require.Equal(t, w.outcome != "allowed" && w.outcome != "denied", e.Err != nil, i)
	}
}

func TestObserverClassifiesCanceledContextsAndClosedStores(t *testing.T) {
	rec := &recorder{}
	canceling := &cancelStore{}
	lim, err := sluice.NewGCRA(sluice.PerSecond(1), 1, sluice.WithStore(canceling), sluice.WithObserver(rec.Observe))
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err = lim.Allow(ctx, "a", 1)
	require.ErrorIs(t, err, context.Canceled)

	mem := sluice.NewMemStore(sluice.MemStoreConfig{})
	require.NoError(t, mem.Close())
	closed, err := sluice.NewGCRA(sluice.PerSecond(1), 1, sluice.WithStore(mem), sluice.WithObserver(rec.Observe))
	require.NoError(t, err)
	_, err = closed.Allow(context.Background(), "a", 1)
	require.ErrorIs(t, err, sluice.ErrStoreClosed)

	require.Len(t, rec.events, 2)
	require.Equal(t, "canceled", rec.events[0].Outcome(), "a client that went away is not a failing store")
	require.Equal(t, "store_error", rec.events[1].Outcome())
	require.Equal(t, "", rec.events[1].Limiter, "no name was given")
}

// cancelStore fails every call with its context's error, as a client
// whose caller went away does.
type cancelStore struct{}

func (cancelStore) Apply(ctx context.Context, _ string, p *engine.Params, _ engine.Op) (engine.Decision, error) {
	return engine.Decision{Limit: p.Limit}, ctx.Err()
}
func (cancelStore) Reset(ctx context.Context, _ string) error { return ctx.Err() }

func TestObserversGivenTwiceAreBothCalledInOrder(t *testing.T) {
	var order []string
	first := func(context.Context, sluice.Event) { order = append(order, "first") }
	second := func(context.Context, sluice.Event) { order = append(order, "second") }
	third := func(context.Context, sluice.Event) { order = append(order, "third") }
	lim, err := sluice.NewGCRA(sluice.PerSecond(1), 1,
		sluice.WithObserver(first), sluice.WithObserver(second), sluice.WithObserver(third))
	require.NoError(t, err)
	_, err = lim.Allow(context.Background(), "a", 1)
	require.NoError(t, err)
	require.Equal(t, []string{"first", "second", "third"}, order)
}

func TestObservationOptionsRefuseBadInput(t *testing.T) {
	for name, opt := range map[string]sluice.Option{
		"empty name":       sluice.WithName(""),
		"nil observer":     sluice.WithObserver(nil),
		"zero timeout":     sluice.WithTimeout(0),
		"negative timeout": sluice.WithTimeout(-time.Second),
	} {
		t.Run(name, func(t *testing.T) {
			_, err := sluice.NewGCRA(sluice.PerSecond(1), 1, opt)
			require.ErrorIs(t, err, sluice.ErrInvalidConfig)
		})
	}
}

func TestAnEventMadeByHandIsClassifiedFromItsDecisionAndError(t *testing.T) {
	for i, tc := range []struct {
		allowed bool
		err     error
		want    string
	}{
		{true, nil, "allowed"},
		{false, nil, "denied"},
		{false, fmt.Errorf("wrapped: %w", sluice.ErrInvalidCost), "invalid"},
		{false, sluice.ErrCostExceedsLimit, "invalid"},
		{false, sluice.ErrUnsupported, "invalid"},
		{false, sluice.ErrTimeOutOfRange, "invalid"},
		{false, sluice.ErrKeyConflict, "invalid"},
		{false, sluice.ErrInvalidKey, "invalid"},
		{false, context.Canceled, "canceled"},
		{false, sluice.ErrTimeout, "timeout"},
		{false, context.DeadlineExceeded, "timeout"},
		{false, sluice.ErrStoreClosed, "store_error"},
		{false, errors.New("connection reset"), "store_error"},
	} {
		e := sluice.Event{Decision: sluice.Decision{Allowed: tc.allowed}, Err: tc.err}
		require.Equal(t, tc.want, e.Outcome(), "row %d", i)
	}
}

func TestAnObservedEventKeepsTheOutcomeItsContextGaveIt(t *testing.T) {
	rec := &recorder{}
	lost := errors.New("connection closed") // a client's own words for a caller gone
	lim, err := sluice.NewGCRA(sluice.PerSecond(1), 1, sluice.WithStore(failingStore{lost}), sluice.WithObserver(rec.Observe))
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err = lim.Allow(ctx, "a", 1)
	require.ErrorIs(t, err, lost)
	require.Len(t, rec.events, 1)
	e := rec.events[0]
	require.Equal(t, "canceled", e.Outcome(), "its caller had gone")
	byHand := sluice.Event{Decision: e.Decision, Err: e.Err}
	require.Equal(t, "store_error", byHand.Outcome(), "with no context to tell")
}

func TestDecisionsAllocateNothingWithOrWithoutAnObserver(t *testing.T) {
	var n int
	counting := func(_ context.Context, e sluice.Event) {
		if e.Outcome() == "allowed" {
			n++
		}
	}
	for name, opts := range map[string][]sluice.Option{
		"none":                  nil,
		"observer":              {sluice.WithObserver(counting), sluice.WithName("api")},
		"timeout on a MemStore": {sluice.WithTimeout(time.Second)},
	} {
		t.Run(name, func(t *testing.T) {
			lim, err := sluice.NewGCRA(sluice.PerSecond(1e6), 1e9, opts...)
			require.NoError(t, err)
			ctx := context.Background()
			_, err = lim.Allow(ctx, "a", 1) // the key exists before counting
			require.NoError(t, err)
			allocs := testing.AllocsPerRun(1000, func() {
				if _, err := lim.Allow(ctx, "a", 1); err != nil {
					t.Fatal(err)
				}
			})
			require.Zero(t, allocs)
		})
	}
	require.Positive(t, n)
}

func TestObserverClassifiesInvalidInputAsInvalidEvenOnACanceledContext(t *testing.T) {
	rec := &recorder{}
	lim, err := sluice.NewGCRA(sluice.PerSecond(1), 1, sluice.WithObserver(rec.Observe))
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err = lim.Allow(ctx, "a", math.NaN())
	require.ErrorIs(t, err, sluice.ErrInvalidCost)
	_, err = lim.Allow(ctx, "a", 2)
	require.ErrorIs(t, err, sluice.ErrCostExceedsLimit)
	require.Len(t, rec.events, 2)
	for _, e := range rec.events {
		require.Equal(t, "invalid", e.Outcome(), "the request was wrong, whatever its context: %v", e.Err)
	}
}

// keyRefusingStore refuses every key, as pgstore refuses a key that is not
// valid UTF-8.
type keyRefusingStore struct{}

func (keyRefusingStore) Apply(_ context.Context, key string, p *engine.Params, _ engine.Op) (engine.Decision, error) {
	return engine.Decision{Limit: p.Limit}, fmt.Errorf("%w: %q", sluice.ErrInvalidKey, key)
}

func (keyRefusingStore) Reset(context.Context, string) error { return sluice.ErrInvalidKey }

func TestObserverClassifiesAKeyTheStoreCannotHoldAsInvalid(t *testing.T) {
	rec := &recorder{}
	lim, err := sluice.NewGCRA(sluice.PerSecond(1), 1, sluice.WithStore(keyRefusingStore{}), sluice.WithObserver(rec.Observe))
	require.NoError(t, err)
	_, err = lim.Allow(context.Background(), "\xff", 1)
	require.ErrorIs(t, err, sluice.ErrInvalidKey)
	require.Len(t, rec.events, 1)
	require.Equal(t, "invalid", rec.events[0].Outcome(), "bad input, not a failing store")
}
