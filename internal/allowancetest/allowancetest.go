// Package allowancetest checks the allowance Store's bound on any remote
// store: several processes' Stores over one remote store, driven by
// random and adversarial traffic, admit together over every interval at
// most what the algorithm admits in that interval and a lease time.
package allowancetest

import (
	"context"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sluice-go/sluice/allowance"
	"github.com/sluice-go/sluice/engine"
	"github.com/sluice-go/sluice/internal/guarantees"
	"github.com/sluice-go/sluice/nearcache"
)

// Start is the traces' first instant: a realistic time since the epoch.
var Start = time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC).UnixNano()

// LeaseTime is the lease time of the Stores the checks make.
const LeaseTime = 50 * time.Millisecond

// Limits are the algorithms the traces run: every one that grants part of
// a cost, with limits that make blocks of a few units.
var Limits = []engine.Params{
	{Kind: engine.KindLeakyBucket, Limit: 24, Interval: int64(time.Second), Amount: 40},
	{Kind: engine.KindGCRA, Limit: 16, Interval: int64(25 * time.Millisecond)},
	{Kind: engine.KindGCRA, Limit: 16, Interval: int64(25 * time.Millisecond), Penalty: int64(300 * time.Millisecond)},
	{Kind: engine.KindTokenBucket, Limit: 32, Interval: int64(time.Second), Amount: 48},
	{Kind: engine.KindTokenBucket, Limit: 24, Interval: int64(200 * time.Millisecond), Amount: 8, IntervalRefill: true},
	{Kind: engine.KindTokenBucket, Limit: 32, Interval: int64(time.Second), Amount: 48, CountDenied: true},
	{Kind: engine.KindFixedWindow, Limit: 32, Interval: int64(time.Second)},
	{Kind: engine.KindFixedWindow, Limit: 24, Interval: int64(500 * time.Millisecond), Anchored: true},
	{Kind: engine.KindSlidingLog, Limit: 24, Interval: int64(time.Second), MaxEntries: 64},
	{Kind: engine.KindSlidingCounter, Limit: 32, Interval: int64(time.Second)},
	// Limits that free their whole allowance within a lease time, under
	// which units leased before an interval and spent in it show.
	{Kind: engine.KindGCRA, Limit: 8, Interval: int64(4 * time.Millisecond)},
	{Kind: engine.KindLeakyBucket, Limit: 8, Interval: int64(20 * time.Millisecond), Amount: 8},
	{Kind: engine.KindFixedWindow, Limit: 8, Interval: int64(20 * time.Millisecond)},
	{Kind: engine.KindSlidingLog, Limit: 8, Interval: int64(20 * time.Millisecond), MaxEntries: 16},
}

// Processes returns n Stores over remote, as processes sharing a Redis
// would be, each taking blocks of up to the whole limit; over a near-cache
// each if cached.
func Processes(t testing.TB, remote engine.Store, n int, cached bool) []*allowance.Store {
	ps := make([]*allowance.Store, n)
	for i := range ps {
		below := remote
		if cached {
			nc, err := nearcache.New(remote, nearcache.Config{})
			require.NoError(t, err)
			below = nc
		}
		s, err := allowance.New(below, allowance.Config{LeaseTime: LeaseTime, MaxShare: 1})
		require.NoError(t, err)
		ps[i] = s
	}
	return ps
}

// traffic offers requests to ps on keys "a" and "b", in phases of 200
// requests, and returns what each key admitted. A phase is random traffic
// from random processes at a quarter to five times p's rate, or a
// hoarding one: each process in turn takes a block with one request, all
// within a lease time, and after a pause of up to a lease time all spend
// what they hold at one instant, beside what the store admits then.
func traffic(t testing.TB, rng *rand.Rand, ps []*allowance.Store, p *engine.Params, steps int) map[string][]guarantees.Admission {
	admitted := map[string][]guarantees.Admission{}
	now := Start
	period := guarantees.Period(*p)
	lease := int64(LeaseTime)
	var gap int64
	hoard := false
	for i := range steps {
		if i%200 == 0 {
			load := []float64{0.25, 1, 2, 5}[rng.IntN(4)]
			gap = int64(float64(period) / p.Limit / load)
			hoard = rng.IntN(3) == 0
		}
		proc := rng.IntN(len(ps))
		switch j := i % (20 * len(ps)); {
		case !hoard:
			now += rng.Int64N(2*gap + 1)
		case j < len(ps):
			proc = j
			now += rng.Int64N(2*lease/int64(len(ps)) + 1)
		case j == len(ps):
			now += rng.Int64N(lease)
		}
		key := []string{"a", "b"}[rng.IntN(2)]
		cost := []float64{1, 1, 1, 0.5, 2}[rng.IntN(5)]
		verb := engine.VerbAllow
		if rng.IntN(8) == 0 {
			verb = engine.VerbCheck
		}
		d, err := ps[proc].Apply(context.Background(), key, p, engine.Op{Verb: verb, Cost: cost, Now: now})
		require.NoError(t, err)
		if d.Allowed && verb == engine.VerbAllow {
			admitted[key] = append(admitted[key], guarantees.Admission{Time: now, Cost: cost})
		}
	}
	return admitted
}

// Bound runs steps requests of traffic from n processes' Stores over
// remote, which must be empty and decide on the caller's clock, from
// seed, and fails t unless every interval of the lengths checked admitted
// at most the algorithm's bound for it and a lease time. It returns the
// most any interval admitted beyond the bound for its length alone (the
// units leased before it and spent in it) and the processes' counts.
func Bound(t testing.TB, remote engine.Store, p engine.Params, n int, cached bool, seed uint64, steps int) (beyond float64, st allowance.Stats) {
	t.Helper()
	rng := rand.New(rand.NewPCG(seed, uint64(p.Kind)))
	ps := Processes(t, remote, n, cached)
	for _, adm := range traffic(t, rng, ps, &p, steps) {
		for _, d := range durations(p) {
			got := guarantees.MaxInWindow(adm, d)
			bound := guarantees.Bound(p, d+int64(LeaseTime), 0) + guarantees.Slack*p.Limit
			require.LessOrEqual(t, got, bound, "%v: cost admitted in an interval of %v", p, time.Duration(d))
			beyond = max(beyond, got-guarantees.Bound(p, d, 0))
		}
	}
	st = sum(ps)
	require.LessOrEqual(t, st.Spent+st.Refunded, st.Leased+guarantees.Slack*p.Limit)
	return beyond, st
}

// durations are the interval lengths checked for p: from a nanosecond to
// two of its periods.
func durations(p engine.Params) []int64 {
	per := guarantees.Period(p)
	return []int64{1, int64(LeaseTime) / 2, int64(LeaseTime), per / 2, per, 2 * per}
}

// sum sums the processes' counts.
func sum(ps []*allowance.Store) allowance.Stats {
	var sum allowance.Stats
	for _, s := range ps {
		st := s.Stats()
		sum.Local += st.Local
		sum.Remote += st.Remote
		sum.Leases += st.Leases
		sum.Leased += st.Leased
		sum.Spent += st.Spent
		sum.Refunded += st.Refunded
	}
	return sum
}

// Adversary runs the bound's worst case on remote, which must be empty
// and decide on the caller's clock, as an adversary would try it: three processes each take a
// whole burst as a block, a refill apart, and all spend what they hold at
// one instant. More is admitted in that instant than the algorithm admits
// in an instant (the blocks were leased before it), and no more than in
// an instant and a lease time: the first block's lease has ended, and a
// lease half as long again would let it through, beyond that bound.
func Adversary(t testing.TB, remote engine.Store) {
	t.Helper()
	p := engine.Params{Kind: engine.KindGCRA, Limit: 8, Interval: int64(4 * time.Millisecond)} // refills in 32 ms
	ps := Processes(t, remote, 3, false)
	ms := int64(time.Millisecond)
	var admitted []guarantees.Admission
	allow := func(proc, n int, at int64) {
		for range n {
			d, err := ps[proc].Apply(context.Background(), "k", &p, engine.Op{Verb: engine.VerbAllow, Cost: 1, Now: Start + at*ms})
			require.NoError(t, err)
			if d.Allowed {
				admitted = append(admitted, guarantees.Admission{Time: Start + at*ms, Cost: 1})
			}
		}
	}
	// Traffic that sizes each process's next block at the whole burst;
	// but for the first, it comes when the key is empty and takes nothing.
	allow(0, 16, -60)
	allow(1, 16, -60)
	allow(0, 1, 0) // a block of 8, one spent
	allow(2, 16, 0)
	allow(1, 1, 32)
	allow(2, 1, 64)
	allow(0, 16, 66) // the first block's lease ended at 50 ms
	allow(1, 16, 66)
	allow(2, 16, 66)
	got := guarantees.MaxInWindow(admitted, 1)
	require.Greater(t, got, guarantees.Bound(p, 1, 1), "no block was spent after its lease began")
	require.LessOrEqual(t, got, guarantees.Bound(p, 1+int64(LeaseTime), 1))
}
