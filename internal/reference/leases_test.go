package reference_test

import (
	"slices"
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
