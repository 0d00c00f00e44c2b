package sluice_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sluice-go/sluice"
)

func TestPenaltyBlocksAKeyThatOverflowsUntilTheBlockEnds(t *testing.T) {
	ctx := context.Background()
	mock := newMock()
	lim, err := sluice.NewGCRA(sluice.PerSecond(1), 2, sluice.WithClock(mock), sluice.WithPenalty(30*time.Second))
	require.NoError(t, err)
	for range 2 {
		d, err := lim.Allow(ctx, "k", 1)
		require.NoError(t, err)
		require.True(t, d.Allowed)
	}
	d, err := lim.CanAccept(ctx, "k", 1)
	require.NoError(t, err)
	require.Equal(t, time.Second, d.RetryAfter, "a check starts no block")
	require.False(t, d.Blocked)

	d, err = lim.Allow(ctx, "k", 1)
	require.NoError(t, err)
	require.False(t, d.Allowed)
	require.True(t, d.Blocked, "the overflow starts the block")
	require.Equal(t, 30*time.Second, d.RetryAfter)

	mock.Add(10 * time.Second) // the bucket has long drained; the block has not ended
	d, err = lim.Allow(ctx, "k", 1)
	require.NoError(t, err)
	require.False(t, d.Allowed)
	require.True(t, d.Blocked)
	require.Equal(t, 20*time.Second, d.RetryAfter, "requests in the block do not extend it")
	r, err := lim.Reserve(ctx, "k", 1, time.Minute)
	require.NoError(t, err)
	require.True(t, r.Allowed)
	require.Equal(t, 20*time.Second, r.Delay, "a reservation is booked at the block's end")

	mock.Add(20 * time.Second)
	d, err = lim.Allow(ctx, "k", 1)
	require.NoError(t, err)
	require.True(t, d.Allowed, "after the block the algorithm decides: the burst's other unit")
	require.False(t, d.Blocked)
	d, err = lim.Allow(ctx, "k", 1)
	require.NoError(t, err)
	require.False(t, d.Allowed)
	require.True(t, d.Blocked, "a new overflow starts a new block")
	require.Equal(t, 30*time.Second, d.RetryAfter)
}

func TestResetLiftsAPenalty(t *testing.T) {
	ctx := context.Background()
	lim, err := sluice.NewFixedWindow(1, time.Minute, sluice.WithPenalty(time.Hour))
	require.NoError(t, err)
	lim.Allow(ctx, "k", 1)
	d, _ := lim.Allow(ctx, "k", 1)
	require.True(t, d.Blocked)
	require.NoError(t, lim.Reset(ctx, "k"))
	d, err = lim.Allow(ctx, "k", 1)
	require.NoError(t, err)
	require.True(t, d.Allowed)
}

func TestABlockedKeyIsNotForgottenBeforeItsBlockEnds(t *testing.T) {
	ctx := context.Background()
	mock := newMock()
	st := sluice.NewMemStore(sluice.MemStoreConfig{})
	lim, err := sluice.NewTokenBucket(sluice.PerSecond(10), 10, sluice.WithClock(mock), sluice.WithStore(st), sluice.WithPenalty(time.Minute))
	require.NoError(t, err)
	_, err = lim.Allow(ctx, "k", 10)
	require.NoError(t, err)
	d, err := lim.Allow(ctx, "k", 1)
	require.NoError(t, err)
	require.Equal(t, time.Minute, d.ResetAfter, "the key lives as long as its block")
	mock.Add(59 * time.Second)
	require.Zero(t, st.Sweep(), "the bucket is full again, but the block holds the key")
	d, err = lim.Allow(ctx, "k", 1)
	require.NoError(t, err)
	require.True(t, d.Blocked)
	mock.Add(time.Second)
	d, err = lim.CanAccept(ctx, "k", 0)
	require.NoError(t, err)
	require.False(t, d.Blocked)
	require.Equal(t, 10.0, d.Remaining, "at the block's end the key is as fresh as its bucket")
}

func TestCountDeniedKeepsAFloodingClientLimited(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name     string
		opts     []sluice.Option
		admitted int
	}{
		{"denials not counted: one through each second after the burst", nil, 2 + 9},
		{"denials counted: nothing through while it floods", []sluice.Option{sluice.WithCountDenied()}, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mock := newMock()
			lim, err := sluice.NewGCRA(sluice.PerSecond(1), 2, append(tc.opts, sluice.WithClock(mock))...)
			require.NoError(t, err)
			admitted := 0
			for range 100 { // ten seconds at ten a second: ten times the rate
				d, err := lim.Allow(ctx, "k", 1)
				require.NoError(t, err)
				if d.Allowed {
					admitted++
				}
				mock.Add(100 * time.Millisecond)
			}
			require.Equal(t, tc.admitted, admitted)
		})
	}
}

// TestPenaltyBlocksACostThatNeverFits sends a bucket of capacity 2 a
// request of 20, as a client that sends impossible requests would: the
// cost is still an error, and the key is blocked, so the request of 1
// that follows at the same instant is denied until the block ends.
func TestPenaltyBlocksACostThatNeverFits(t *testing.T) {
	ctx := context.Background()
	tests := []struct {
		name    string
		penalty time.Duration
		blocked bool
	}{
		{"under a penalty: blocked", 5 * time.Second, true},
		{"without a penalty: nothing recorded", 0, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			mock := newMock()
			opts := []sluice.Option{sluice.WithClock(mock)}
			if tt.penalty > 0 {
				opts = append(opts, sluice.WithPenalty(tt.penalty))
			}
			lim, err := sluice.NewLeakyBucket(2, sluice.PerSecond(1), opts...)
			require.NoError(t, err)
			d, err := lim.Allow(ctx, "k", 20)
			require.ErrorIs(t, err, sluice.ErrCostExceedsLimit)
			require.False(t, d.Allowed)
			require.Equal(t, tt.blocked, d.Blocked)
			d, err = lim.Allow(ctx, "k", 1)
			require.NoError(t, err)
			require.Equal(t, !tt.blocked, d.Allowed)
			if tt.blocked {
				require.Equal(t, tt.penalty, d.RetryAfter, "until the block ends")
				mock.Add(tt.penalty)
				d, err = lim.Allow(ctx, "k", 1)
				require.NoError(t, err)
				require.True(t, d.Allowed, "admitted once the block ends")
			}
		})
	}
}
