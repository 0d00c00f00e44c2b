package engine

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestLeasesFollowTheirRules pins the concurrency limit's step, op by op,
// on one key: two slots of a minute each, at most three leases.
func TestLeasesFollowTheirRules(t *testing.T) {
	const ttl = int64(time.Minute)
	p := Params{Kind: KindConcurrency, Limit: 2, Interval: ttl, MaxEntries: 3}
	require.NoError(t, p.Validate())
	const t0 = int64(1_700_000_000_000_000_000)
	var s State
	step := func(op Op) Decision {
		t.Helper()
		var d Decision
		var err error
		s, d, err = p.Step(s, op)
		require.NoError(t, err)
		return d
	}
	acquire := func(now int64, cost float64) Op { return Op{Verb: VerbAllow, Cost: cost, Now: now} }
	release := func(now, at int64) Op { return Op{Verb: VerbCancel, Cost: 1, Now: now, At: at} }
	extend := func(now, at int64) Op { return Op{Verb: VerbExtend, Cost: 1, Now: now, At: at} }

	a := step(acquire(t0, 1))
	require.Equal(t, Decision{Allowed: true, Limit: 2, Used: 1, Remaining: 1, ResetAfter: time.Minute, At: t0 + ttl}, a)
	b := step(acquire(t0, 1))
	require.Equal(t, t0+ttl+1, b.At, "a second lease at the same instant expires a nanosecond later: its own identity")
	require.Equal(t, 2.0, b.Used)

	full := step(acquire(t0+5, 0.5))
	require.False(t, full.Allowed)
	require.Equal(t, time.Duration(ttl-5), full.RetryAfter, "admitted once the earliest lease expires")
	require.Len(t, s.Log, 2, "a denial records nothing")

	check := step(Op{Verb: VerbCheck, Cost: 0, Now: t0 + 5})
	require.True(t, check.Allowed, "a cost of zero holds nothing and always fits")
	require.Zero(t, check.At)

	r := step(release(t0+10, a.At))
	require.True(t, r.Allowed)
	require.Equal(t, 1.0, r.Used)
	again := step(release(t0+11, a.At))
	require.False(t, again.Allowed, "releasing twice is harmless and says so")
	require.Equal(t, 1.0, again.Used)

	c := step(acquire(t0+10, 1))
	require.True(t, c.Allowed)
	require.Equal(t, t0+10+ttl, c.At)
	require.NotEqual(t, a.At, c.At, "a new lease never takes a released one's identity")

	e := step(extend(t0+20, b.At))
	require.True(t, e.Allowed)
	require.Equal(t, t0+20+ttl, e.At, "extended a time to live from now")
	require.Equal(t, []Entry{{t0 + 10 + ttl, 1}, {t0 + 20 + ttl, 1}}, s.Log, "kept in order of expiry")
	require.False(t, step(extend(t0+21, b.At)).Allowed, "the old identity names no lease once extended")

	// The lease of c expires unreleased: its slot comes back by itself.
	late := t0 + 10 + ttl
	require.False(t, step(release(late, c.At)).Allowed, "a release after expiry is harmless and says so")
	d := step(acquire(late, 1))
	require.True(t, d.Allowed)
	require.Equal(t, 2.0, d.Used)

	// Fresh again once the latest identity handed out has passed.
	end := step(Op{Verb: VerbCheck, Now: d.At})
	require.Zero(t, end.ResetAfter)
	require.Zero(t, end.Used)
}

// TestLeasesAreBoundedInNumber pins MaxEntries: a lease of any cost above
// zero needs a free entry, and a denial for want of one says when the
// earliest lease expires.
func TestLeasesAreBoundedInNumber(t *testing.T) {
	p := Params{Kind: KindConcurrency, Limit: 10, Interval: 100, MaxEntries: 2}
	var s State
	for i := range 2 {
		var d Decision
		s, d, _ = p.Step(s, Op{Verb: VerbAllow, Cost: 0.1, Now: 1000 + int64(i)})
		require.True(t, d.Allowed)
	}
	_, d, err := p.Step(s, Op{Verb: VerbAllow, Cost: 0.1, Now: 1010})
	require.NoError(t, err)
	require.False(t, d.Allowed, "the third lease has no entry")
	require.Equal(t, time.Duration(1100-1010), d.RetryAfter)
	_, d, _ = p.Step(s, Op{Verb: VerbAllow, Cost: 0, Now: 1010})
	require.True(t, d.Allowed, "a cost of zero takes no entry")
}

// TestLeasesRefuseWhatTheyDoNotRun pins the options and verbs that the
// concurrency limit refuses with an error, not a decision.
func TestLeasesRefuseWhatTheyDoNotRun(t *testing.T) {
	p := Params{Kind: KindConcurrency, Limit: 2, Interval: 100, MaxEntries: 2}
	require.NoError(t, p.Validate())
	for _, bad := range []Params{
		{Kind: KindConcurrency, Limit: 2, Interval: 100},
		{Kind: KindConcurrency, Limit: 2, Interval: 100, MaxEntries: 2, Penalty: 5},
		{Kind: KindConcurrency, Limit: 2, Interval: 100, MaxEntries: 2, CountDenied: true},
		{Kind: KindConcurrency, Limit: 2, Interval: 100, MaxEntries: 2, Amount: 1},
		{Kind: KindConcurrency, Limit: 1e308, Interval: 100, MaxEntries: 2}, // a sum of two would overflow
	} {
		require.ErrorIs(t, bad.Validate(), ErrInvalidConfig, "%v", bad)
	}
	for _, verb := range []Verb{VerbFill, VerbReserve, VerbAtMost} {
		_, _, err := p.Step(State{}, Op{Verb: verb, Cost: 1, Now: 5})
		require.ErrorIs(t, err, ErrUnsupported, "%v", verb)
	}
	gcra := Params{Kind: KindGCRA, Limit: 2, Interval: 100}
	_, _, err := gcra.Step(State{}, Op{Verb: VerbExtend, Cost: 1, Now: 5, At: 10})
	require.ErrorIs(t, err, ErrUnsupported, "only leases extend")
	_, _, err = p.Step(State{}, Op{Verb: VerbExtend, Cost: 1, Now: 5, At: -1})
	require.ErrorIs(t, err, ErrTimeOutOfRange)
}

// TestOnlyTheSlidingLogAndLeasesKeepEntries pins Kind.Logs over every
// kind a State's kind byte can hold.
func TestOnlyTheSlidingLogAndLeasesKeepEntries(t *testing.T) {
	for k := range Kind(255) {
		require.Equal(t, k == KindSlidingLog || k == KindConcurrency, k.Logs(), "%v", k)
	}
}

// TestLeasesAtTheEndOfTimeCanBeReleased pins the bound of a lease's
// identity: the longest time to live from the latest time a step takes,
// and a nanosecond more per lease of that instant, is still released.
func TestLeasesAtTheEndOfTimeCanBeReleased(t *testing.T) {
	p := Params{Kind: KindConcurrency, Limit: 2, Interval: maxSpan, MaxEntries: 2}
	var s State
	var first, second Decision
	s, first, _ = p.Step(s, Op{Verb: VerbAllow, Cost: 1, Now: maxTime})
	s, second, _ = p.Step(s, Op{Verb: VerbAllow, Cost: 1, Now: maxTime})
	require.Equal(t, int64(maxTime+maxSpan), first.At)
	require.Equal(t, first.At+1, second.At, "past 2^62 + 2^60 ns")
	s, ext, err := p.Step(s, Op{Verb: VerbExtend, Cost: 1, Now: maxTime, At: second.At})
	require.NoError(t, err)
	require.True(t, ext.Allowed)
	_, rel, err := p.Step(s, Op{Verb: VerbCancel, Cost: 1, Now: maxTime, At: ext.At})
	require.NoError(t, err)
	require.True(t, rel.Allowed)
	_, _, err = p.Step(s, Op{Verb: VerbCancel, Cost: 1, Now: maxTime, At: maxLeaseAt + 1})
	require.ErrorIs(t, err, ErrTimeOutOfRange)
}
