package sluice_test

import (
	"context"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sluice-go/sluice"

	"github.com/sluice-go/sluice/engine"
)

// calls counts the decisions reaching a store.
type calls struct {
	engine.Store
	n atomic.Int64
}

func (c *calls) Apply(ctx context.Context, key string, p *engine.Params, op engine.Op) (engine.Decision, error) {
	c.n.Add(1)
	return c.Store.Apply(ctx, key, p, op)
}

func countedGCRA(t *testing.T, rate sluice.Rate, burst float64) (*sluice.Limiter, *calls) {
	t.Helper()
	st := &calls{Store: sluice.NewMemStore(sluice.MemStoreConfig{})}
	lim, err := sluice.NewGCRA(rate, burst, sluice.WithStore(st))
	require.NoError(t, err)
	return lim, st
}

func TestWaitersAreServedInArrivalOrderOneStoreCallEach(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		lim, st := countedGCRA(t, sluice.PerSecond(10), 1)
		begin := time.Now()
		type woke struct {
			waiter int
			after  time.Duration
		}
		woken := make(chan woke, 16)
		for i := range 16 {
			go func() {
				require.NoError(t, lim.Wait(context.Background(), "api", 1))
				woken <- woke{i, time.Since(begin)}
			}()
			synctest.Wait() // waiter i has booked before i+1 arrives
		}
		for i := range 16 {
			require.Equal(t, woke{i, time.Duration(i) * 100 * ms}, <-woken)
		}
		require.Equal(t, int64(16), st.n.Load(), "one store call per Wait")
	})
}

func TestWaitGivesItsTurnBackWhenItsContextEnds(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		lim, st := countedGCRA(t, sluice.PerSecond(1), 1)
		begin := time.Now()
		require.NoError(t, lim.Wait(context.Background(), "api", 1))
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error)
		go func() { done <- lim.Wait(ctx, "api", 1) }()
		synctest.Wait() // booked for +1s, asleep
		time.Sleep(500 * ms)
		cancel()
		require.ErrorIs(t, <-done, context.Canceled)
		require.Equal(t, int64(3), st.n.Load(), "two bookings and the cancel")
		require.NoError(t, lim.Wait(context.Background(), "api", 1))
		require.Equal(t, time.Second+1, time.Since(begin), "the next waiter took the turn given back, a nanosecond late")
	})
}

func TestReserveBooksOnlyWithinItsMaxDelay(t *testing.T) {
	ctx := context.Background()
	mock := newMock()
	lim, err := sluice.NewGCRA(sluice.PerSecond(1), 1, sluice.WithClock(mock))
	require.NoError(t, err)
	now, err := lim.Reserve(ctx, "k", 1, 0)
	require.NoError(t, err)
	require.True(t, now.Allowed)
	require.Zero(t, now.Delay)
	require.NoError(t, now.Wait(ctx), "acts at once")

	late, err := lim.Reserve(ctx, "k", 1, 400*ms)
	require.NoError(t, err)
	require.False(t, late.Allowed, "the turn is a second away")
	require.Equal(t, 600*ms, late.RetryAfter, "when a reservation with the same max delay is booked")
	require.ErrorIs(t, late.Wait(ctx), sluice.ErrNotReserved)
	require.NoError(t, late.Cancel(ctx), "nothing to give back")

	mock.Add(600 * ms)
	booked, err := lim.Reserve(ctx, "k", 1, 400*ms)
	require.NoError(t, err)
	require.True(t, booked.Allowed)
	require.Equal(t, 400*ms, booked.Delay)
	require.Equal(t, mock.Now().Add(400*ms).UnixNano(), booked.At)
}

func TestReserveWithNoDelayDecidesAsAllow(t *testing.T) {
	ctx := context.Background()
	for name, build := range map[string]func(...sluice.Option) (*sluice.Limiter, error){
		"GCRA": func(o ...sluice.Option) (*sluice.Limiter, error) { return sluice.NewGCRA(sluice.PerSecond(4), 3, o...) },
		"LeakyBucket": func(o ...sluice.Option) (*sluice.Limiter, error) {
			return sluice.NewLeakyBucket(3, sluice.PerSecond(4), o...)
		},
		"TokenBucket": func(o ...sluice.Option) (*sluice.Limiter, error) {
			return sluice.NewTokenBucket(sluice.PerSecond(4), 3, o...)
		},
		"IntervalRefill": func(o ...sluice.Option) (*sluice.Limiter, error) {
			return sluice.NewTokenBucket(sluice.PerSecond(4), 3, append(o, sluice.WithIntervalRefill())...)
		},
	} {
		t.Run(name, func(t *testing.T) {
			mock := newMock()
			allow, err := build(sluice.WithClock(mock))
			require.NoError(t, err)
			reserve, err := build(sluice.WithClock(mock))
			require.NoError(t, err)
			for i, cost := range []float64{1, 2, 0.5, 1, 3, 0, 1.25, 1} {
				want, err := allow.Allow(ctx, "k", cost)
				require.NoError(t, err)
				r, err := reserve.Reserve(ctx, "k", cost, 0)
				require.NoError(t, err)
				require.Equal(t, want, r.Decision, "request %d", i)
				mock.Add(time.Duration(i) * 90 * ms)
			}
		})
	}
}

func TestCancelGivesBackOnceAndNeverAfterItsInstant(t *testing.T) {
	ctx := context.Background()
	mock := newMock()
	lim, err := sluice.NewLeakyBucket(1, sluice.PerSecond(1), sluice.WithClock(mock))
	require.NoError(t, err)
	_, err = lim.Allow(ctx, "k", 1)
	require.NoError(t, err)
	first, err := lim.Reserve(ctx, "k", 1, time.Minute)
	require.NoError(t, err)
	second, err := lim.Reserve(ctx, "k", 1, time.Minute)
	require.NoError(t, err)
	require.Equal(t, []time.Duration{time.Second, 2 * time.Second}, []time.Duration{first.Delay, second.Delay})

	require.NoError(t, first.Cancel(ctx))
	d, err := lim.CanAccept(ctx, "k", 0)
	require.NoError(t, err)
	require.Equal(t, 3*time.Second, d.ResetAfter, "a booking followed by another is not given back")

	require.NoError(t, second.Cancel(ctx))
	require.NoError(t, second.Cancel(ctx))
	d, err = lim.CanAccept(ctx, "k", 0)
	require.NoError(t, err)
	require.Equal(t, 2*time.Second+1, d.ResetAfter, "the latest booking is given back, once, a nanosecond late")

	third, err := lim.Reserve(ctx, "k", 1, time.Minute)
	require.NoError(t, err)
	require.Equal(t, 2*time.Second+1, third.Delay, "the freed turn is booked again, a nanosecond late")
	mock.Add(third.Delay)
	require.NoError(t, third.Cancel(ctx), "its instant has come: nothing to give back")
	d, err = lim.CanAccept(ctx, "k", 0)
	require.NoError(t, err)
	require.Equal(t, time.Second, d.ResetAfter)
}

func TestWindowsRefuseReservationsAndWaitAsksAgain(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		lim, err := sluice.NewFixedWindow(1, time.Second)
		require.NoError(t, err)
		ctx := context.Background()
		_, err = lim.Reserve(ctx, "k", 1, time.Second)
		require.ErrorIs(t, err, sluice.ErrUnsupported)
		begin := time.Now()
		require.NoError(t, lim.Wait(ctx, "k", 1))
		require.NoError(t, lim.Wait(ctx, "k", 1))
		require.Equal(t, time.Second-time.Duration(begin.UnixNano()%int64(time.Second)), time.Since(begin),
			"the second waits for the next window")
	})
}

func TestAllowAtMostGrantsWhatFits(t *testing.T) {
	ctx := context.Background()
	mock := newMock()
	lim, err := sluice.NewTokenBucket(sluice.PerSecond(10), 10, sluice.WithClock(mock))
	require.NoError(t, err)
	for _, tc := range []struct {
		name     string
		advance  time.Duration
		cost     float64
		granted  float64
		retry    time.Duration
		errorsIs error
	}{
		{name: "more than the burst takes the burst", cost: 25, granted: 10},
		{name: "an empty bucket grants nothing and says when one unit fits", cost: 5, retry: 100 * ms},
		{name: "whole units of what refilled", advance: 350 * ms, cost: 5, granted: 3},
		{name: "a whole cost that fits, fractional or not", cost: 0.5, granted: 0.5},
		{name: "less than one unit asked, none left: says when it fits", cost: 0.25, retry: 25 * ms},
		{name: "a negative cost is an error", cost: -1, errorsIs: sluice.ErrInvalidCost},
	} {
		mock.Add(tc.advance)
		d, err := lim.AllowAtMost(ctx, "k", tc.cost)
		if tc.errorsIs != nil {
			require.ErrorIs(t, err, tc.errorsIs, tc.name)
			continue
		}
		require.NoError(t, err, tc.name)
		require.Equal(t, tc.granted, d.Granted, tc.name)
		require.Equal(t, tc.granted > 0, d.Allowed, tc.name)
		require.Equal(t, tc.retry, d.RetryAfter, tc.name)
	}
	small, err := sluice.NewGCRA(sluice.PerSecond(1), 0.5)
	require.NoError(t, err)
	_, err = small.AllowAtMost(ctx, "k", 2)
	require.ErrorIs(t, err, sluice.ErrCostExceedsLimit, "a limit below one unit never grants a whole unit")
}

func TestAReservationMadeElsewhereWaitsAndCancelsWithoutPanicking(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := &sluice.Reservation{Decision: sluice.Decision{Allowed: true, Delay: time.Second}}
		require.NoError(t, r.Cancel(context.Background()), "nothing to give back")
		begin := time.Now()
		require.NoError(t, r.Wait(context.Background()))
		require.Equal(t, time.Second, time.Since(begin))
	})
}

func TestTurnBookedAndGivenBackInMemoryAllocatesNothing(t *testing.T) {
	ctx := context.Background()
	gcra := func(t *testing.T, opts ...sluice.Option) *sluice.Limiter {
		lim, err := sluice.NewGCRA(sluice.PerSecond(10), 1, append(opts, sluice.WithClock(newMock()))...)
		require.NoError(t, err)
		t.Cleanup(func() { lim.Close() })
		return lim
	}
	onLimiter := func(lim *sluice.Limiter) func() (bool, error) {
		return func() (bool, error) {
			r, err := lim.Reserve(ctx, "k", 1, time.Second)
			if err != nil || !r.Allowed {
				return r.Allowed, err
			}
			return true, r.Cancel(ctx)
		}
	}
	for name, turn := range map[string]func(t *testing.T) func() (bool, error){
		"fixed": func(t *testing.T) func() (bool, error) { return onLimiter(gcra(t)) },
		"per key": func(t *testing.T) func() (bool, error) {
			limit := gcra(t)
			lim, err := sluice.NewPerKey(func(context.Context, string) (*sluice.Limiter, error) { return limit, nil },
				sluice.WithClock(newMock()))
			require.NoError(t, err)
			t.Cleanup(func() { lim.Close() })
			return onLimiter(lim)
		},
		"group": func(t *testing.T) func() (bool, error) {
			st := sluice.NewMemStore(sluice.MemStoreConfig{})
			t.Cleanup(func() { st.Close() })
			bucket, err := sluice.NewTokenBucket(sluice.PerSecond(2), 1, sluice.WithStore(st), sluice.WithClock(newMock()))
			require.NoError(t, err)
			group, err := sluice.NewGroup(gcra(t, sluice.WithStore(st)), bucket)
			require.NoError(t, err)
			keys := []string{"f", "s"}
			return func() (bool, error) {
				r, err := group.Reserve(ctx, keys, 1, time.Second)
				if err != nil || !r.Allowed {
					return r.Allowed, err
				}
				return true, r.Cancel(ctx)
			}
		},
	} {
		t.Run(name, func(t *testing.T) {
			book := turn(t)
			allocs := testing.AllocsPerRun(1000, func() {
				if allowed, err := book(); err != nil || !allowed {
					t.Fatal(err, allowed)
				}
			})
			require.Zero(t, allocs)
		})
	}
}
