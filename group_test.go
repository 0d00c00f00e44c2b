package sluice_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sluice-go/sluice"
)

// Two limits stacked by hand, as a new user would stack two middlewares: a
// daily window of 1000 outside, a token bucket of 5 inside. Eight quick
// requests: five admitted, and the daily allowance falls by eight; as one
// group it falls by five.
func TestAGroupChargesOnlyWhatItAdmits(t *testing.T) {
	ctx := context.Background()
	st := sluice.NewMemStore(sluice.MemStoreConfig{})
	daily, err := sluice.NewFixedWindow(1000, 24*time.Hour, sluice.WithStore(st))
	require.NoError(t, err)
	burst, err := sluice.NewTokenBucket(sluice.PerSecond(1), 5, sluice.WithStore(st))
	require.NoError(t, err)

	stacked := 0
	for range 8 {
		d, err := daily.Allow(ctx, "stacked:day", 1)
		require.NoError(t, err)
		if d.Allowed {
			if d, _ := burst.Allow(ctx, "stacked:burst", 1); d.Allowed {
				stacked++
			}
		}
	}
	left, err := daily.CanAccept(ctx, "stacked:day", 0)
	require.NoError(t, err)
	require.Equal(t, 5, stacked)
	require.Equal(t, 992.0, left.Remaining, "stacked: the daily limit paid for the three denied")

	group, err := sluice.NewGroup(daily, burst)
	require.NoError(t, err)
	admitted := 0
	for range 8 {
		d, err := group.Allow(ctx, []string{"group:day", "group:burst"}, 1)
		require.NoError(t, err)
		if d.Allowed {
			admitted++
		}
	}
	left, err = daily.CanAccept(ctx, "group:day", 0)
	require.NoError(t, err)
	require.Equal(t, 5, admitted)
	require.Equal(t, 995.0, left.Remaining, "grouped: only what was admitted")
}

func TestAGroupDecisionIsTheMostRestrictive(t *testing.T) {
	ctx := context.Background()
	mock := newMock()
	st := sluice.NewMemStore(sluice.MemStoreConfig{})
	perSecond, err := sluice.NewGCRA(sluice.PerSecond(2), 2, sluice.WithStore(st), sluice.WithClock(mock))
	require.NoError(t, err)
	perMinute, err := sluice.NewFixedWindow(3, time.Minute, sluice.WithStore(st), sluice.WithClock(mock))
	require.NoError(t, err)
	group, err := sluice.NewGroup(perSecond, perMinute)
	require.NoError(t, err)
	keys := []string{"s:alice", "m:alice"}

	d, err := group.Allow(ctx, keys, 1)
	require.NoError(t, err)
	require.True(t, d.Allowed)
	require.Len(t, d.Limits(), 2)
	require.Equal(t, 1.0, d.Limits()[0].Remaining)
	require.Equal(t, 2.0, d.Limits()[1].Remaining)
	require.Equal(t, 1.0, d.Remaining, "the limit with the least of it left")

	d, err = group.Allow(ctx, keys, 2)
	require.NoError(t, err)
	require.False(t, d.Allowed, "the per-second limit has one left")
	require.Equal(t, 500*time.Millisecond, d.RetryAfter)
	require.True(t, d.Limits()[1].Allowed, "the per-minute limit alone would admit")

	mock.Add(time.Second)
	d, err = group.Allow(ctx, keys, 2)
	require.NoError(t, err)
	require.True(t, d.Allowed)
	d, err = group.Allow(ctx, keys, 1)
	require.NoError(t, err)
	require.False(t, d.Allowed)
	mock.Add(time.Second)
	d, err = group.Allow(ctx, keys, 1)
	require.NoError(t, err)
	require.False(t, d.Allowed, "the minute's three are spent")
	require.Equal(t, 58*time.Second, d.RetryAfter, "when every limit would admit")
}

func TestAGroupWaitBooksOneInstantForEveryLimit(t *testing.T) {
	ctx := context.Background()
	mock := newMock()
	st := sluice.NewMemStore(sluice.MemStoreConfig{})
	fast, err := sluice.NewGCRA(sluice.PerSecond(10), 1, sluice.WithStore(st), sluice.WithClock(mock))
	require.NoError(t, err)
	slow, err := sluice.NewTokenBucket(sluice.PerSecond(2), 1, sluice.WithStore(st), sluice.WithClock(mock))
	require.NoError(t, err)
	group, err := sluice.NewGroup(fast, slow)
	require.NoError(t, err)
	keys := []string{"f", "s"}
	r, err := group.Reserve(ctx, keys, 1, time.Second)
	require.NoError(t, err)
	require.True(t, r.Allowed)
	require.Zero(t, r.Delay)
	r, err = group.Reserve(ctx, keys, 1, time.Second)
	require.NoError(t, err)
	require.True(t, r.Allowed)
	require.Equal(t, 500*time.Millisecond, r.Delay, "the slower limit sets the instant")
	require.NoError(t, r.Cancel(ctx))
	r, err = group.Reserve(ctx, keys, 1, time.Second)
	require.NoError(t, err)
	// The bucket gives its turn back; the GCRA, booked later than it
	// needed so as to act with the bucket, cannot tell that booking from a
	// later one and keeps it: the next group books after it.
	require.Equal(t, 600*time.Millisecond, r.Delay)
}

func TestGroupsNeedOneStoreThatDecidesThem(t *testing.T) {
	a, err := sluice.NewGCRA(sluice.PerSecond(1), 1)
	require.NoError(t, err)
	b, err := sluice.NewGCRA(sluice.PerSecond(1), 1)
	require.NoError(t, err)
	_, err = sluice.NewGroup(a, b)
	require.ErrorIs(t, err, sluice.ErrInvalidConfig, "each has its own default store")
	_, err = sluice.NewGroup()
	require.ErrorIs(t, err, sluice.ErrInvalidConfig)
	var missing *sluice.Limiter // a constructor's nil, its error unchecked
	_, err = sluice.NewGroup(a, missing)
	require.ErrorIs(t, err, sluice.ErrInvalidConfig, "a nil limiter is an error, not a panic")
	g, err := sluice.NewGroup(a)
	require.NoError(t, err)
	_, err = g.Allow(context.Background(), []string{"x", "y"}, 1)
	require.ErrorIs(t, err, sluice.ErrInvalidKey, "one key per limit")
	st := sluice.NewMemStore(sluice.MemStoreConfig{})
	c, _ := sluice.NewGCRA(sluice.PerSecond(1), 1, sluice.WithStore(st))
	d, _ := sluice.NewFixedWindow(1, time.Second, sluice.WithStore(st))
	g, err = sluice.NewGroup(c, d)
	require.NoError(t, err)
	_, err = g.Reserve(context.Background(), []string{"x", "y"}, 1, time.Second)
	require.ErrorIs(t, err, sluice.ErrUnsupported, "a window cannot book ahead")
	_, err = g.Allow(context.Background(), []string{"x", "x"}, 1)
	require.ErrorIs(t, err, sluice.ErrInvalidKey, "a key decided twice in one group")
}
