package sluice_test

import (
	"context"
	"math"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/benbjohnson/clock"
	"github.com/stretchr/testify/require"

	"github.com/sluice-go/sluice"
)

// start is where the tests' fake clocks begin: a realistic time, a whole
// number of hours since the epoch, so that aligned windows start on it.
var start = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func newMock() *clock.Mock {
	m := clock.NewMock()
	m.Set(start)
	return m
}

// Verbs a step can take.
const (
	allow = "allow"
	check = "check"
	fill  = "fill"
	reset = "reset"
)

// step is one request at a time since start and the decision it must get.
// Amounts are checked to within 1e-12, durations exactly.
type step struct {
	at        time.Duration
	verb      string
	cost      float64
	allowed   bool
	remaining float64
	retry     time.Duration
	reset     time.Duration
	err       error
}

// runSteps replays steps against lim and reports the first that differs.
func runSteps(t *testing.T, lim *sluice.Limiter, mock *clock.Mock, steps []step) {
	t.Helper()
	ctx := context.Background()
	for i, s := range steps {
		mock.Set(start.Add(s.at))
		var d sluice.Decision
		var err error
		switch s.verb {
		case allow:
			d, err = lim.Allow(ctx, "k", s.cost)
		case check:
			d, err = lim.CanAccept(ctx, "k", s.cost)
		case fill:
			d, err = lim.Fillup(ctx, "k", s.cost)
		case reset:
			require.NoError(t, lim.Reset(ctx, "k"), "step %d", i)
			continue
		}
		if s.err != nil {
			require.ErrorIs(t, err, s.err, "step %d (%s %v at %v)", i, s.verb, s.cost, s.at)
			continue
		}
		require.NoError(t, err, "step %d", i)
		require.Equal(t, s.allowed, d.Allowed, "step %d (%s %v at %v): allowed; decision %+v", i, s.verb, s.cost, s.at, d)
		require.InDelta(t, s.remaining, d.Remaining, 1e-12, "step %d (%s %v at %v): remaining; decision %+v", i, s.verb, s.cost, s.at, d)
		require.Equal(t, s.retry, d.RetryAfter, "step %d (%s %v at %v): retry after; decision %+v", i, s.verb, s.cost, s.at, d)
		require.Equal(t, s.reset, d.ResetAfter, "step %d (%s %v at %v): reset after; decision %+v", i, s.verb, s.cost, s.at, d)
		require.InDelta(t, d.Limit, d.Used+d.Remaining, 1e-12, "step %d: Used + Remaining = Limit", i)
	}
}

const ms = time.Millisecond

func TestLeakyBucketWorkedExampleReachesCapacityAndDrains(t *testing.T) {
	// Capacity 3, leaking 1.5 per second: fill-ups of 1 at 1s, 2 at 1.7s,
	// 1 at 2s and 2 at 2.3s; the last one reaches capacity. The level is
	// back at zero at 4.3s (3 / 1.5 = 2s later), before 6s, and a fill-up
	// of 3 at 6s reaches capacity again.
	mock := newMock()
	b, err := sluice.NewLeakyBucket(3, sluice.PerSecond(1.5), sluice.WithClock(mock))
	require.NoError(t, err)
	ctx := context.Background()
	for _, f := range []struct {
		at    time.Duration
		cost  float64
		level float64
		full  bool
		reset time.Duration
	}{
		{1000 * ms, 1, 1, false, 666666667},
		{1700 * ms, 2, 2, false, 1333333334}, // 1 leaked away by 1.667s
		{2000 * ms, 1, 2.55, false, 1700 * ms},
		{2300 * ms, 2, 3, true, 2000 * ms}, // 2.1 + 2 would pass capacity
		{6000 * ms, 3, 3, true, 2000 * ms},
	} {
		mock.Set(start.Add(f.at))
		d, err := b.Fillup(ctx, "k", f.cost)
		require.NoError(t, err)
		require.InDelta(t, f.level, d.Used, 1e-12, "level at %v", f.at)
		require.Equal(t, f.full, d.Remaining <= 0, "full at %v", f.at)
		require.Equal(t, f.reset, d.ResetAfter, "time to empty at %v", f.at)
		if f.at == 2300*ms {
			mock.Set(start.Add(f.at + d.ResetAfter))
			d, err := b.CanAccept(ctx, "k", 0)
			require.NoError(t, err)
			require.Zero(t, d.Used, "empty at 4.3s")
		}
	}
}

func TestLimitersDecideExactly(t *testing.T) {
	for _, tc := range []struct {
		name  string
		build func(c sluice.Clock) (*sluice.Limiter, error)
		steps []step
	}{
		{
			name: "GCRA/BurstFromRestThenExactRate",
			build: func(c sluice.Clock) (*sluice.Limiter, error) {
				return sluice.NewGCRA(sluice.PerSecond(10), 5, sluice.WithClock(c))
			},
			steps: []step{
				{at: 0, verb: allow, cost: 1, allowed: true, remaining: 4, reset: 100 * ms},
				{at: 0, verb: allow, cost: 1, allowed: true, remaining: 3, reset: 200 * ms},
				{at: 0, verb: allow, cost: 1, allowed: true, remaining: 2, reset: 300 * ms},
				{at: 0, verb: allow, cost: 1, allowed: true, remaining: 1, reset: 400 * ms},
				{at: 0, verb: allow, cost: 1, allowed: true, remaining: 0, reset: 500 * ms},
				{at: 0, verb: allow, cost: 1, allowed: false, retry: 100 * ms, reset: 500 * ms},
				{at: 100*ms - 1, verb: allow, cost: 1, allowed: false, retry: 1, remaining: 0.99999999, reset: 400*ms + 1},
				{at: 100 * ms, verb: allow, cost: 1, allowed: true, remaining: 0, reset: 500 * ms},
				{at: 200 * ms, verb: allow, cost: 1, allowed: true, remaining: 0, reset: 500 * ms},
				{at: 250 * ms, verb: allow, cost: 1, allowed: false, retry: 50 * ms, remaining: 0.5, reset: 450 * ms},
			},
		},
		{
			name: "GCRA/FractionalAndLargeCosts",
			build: func(c sluice.Clock) (*sluice.Limiter, error) {
				return sluice.NewGCRA(sluice.PerSecond(10), 5, sluice.WithClock(c))
			},
			steps: []step{
				{at: 0, verb: allow, cost: 2.5, allowed: true, remaining: 2.5, reset: 250 * ms},
				{at: 0, verb: allow, cost: 3, allowed: false, retry: 50 * ms, remaining: 2.5, reset: 250 * ms},
				{at: 0, verb: check, cost: 2.5, allowed: true, remaining: 0, reset: 500 * ms},
				{at: 0, verb: allow, cost: 0.25, allowed: true, remaining: 2.25, reset: 275 * ms},
				{at: 0, verb: allow, cost: 5.5, err: sluice.ErrCostExceedsLimit},
				{at: 0, verb: allow, cost: 0, allowed: true, remaining: 2.25, reset: 275 * ms},
			},
		},
		{
			name: "GCRA/ClockSteppingBackCountsAsNoTime",
			build: func(c sluice.Clock) (*sluice.Limiter, error) {
				return sluice.NewGCRA(sluice.PerSecond(10), 1, sluice.WithClock(c))
			},
			steps: []step{
				{at: 10 * time.Second, verb: allow, cost: 1, allowed: true, reset: 100 * ms},
				{at: 9 * time.Second, verb: allow, cost: 1, allowed: false, retry: 1100 * ms, reset: 1100 * ms},
				{at: 10*time.Second + 100*ms, verb: allow, cost: 1, allowed: true, reset: 100 * ms},
			},
		},
		{
			name: "GCRA/LongIdleIsFresh",
			build: func(c sluice.Clock) (*sluice.Limiter, error) {
				return sluice.NewGCRA(sluice.PerMinute(1), 2, sluice.WithClock(c))
			},
			steps: []step{
				{at: 0, verb: allow, cost: 2, allowed: true, reset: 2 * time.Minute},
				{at: 0, verb: allow, cost: 1, allowed: false, retry: time.Minute, reset: 2 * time.Minute},
				{at: 240 * time.Hour, verb: allow, cost: 1, allowed: true, remaining: 1, reset: time.Minute},
			},
		},
		{
			name: "LeakyBucket/AllowDeniesWithoutRecording",
			build: func(c sluice.Clock) (*sluice.Limiter, error) {
				return sluice.NewLeakyBucket(3, sluice.PerSecond(1.5), sluice.WithClock(c))
			},
			steps: []step{
				{at: 0, verb: allow, cost: 3, allowed: true, remaining: 0, reset: 2 * time.Second},
				// One unit leaks in 2/3 s.
				{at: 0, verb: allow, cost: 1, allowed: false, retry: 666666667, reset: 2 * time.Second},
				{at: 666666666, verb: check, cost: 1, allowed: false, retry: 1, remaining: 0.999999999, reset: 1333333334},
				// The level at the admission instant is 1.9999999995: the
				// excess leaked by the rounded-up nanosecond.
				{at: 666666667, verb: check, cost: 1, allowed: true, remaining: 0.0000000005, reset: 2 * time.Second},
				{at: 666666667, verb: allow, cost: 1, allowed: true, remaining: 0.0000000005, reset: 2 * time.Second},
				{at: 666666667, verb: fill, cost: 0.5, allowed: false, remaining: 0, reset: 2 * time.Second},
				{at: 4 * time.Second, verb: allow, cost: 0.75, allowed: true, remaining: 2.25, reset: 500 * ms},
				{at: 4 * time.Second, verb: fill, cost: 10, allowed: false, remaining: 0, reset: 2 * time.Second},
				{at: 4 * time.Second, verb: allow, cost: 3.5, err: sluice.ErrCostExceedsLimit},
				{at: 4 * time.Second, verb: reset},
				{at: 4 * time.Second, verb: check, cost: 3, allowed: true, remaining: 0, reset: 2 * time.Second},
			},
		},
		{
			name: "TokenBucket/StartsFullAndRefillsContinuously",
			build: func(c sluice.Clock) (*sluice.Limiter, error) {
				return sluice.NewTokenBucket(sluice.PerSecond(4), 10, sluice.WithClock(c))
			},
			steps: []step{
				{at: 0, verb: check, cost: 0, allowed: true, remaining: 10},
				{at: 0, verb: allow, cost: 10, allowed: true, remaining: 0, reset: 2500 * ms},
				{at: 0, verb: allow, cost: 1, allowed: false, retry: 250 * ms, reset: 2500 * ms},
				{at: 250*ms - 1, verb: allow, cost: 1, allowed: false, retry: 1, remaining: 0.999999996, reset: 2250*ms + 1},
				{at: 250 * ms, verb: allow, cost: 1, allowed: true, remaining: 0, reset: 2500 * ms},
				{at: 375 * ms, verb: allow, cost: 0.5, allowed: true, remaining: 0, reset: 2500 * ms},
				{at: 10 * time.Second, verb: allow, cost: 2.5, allowed: true, remaining: 7.5, reset: 625 * ms},
			},
		},
		{
			name: "TokenBucket/IntervalRefillKeepsPartialInterval",
			build: func(c sluice.Clock) (*sluice.Limiter, error) {
				return sluice.NewTokenBucket(sluice.PerSecond(4), 10, sluice.WithIntervalRefill(), sluice.WithClock(c))
			},
			steps: []step{
				{at: 0, verb: allow, cost: 10, allowed: true, remaining: 0, reset: 3 * time.Second},
				{at: 999 * ms, verb: allow, cost: 1, allowed: false, retry: 1 * ms, reset: 2001 * ms},
				{at: 1000 * ms, verb: allow, cost: 1, allowed: true, remaining: 3, reset: 2 * time.Second},
				{at: 1500 * ms, verb: allow, cost: 3, allowed: true, remaining: 0, reset: 2500 * ms},
				{at: 2000*ms - 1, verb: allow, cost: 1, allowed: false, retry: 1, reset: 2000*ms + 1},
				{at: 2000 * ms, verb: allow, cost: 4, allowed: true, remaining: 0, reset: 3 * time.Second},
				{at: 2500 * ms, verb: allow, cost: 8, allowed: false, retry: 1500 * ms, reset: 2500 * ms},
				{at: 4000 * ms, verb: allow, cost: 8, allowed: true, remaining: 0, reset: 3 * time.Second},
			},
		},
		{
			name: "FixedWindow/AlignedAllowsTwoLimitsAcrossBoundary",
			build: func(c sluice.Clock) (*sluice.Limiter, error) {
				return sluice.NewFixedWindow(5, time.Second, sluice.WithClock(c))
			},
			steps: []step{
				{at: 900 * ms, verb: allow, cost: 5, allowed: true, remaining: 0, reset: 100 * ms},
				{at: 999 * ms, verb: allow, cost: 1, allowed: false, retry: 1 * ms, reset: 1 * ms},
				{at: 1000 * ms, verb: allow, cost: 5, allowed: true, remaining: 0, reset: time.Second},
				{at: 1200 * ms, verb: allow, cost: 0.5, allowed: false, retry: 800 * ms, reset: 800 * ms},
				{at: 2000 * ms, verb: allow, cost: 2.5, allowed: true, remaining: 2.5, reset: time.Second},
				{at: 2000 * ms, verb: check, cost: 2.5, allowed: true, remaining: 0, reset: time.Second},
				{at: 2000 * ms, verb: check, cost: 2.6, allowed: false, retry: time.Second, remaining: 2.5, reset: time.Second},
			},
		},
		{
			name: "FixedWindow/AnchoredStartsAtFirstRequest",
			build: func(c sluice.Clock) (*sluice.Limiter, error) {
				return sluice.NewFixedWindow(5, time.Second, sluice.WithAnchoredWindows(), sluice.WithClock(c))
			},
			steps: []step{
				{at: 500 * ms, verb: allow, cost: 1, allowed: true, remaining: 4, reset: time.Second},
				{at: 1499 * ms, verb: allow, cost: 4, allowed: true, remaining: 0, reset: 1 * ms},
				{at: 1499 * ms, verb: allow, cost: 1, allowed: false, retry: 1 * ms, reset: 1 * ms},
				{at: 1500 * ms, verb: allow, cost: 5, allowed: true, remaining: 0, reset: time.Second},
				{at: 3700 * ms, verb: allow, cost: 1, allowed: true, remaining: 4, reset: time.Second},
			},
		},
		{
			name: "SlidingLog/NeverMoreThanLimitInAnyWindow",
			build: func(c sluice.Clock) (*sluice.Limiter, error) {
				return sluice.NewSlidingLog(5, time.Second, sluice.WithClock(c))
			},
			steps: []step{
				{at: 0, verb: allow, cost: 3, allowed: true, remaining: 2, reset: time.Second},
				{at: 600 * ms, verb: allow, cost: 2, allowed: true, remaining: 0, reset: time.Second},
				{at: 900 * ms, verb: allow, cost: 1, allowed: false, retry: 100 * ms, reset: 700 * ms},
				{at: 1000*ms - 1, verb: allow, cost: 3, allowed: false, retry: 1, reset: 600*ms + 1},
				{at: 1000 * ms, verb: allow, cost: 3, allowed: true, remaining: 0, reset: time.Second},
				{at: 1500 * ms, verb: allow, cost: 2.5, allowed: false, retry: 500 * ms, reset: 500 * ms},
				{at: 1500 * ms, verb: allow, cost: 2, allowed: false, retry: 100 * ms, reset: 500 * ms},
				{at: 1600 * ms, verb: allow, cost: 2, allowed: true, remaining: 0, reset: time.Second},
			},
		},
		{
			name: "SlidingCounter/WeighsThePreviousWindow",
			build: func(c sluice.Clock) (*sluice.Limiter, error) {
				return sluice.NewSlidingCounter(5, time.Second, sluice.WithClock(c))
			},
			steps: []step{
				{at: 900 * ms, verb: allow, cost: 5, allowed: true, remaining: 0, reset: 1100 * ms},
				// At 1s the previous window weighs 1; one unit fits once
				// its weight is 0.8, 200ms into the window.
				{at: 1000 * ms, verb: allow, cost: 1, allowed: false, retry: 200 * ms, reset: 1000 * ms},
				{at: 1200*ms - 1, verb: allow, cost: 1, allowed: false, retry: 1, remaining: 0.999999995, reset: 800*ms + 1},
				{at: 1200 * ms, verb: allow, cost: 1, allowed: true, remaining: 0, reset: 1800 * ms},
				{at: 3000 * ms, verb: allow, cost: 5, allowed: true, remaining: 0, reset: 2000 * ms},
			},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mock := newMock()
			lim, err := tc.build(mock)
			require.NoError(t, err)
			runSteps(t, lim, mock, tc.steps)
		})
	}
}

func TestDeniedAndCheckedRequestsLeaveStateUnchanged(t *testing.T) {
	for name, build := range limiterBuilders() {
		t.Run(name, func(t *testing.T) {
			mock := newMock()
			lim, err := build(mock)
			require.NoError(t, err)
			ctx := context.Background()
			// Use up the key, then hammer it with denied and checked
			// requests: the next admission comes exactly when it would have.
			d, err := lim.Allow(ctx, "k", 5)
			require.NoError(t, err)
			require.True(t, d.Allowed)
			d, err = lim.Allow(ctx, "k", 1)
			require.NoError(t, err)
			require.False(t, d.Allowed)
			admitAt := mock.Now().Add(d.RetryAfter)
			for range 100 {
				mock.Add(d.RetryAfter / 100)
				if mock.Now().Before(admitAt) {
					d2, err := lim.Allow(ctx, "k", 1)
					require.NoError(t, err)
					require.False(t, d2.Allowed)
					require.Equal(t, admitAt, mock.Now().Add(d2.RetryAfter), "denials do not move the admission")
				}
				_, err = lim.CanAccept(ctx, "k", 1)
				require.NoError(t, err)
			}
			mock.Set(admitAt.Add(-1))
			d, err = lim.Allow(ctx, "k", 1)
			require.NoError(t, err)
			require.False(t, d.Allowed, "one nanosecond early")
			mock.Set(admitAt)
			d, err = lim.Allow(ctx, "k", 1)
			require.NoError(t, err)
			require.True(t, d.Allowed, "exactly at RetryAfter")
		})
	}
}

// limiterBuilders returns each algorithm with a limit of 5 per second.
func limiterBuilders() map[string]func(c sluice.Clock) (*sluice.Limiter, error) {
	return map[string]func(c sluice.Clock) (*sluice.Limiter, error){
		"LeakyBucket": func(c sluice.Clock) (*sluice.Limiter, error) {
			return sluice.NewLeakyBucket(5, sluice.PerSecond(5), sluice.WithClock(c))
		},
		"GCRA": func(c sluice.Clock) (*sluice.Limiter, error) {
			return sluice.NewGCRA(sluice.PerSecond(5), 5, sluice.WithClock(c))
		},
		"TokenBucket": func(c sluice.Clock) (*sluice.Limiter, error) {
			return sluice.NewTokenBucket(sluice.PerSecond(5), 5, sluice.WithClock(c))
		},
		"TokenBucketIntervalRefill": func(c sluice.Clock) (*sluice.Limiter, error) {
			return sluice.NewTokenBucket(sluice.PerSecond(5), 5, sluice.WithIntervalRefill(), sluice.WithClock(c))
		},
		"FixedWindow": func(c sluice.Clock) (*sluice.Limiter, error) {
			return sluice.NewFixedWindow(5, time.Second, sluice.WithClock(c))
		},
		"FixedWindowAnchored": func(c sluice.Clock) (*sluice.Limiter, error) {
			return sluice.NewFixedWindow(5, time.Second, sluice.WithAnchoredWindows(), sluice.WithClock(c))
		},
		"SlidingLog": func(c sluice.Clock) (*sluice.Limiter, error) {
			return sluice.NewSlidingLog(5, time.Second, sluice.WithClock(c))
		},
		"SlidingCounter": func(c sluice.Clock) (*sluice.Limiter, error) {
			return sluice.NewSlidingCounter(5, time.Second, sluice.WithClock(c))
		},
	}
}

func TestConcurrentCallersOnOneKeyAdmitExactlyTheBurst(t *testing.T) {
	for name, build := range limiterBuilders() {
		t.Run(name, func(t *testing.T) {
			lim, err := build(newMock()) // frozen: no time passes
			require.NoError(t, err)
			var wg sync.WaitGroup
			var mu sync.Mutex
			admitted := 0
			for range 64 {
				wg.Go(func() {
					for range 10 {
						d, err := lim.Allow(context.Background(), "hot", 1)
						if err != nil {
							t.Error(err)
							return
						}
						if d.Allowed {
							mu.Lock()
							admitted++
							mu.Unlock()
						}
					}
				})
			}
			wg.Wait()
			require.Equal(t, 5, admitted)
		})
	}
}

func TestInvalidConfigurationIsAnError(t *testing.T) {
	nan, inf := math.NaN(), math.Inf(1)
	for name, build := range map[string]func() (any, error){
		"GCRA/ZeroRate":             func() (any, error) { return sluice.NewGCRA(sluice.PerSecond(0), 1) },
		"GCRA/NegativeRate":         func() (any, error) { return sluice.NewGCRA(sluice.PerSecond(-1), 1) },
		"GCRA/NaNRate":              func() (any, error) { return sluice.NewGCRA(sluice.PerSecond(nan), 1) },
		"GCRA/InfiniteRate":         func() (any, error) { return sluice.NewGCRA(sluice.PerSecond(inf), 1) },
		"GCRA/ZeroPeriod":           func() (any, error) { return sluice.NewGCRA(sluice.Per(1, 0), 1) },
		"GCRA/NegativePeriod":       func() (any, error) { return sluice.NewGCRA(sluice.Per(1, -time.Second), 1) },
		"GCRA/FasterThanNanosecond": func() (any, error) { return sluice.NewGCRA(sluice.PerSecond(2e9), 1) },
		"GCRA/ZeroBurst":            func() (any, error) { return sluice.NewGCRA(sluice.PerSecond(1), 0) },
		"GCRA/NaNBurst":             func() (any, error) { return sluice.NewGCRA(sluice.PerSecond(1), nan) },
		"GCRA/BurstTooLong":         func() (any, error) { return sluice.NewGCRA(sluice.Per(1, time.Hour), 1e9) },
		"GCRA/IntervalRefillOption": func() (any, error) {
			return sluice.NewGCRA(sluice.PerSecond(1), 1, sluice.WithIntervalRefill())
		},
		"GCRA/NilClock":               func() (any, error) { return sluice.NewGCRA(sluice.PerSecond(1), 1, sluice.WithClock(nil)) },
		"GCRA/NilStore":               func() (any, error) { return sluice.NewGCRA(sluice.PerSecond(1), 1, sluice.WithStore(nil)) },
		"LeakyBucket/ZeroCapacity":    func() (any, error) { return sluice.NewLeakyBucket(0, sluice.PerSecond(1)) },
		"LeakyBucket/InfCapacity":     func() (any, error) { return sluice.NewLeakyBucket(inf, sluice.PerSecond(1)) },
		"LeakyBucket/ZeroLeak":        func() (any, error) { return sluice.NewLeakyBucket(1, sluice.PerSecond(0)) },
		"LeakyBucket/NaNLeak":         func() (any, error) { return sluice.NewLeakyBucket(1, sluice.PerSecond(nan)) },
		"LeakyBucket/DrainTooLong":    func() (any, error) { return sluice.NewLeakyBucket(1e12, sluice.Per(1, time.Hour)) },
		"TokenBucket/ZeroRate":        func() (any, error) { return sluice.NewTokenBucket(sluice.PerSecond(0), 0) },
		"TokenBucket/NegativeBurst":   func() (any, error) { return sluice.NewTokenBucket(sluice.PerSecond(1), -1) },
		"TokenBucket/NaNBurst":        func() (any, error) { return sluice.NewTokenBucket(sluice.PerSecond(1), nan) },
		"FixedWindow/ZeroLimit":       func() (any, error) { return sluice.NewFixedWindow(0, time.Second) },
		"FixedWindow/NegativeLimit":   func() (any, error) { return sluice.NewFixedWindow(-5, time.Second) },
		"FixedWindow/ZeroWindow":      func() (any, error) { return sluice.NewFixedWindow(5, 0) },
		"FixedWindow/MaxEntries":      func() (any, error) { return sluice.NewFixedWindow(5, time.Second, sluice.WithMaxEntries(3)) },
		"SlidingLog/ZeroMaxEntries":   func() (any, error) { return sluice.NewSlidingLog(5, time.Second, sluice.WithMaxEntries(0)) },
		"SlidingLog/HugeMaxEntries":   func() (any, error) { return sluice.NewSlidingLog(5, time.Second, sluice.WithMaxEntries(1<<30)) },
		"SlidingLog/InfLimit":         func() (any, error) { return sluice.NewSlidingLog(inf, time.Second) },
		"SlidingLog/AnchoredOption":   func() (any, error) { return sluice.NewSlidingLog(5, time.Second, sluice.WithAnchoredWindows()) },
		"SlidingCounter/NaNLimit":     func() (any, error) { return sluice.NewSlidingCounter(nan, time.Second) },
		"SlidingCounter/NegativeSpan": func() (any, error) { return sluice.NewSlidingCounter(5, -time.Second) },
	} {
		t.Run(name, func(t *testing.T) {
			lim, err := build()
			require.ErrorIs(t, err, sluice.ErrInvalidConfig)
			require.Nil(t, lim)
		})
	}
}

func TestInvalidCostIsAnErrorOnEveryVerb(t *testing.T) {
	ctx := context.Background()
	for name, build := range limiterBuilders() {
		t.Run(name, func(t *testing.T) {
			lim, err := build(newMock())
			require.NoError(t, err)
			for _, cost := range []float64{math.NaN(), math.Inf(1), math.Inf(-1), -1, -1e-300} {
				_, err := lim.Allow(ctx, "k", cost)
				require.ErrorIs(t, err, sluice.ErrInvalidCost, "Allow(%v)", cost)
				_, err = lim.CanAccept(ctx, "k", cost)
				require.ErrorIs(t, err, sluice.ErrInvalidCost, "CanAccept(%v)", cost)
				require.ErrorIs(t, lim.Wait(ctx, "k", cost), sluice.ErrInvalidCost, "Wait(%v)", cost)
			}
			_, err = lim.Allow(ctx, "k", 5.000001)
			require.ErrorIs(t, err, sluice.ErrCostExceedsLimit, "a cost over the limit can never fit")
			require.ErrorIs(t, lim.Wait(ctx, "k", 6), sluice.ErrCostExceedsLimit, "Wait must not wait forever")
			d, err := lim.CanAccept(ctx, "k", 5)
			require.NoError(t, err)
			require.True(t, d.Allowed, "errors recorded nothing")
		})
	}
	b, err := sluice.NewLeakyBucket(1, sluice.PerSecond(1))
	require.NoError(t, err)
	_, err = b.Fillup(ctx, "k", math.NaN())
	require.ErrorIs(t, err, sluice.ErrInvalidCost)
}

func TestWaitPacesCallsAtTheRate(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		lim, err := sluice.NewGCRA(sluice.PerSecond(10), 1)
		require.NoError(t, err)
		begin := time.Now()
		for i := range 5 {
			require.NoError(t, lim.Wait(context.Background(), "api", 1))
			require.Equal(t, time.Duration(i)*100*ms, time.Since(begin), "call %d", i)
		}
	})
}

func TestWaitReturnsAtOnceWhenTheDeadlineIsTooSoon(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		lim, err := sluice.NewGCRA(sluice.PerSecond(1), 1)
		require.NoError(t, err)
		ctx, cancel := context.WithTimeout(context.Background(), 500*ms)
		defer cancel()
		require.NoError(t, lim.Wait(ctx, "api", 1))
		begin := time.Now()
		err = lim.Wait(ctx, "api", 1)
		require.ErrorIs(t, err, context.DeadlineExceeded)
		require.ErrorContains(t, err, "sluice: wait would exceed context deadline", "not the deadline itself, which has not passed")
		require.Zero(t, time.Since(begin), "no sleeping")
		d, err := lim.CanAccept(context.Background(), "api", 1)
		require.NoError(t, err)
		require.Equal(t, time.Second, d.RetryAfter, "the failed wait recorded nothing")
	})
}

func TestWaitStopsWhenTheContextIsCancelled(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		lim, err := sluice.NewGCRA(sluice.PerMinute(1), 1)
		require.NoError(t, err)
		require.NoError(t, lim.Wait(context.Background(), "api", 1))
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error)
		go func() { done <- lim.Wait(ctx, "api", 1) }()
		synctest.Wait() // the waiter is asleep
		cancel()
		require.ErrorIs(t, <-done, context.Canceled)
		cancel()
		require.ErrorIs(t, lim.Wait(ctx, "api", 1), context.Canceled, "a done context admits nothing")
	})
}

func TestWaitOnAFakeClockWakesWhenTheClockAdvances(t *testing.T) {
	mock := newMock()
	lim, err := sluice.NewTokenBucket(sluice.PerSecond(2), 1, sluice.WithClock(mock))
	require.NoError(t, err)
	ctx := context.Background()
	require.NoError(t, lim.Wait(ctx, "k", 1))
	done := make(chan error)
	go func() { done <- lim.Wait(ctx, "k", 1) }()
	for {
		select {
		case err := <-done:
			require.NoError(t, err)
			require.Equal(t, start.Add(500*ms), mock.Now())
			return
		default:
			// Move the clock only once the waiter is asleep on it.
			mock.WaitForAllTimers()
		}
	}
}

func TestClocksOutOfRangeAreErrorsNotOverflows(t *testing.T) {
	for _, at := range []time.Time{
		time.Date(1, 1, 1, 0, 0, 0, 0, time.UTC),
		time.Unix(0, -1),
		time.Date(2116, 12, 31, 0, 0, 0, 0, time.UTC),
		time.Date(2262, 4, 11, 23, 47, 16, 854775807, time.UTC), // the last time.Duration from 1970
		time.Date(9999, 12, 31, 23, 59, 59, 0, time.UTC),
	} {
		for name, build := range limiterBuilders() {
			t.Run(at.Format("2006")+"/"+name, func(t *testing.T) {
				mock := clock.NewMock()
				mock.Set(at)
				lim, err := build(mock)
				require.NoError(t, err)
				_, err = lim.Allow(context.Background(), "k", 1)
				require.ErrorIs(t, err, sluice.ErrTimeOutOfRange)
			})
		}
	}
}

func TestClocksAtTheEdgesOfTheRangeDecideNormally(t *testing.T) {
	for _, at := range []time.Time{
		time.Unix(0, 0),
		time.Unix(0, 1<<62-int64(3*time.Second)),
	} {
		for name, build := range limiterBuilders() {
			t.Run(at.Format("2006")+"/"+name, func(t *testing.T) {
				mock := clock.NewMock()
				mock.Set(at)
				lim, err := build(mock)
				require.NoError(t, err)
				ctx := context.Background()
				for range 6 {
					d, err := lim.Allow(ctx, "k", 1)
					require.NoError(t, err)
					require.GreaterOrEqual(t, d.RetryAfter, time.Duration(0))
					require.GreaterOrEqual(t, d.ResetAfter, time.Duration(0))
					require.LessOrEqual(t, d.ResetAfter, 2*time.Second)
				}
				d, err := lim.Allow(ctx, "k", 1)
				require.NoError(t, err)
				require.False(t, d.Allowed, "the limit still holds")
			})
		}
	}
}
