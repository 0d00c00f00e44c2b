package reference_test

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sluice-go/sluice/engine"
	"github.com/sluice-go/sluice/internal/reference"
)

// TestLeaseModelGivesHandComputedDecisions pins the model of the
// concurrency limit to decisions worked out by hand from its definition
// (a set of leases, live until released or expired, identities unique
// while the key lives), so that the model is checked against something
// other than the code it judges.
func TestLeaseModelGivesHandComputedDecisions(t *testing.T) {
	const s = int64(time.Second)
	t0 := 1000 * s
	type step struct {
		op      engine.Op // Now and At in ns after t0
		allowed bool
		used    float64
		retry   int64
		reset   int64
		at      int64 // the identity handed out, after t0; 0 for none
	}
	acquire := func(c float64, now int64) engine.Op { return engine.Op{Verb: engine.VerbAllow, Cost: c, Now: now} }
	check := func(c float64, now int64) engine.Op { return engine.Op{Verb: engine.VerbCheck, Cost: c, Now: now} }
	release := func(now, at int64) engine.Op { return engine.Op{Verb: engine.VerbCancel, Cost: 1, Now: now, At: at} }
	extend := func(now, at int64) engine.Op { return engine.Op{Verb: engine.VerbExtend, Cost: 1, Now: now, At: at} }
	const ttl = 60 * s
	tests := []struct {
		name  string
		p     engine.Params
		steps []step
	}{
		{"two slots of a minute", engine.Params{Kind: engine.KindConcurrency, Limit: 2, Interval: ttl, MaxEntries: 3}, []step{
			{op: acquire(1, 0), allowed: true, used: 1, reset: ttl, at: ttl},
			// The same instant: the next identity, a nanosecond later.
			{op: acquire(1, 0), allowed: true, used: 2, reset: ttl + 1, at: ttl + 1},
			// Full: room once the first lease expires.
			{op: acquire(0.5, 5), used: 2, retry: ttl - 5, reset: ttl + 1 - 5},
			{op: check(0, 5), allowed: true, used: 2, reset: ttl + 1 - 5},
			{op: release(10, ttl), allowed: true, used: 1, reset: ttl + 1 - 10},
			{op: release(11, ttl), used: 1, reset: ttl + 1 - 11}, // released already
			// Never a released lease's identity.
			{op: acquire(1, 11), allowed: true, used: 2, reset: ttl, at: ttl + 11},
			{op: extend(20, ttl+1), allowed: true, used: 2, reset: ttl, at: ttl + 20},
			{op: extend(21, ttl+1), used: 2, reset: ttl - 1}, // the old identity names nothing now
			// At its expiry a lease is no longer live: nothing to release.
			{op: release(ttl+11, ttl+11), used: 1, reset: 9},
			{op: acquire(1, ttl+11), allowed: true, used: 2, reset: ttl, at: 2*ttl + 11},
			// The extended lease expires first, 9ns from now.
			{op: check(1, ttl+11), used: 2, retry: 9, reset: ttl},
		}},
		{"two leases at most", engine.Params{Kind: engine.KindConcurrency, Limit: 10, Interval: 100, MaxEntries: 2}, []step{
			{op: acquire(0.5, 0), allowed: true, used: 0.5, reset: 100, at: 100},
			{op: acquire(0.5, 1), allowed: true, used: 1, reset: 100, at: 101},
			// No entry left, whatever the room: one once the first expires.
			{op: acquire(0.5, 10), used: 1, retry: 90, reset: 91},
			{op: acquire(0, 10), allowed: true, used: 1, reset: 91}, // takes no lease
			{op: acquire(0.5, 100), allowed: true, used: 1, reset: 100, at: 200},
		}},
		{"a clock that steps back", engine.Params{Kind: engine.KindConcurrency, Limit: 1, Interval: 100, MaxEntries: 4}, []step{
			{op: acquire(1, 0), allowed: true, used: 1, reset: 100, at: 100},
			// A check describes the key as the acquisition would leave it.
			{op: check(1, 100), allowed: true, used: 1, reset: 100},
			// The check recorded nothing: back before its expiry, the
			// lease is live again.
			{op: check(1, 99), used: 1, retry: 1, reset: 1},
			{op: acquire(1, 150), allowed: true, used: 1, reset: 100, at: 250},
			// That acquisition recorded the leases live then: the first
			// one stays expired.
			{op: check(0.5, 99), used: 1, retry: 151, reset: 151},
			{op: release(300, 250), used: 0},
			{op: acquire(1, 250), allowed: true, used: 1, reset: 100, at: 350},
			{op: release(300, 350), allowed: true, reset: 50},
			// Fresh once the latest identity is past: a recorded decision
			// forgets the key, and identities start over.
			{op: acquire(0, 350), allowed: true},
			{op: acquire(1, 150), allowed: true, used: 1, reset: 100, at: 250},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, err := reference.New(tt.p)
			require.NoError(t, err)
			for i, st := range tt.steps {
				op := st.op
				op.Now += t0
				if op.Verb == engine.VerbCancel || op.Verb == engine.VerbExtend {
					op.At += t0
				}
				d := m.Apply(op)
				used, _ := d.Used.Float64()
				require.Equal(t, st.allowed, d.Allowed, "step %d", i)
				require.Equal(t, st.used, used, "step %d Used", i)
				require.Equal(t, st.retry, d.RetryAfter, "step %d RetryAfter", i)
				require.Equal(t, st.reset, d.ResetAfter, "step %d ResetAfter", i)
				wantAt := int64(0)
				if st.at != 0 {
					wantAt = t0 + st.at
				}
				require.Equal(t, wantAt, d.At, "step %d At", i)
				require.Zero(t, d.Delay, "step %d Delay", i)
			}
		})
	}
}

// TestLeaseModelCallsTheLimitThresholdClose pins the margins of the
// concurrency limit's model: an acquisition whose exact sum lands within
// reference.Band above the limit is reported too close to call (the float
// code, which admits up to a slack above the limit, may decide it either
// way); an exact fit is not (the slack exists so that rounding never
// denies it), unless it sums more leases than the slack covers the
// rounding of; one that misses the limit by a fraction of a unit is not;
// and neither is a release, which compares no amounts.
func TestLeaseModelCallsTheLimitThresholdClose(t *testing.T) {
	p := engine.Params{Kind: engine.KindConcurrency, Limit: 1, Interval: 100, MaxEntries: 100}
	tests := []struct {
		name  string
		costs []float64 // acquired one after another at one instant
		close bool      // whether the last decision is within Band
	}{
		// Ten float 0.1s exceed 1 by 5.5e-17 exactly; in float they sum to
		// 0.9999999999999999.
		{"ten tenths", slices.Repeat([]float64{0.1}, 10), true},
		{"exactly the limit", []float64{0.5, 0.5}, false},
		{"exactly the limit in 31 leases", append(slices.Repeat([]float64{1.0 / 32}, 30), 2.0/32), false},
		{"exactly the limit in 32 leases", slices.Repeat([]float64{1.0 / 32}, 32), true},
		{"a quarter short", []float64{0.5, 0.25}, false},
		{"a quarter over", []float64{0.75, 0.5}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, err := reference.New(p)
			require.NoError(t, err)
			var d reference.Decision
			for _, c := range tt.costs {
				d = m.Apply(engine.Op{Verb: engine.VerbAllow, Cost: c, Now: 1000})
			}
			require.Equal(t, tt.close, d.Margin <= reference.Band, "margin %g", d.Margin)
			r := m.Apply(engine.Op{Verb: engine.VerbCancel, Cost: 1, Now: 1000, At: 1100})
			require.Greater(t, r.Margin, reference.Band, "a release compares no amounts")
		})
	}
}

// TestLeaseLineModelGivesHandComputedDecisions pins the model of the
// concurrency limit's line to decisions worked out by hand from its rules
// (waiters served in the order of their tickets, each in line until its
// deadline, a patience from its latest try), so that the model is checked
// against something other than the code it judges.
func TestLeaseLineModelGivesHandComputedDecisions(t *testing.T) {
	const s = int64(time.Second)
	t0 := 1000 * s
	type step struct {
		op      engine.Op // Now, and the At of a release, in ns after t0; a ticket as is
		allowed bool
		used    float64
		retry   int64
		reset   int64
		lease   int64 // the identity handed out, after t0; 0 for none
		ticket  int64 // the ticket handed out or kept; 0 for none
	}
	// wait is an acquisition of cost c at now with a ticket (0 for none)
	// and a patience (0 for none).
	wait := func(c float64, now, ticket, patience int64) engine.Op {
		return engine.Op{Verb: engine.VerbAllow, Cost: c, Now: now, At: ticket, MaxDelay: patience}
	}
	check := func(c float64, now, ticket int64) engine.Op {
		return engine.Op{Verb: engine.VerbCheck, Cost: c, Now: now, At: ticket}
	}
	leave := func(now, ticket int64) engine.Op { return engine.Op{Verb: engine.VerbLeave, Now: now, At: ticket} }
	release := func(now, at int64) engine.Op { return engine.Op{Verb: engine.VerbCancel, Cost: 1, Now: now, At: at} }
	tests := []struct {
		name  string
		p     engine.Params
		steps []step
	}{
		{"one slot, two places in line", engine.Params{Kind: engine.KindConcurrency, Limit: 1, Interval: 100, MaxEntries: 2}, []step{
			{op: wait(1, 0, 0, 0), allowed: true, used: 1, reset: 100, lease: 100},
			// Full: the first joins the line, until 60; the lease expires
			// at 100.
			{op: wait(1, 10, 0, 50), used: 1, retry: 90, reset: 90, ticket: 1},
			// The second joins behind it, until 220: the lease still
			// decides the retry.
			{op: wait(1, 20, 0, 200), used: 1, retry: 80, reset: 200, ticket: 2},
			// The line is full: no place, nothing recorded.
			{op: wait(1, 30, 0, 10), used: 1, retry: 70, reset: 190},
			// A check of nothing as the second: the first is ahead, until
			// 60.
			{op: check(0, 30, 2), used: 1, retry: 30, reset: 190},
			// As the first: nothing ahead, and served it leaves the line.
			{op: check(0, 30, 1), allowed: true, used: 1, reset: 190},
			{op: release(40, 100), allowed: true, reset: 180},
			// Room, but both wait ahead of a caller without a ticket.
			{op: wait(1, 50, 0, 0), retry: 10, reset: 170},
			// The second asks again: it keeps its place, until 150 now.
			{op: wait(1, 50, 2, 100), retry: 10, reset: 100, ticket: 2},
			// At 60 the first is gone: its ticket holds no place, so it
			// joins behind the second (until 150), until 65.
			{op: wait(1, 60, 1, 5), retry: 90, reset: 90, ticket: 3},
			{op: leave(61, 2), allowed: true, reset: 39},
			{op: leave(62, 2), reset: 38}, // left already
			// The third is first now, until 65.
			{op: wait(0.5, 62, 0, 0), retry: 3, reset: 38},
			{op: wait(0.5, 63, 3, 1), allowed: true, used: 0.5, reset: 100, lease: 163},
			// The clock steps back: the first left the line when the
			// third joined (recorded at 60), the second by leaving, the
			// third when served.
			{op: check(1, 55, 0), used: 0.5, retry: 108, reset: 108},
			// The first's ticket, gone, holds no place, and there is none
			// ahead: it fits, and would take the identity after 163.
			{op: check(0.5, 55, 1), allowed: true, used: 1, reset: 109},
		}},
		{"a waiter gone unrecorded comes back with the clock", engine.Params{Kind: engine.KindConcurrency, Limit: 1, Interval: 100, MaxEntries: 4}, []step{
			{op: wait(1, 0, 0, 0), allowed: true, used: 1, reset: 100, lease: 100},
			{op: wait(1, 0, 0, 30), used: 1, retry: 100, reset: 100, ticket: 1},
			// Its patience counts from its latest try: until 40 now.
			{op: wait(1, 10, 1, 30), used: 1, retry: 90, reset: 90, ticket: 1},
			// Gone at 40 (a check records nothing) ...
			{op: check(0, 40, 0), allowed: true, used: 1, reset: 60},
			// ... but in line again at 39.
			{op: check(0, 39, 0), used: 1, retry: 1, reset: 61},
			// A release at 45 records the line without it.
			{op: release(45, 100), allowed: true, reset: 55},
			{op: check(0, 39, 0), allowed: true, reset: 61},
			// A cost of zero admitted records, and the key is fresh at 100:
			// tickets start over.
			{op: wait(0, 100, 0, 0), allowed: true},
			{op: wait(1, 100, 0, 0), allowed: true, used: 1, reset: 100, lease: 200},
			{op: wait(1, 100, 1, 1), used: 1, retry: 100, reset: 100, ticket: 1},
			// A patience of a nanosecond: gone the next one.
			{op: wait(0, 101, 0, 0), allowed: true, used: 1, reset: 99},
		}},
		{"waiters ahead decide the retry when the cost fits", engine.Params{Kind: engine.KindConcurrency, Limit: 3, Interval: 1000, MaxEntries: 5}, []step{
			{op: wait(2, 0, 0, 0), allowed: true, used: 2, reset: 1000, lease: 1000},
			{op: wait(2, 0, 0, 500), used: 2, retry: 1000, reset: 1000, ticket: 1},
			{op: wait(1, 0, 0, 300), used: 2, retry: 500, reset: 1000, ticket: 2},
			{op: wait(1, 0, 0, 400), used: 2, retry: 300, reset: 1000, ticket: 3},
			// The first asks without patience: it keeps its place,
			// unrecorded, and its deadline.
			{op: wait(2, 100, 1, 0), used: 2, retry: 900, reset: 900},
			// The first asks with a patience shorter than it had: until
			// 150, before the second's 300.
			{op: wait(2, 100, 1, 50), used: 2, retry: 900, reset: 900, ticket: 1},
			{op: wait(1, 100, 3, 400), used: 2, retry: 50, reset: 900, ticket: 3},
			// At 150 the first is gone; the second fits and is served.
			{op: wait(1, 150, 2, 1), allowed: true, used: 3, reset: 1000, lease: 1150},
			// A lease released: the third is served with what it asked.
			{op: release(160, 1000), allowed: true, used: 1, reset: 990},
			{op: wait(1, 160, 3, 1), allowed: true, used: 2, reset: 1000, lease: 1160},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, err := reference.New(tt.p)
			require.NoError(t, err)
			for i, st := range tt.steps {
				op := st.op
				op.Now += t0
				if op.Verb == engine.VerbCancel {
					op.At += t0
				}
				d := m.Apply(op)
				used, _ := d.Used.Float64()
				require.Equal(t, st.allowed, d.Allowed, "step %d", i)
				require.Equal(t, st.used, used, "step %d Used", i)
				require.Equal(t, st.retry, d.RetryAfter, "step %d RetryAfter", i)
				require.Equal(t, st.reset, d.ResetAfter, "step %d ResetAfter", i)
				want := st.ticket
				if st.lease != 0 {
					want = t0 + st.lease
				}
				require.Equal(t, want, d.At, "step %d At", i)
				require.Zero(t, d.Delay, "step %d Delay", i)
			}
		})
	}
}

// TestLeaseLineModelHandsOutTicketsUpTo2To53 pins the last ticket: a
// line whose latest ticket is 2^53 - 1 hands out 2^53, and then no more
// (a float64 holds every integer up to 2^53, not one beyond), until the
// key is fresh again.
func TestLeaseLineModelHandsOutTicketsUpTo2To53(t *testing.T) {
	const last = 1 << 53
	p := engine.Params{Kind: engine.KindConcurrency, Limit: 1, Interval: 100, MaxEntries: 4}
	m, err := reference.New(p)
	require.NoError(t, err)
	m.Load(engine.State{A: last - 1, Log: []engine.Entry{{Time: 1000, Cost: -(last - 1)}}})
	wait := func(now, ticket, patience int64) reference.Decision {
		return m.Apply(engine.Op{Verb: engine.VerbAllow, Cost: 1, Now: now, At: ticket, MaxDelay: patience})
	}
	d := wait(10, 0, 50)
	require.False(t, d.Allowed)
	require.Equal(t, int64(last), d.At, "the last ticket")
	require.Equal(t, int64(990), d.RetryAfter, "the first waiter's deadline")
	d = wait(20, 0, 50)
	require.Zero(t, d.At, "no ticket after 2^53")
	require.Equal(t, int64(980), d.ResetAfter)
	d = wait(20, last, 500)
	require.Equal(t, int64(last), d.At, "the last ticket keeps its place")
	require.Equal(t, int64(980), d.RetryAfter)
	require.True(t, m.Apply(engine.Op{Verb: engine.VerbLeave, Now: 30, At: last - 1}).Allowed)
	d = wait(40, last, 500)
	require.True(t, d.Allowed, "first in line")
	require.Equal(t, int64(140), d.At, "its lease")
	s, ok := reference.LeaseState(m)
	require.True(t, ok)
	require.Equal(t, engine.State{Time: 140, A: last, Log: []engine.Entry{{Time: 140, Cost: 1}}}, s)
	d = wait(140, 0, 50) // the lease expired, nobody waits: fresh, and admitted
	require.True(t, d.Allowed)
	require.Equal(t, int64(240), d.At)
	d = wait(150, 0, 50)
	require.Equal(t, int64(1), d.At, "tickets start over once the key was fresh, as if forgotten")
	// A cost of zero at 240 finds the key fresh, and forgets it: tickets
	// start over.
	d = m.Apply(engine.Op{Verb: engine.VerbAllow, Now: 240})
	require.True(t, d.Allowed)
	require.Zero(t, d.ResetAfter)
	s, _ = reference.LeaseState(m)
	require.Equal(t, engine.State{}, s)
	require.Equal(t, int64(340), wait(240, 0, 0).At)
	require.Equal(t, int64(1), wait(240, 0, 1).At, "the first ticket again")
}

// lineAlgorithms are the concurrency limits the line's traces run: one
// slot and a line of one (full at once), a few slots with a few places,
// a time to live of a few nanoseconds (deadlines and expiries on top of
// each other), fractional limits, and a hundred slots with long lines.
var lineAlgorithms = []struct {
	name string
	p    engine.Params
}{
	{"1 slot of 1s, 1 entry", engine.Params{Kind: engine.KindConcurrency, Limit: 1, Interval: int64(time.Second), MaxEntries: 1}},
	{"1 slot of 1s, 4 entries", engine.Params{Kind: engine.KindConcurrency, Limit: 1, Interval: int64(time.Second), MaxEntries: 4}},
	{"2 slots of 1m, 3 entries", engine.Params{Kind: engine.KindConcurrency, Limit: 2, Interval: int64(time.Minute), MaxEntries: 3}},
	{"5 slots of 30s, 3 entries", engine.Params{Kind: engine.KindConcurrency, Limit: 5, Interval: 30 * int64(time.Second), MaxEntries: 3}},
	{"2.5 of 7ns, 8 entries", engine.Params{Kind: engine.KindConcurrency, Limit: 2.5, Interval: 7, MaxEntries: 8}},
	{"0.75 of 250ms, 16 entries", engine.Params{Kind: engine.KindConcurrency, Limit: 0.75, Interval: int64(250 * time.Millisecond), MaxEntries: 16}},
	{"100 of 10s, 1000 entries", engine.Params{Kind: engine.KindConcurrency, Limit: 100, Interval: 10 * int64(time.Second), MaxEntries: 1000}},
}

// TestLeaseLineStepMatchesModel replays seeded random traces of each
// concurrency limit, heavy with waiters, against Params.Step and the
// model, and compares them op by op: the decision with reference.Compare
// (Allowed, At, RetryAfter and ResetAfter identical, Used within Band of
// the limit, unless the exact sum lies within Band of it: then the model
// takes Step's state), whether it records, and the state it leaves, entry
// for entry.
//
// A trace has a few callers, each with the ticket its latest denial gave
// it, which ask again with it (and a patience from a nanosecond to a few
// times to live, or none), check with it, leave with it, and acquire
// without it; beside them, acquisitions with a stale ticket (handed out
// earlier, its waiter served, left or gone), an unknown one (never handed
// out, up to 2^53) or none; releases and extensions of held, stale and
// made-up identities; leavings of stale and unknown tickets; and ops Step
// must reject (a ticket or a patience out of range). The clock moves by
// nothing, nanoseconds, up to several times to live, to a lease's expiry
// or a waiter's deadline or the nanosecond before, to the instant a denial
// said to retry, and steps back. One trace in eight starts at the last
// tickets, with a waiter holding 2^53 - 1 or 2^53.
func TestLeaseLineStepMatchesModel(t *testing.T) {
	traces := lineTraces
	for ai, alg := range lineAlgorithms {
		t.Run(alg.name, func(t *testing.T) {
			t.Parallel()
			var total lineStats
			for trace := range traces {
				seed := uint64(ai)<<32 | uint64(trace)
				c := newLineChecker(t, alg.p, seed)
				c.run()
				total.add(c.stats)
				if t.Failed() {
					return
				}
			}
			t.Logf("%d traces: %v", traces, total)
			total.requireCoverage(t, alg.p)
		})
	}
}

// TestLeaseLineStepMatchesModelOnShortTraces replays short traces, each
// the smallest found of a kind of disagreement the random traces met,
// against Params.Step and the model, as TestLeaseLineStepMatchesModel
// does.
func TestLeaseLineStepMatchesModelOnShortTraces(t *testing.T) {
	allow := func(c float64, now, ticket, patience int64) engine.Op {
		return engine.Op{Verb: engine.VerbAllow, Cost: c, Now: now, At: ticket, MaxDelay: patience}
	}
	check := func(c float64, now, ticket int64) engine.Op {
		return engine.Op{Verb: engine.VerbCheck, Cost: c, Now: now, At: ticket}
	}
	release := func(now, at int64) engine.Op { return engine.Op{Verb: engine.VerbCancel, Now: now, At: at} }
	two := engine.Params{Kind: engine.KindConcurrency, Limit: 1, Interval: 100, MaxEntries: 2}
	four := engine.Params{Kind: engine.KindConcurrency, Limit: 1, Interval: 100, MaxEntries: 4}
	tests := []struct {
		name string
		p    engine.Params
		from engine.State
		ops  []engine.Op
	}{
		// A denied acquisition that finds no place records nothing: the
		// state stays as it was, its expired lease included.
		{"a denial that finds the line full", two, engine.State{}, []engine.Op{
			allow(0.5, 1000, 0, 0), allow(0.5, 1050, 0, 0), // leases 1100 and 1150
			allow(1, 1060, 0, 1000), allow(1, 1060, 0, 1000), // tickets 1 and 2: the line is full
			allow(1, 1120, 0, 10), // no place
			check(0, 1120, 1),     // 0.5 held, not 1
		}},
		{"a denial that finds the tickets spent", four, engine.State{Time: 150, A: lastTicket, Log: []engine.Entry{{Time: 100, Cost: 0.5}, {Time: 150, Cost: 0.5}}}, []engine.Op{
			allow(1, 120, 0, 50),
		}},
		// ResetAfter reaches the latest deadline of the line as the op
		// leaves it: the first waiter's, not the one that joins behind it
		// (a lease expired before the line) ...
		{"a waiter joins behind another after an expired lease", four, engine.State{}, []engine.Op{
			allow(1, 0, 0, 0), allow(1, 10, 0, 1000), // lease 100, ticket 1 until 1010
			allow(1, 100, 0, 5), // ticket 2 until 105: ResetAfter 910
		}},
		// ... nor that of the last after a release ahead of the line ...
		{"a release ahead of the line", four, engine.State{}, []engine.Op{
			allow(1, 0, 0, 0), allow(1, 10, 0, 1000), allow(1, 10, 0, 5), // tickets 1 until 1010, 2 until 15
			release(12, 100), // ResetAfter 998
		}},
		// ... and a waiter's refreshed deadline, not the one it replaces.
		{"a waiter asks again with less patience", two, engine.State{}, []engine.Op{
			allow(0.5, 0, 0, 0), allow(0.5, 50, 0, 0), allow(1, 60, 0, 1000), // leases 100 and 150, ticket 1 until 1060
			allow(1, 120, 1, 5), // until 125: ResetAfter 30
		}},
		// A check decides as the acquisition would: served, the first
		// waiter leaves the line, and the key is fresh once the lease
		// released is past.
		{"a check as the first waiter", four, engine.State{}, []engine.Op{
			allow(1, 0, 0, 0), allow(1, 10, 0, 200), release(20, 100),
			check(0, 30, 1), // ResetAfter 70, as the acquisition's
			allow(0, 30, 1, 0),
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := newLineChecker(t, tt.p, 0)
			c.state = tt.from
			c.model.Load(tt.from)
			c.ops = append(c.ops, fmt.Sprintf("from %+v", tt.from))
			for _, op := range tt.ops {
				c.ops = append(c.ops, formatLineOp(op))
				if !c.apply(op) {
					return
				}
			}
		})
	}
}

// lineChecker replays one random trace of a concurrency limit against
// Params.Step and the model.
type lineChecker struct {
	t     *testing.T
	p     engine.Params
	seed  uint64
	rng   *rand.Rand
	model reference.Model
	state engine.State
	ops   []string // the trace so far, to reproduce a failure
	// callers each hold the ticket their latest denial gave them (0 for
	// none) and ask with a cost of their own.
	callers []lineCaller
	who     int // the caller of the op being decided
	// tickets and identities hold the latest handed out, resets and all.
	tickets, identities []int64
	last                engine.Decision // the latest decision
	stats               lineStats
}

type lineCaller struct {
	ticket int64
	cost   float64
}

func newLineChecker(t *testing.T, p engine.Params, seed uint64) *lineChecker {
	m, err := reference.New(p)
	require.NoError(t, err)
	c := &lineChecker{t: t, p: p, seed: seed, rng: rand.New(rand.NewPCG(seed, 0x11e)), model: m}
	c.callers = make([]lineCaller, 2+c.rng.IntN(11))
	for i := range c.callers {
		c.callers[i].cost = c.drawCost(0)
	}
	return c
}

// maxTime is the latest time an op may take, 2^62 ns.
const maxTime = 1 << 62

// lastTicket is the latest ticket a line hands out, 2^53.
const lastTicket = 1 << 53

// run replays the trace: 200 to 800 ops.
func (c *lineChecker) run() {
	rng := c.rng
	now := c.start()
	for range 200 + rng.IntN(600) {
		now = c.nextTime(now)
		switch r := rng.IntN(100); {
		case r < 1:
			c.ops = append(c.ops, "reset")
			c.state = engine.State{}
			c.model.Reset()
			continue
		case r < 3:
			if !c.rejects(c.drawInvalid(now)) {
				return
			}
			continue
		}
		if !c.apply(c.drawOp(now)) {
			return
		}
	}
}

// start draws the trace's first instant, and for one trace in eight
// a state at the last tickets: a waiter with ticket 2^53 - 1 or 2^53
// (the latest handed out), in line for up to a few times to live.
func (c *lineChecker) start() int64 {
	ttl := c.p.Interval
	var now int64
	switch r := c.rng.IntN(8); {
	case r < 1:
		now = c.rng.Int64N(ttl)
	case r < 2:
		now = maxTime - c.rng.Int64N(10*ttl)
	default:
		now = time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC).UnixNano() + c.rng.Int64N(int64(time.Hour))
	}
	if c.rng.IntN(8) == 0 {
		ticket := int64(lastTicket - c.rng.IntN(2))
		c.state = engine.State{A: float64(ticket), Log: []engine.Entry{{Time: now + 1 + c.rng.Int64N(4*ttl), Cost: -float64(ticket)}}}
		c.model.Load(c.state)
		c.callers[0].ticket = ticket
		c.tickets = append(c.tickets, ticket)
		c.ops = append(c.ops, fmt.Sprintf("from %+v", c.state))
	}
	return now
}

// drawOp draws the trace's next op at now.
func (c *lineChecker) drawOp(now int64) engine.Op {
	rng := c.rng
	who := rng.IntN(len(c.callers))
	caller := &c.callers[who]
	if rng.IntN(3) > 0 {
		// Mostly a caller that holds a ticket.
		var holders []int
		for i, cl := range c.callers {
			if cl.ticket != 0 {
				holders = append(holders, i)
			}
		}
		if len(holders) > 0 {
			who = holders[rng.IntN(len(holders))]
			caller = &c.callers[who]
		}
	}
	op := engine.Op{Verb: engine.VerbAllow, Now: now, Cost: caller.cost}
	if rng.IntN(4) == 0 {
		op.Cost = c.drawCost(now)
	}
	switch r := rng.IntN(100); {
	case r < 40: // the caller asks, with its ticket
		op.At, op.MaxDelay = caller.ticket, c.drawPatience()
	case r < 50: // without one
		op.MaxDelay = c.drawPatience()
	case r < 56: // with a stale or an unknown one
		op.At, op.MaxDelay = c.drawTicket(), c.drawPatience()
	case r < 66:
		op.Verb = engine.VerbCheck
		if rng.IntN(3) > 0 {
			op.At = caller.ticket
		} else {
			op.At = c.drawTicket()
		}
		if rng.IntN(4) == 0 {
			op.MaxDelay = c.drawPatience() // no patience for a check
		}
	case r < 76:
		op.Verb = engine.VerbLeave
		if rng.IntN(3) > 0 {
			op.At = caller.ticket
		} else {
			op.At = c.drawTicket()
		}
	case r < 90:
		op.Verb, op.At = engine.VerbCancel, c.drawIdentity(now)
	default:
		op.Verb, op.At = engine.VerbExtend, c.drawIdentity(now)
	}
	c.ops = append(c.ops, fmt.Sprintf("caller %d: %s", who, formatLineOp(op)))
	c.who = who
	return op
}

// drawCost draws a cost: zero, the limit, a unit, eighths of the limit,
// any fraction of it, or a hair (1e-11 to 1e-6 of the limit) above or
// below the room the key's live leases leave at now.
func (c *lineChecker) drawCost(now int64) float64 {
	limit := c.p.Limit
	switch r := c.rng.IntN(20); {
	case r < 1:
		return 0
	case r < 3:
		return limit
	case r < 8:
		return min(1, limit)
	case r < 13:
		return limit * float64(1+c.rng.IntN(8)) / 8
	case r < 17:
		return limit * c.rng.Float64()
	}
	room := limit
	for _, e := range c.state.Log {
		if e.Cost > 0 && e.Time > now {
			room -= e.Cost
		}
	}
	hair := limit * [3]float64{1e-11, 1e-9, 1e-6}[c.rng.IntN(3)]
	if c.rng.IntN(2) == 0 {
		hair = -hair
	}
	return min(max(room+hair, 0), limit)
}

// drawPatience draws an acquisition's patience: none, a nanosecond, up to
// a microsecond, up to a time to live, or up to four; once in a while the
// most there is, 2^60 ns.
func (c *lineChecker) drawPatience() int64 {
	ttl := c.p.Interval
	switch r := c.rng.IntN(100); {
	case r < 10:
		return 0
	case r < 20:
		return 1
	case r < 32:
		return 1 + c.rng.Int64N(1000)
	case r < 65:
		return 1 + c.rng.Int64N(ttl)
	case r < 99:
		return 1 + c.rng.Int64N(4*ttl)
	}
	return 1 << 60
}

// drawTicket draws a ticket no caller need hold: one handed out (its
// waiter maybe served, left or gone, or still in line), one off by one,
// the next to be handed out or beyond, zero, or any up to 2^53.
func (c *lineChecker) drawTicket() int64 {
	switch r := c.rng.IntN(10); {
	case r < 5 && len(c.tickets) > 0:
		return c.tickets[c.rng.IntN(len(c.tickets))]
	case r < 6 && len(c.tickets) > 0:
		return min(max(c.tickets[c.rng.IntN(len(c.tickets))]+1-2*c.rng.Int64N(2), 0), lastTicket)
	case r < 8:
		return min(int64(c.state.A)+1+c.rng.Int64N(3), lastTicket)
	case r < 9:
		return 0
	}
	return 1 + c.rng.Int64N(lastTicket)
}

// drawIdentity draws the identity a release or an extension names: a
// lease live at now, one handed out, one a nanosecond off, or made up.
func (c *lineChecker) drawIdentity(now int64) int64 {
	var live []int64
	for _, e := range c.state.Log {
		if e.Cost > 0 && e.Time > now {
			live = append(live, e.Time)
		}
	}
	switch r := c.rng.IntN(20); {
	case r < 11 && len(live) > 0:
		return live[c.rng.IntN(len(live))]
	case r < 15 && len(c.identities) > 0:
		return c.identities[c.rng.IntN(len(c.identities))]
	case r < 17 && len(c.identities) > 0:
		return c.identities[c.rng.IntN(len(c.identities))] + 1 - 2*c.rng.Int64N(2)
	case r < 18:
		return now
	}
	return now + 1 + c.rng.Int64N(2*c.p.Interval)
}

// nextTime draws the instant of the trace's next op.
func (c *lineChecker) nextTime(now int64) int64 {
	ttl := c.p.Interval
	var leases, deadlines []int64
	for _, e := range c.state.Log {
		if e.Cost < 0 {
			deadlines = append(deadlines, e.Time)
		} else {
			leases = append(leases, e.Time)
		}
	}
	next := now
	switch r := c.rng.IntN(100); {
	case r < 15:
	case r < 25:
		next = now + 1 + c.rng.Int64N(1000)
	case r < 42:
		next = now + c.rng.Int64N(ttl)
	case r < 50:
		if len(leases) > 0 {
			next = leases[c.rng.IntN(len(leases))] - c.rng.Int64N(2)
		}
	case r < 62:
		if len(deadlines) > 0 {
			next = deadlines[c.rng.IntN(len(deadlines))] - c.rng.Int64N(2)
		}
	case r < 70:
		if c.last.RetryAfter > 0 {
			next = now + int64(c.last.RetryAfter) - c.rng.Int64N(2)
		}
	case r < 73:
		end := c.state.Time
		for _, d := range deadlines {
			end = max(end, d)
		}
		if end > 0 {
			next = end + c.rng.Int64N(3) - 1
		}
	case r < 80:
		next = now + ttl + c.rng.Int64N(4*ttl)
	case r < 81:
		next = now + c.rng.Int64N(int64(48*time.Hour))
	default:
		next = now - 1 - c.rng.Int64N(2*ttl) // the clock steps back
	}
	return min(max(next, 0), maxTime)
}

// drawInvalid draws an op Step must reject: a ticket or a patience out of
// range.
func (c *lineChecker) drawInvalid(now int64) (engine.Op, error) {
	ops := []struct {
		op   engine.Op
		want error
	}{
		{engine.Op{Verb: engine.VerbAllow, Cost: 0, Now: now, At: lastTicket + 1}, engine.ErrInvalidConfig},
		{engine.Op{Verb: engine.VerbCheck, Cost: 0, Now: now, At: -1}, engine.ErrInvalidConfig},
		{engine.Op{Verb: engine.VerbLeave, Now: now, At: lastTicket + 1 + c.rng.Int64N(1<<60)}, engine.ErrInvalidConfig},
		{engine.Op{Verb: engine.VerbAllow, Cost: 0, Now: now, MaxDelay: -1}, engine.ErrInvalidDelay},
		{engine.Op{Verb: engine.VerbAllow, Cost: 0, Now: now, MaxDelay: 1<<60 + 1}, engine.ErrInvalidDelay},
		{engine.Op{Verb: engine.VerbLeave, Cost: -1, Now: now, At: 1}, engine.ErrInvalidCost},
	}
	o := ops[c.rng.IntN(len(ops))]
	return o.op, o.want
}

// rejects requires Step to reject op with want and leave the state.
func (c *lineChecker) rejects(op engine.Op, want error) bool {
	c.ops = append(c.ops, "invalid "+formatLineOp(op))
	next, _, err := c.p.Step(cloneState(c.state), op)
	if !errors.Is(err, want) {
		c.t.Errorf("Step: %v, want %v: %s", err, want, c.trace())
		return false
	}
	if !reflect.DeepEqual(next, c.state) {
		c.t.Errorf("a rejected op changed the state to %+v: %s", next, c.trace())
		return false
	}
	return true
}

// apply runs op on Step and the model and compares them.
func (c *lineChecker) apply(op engine.Op) bool {
	before := cloneState(c.state)
	next, got, err := c.p.Step(cloneState(c.state), op)
	if err != nil {
		c.t.Errorf("Step: %v: %s", err, c.trace())
		return false
	}
	want := c.model.Apply(op)
	lenient, err := reference.Compare(c.p, op, got, want)
	if err != nil {
		c.t.Errorf("%s: %v\ngot  %+v\nwant %+v\nfrom %+v\n%s", formatLineOp(op), err, got, want, before, c.trace())
		return false
	}
	rec := c.p.Records(op.Verb, &got)
	if lenient {
		c.model.Load(next) // the float code took a side too close to call
		c.stats.lenient++
	} else if rec != reference.Records(op.Verb, want) {
		c.t.Errorf("Params.Records %v, the model's %v: %s", rec, !rec, c.trace())
		return false
	}
	if !rec && !reflect.DeepEqual(next, before) {
		c.t.Errorf("a %v that records nothing (%+v) changed the state from %+v to %+v: %s", op.Verb, got, before, next, c.trace())
		return false
	}
	if mine, _ := reference.LeaseState(c.model); !sameState(mine, next) {
		c.t.Errorf("%s from %+v: Step leaves %+v, the model %+v (decision %+v): %s", formatLineOp(op), before, next, mine, got, c.trace())
		return false
	}
	c.stats.count(c.p, op, before, got)
	c.state, c.last = next, got
	c.keep(op, got)
	return true
}

// keep updates the callers and the tickets and identities handed out
// after decision d on op.
func (c *lineChecker) keep(op engine.Op, d engine.Decision) {
	caller := &c.callers[c.who]
	switch {
	case op.Verb == engine.VerbAllow && d.Allowed:
		if caller.ticket == op.At {
			caller.ticket = 0 // served
		}
		if d.At != 0 {
			c.identities = appendRecent(c.identities, d.At)
		}
	case op.Verb == engine.VerbAllow && d.At != 0:
		caller.ticket = d.At
		c.tickets = appendRecent(c.tickets, d.At)
	case op.Verb == engine.VerbLeave && caller.ticket == op.At:
		caller.ticket = 0
	case op.Verb == engine.VerbExtend && d.Allowed:
		c.identities = appendRecent(c.identities, d.At)
	}
}

// appendRecent appends x to the latest values xs keeps.
func appendRecent(xs []int64, x int64) []int64 {
	xs = append(xs, x)
	if len(xs) > 64 {
		xs = slices.Delete(xs, 0, 16)
	}
	return xs
}

// trace describes the trace so far, to reproduce a failure.
func (c *lineChecker) trace() string {
	ops := c.ops
	if len(ops) > 80 {
		ops = ops[len(ops)-80:]
	}
	return fmt.Sprintf("%v, seed %d, the last %d ops:\n\t%s", c.p, c.seed, len(ops), strings.Join(ops, "\n\t"))
}

// formatLineOp writes op as a test would construct it.
func formatLineOp(op engine.Op) string {
	return fmt.Sprintf("{Verb: %v, Cost: %v, Now: %d, At: %d, MaxDelay: %d}", op.Verb, op.Cost, op.Now, op.At, op.MaxDelay)
}

func cloneState(s engine.State) engine.State {
	s.Log = slices.Clone(s.Log)
	return s
}

// sameState reports whether a and b are the same state, an empty Log
// being none.
func sameState(a, b engine.State) bool {
	if len(a.Log) == 0 && len(b.Log) == 0 {
		a.Log, b.Log = nil, nil
	}
	return reflect.DeepEqual(a, b)
}

// lineStats counts what the line's traces decided.
type lineStats struct {
	decisions int // compared with Step
	lenient   int // too close to the limit to compare, the model following Step
	line      int // decisions with a waiter in line, a ticket or a patience, or a leaving
	// Acquisitions: waiters joining, keeping their place, denied a place
	// (the line full, the tickets spent); served from the line; denied
	// for waiters ahead although the cost fitted; asking with a ticket
	// that holds no place (stale or unknown).
	joined, kept, lineFull, ticketsSpent int
	served, blockedAhead, staleTicket    int
	checksInLine                         int // checks as a ticket holder
	left, notInLine                      int // leavings made and refused
	mostWaiters                          int
}

func (s *lineStats) add(o lineStats) {
	s.decisions += o.decisions
	s.lenient += o.lenient
	s.line += o.line
	s.joined += o.joined
	s.kept += o.kept
	s.lineFull += o.lineFull
	s.ticketsSpent += o.ticketsSpent
	s.served += o.served
	s.blockedAhead += o.blockedAhead
	s.staleTicket += o.staleTicket
	s.checksInLine += o.checksInLine
	s.left += o.left
	s.notInLine += o.notInLine
	s.mostWaiters = max(s.mostWaiters, o.mostWaiters)
}

// count counts decision d on op, made from state before.
func (s *lineStats) count(p engine.Params, op engine.Op, before engine.State, d engine.Decision) {
	s.decisions++
	var line []int64 // the tickets in line at op.Now
	var held float64
	mine := false
	for _, e := range before.Log {
		switch {
		case e.Time <= op.Now:
		case e.Cost < 0:
			line = append(line, int64(-e.Cost))
			mine = mine || int64(-e.Cost) == op.At
		default:
			held += e.Cost
		}
	}
	s.mostWaiters = max(s.mostWaiters, len(line))
	waits := op.Verb == engine.VerbAllow && op.MaxDelay > 0
	if len(line) > 0 || op.Verb == engine.VerbLeave || waits ||
		op.At != 0 && (op.Verb == engine.VerbAllow || op.Verb == engine.VerbCheck) {
		s.line++
	}
	switch op.Verb {
	case engine.VerbAllow, engine.VerbCheck:
		if op.At != 0 && !mine {
			s.staleTicket++
		}
		if op.Verb == engine.VerbCheck && mine {
			s.checksInLine++
		}
		ahead := 0
		for _, t := range line {
			if !mine || t < op.At {
				ahead++
			}
		}
		switch {
		case d.Allowed:
			if mine && op.Verb == engine.VerbAllow {
				s.served++
			}
		case op.Verb == engine.VerbAllow && d.At != 0 && mine:
			s.kept++
		case op.Verb == engine.VerbAllow && d.At != 0:
			s.joined++
		case waits && !mine && len(line) >= p.MaxEntries:
			s.lineFull++
		case waits && !mine:
			s.ticketsSpent++
		}
		if !d.Allowed && ahead > 0 && held+op.Cost < p.Limit*(1-1e-9) {
			s.blockedAhead++
		}
	case engine.VerbLeave:
		if d.Allowed {
			s.left++
		} else {
			s.notInLine++
		}
	}
}

func (s lineStats) String() string {
	return fmt.Sprintf("%d decisions (%d lenient), %d of them with the line: "+
		"%d joined it, %d kept their place, %d found it full, %d found the tickets spent; "+
		"%d served from it, %d denied for waiters ahead while the cost fitted, %d asked with a ticket holding no place, "+
		"%d checks as a waiter; %d left, %d leavings of no waiter; at most %d waiters",
		s.decisions, s.lenient, s.line, s.joined, s.kept, s.lineFull, s.ticketsSpent,
		s.served, s.blockedAhead, s.staleTicket, s.checksInLine, s.left, s.notInLine, s.mostWaiters)
}

// requireCoverage requires the traces of p to have driven the line where
// its rules matter.
func (s lineStats) requireCoverage(t *testing.T, p engine.Params) {
	t.Helper()
	counts := map[string]int{
		"waiters joining":              s.joined,
		"waiters keeping their place":  s.kept,
		"waiters served":               s.served,
		"denials for waiters ahead":    s.blockedAhead,
		"tickets holding no place":     s.staleTicket,
		"checks as a waiter":           s.checksInLine,
		"leavings":                     s.left,
		"leavings of no waiter":        s.notInLine,
		"places denied, tickets spent": s.ticketsSpent,
	}
	if p.MaxEntries <= 8 {
		counts["places denied, the line full"] = s.lineFull
	}
	for name, n := range counts {
		require.Positive(t, n, name)
	}
	require.Greater(t, s.line, s.decisions/2, "decisions with the line")
}
