package engine

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sluice-go/sluice/internal/arith"
)

const ms = int64(time.Millisecond)

// gcraAt returns the GCRA of burst units at one unit per interval.
func gcraAt(t *testing.T, burst float64, interval time.Duration) Params {
	p := Params{Kind: KindGCRA, Limit: burst, Interval: int64(interval)}
	require.NoError(t, p.Validate())
	return p
}

// admitAll runs Allows of one unit on s at now until one is denied, and
// returns how many were admitted and the denial.
func admitAll(t *testing.T, p Params, s *State, now int64) (int, Decision) {
	for n := 0; ; n++ {
		next, d, err := p.Step(*s, Op{Verb: VerbAllow, Cost: 1, Now: now})
		require.NoError(t, err)
		if !d.Allowed {
			require.Equal(t, *s, next, "a denial records nothing")
			return n, d
		}
		*s = next
	}
}

func TestGCRARaisedAdmitsAtTheNewRateAtOnce(t *testing.T) {
	slow, fast := gcraAt(t, 5, 100*time.Millisecond), gcraAt(t, 5, 10*time.Millisecond)
	var s State
	n, _ := admitAll(t, slow, &s, 0)
	require.Equal(t, 5, n)
	require.Equal(t, 500*ms, s.Time)
	require.Equal(t, float64(100*ms), s.A, "the TAT records its interval")

	// The first decision under 100/s, denied, still converts the 5 units
	// held to 50 ms and records it.
	op := Op{Verb: VerbAllow, Cost: 1, Now: 0}
	require.True(t, fast.Carries(&s, &op))
	s, d, err := fast.Step(s, op)
	require.NoError(t, err)
	require.False(t, d.Allowed)
	require.Equal(t, 10*time.Millisecond, d.RetryAfter, "one unit at the new rate, not 100 ms")
	require.Equal(t, State{Time: 50 * ms, A: float64(10 * ms)}, s)
	require.False(t, fast.Carries(&s, &op), "carried once")

	for i := range int64(10) {
		now := 10*ms + i*10*ms
		n, _ := admitAll(t, fast, &s, now)
		require.Equal(t, 1, n, "one a 10 ms at %v", time.Duration(now))
	}
}

func TestGCRALoweredKeepsWhatWasUsed(t *testing.T) {
	fast, slow := gcraAt(t, 10, 10*time.Millisecond), gcraAt(t, 10, 100*time.Millisecond)
	var s State
	n, _ := admitAll(t, fast, &s, 0)
	require.Equal(t, 10, n)
	// 40 ms later 4 units have drained at 100/s; 6 are held, which take
	// 600 ms at 10/s.
	now := 40 * ms
	n, d := admitAll(t, slow, &s, now)
	require.Equal(t, 4, n, "the room left, in units, and no more")
	require.Equal(t, State{Time: now + 1000*ms, A: float64(100 * ms)}, s)
	require.Equal(t, 100*time.Millisecond, d.RetryAfter)
}

func TestGCRACheckUnderANewIntervalDecidesAsCarriedAndRecordsNothing(t *testing.T) {
	slow, fast := gcraAt(t, 5, 100*time.Millisecond), gcraAt(t, 5, 10*time.Millisecond)
	s := State{Time: 500 * ms, A: float64(100 * ms)}
	op := Op{Verb: VerbCheck, Cost: 1, Now: 0}
	require.False(t, fast.Carries(&s, &op), "a check records nothing")
	_, d, err := fast.Step(s, op)
	require.NoError(t, err)
	require.Equal(t, 10*time.Millisecond, d.RetryAfter)
	require.Equal(t, 50*time.Millisecond, d.ResetAfter)
	_, d, err = slow.Step(s, op)
	require.NoError(t, err)
	require.Equal(t, 100*time.Millisecond, d.RetryAfter, "the same interval: read as it stands")
}

func TestGCRACarriesNothingItDoesNotNeedTo(t *testing.T) {
	fast := gcraAt(t, 5, 10*time.Millisecond)
	for _, c := range []struct {
		name string
		s    State
	}{
		{"fresh key", State{}},
		{"TAT in the past", State{Time: 50 * ms, A: float64(100 * ms)}},
		{"TAT now", State{Time: 100 * ms, A: float64(100 * ms)}},
		{"state from before intervals were recorded", State{Time: 300 * ms}},
		{"same interval", State{Time: 300 * ms, A: float64(10 * ms)}},
	} {
		t.Run(c.name, func(t *testing.T) {
			require.False(t, fast.Carries(&c.s, &Op{Verb: VerbAllow, Cost: 1, Now: 100 * ms}))
		})
	}
}

func TestGCRACarriedBacklogIsBoundedByMaxSpan(t *testing.T) {
	year := gcraAt(t, 1, 365*24*time.Hour)
	s := State{Time: 1e6, A: 1} // a million units held at 1 ns each
	s, d, err := year.Step(s, Op{Verb: VerbAllow, Cost: 1, Now: 0})
	require.NoError(t, err)
	require.False(t, d.Allowed)
	require.Equal(t, State{Time: maxSpan, A: float64(year.Interval)}, s, "a million years, capped")
	require.Equal(t, time.Duration(maxSpan), d.RetryAfter)
}

func TestWindowCountedUnderAnotherLengthCountsInTheWindowHoldingItsStart(t *testing.T) {
	minute, hour := int64(time.Minute), int64(time.Hour)
	perMinute := Params{Kind: KindFixedWindow, Limit: 10, Interval: minute}
	perHour := Params{Kind: KindFixedWindow, Limit: 100, Interval: hour}
	counterMinute := Params{Kind: KindSlidingCounter, Limit: 10, Interval: minute}
	counterHour := Params{Kind: KindSlidingCounter, Limit: 100, Interval: hour}
	at := func(m int64) int64 { return 1000*hour + m*minute }
	for _, c := range []struct {
		name     string
		p        Params
		s        State
		now      int64
		used     float64
		resetEnd int64 // when the key is fresh again
	}{
		{"fixed window lengthened keeps the minute's count in its hour", perHour,
			State{Time: at(34), A: 7}, at(34) + 10, 8, at(60)},
		{"fixed window shortened starts a new minute", perMinute,
			State{Time: at(0), A: 70}, at(34) + 10, 1, at(35)},
		{"fixed window shortened, in the minute that holds the hour's start", perMinute,
			State{Time: at(0), A: 7}, at(0) + 10, 8, at(1)},
		{"counter lengthened keeps both counts in the hour", counterHour,
			State{Time: at(34), A: 7, B: 3}, at(34) + 10, 8 + 3*float64(hour-(34*minute+10))/float64(hour), at(120)},
		{"counter shortened forgets a window that is not the previous one", counterMinute,
			State{Time: at(0), A: 70, B: 30}, at(34) + 10, 1, at(36)},
	} {
		t.Run(c.name, func(t *testing.T) {
			require.NoError(t, c.p.Validate())
			_, d, err := c.p.Step(c.s, Op{Verb: VerbAllow, Cost: 1, Now: c.now})
			require.NoError(t, err)
			require.True(t, d.Allowed)
			require.InDelta(t, c.used, d.Used, 1e-9)
			require.Equal(t, time.Duration(c.resetEnd-c.now), d.ResetAfter)
		})
	}
}

func TestBucketKeepsItsLevelUnderANewCapacityAndRate(t *testing.T) {
	big := Params{Kind: KindLeakyBucket, Limit: 100, Interval: int64(time.Second), Amount: 10}
	small := Params{Kind: KindLeakyBucket, Limit: 10, Interval: int64(time.Second), Amount: 1}
	require.NoError(t, big.Validate())
	require.NoError(t, small.Validate())
	s, _, err := big.Step(State{}, Op{Verb: VerbAllow, Cost: 50, Now: 0})
	require.NoError(t, err)
	// A second later, 49 are held at the old level's point drained at the
	// new rate (1/s): over the new capacity of 10, denied until 40 leak.
	_, d, err := small.Step(s, Op{Verb: VerbAllow, Cost: 1, Now: int64(time.Second)})
	require.NoError(t, err)
	require.False(t, d.Allowed)
	require.Equal(t, 10.0, d.Used, "clamped to the capacity")
	require.Equal(t, 40*time.Second, d.RetryAfter)
}

func TestWholeNanosIsTheRoundedFloatProductWhereItAnswers(t *testing.T) {
	for _, c := range []struct {
		amount   float64
		interval int64
		whole    bool
	}{
		{1, 333333333, true}, {5, int64(time.Second) / 10, true}, {2047, 1<<42 - 1, true},
		{2048, 1, false}, {1, 1 << 42, false}, {2.5, 333333333, false}, {0, 1<<42 - 1, true},
		{1e9, 1000, false}, {-1, 5, false},
	} {
		got, whole := wholeNanos(c.amount, c.interval)
		require.Equal(t, c.whole, whole, "%v*%v", c.amount, c.interval)
		if whole {
			require.Equal(t, arith.Nanos(c.amount, c.interval), got, "%v*%v", c.amount, c.interval)
		}
	}
}

func FuzzWholeNanosIsTheRoundedFloatProduct(f *testing.F) {
	f.Add(3.0, int64(1<<41+1))
	f.Add(2047.0, int64(1<<42-1))
	f.Fuzz(func(t *testing.T, amount float64, interval int64) {
		if got, whole := wholeNanos(amount, interval); whole && got != arith.Nanos(amount, interval) {
			t.Fatalf("wholeNanos(%v, %v) = %v, arith.Nanos %v", amount, interval, got, arith.Nanos(amount, interval))
		}
	})
}
