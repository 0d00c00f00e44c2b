package reference_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sluice-go/sluice/engine"
	"github.com/sluice-go/sluice/internal/reference"
)

// changeStep is one step of a hand-computed trace whose limit changes:
// either a change of the key's limit to p (the other fields unused), or a
// decision and what it must be.
type changeStep struct {
	p                 *engine.Params // the limit the key changes to
	verb              engine.Verb
	cost              float64
	at                int64 // nanoseconds after t0
	allowed           bool
	retry, resetAfter int64
	used              float64 // Used, unclamped
}

// changeTo is a step that changes the key's limit to p.
func changeTo(p engine.Params) changeStep { return changeStep{p: &p} }

// TestModelsCarryTheKeysStateOverToANewLimit pins the models of keys whose
// limit changes (reference.Change) to decisions worked out by hand from
// the rule of package engine's "Limits that change": what the key has
// used carries over in units of cost, and the new limit decides from it,
// until the key's expiry under the limit that recorded it, from which the
// key is fresh ("State and time").
func TestModelsCarryTheKeysStateOverToANewLimit(t *testing.T) {
	const (
		ms     = int64(time.Millisecond)
		s      = int64(time.Second)
		minute = int64(time.Minute)
		hour   = int64(time.Hour)
	)
	t0 := 1000 * hour // a whole hour: aligned windows of every length here start on it
	allow, check, atMost := engine.VerbAllow, engine.VerbCheck, engine.VerbAtMost
	gcra := func(burst float64, interval int64) engine.Params {
		return engine.Params{Kind: engine.KindGCRA, Limit: burst, Interval: interval}
	}
	tests := []struct {
		name  string
		p     engine.Params
		steps []changeStep
	}{
		{"GCRA raised from 10/s to 100/s admits at 100/s at once", gcra(5, 100*ms), []changeStep{
			{verb: allow, cost: 5, allowed: true, resetAfter: 500 * ms, used: 5},
			changeTo(gcra(5, 10*ms)),
			// 5 units held, 50ms at 100/s: one unit in 10ms, denied,
			// and the conversion recorded all the same.
			{verb: allow, cost: 1, retry: 10 * ms, resetAfter: 50 * ms, used: 5},
			{verb: allow, cost: 1, at: 10 * ms, allowed: true, resetAfter: 50 * ms, used: 5},
			{verb: allow, cost: 1, at: 10 * ms, retry: 10 * ms, resetAfter: 50 * ms, used: 5},
		}},
		{"GCRA lowered from 100/s to 10/s keeps what was used", gcra(10, 10*ms), []changeStep{
			{verb: allow, cost: 10, allowed: true, resetAfter: 100 * ms, used: 10},
			changeTo(gcra(10, 100*ms)),
			// At 40ms 6 units are held: 600ms at 10/s, room for 4.
			{verb: atMost, cost: 10, at: 40 * ms, allowed: true, resetAfter: 1000 * ms, used: 10},
			{verb: allow, cost: 1, at: 40 * ms, retry: 100 * ms, resetAfter: 1000 * ms, used: 10},
		}},
		{"GCRA check converts for its decision and records nothing", gcra(5, 100*ms), []changeStep{
			{verb: allow, cost: 5, allowed: true, resetAfter: 500 * ms, used: 5},
			changeTo(gcra(5, 10*ms)),
			{verb: check, cost: 1, retry: 10 * ms, resetAfter: 50 * ms, used: 5},
			// Recorded, the check's conversion would have drained by
			// 100ms; unrecorded, the 400ms left at 10/s are 4 units,
			// 40ms at 100/s, converted now.
			{verb: allow, cost: 1, at: 100 * ms, allowed: true, resetAfter: 50 * ms, used: 5},
		}},
		{"GCRA changed twice before a decision converts once from the interval it was computed with", gcra(5, 100*ms), []changeStep{
			{verb: allow, cost: 5, allowed: true, resetAfter: 500 * ms, used: 5},
			changeTo(gcra(5, 10*ms)),
			changeTo(gcra(5, 20*ms)),
			// At 100ms 4 units are held at 100ms each: 80ms at 20ms each,
			// and the burst of 100ms holds one more from now.
			{verb: allow, cost: 1, at: 100 * ms, allowed: true, resetAfter: 100 * ms, used: 5},
			{verb: allow, cost: 1, at: 100 * ms, retry: 20 * ms, resetAfter: 100 * ms, used: 5},
		}},
		{"GCRA changed and back before a decision converts nothing", gcra(5, 100*ms), []changeStep{
			{verb: allow, cost: 5, allowed: true, resetAfter: 500 * ms, used: 5},
			changeTo(gcra(5, 10*ms)),
			changeTo(gcra(5, 100*ms)),
			{verb: allow, cost: 1, at: 100 * ms, allowed: true, resetAfter: 500 * ms, used: 5},
		}},
		{"GCRA converts nothing from a TAT in the past", gcra(5, 100*ms), []changeStep{
			{verb: allow, cost: 1, allowed: true, resetAfter: 100 * ms, used: 1},
			changeTo(gcra(5, 10*ms)),
			{verb: allow, cost: 1, at: 200 * ms, allowed: true, resetAfter: 10 * ms, used: 1},
		}},
		{"GCRA conversion rounds half a nanosecond away from zero", gcra(1, 2), []changeStep{
			{verb: allow, cost: 1, allowed: true, resetAfter: 2, used: 1},
			changeTo(gcra(1, 1)),
			// 1ns held at 2ns a unit is half a unit, half a nanosecond
			// at 1ns a unit: rounded to 1ns, so a whole unit does not fit.
			{verb: allow, cost: 1, at: 1, retry: 1, resetAfter: 1, used: 1},
		}},
		{"leaky bucket keeps its level under a new capacity and rate", engine.Params{Kind: engine.KindLeakyBucket, Limit: 100, Interval: s, Amount: 10}, []changeStep{
			{verb: allow, cost: 50, allowed: true, resetAfter: 5 * s, used: 50},
			changeTo(engine.Params{Kind: engine.KindLeakyBucket, Limit: 10, Interval: s, Amount: 1}),
			// A second later at 1/s: 49 held, over the capacity of 10;
			// 1 more fits when 40 have leaked.
			{verb: allow, cost: 1, at: s, retry: 40 * s, resetAfter: 49 * s, used: 49},
		}},
		{"token bucket's time since its point counts at the new rate", engine.Params{Kind: engine.KindTokenBucket, Limit: 10, Interval: s, Amount: 4}, []changeStep{
			{verb: allow, cost: 10, allowed: true, resetAfter: 2500 * ms, used: 10},
			changeTo(engine.Params{Kind: engine.KindTokenBucket, Limit: 10, Interval: s, Amount: 10}),
			{verb: allow, cost: 5, at: 500 * ms, allowed: true, resetAfter: 1000 * ms, used: 10},
		}},
		{"interval-refill bucket refills every new interval after its point", engine.Params{Kind: engine.KindTokenBucket, Limit: 10, Interval: 3 * s, Amount: 4, IntervalRefill: true}, []changeStep{
			{verb: allow, cost: 10, allowed: true, resetAfter: 9 * s, used: 10},
			changeTo(engine.Params{Kind: engine.KindTokenBucket, Limit: 10, Interval: s, Amount: 4, IntervalRefill: true}),
			// At 2.5s two refills of the new interval came, at 1s and
			// 2s: 2 in use, room for 8; the next refill at 3s.
			{verb: allow, cost: 8, at: 2500 * ms, allowed: true, resetAfter: 2500 * ms, used: 10},
			{verb: allow, cost: 1, at: 2500 * ms, retry: 500 * ms, resetAfter: 2500 * ms, used: 10},
		}},
		{"fixed window lengthened counts the minute in the hour that holds it", engine.Params{Kind: engine.KindFixedWindow, Limit: 10, Interval: minute}, []changeStep{
			{verb: allow, cost: 7, at: 34 * minute, allowed: true, resetAfter: minute, used: 7},
			changeTo(engine.Params{Kind: engine.KindFixedWindow, Limit: 100, Interval: hour}),
			{verb: allow, cost: 1, at: 34*minute + 10, allowed: true, resetAfter: 26*minute - 10, used: 8},
		}},
		{"fixed window shortened starts the minute of now", engine.Params{Kind: engine.KindFixedWindow, Limit: 100, Interval: hour}, []changeStep{
			{verb: allow, cost: 70, allowed: true, resetAfter: hour, used: 70},
			changeTo(engine.Params{Kind: engine.KindFixedWindow, Limit: 10, Interval: minute}),
			{verb: allow, cost: 1, at: 34*minute + 10, allowed: true, resetAfter: minute - 10, used: 1},
		}},
		{"fixed window shortened, in the minute that holds the hour's start", engine.Params{Kind: engine.KindFixedWindow, Limit: 100, Interval: hour}, []changeStep{
			{verb: allow, cost: 7, allowed: true, resetAfter: hour, used: 7},
			changeTo(engine.Params{Kind: engine.KindFixedWindow, Limit: 10, Interval: minute}),
			{verb: allow, cost: 1, at: 10, allowed: true, resetAfter: minute - 10, used: 8},
			{verb: allow, cost: 3, at: 10, retry: minute - 10, resetAfter: minute - 10, used: 8},
		}},
		{"fixed window changed twice before a decision aligns to the last length only", engine.Params{Kind: engine.KindFixedWindow, Limit: 10, Interval: minute}, []changeStep{
			{verb: allow, cost: 7, at: 34 * minute, allowed: true, resetAfter: minute, used: 7},
			changeTo(engine.Params{Kind: engine.KindFixedWindow, Limit: 100, Interval: hour}),
			changeTo(engine.Params{Kind: engine.KindFixedWindow, Limit: 10, Interval: minute}),
			{verb: allow, cost: 1, at: 34*minute + 10, allowed: true, resetAfter: minute - 10, used: 8},
		}},
		{"anchored window keeps its start and takes the new length", engine.Params{Kind: engine.KindFixedWindow, Limit: 10, Interval: minute, Anchored: true}, []changeStep{
			{verb: allow, cost: 7, at: 34*minute + 5, allowed: true, resetAfter: minute, used: 7},
			changeTo(engine.Params{Kind: engine.KindFixedWindow, Limit: 10, Interval: 2 * minute, Anchored: true}),
			// A nanosecond before the key's expiry, the end of the old
			// window: the new one, from the same start, ends a minute
			// later.
			{verb: allow, cost: 3, at: 35*minute + 4, allowed: true, resetAfter: minute + 1, used: 10},
			{verb: allow, cost: 1, at: 36*minute + 4, retry: 1, resetAfter: 1, used: 10},
		}},
		{"anchored window lengthened is fresh from the old window's end", engine.Params{Kind: engine.KindFixedWindow, Limit: 10, Interval: minute, Anchored: true}, []changeStep{
			{verb: allow, cost: 7, at: 34*minute + 5, allowed: true, resetAfter: minute, used: 7},
			changeTo(engine.Params{Kind: engine.KindFixedWindow, Limit: 10, Interval: 2 * minute, Anchored: true}),
			{verb: allow, cost: 10, at: 35*minute + 5, allowed: true, resetAfter: 2 * minute, used: 10},
		}},
		{"sliding counter lengthened keeps both counts in the hour", engine.Params{Kind: engine.KindSlidingCounter, Limit: 10, Interval: minute}, []changeStep{
			{verb: allow, cost: 3, at: 33 * minute, allowed: true, resetAfter: 2 * minute, used: 3},
			{verb: allow, cost: 7, at: 34 * minute, allowed: true, resetAfter: 2 * minute, used: 10},
			changeTo(engine.Params{Kind: engine.KindSlidingCounter, Limit: 100, Interval: hour}),
			// The minute 34 counts in hour 0, and minute 33 as the hour
			// before it, weighing what is left of that hour.
			{verb: allow, cost: 1, at: 34*minute + 10, allowed: true, resetAfter: 2*hour - 34*minute - 10,
				used: 8 + 3*float64(hour-34*minute-10)/float64(hour)},
		}},
		{"sliding counter shortened forgets a window that is not the previous one", engine.Params{Kind: engine.KindSlidingCounter, Limit: 100, Interval: hour}, []changeStep{
			{verb: allow, cost: 70, allowed: true, resetAfter: 2 * hour, used: 70},
			changeTo(engine.Params{Kind: engine.KindSlidingCounter, Limit: 10, Interval: minute}),
			{verb: allow, cost: 1, at: 34*minute + 10, allowed: true, resetAfter: 2*minute - 10, used: 1},
		}},
		{"sliding log lengthened counts entries kept past the old window until the key's expiry", engine.Params{Kind: engine.KindSlidingLog, Limit: 5, Interval: s, MaxEntries: 5}, []changeStep{
			{verb: allow, cost: 4, allowed: true, resetAfter: s, used: 4},
			{verb: allow, cost: 1, at: 900 * ms, allowed: true, resetAfter: s, used: 5},
			changeTo(engine.Params{Kind: engine.KindSlidingLog, Limit: 5, Interval: 2*s + 7, MaxEntries: 5}),
			// The entry at 0 has left the old window, not the new one.
			// RetryAfter and ResetAfter are read under the new window,
			// past the key's expiry at 1.9s.
			{verb: allow, cost: 1, at: 1500 * ms, retry: 500*ms + 7, resetAfter: 1400*ms + 7, used: 5},
			// At 1.9s, the key's expiry, it is fresh.
			{verb: allow, cost: 5, at: 1900 * ms, allowed: true, resetAfter: 2*s + 7, used: 5},
		}},
		{"leaky bucket slowed is fresh from its old expiry on", engine.Params{Kind: engine.KindLeakyBucket, Limit: 100, Interval: s, Amount: 10}, []changeStep{
			{verb: allow, cost: 50, allowed: true, resetAfter: 5 * s, used: 50},
			changeTo(engine.Params{Kind: engine.KindLeakyBucket, Limit: 100, Interval: s, Amount: 1}),
			// 49 held at 1/s: read so, though the key is fresh at 5s.
			{verb: allow, cost: 60, at: s, retry: 9 * s, resetAfter: 49 * s, used: 49},
			{verb: check, cost: 1, at: 5 * s, allowed: true, resetAfter: s, used: 1},
			// The check recorded nothing: a clock that steps back before
			// the expiry finds the state as it was, 46 held at 4s.
			{verb: check, cost: 1, at: 4 * s, allowed: true, resetAfter: 47 * s, used: 47},
			{verb: allow, cost: 100, at: 5 * s, allowed: true, resetAfter: 100 * s, used: 100},
			// Recorded from a fresh key: the old state is gone.
			{verb: check, at: 4 * s, retry: s, resetAfter: 101 * s, used: 101},
		}},
		{"concurrency limit lowered keeps its leases", engine.Params{Kind: engine.KindConcurrency, Limit: 3, Interval: 30 * s, MaxEntries: 3}, []changeStep{
			{verb: allow, cost: 3, allowed: true, resetAfter: 30 * s, used: 3},
			changeTo(engine.Params{Kind: engine.KindConcurrency, Limit: 1.5, Interval: 10 * s, MaxEntries: 1}),
			{verb: allow, cost: 1, at: s, retry: 29 * s, resetAfter: 29 * s, used: 3},
			{verb: allow, cost: 1, at: 30 * s, allowed: true, resetAfter: 10 * s, used: 1},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, err := reference.New(tt.p)
			require.NoError(t, err)
			for i, st := range tt.steps {
				if st.p != nil {
					m, err = reference.Change(m, *st.p)
					require.NoError(t, err, "step %d", i)
					continue
				}
				d := m.Apply(engine.Op{Verb: st.verb, Cost: st.cost, Now: t0 + st.at})
				require.Equal(t, st.allowed, d.Allowed, "step %d", i)
				require.Equal(t, st.retry, d.RetryAfter, "step %d RetryAfter", i)
				require.Equal(t, st.resetAfter, d.ResetAfter, "step %d ResetAfter", i)
				used, _ := d.Used.Float64()
				require.InDelta(t, st.used, used, 1e-9, "step %d Used", i)
			}
		})
	}
}

// TestGCRAConversionMarginSaysWhereTheFloatConversionMayRoundEitherWay
// pins the margin of GCRA's conversion of a TAT to another interval: the
// production code computes the backlog in float arithmetic, which is exact
// when its inputs, quotient and product are float64 values, and otherwise
// lies within 2^-50 of the exact backlog: one that close to a half-integer
// (or to the cap of 2^60 ns) may round to the other side.
func TestGCRAConversionMarginSaysWhereTheFloatConversionMayRoundEitherWay(t *testing.T) {
	const (
		t0   = int64(1000 * time.Hour)
		year = int64(365 * 24 * time.Hour)
	)
	tests := []struct {
		name     string
		interval int64
		state    engine.State // a TAT computed with another interval
		now      int64
		lenient  bool
		reset    int64 // ResetAfter: the converted TAT, from now
	}{
		{"a half computed exactly rounds up, and is compared", 1,
			engine.State{Time: t0 + 1e12, A: 2e12}, t0, false, 1},
		{"a hair below a half, within the float conversion's error, may round either way", 1,
			engine.State{Time: t0 + 1<<52, A: 1<<53 + 2}, t0, true, 0}, // a half less 2^-53 of it
		{"a hair below a half, beyond the float conversion's error, is compared", 1,
			engine.State{Time: t0 + 1e12, A: 2e12 + 1}, t0, false, 0}, // a half less 2.5e-13
		{"a backlog far from a half is compared", 3,
			engine.State{Time: t0 + 1000, A: 7}, t0, false, 429}, // 428.57...
		{"a backlog beyond 2^60 ns is capped, and compared", year,
			engine.State{Time: t0 + 1e6, A: 1}, t0, false, 1 << 60},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, err := reference.New(engine.Params{Kind: engine.KindGCRA, Limit: 1, Interval: tt.interval})
			require.NoError(t, err)
			m.Load(tt.state)
			d := m.Apply(engine.Op{Verb: engine.VerbCheck, Now: tt.now})
			require.Equal(t, tt.lenient, d.Margin <= reference.Band, "margin %v", d.Margin)
			require.Equal(t, tt.reset, d.ResetAfter)
		})
	}
}

// TestChangeKeepsABlockAndTakesTheNewPenalty changes a blocked key's
// limit and penalty: the block keeps its end, and the next overflow blocks
// the key for the new penalty.
func TestChangeKeepsABlockAndTakesTheNewPenalty(t *testing.T) {
	const s = int64(time.Second)
	t0 := 1000 * s
	m, err := reference.NewStrict(engine.Params{Kind: engine.KindGCRA, Limit: 5, Interval: s / 10, Penalty: 2 * s})
	require.NoError(t, err)
	require.True(t, m.Decide(engine.Op{Verb: engine.VerbAllow, Cost: 5, Now: t0}).Allowed)
	d := m.Decide(engine.Op{Verb: engine.VerbAllow, Cost: 1, Now: t0})
	require.True(t, d.Blocked)
	require.Equal(t, t0+2*s, d.Until)

	changed, err := reference.Change(m, engine.Params{Kind: engine.KindGCRA, Limit: 5, Interval: s / 100, Penalty: 10 * s})
	require.NoError(t, err)
	strict, ok := changed.(*reference.Strict)
	require.True(t, ok, "a strict model changes to a strict model")
	d = strict.Decide(engine.Op{Verb: engine.VerbAllow, Cost: 1, Now: t0 + s})
	require.False(t, d.Allowed)
	require.Equal(t, t0+2*s, d.Until, "the block keeps its end")
	require.Equal(t, s, d.RetryAfter)
	require.True(t, strict.Decide(engine.Op{Verb: engine.VerbAllow, Cost: 5, Now: t0 + 2*s}).Allowed)
	d = strict.Decide(engine.Op{Verb: engine.VerbAllow, Cost: 1, Now: t0 + 2*s})
	require.Equal(t, t0+12*s, d.Until, "the new penalty")
}

// TestChangeRefusesAnotherAlgorithmOrMode: the algorithm and its mode are
// the key's own, and a limit must be valid.
func TestChangeRefusesAnotherAlgorithmOrMode(t *testing.T) {
	const s = int64(time.Second)
	window := engine.Params{Kind: engine.KindFixedWindow, Limit: 5, Interval: s}
	bucket := engine.Params{Kind: engine.KindTokenBucket, Limit: 5, Interval: s, Amount: 1}
	anchored, refill, invalid := window, bucket, window
	anchored.Anchored, refill.IntervalRefill, invalid.Limit = true, true, -1
	tests := []struct {
		name     string
		from, to engine.Params
	}{
		{"another algorithm", window, bucket},
		{"anchored windows", window, anchored},
		{"interval refill", bucket, refill},
		{"an invalid limit", window, invalid},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, err := reference.New(tt.from)
			require.NoError(t, err)
			_, err = reference.Change(m, tt.to)
			require.Error(t, err)
		})
	}
}

// TestCountedDenialRecordsABucketAtNowEvenWhenItAddsNothing: a denial
// counted on a bucket already over its limit (a lower one than filled it)
// fills nothing, yet records the key at now, as any cost recorded then:
// its point moves to now, and a rate that changes later counts from there.
func TestCountedDenialRecordsABucketAtNowEvenWhenItAddsNothing(t *testing.T) {
	const s = int64(time.Second)
	t0 := 1000 * s
	bucket := func(limit, perSecond float64) engine.Params {
		return engine.Params{Kind: engine.KindLeakyBucket, Limit: limit, Interval: s, Amount: perSecond, CountDenied: true}
	}
	var m reference.Model
	m, err := reference.NewStrict(bucket(4, 1))
	require.NoError(t, err)
	require.True(t, m.Apply(engine.Op{Verb: engine.VerbAllow, Cost: 4, Now: t0}).Allowed)
	m, err = reference.Change(m, bucket(2, 1))
	require.NoError(t, err)
	// 3 held at 1s, over the limit of 2: denied, counted, nothing to fill.
	require.False(t, m.Apply(engine.Op{Verb: engine.VerbAllow, Cost: 1, Now: t0 + s}).Allowed)
	m, err = reference.Change(m, bucket(2, 2))
	require.NoError(t, err)
	// From the point at 1s, at 2/s: 1 held at 2s (from the point at 0, 0).
	used, _ := m.Apply(engine.Op{Verb: engine.VerbCheck, Now: t0 + 2*s}).Used.Float64()
	require.Equal(t, 1.0, used)
}

// TestAStrictKeyIsFreshFromItsExpiryBlockIncluded changes a blocked
// window's length: the key's expiry is the block's end, later than the
// old window's, and from it on the key is fresh, though the new window
// still holds the old count. A check records nothing, and leaves the
// expiry where it was.
func TestAStrictKeyIsFreshFromItsExpiryBlockIncluded(t *testing.T) {
	const (
		ms     = int64(time.Millisecond)
		s      = int64(time.Second)
		minute = int64(time.Minute)
	)
	t0 := 1000 * int64(time.Hour)
	window := func(interval int64) engine.Params {
		return engine.Params{Kind: engine.KindFixedWindow, Limit: 4, Interval: interval, Penalty: 1500 * ms}
	}
	m, err := reference.NewStrict(window(s))
	require.NoError(t, err)
	require.True(t, m.Decide(engine.Op{Verb: engine.VerbAllow, Cost: 4, Now: t0}).Allowed)
	d := m.Decide(engine.Op{Verb: engine.VerbAllow, Cost: 1, Now: t0})
	require.True(t, d.Blocked)
	at, ok := reference.Expiry(m)
	require.True(t, ok)
	require.Equal(t, t0+1500*ms, at, "the block's end, after the window's")

	changed, err := reference.Change(m, window(minute))
	require.NoError(t, err)
	strict := changed.(*reference.Strict)
	// Blocked, and the minute holds the 4 counted: read so, past the
	// key's expiry.
	d = strict.Decide(engine.Op{Verb: engine.VerbCheck, Cost: 1, Now: t0 + 1400*ms})
	require.False(t, d.Allowed)
	require.Equal(t, minute-1400*ms, d.RetryAfter)
	at, _ = reference.Expiry(strict)
	require.Equal(t, t0+1500*ms, at, "a check records nothing")
	d = strict.Decide(engine.Op{Verb: engine.VerbAllow, Cost: 4, Now: t0 + 1500*ms})
	require.True(t, d.Allowed, "fresh at the block's end")
	require.Equal(t, minute-1500*ms, d.ResetAfter)
	at, _ = reference.Expiry(strict)
	require.Equal(t, t0+minute, at, "the new window's end")
}
