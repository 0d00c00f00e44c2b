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
