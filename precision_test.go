package sluice_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sluice-go/sluice"

	"github.com/sluice-go/sluice/engine"
)

// The precision tests send one key 10^8 requests (10^7 under the race
// detector) at exactly its rate, each at the very nanosecond the exact
// arithmetic admits it, and require every one to be admitted there and
// (for every 1024th and the last thousand, to keep the run short) denied
// one nanosecond earlier, with RetryAfter 1ns: float or integer drift
// anywhere in 10^8 steps would move an admission instant. They call
// Params.Step in a tight loop on simulated time: through a limiter and its
// MemStore each request would cost several times more.

// precisionRequests is how many requests each precision test sends.
func precisionRequests() int64 {
	if raceEnabled {
		return 1e7
	}
	return 1e8
}

// precisionKey drives one key through Params.Step.
type precisionKey struct {
	t *testing.T
	p engine.Params
	s engine.State
}

func (k *precisionKey) do(verb engine.Verb, now int64) engine.Decision {
	s, d, err := k.p.Step(k.s, engine.Op{Verb: verb, Cost: 1, Now: now})
	if err != nil {
		k.t.Fatal(err)
	}
	k.s = s
	return d
}

// admitExactlyAt requires a unit request to be admitted at now and, if
// probe, denied one nanosecond earlier with RetryAfter 1ns.
func (k *precisionKey) admitExactlyAt(i, now int64, probe bool) {
	if probe {
		if d := k.do(engine.VerbCheck, now-1); d.Allowed || d.RetryAfter != time.Nanosecond {
			k.t.Fatalf("request %d: at %d, 1ns before its instant, got %+v, want denied with RetryAfter 1ns", i, now-1, d)
		}
	}
	if d := k.do(engine.VerbAllow, now); !d.Allowed {
		k.t.Fatalf("request %d: denied at %d, its instant: %+v", i, now, d)
	}
}

// burst takes n unit requests at now, and requires the next to be denied.
func (k *precisionKey) burst(n int, now int64) {
	for i := range n {
		require.True(k.t, k.do(engine.VerbAllow, now).Allowed, "burst request %d", i)
	}
	require.False(k.t, k.do(engine.VerbAllow, now).Allowed, "one more than the burst")
}

// probe reports whether request i of n is one whose instant is checked
// from both sides.
func probe(i, n int64) bool { return i%1024 == 0 || i > n-1000 }

func TestGCRAAdmitsAtExactInstantsOverManyRequests(t *testing.T) {
	start := time.Date(2026, 11, 21, 12, 0, 0, 123456789, time.UTC).UnixNano()
	tests := []struct {
		name  string
		rate  sluice.Rate
		burst float64
		// The math: T is the rate's interval rounded to a nanosecond,
		// tau = round(burst*T), and after a burst of floor(burst) at
		// start, request i is admitted from start + (floor(burst)+i)*T - tau.
		interval, tau int64
	}{
		{"10/s burst 5", sluice.PerSecond(10), 5, 100_000_000, 500_000_000},
		{"3/s burst 2.5 (T rounds down)", sluice.PerSecond(3), 2.5, 333_333_333, 833_333_333},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			lim, err := sluice.NewGCRA(tt.rate, tt.burst)
			require.NoError(t, err)
			k := &precisionKey{t: t, p: fixedParams(t, lim)}
			require.NoError(t, lim.Close())
			require.Equal(t, tt.interval, k.p.Interval)
			head := int64(tt.burst)
			k.burst(int(head), start)
			n := precisionRequests()
			for i := int64(1); i <= n; i++ {
				k.admitExactlyAt(i, start+(head+i)*tt.interval-tt.tau, probe(i, n))
			}
			require.Equal(t, start+(head+n)*tt.interval, k.s.Time, "the theoretical arrival time after %d requests", n)
		})
	}
}

func TestBucketsAdmitAtExactInstantsOverManyRequests(t *testing.T) {
	start := time.Date(2026, 11, 21, 12, 0, 0, 123456789, time.UTC).UnixNano()
	type limiter interface {
		Params() (engine.Params, bool)
		Close() error
	}
	tests := []struct {
		name  string
		build func() (limiter, error)
	}{
		{"leaky bucket 5 at 3/s", func() (limiter, error) { return sluice.NewLeakyBucket(5, sluice.PerSecond(3)) }},
		{"token bucket 3/s burst 5", func() (limiter, error) {
			return sluice.NewTokenBucket(sluice.PerSecond(3), 5)
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			lim, err := tt.build()
			require.NoError(t, err)
			k := &precisionKey{t: t, p: fixedParams(t, lim)}
			require.NoError(t, lim.Close())
			// The math, with P = Interval/Amount nanoseconds per unit:
			// after a full burst at start, request i comes at
			// t_i = start + ceil(i*P), when the level is
			// burst - 1 - (ceil(i*P) - i*P)/P: it fits, and one nanosecond
			// earlier, 1/P higher, it does not. Amount is a whole number
			// here, so ceil(i*P) is integer arithmetic.
			interval, amount := k.p.Interval, int64(k.p.Amount)
			require.Equal(t, float64(amount), k.p.Amount)
			k.burst(int(k.p.Limit), start)
			n := precisionRequests()
			for i := int64(1); i <= n; i++ {
				k.admitExactlyAt(i, start+(i*interval+amount-1)/amount, probe(i, n))
			}
		})
	}
}
