package sluice_test

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sluice-go/sluice"

	"github.com/sluice-go/sluice/engine"
)

// stalledStore is a store that never answers: each call waits until its
// context ends, then fails as a client that honours deadlines does, with
// its own network error rather than the context's.
type stalledStore struct{}

var errIOTimeout = errors.New("read tcp 127.0.0.1:6379: i/o timeout")

func (stalledStore) Apply(ctx context.Context, _ string, p *engine.Params, _ engine.Op) (engine.Decision, error) {
	<-ctx.Done()
	return engine.Decision{Limit: p.Limit}, errIOTimeout
}

func (stalledStore) Reset(ctx context.Context, _ string) error {
	<-ctx.Done()
	return errIOTimeout
}

func TestTimeoutBoundsEachStoreCall(t *testing.T) {
	for _, tc := range []struct {
		name     string
		timeout  time.Duration // of the limiter; 0 for none
		deadline time.Duration // of the caller's context; 0 for none
		want     time.Duration
	}{
		{"limiter timeout", 50 * ms, 0, 50 * ms},
		{"earlier context deadline", 50 * ms, 20 * ms, 20 * ms},
		{"later context deadline", 50 * ms, time.Second, 50 * ms},
		{"context deadline only", 0, 30 * ms, 30 * ms},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				var opts []sluice.Option
				if tc.timeout > 0 {
					opts = append(opts, sluice.WithTimeout(tc.timeout))
				}
				var outcomes []string
				opts = append(opts, sluice.WithStore(stalledStore{}), sluice.WithObserver(func(_ context.Context, e sluice.Event) {
					outcomes = append(outcomes, e.Outcome())
				}))
				lim, err := sluice.NewGCRA(sluice.PerSecond(1), 1, opts...)
				require.NoError(t, err)
				ctx := context.Background()
				if tc.deadline > 0 {
					var cancel context.CancelFunc
					ctx, cancel = context.WithTimeout(ctx, tc.deadline)
					defer cancel()
				}
				begin := time.Now()
				_, err = lim.Allow(ctx, "k", 1)
				require.Equal(t, tc.want, time.Since(begin))
				require.ErrorIs(t, err, sluice.ErrTimeout)
				require.ErrorIs(t, err, context.DeadlineExceeded)
				require.ErrorIs(t, err, errIOTimeout, "the store's own error is kept")
				require.Equal(t, []string{"timeout"}, outcomes)
			})
		})
	}
}

func TestTimeoutBoundsReset(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		lim, err := sluice.NewGCRA(sluice.PerSecond(1), 1, sluice.WithStore(stalledStore{}), sluice.WithTimeout(40*ms))
		require.NoError(t, err)
		begin := time.Now()
		err = lim.Reset(context.Background(), "k")
		require.Equal(t, 40*ms, time.Since(begin))
		require.ErrorIs(t, err, sluice.ErrTimeout)
	})
}

func TestTimeoutLeavesOtherErrorsAlone(t *testing.T) {
	refused := errors.New("connection refused")
	lim, err := sluice.NewGCRA(sluice.PerSecond(1), 1, sluice.WithStore(failingStore{refused}), sluice.WithTimeout(time.Hour))
	require.NoError(t, err)
	_, err = lim.Allow(context.Background(), "k", 1)
	require.ErrorIs(t, err, refused)
	require.NotErrorIs(t, err, sluice.ErrTimeout, "the deadline did not pass")
}

// failingStore fails every call at once with err.
type failingStore struct{ err error }

func (s failingStore) Apply(_ context.Context, _ string, p *engine.Params, _ engine.Op) (engine.Decision, error) {
	return engine.Decision{Limit: p.Limit}, s.err
}
func (s failingStore) Reset(context.Context, string) error { return s.err }

func TestWaitGivesUpOnAStalledStoreAtTheTimeout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		lim, err := sluice.NewGCRA(sluice.PerSecond(1), 1, sluice.WithStore(stalledStore{}), sluice.WithTimeout(25*ms))
		require.NoError(t, err)
		begin := time.Now()
		err = lim.Wait(context.Background(), "k", 1)
		require.ErrorIs(t, err, sluice.ErrTimeout)
		require.Equal(t, 25*ms, time.Since(begin))
	})
}

func TestCanceledContextIsNotATimeout(t *testing.T) {
	lim, err := sluice.NewGCRA(sluice.PerSecond(1), 1, sluice.WithStore(cancelStore{}), sluice.WithTimeout(time.Hour))
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), time.Hour)
	cancel()
	_, err = lim.Allow(ctx, "k", 1)
	require.ErrorIs(t, err, context.Canceled)
	require.NotErrorIs(t, err, sluice.ErrTimeout)
}

func TestMemStoreErrorsAreNeverTimeouts(t *testing.T) {
	mem := sluice.NewMemStore(sluice.MemStoreConfig{})
	require.NoError(t, mem.Close())
	lim, err := sluice.NewGCRA(sluice.PerSecond(1), 1, sluice.WithStore(mem), sluice.WithTimeout(time.Second))
	require.NoError(t, err)
	ctx, cancel := context.WithDeadline(context.Background(), time.Unix(0, 0)) // long past
	defer cancel()
	_, err = lim.Allow(ctx, "k", 1)
	require.ErrorIs(t, err, sluice.ErrStoreClosed)
	require.NotErrorIs(t, err, sluice.ErrTimeout, "the in-memory store answered at once")
	err = lim.Reset(ctx, "k")
	require.ErrorIs(t, err, sluice.ErrStoreClosed)
	require.NotErrorIs(t, err, sluice.ErrTimeout, "the in-memory store answered at once")
}
