package storetest

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sluice-go/sluice/engine"
)

// Strict returns Params of several algorithms under a penalty, with denials
// counted, or both: the variants the traces add to [Algorithms].
func Strict() []engine.Params {
	const s = int64(time.Second)
	return []engine.Params{
		{Kind: engine.KindGCRA, Limit: 3, Interval: s / 4, Penalty: 2 * s},
		{Kind: engine.KindLeakyBucket, Limit: 4, Interval: s, Amount: 2, CountDenied: true},
		{Kind: engine.KindTokenBucket, Limit: 5, Interval: s, Amount: 2, IntervalRefill: true, Penalty: 3 * s, CountDenied: true},
		{Kind: engine.KindFixedWindow, Limit: 4, Interval: s, Penalty: 1500 * time.Millisecond.Nanoseconds()},
		{Kind: engine.KindSlidingLog, Limit: 4, Interval: s, MaxEntries: 4, CountDenied: true},
		{Kind: engine.KindSlidingCounter, Limit: 5, Interval: s, Penalty: s / 2, CountDenied: true},
	}
}

// RunGroups replays random group decisions over st, which must implement
// [engine.GroupStore], against [engine.DecideGroup] over the
// specification's steps, bit for bit: groups of two to four limits, and in
// every fourth trace [engine.MaxGroup], of mixed algorithms (penalized and
// strict ones among them), each on a key of its own from a small pool,
// with checks, admissions, reservations (when every limit books them) and
// cancels of earlier group reservations.
//
// Options: [GroupHashTags].
func RunGroups(t *testing.T, st engine.Store, opts ...Option) {
	c := configure(opts)
	gs, ok := st.(engine.GroupStore)
	require.True(t, ok, "%T does not decide groups", st)
	ctx := context.Background()
	prefix := uniquePrefix()
	pool := append(Algorithms(), Strict()...)
	for trace := range max(Traces()/5, 4) {
		seed := uint64(trace)
		rng := rand.New(rand.NewPCG(seed, 0x6709))
		// Each key belongs to one limit, as a limiter's keys do. Most
		// groups are of the usual sizes; every fourth is of the most
		// limits a group takes.
		n := 2 + rng.IntN(3)
		if trace%4 == 3 {
			n = engine.MaxGroup
		}
		limits := make([]engine.Params, n)
		keys := make([]string, n)
		var reservables []engine.Params
		for _, p := range pool {
			if p.Reservable() {
				reservables = append(reservables, p)
			}
		}
		for i := range n {
			limits[i] = pool[rng.IntN(len(pool))]
			if trace%2 == 0 { // every other trace books reservations
				limits[i] = reservables[rng.IntN(len(reservables))]
			}
			keys[i] = c.groupKey(fmt.Sprintf("%sg%d", prefix, trace), fmt.Sprintf(".%d", i))
		}
		reservable := true
		for _, p := range limits {
			reservable = reservable && p.Reservable()
		}
		spec := map[string]engine.State{}
		expires := map[string]int64{}   // when each key's state is fresh again
		tickets := map[string][]int64{} // each concurrency limit's waiters
		var booked [][]engine.GroupOp
		now := base + int64(trace)*int64(24*time.Hour)
		for step := range 80 {
			if i := rng.IntN(4 * n); i < n {
				limits[i] = change(rng, limits[i]) // a key's limit changes
			}
			now += nextGap(rng, limits[0])
			now = max(now, 0)
			// A group of some of the limits, in a random order.
			order := rng.Perm(n)[:1+rng.IntN(n)]
			op := engine.Op{Verb: engine.VerbAllow, Now: now}
			switch r := rng.IntN(10); {
			case r < 2:
				op.Verb = engine.VerbCheck
			case r < 5 && reservable:
				op.Verb, op.MaxDelay = engine.VerbReserve, rng.Int64N(4*int64(time.Second))
			case r < 8:
				// A waiter's: its concurrency limits' tickets and its
				// patience, which the others ignore.
				op.MaxDelay = 1 + rng.Int64N(4*int64(time.Second))
			}
			ops := make([]engine.GroupOp, len(order))
			for j, i := range order {
				c := op
				c.Cost = min(randomCost(rng, limits[i]), limits[i].Limit)
				if t := tickets[keys[i]]; len(t) > 0 && op.MaxDelay > 0 && op.Verb == engine.VerbAllow && rng.IntN(4) > 0 {
					c.At = t[rng.IntN(len(t))]
				}
				ops[j] = engine.GroupOp{Key: keys[i], Params: &limits[i], Op: c}
			}
			if r := rng.IntN(10); r < 2 && len(booked) > 0 {
				ops = booked[rng.IntN(len(booked))]
				for j := range ops {
					ops[j].Op.Now = now
				}
			}
			where := fmt.Sprintf("trace %d step %d ops %s", trace, step, describeGroup(ops))
			want := make([]engine.Decision, len(ops))
			next := map[string]engine.State{}
			nextExpires := map[string]int64{}
			var wantD engine.Decision
			wantErr := engine.CheckGroup(ops, true)
			if wantErr == nil {
				wantD, wantErr = engine.DecideGroup(ops, func(i int, op engine.Op) (engine.Decision, error) {
					key := ops[i].Key
					s, ok := next[key]
					if !ok {
						s = cloneState(spec[key])
						if exp, found := expires[key]; found && op.Now >= exp {
							s = engine.State{} // fresh again, whatever the Params now
						}
					}
					carried := ops[i].Params.Carries(&s, &op)
					s2, d, err := ops[i].Params.Step(s, op)
					if ops[i].Params.Records(op.Verb, &d) || carried {
						next[key] = s2
						nextExpires[key] = op.Now + int64(d.ResetAfter)
					}
					return d, err
				}, want)
			}
			got := make([]engine.Decision, len(ops))
			gotD, err := gs.ApplyGroup(ctx, ops, got)
			if wantErr != nil {
				require.ErrorIs(t, err, unwrapSentinel(wantErr), where)
				continue
			}
			require.NoError(t, err, where)
			RequireIdenticalDecision(t, wantD, gotD, where+" (the group's)")
			for i := range ops {
				RequireIdenticalDecision(t, want[i], got[i], fmt.Sprintf("%s (limit %d)", where, i))
			}
			for key, s := range next {
				spec[key] = s
			}
			for key, exp := range nextExpires {
				expires[key] = exp
			}
			if op.Verb == engine.VerbReserve && wantD.At != 0 {
				cancels := make([]engine.GroupOp, len(ops))
				for i, g := range ops {
					g.Op = engine.Op{Verb: engine.VerbCancel, Cost: g.Op.Cost, At: want[i].At}
					cancels[i] = g
				}
				booked = append(booked, cancels)
			}
			for i, g := range ops {
				if g.Op.Verb == engine.VerbAllow && !want[i].Allowed && want[i].At != 0 {
					tickets[g.Key] = append(tickets[g.Key], want[i].At)
				}
			}
			if held := groupLeases(ops, want, rng); held != nil {
				booked = append(booked, held)
			}
		}
	}
}

// groupLeases returns, for a group decision each[i] on ops that took
// leases, a group op of those leases alone, as a group lease releases
// them (VerbCancel) or, one time in three, extends them (VerbExtend); nil
// if it took none.
func groupLeases(ops []engine.GroupOp, each []engine.Decision, rng *rand.Rand) []engine.GroupOp {
	verb := engine.VerbCancel
	if rng.IntN(3) == 0 {
		verb = engine.VerbExtend
	}
	var held []engine.GroupOp
	for i, g := range ops {
		if g.Params.Kind == engine.KindConcurrency && g.Op.Verb != engine.VerbCancel && each[i].Allowed && each[i].At != 0 {
			g.Op = engine.Op{Verb: verb, Cost: g.Op.Cost, At: each[i].At}
			held = append(held, g)
		}
	}
	return held
}

// GroupHashTags names the keys that RunGroups and RunGroupsConcurrent
// may decide together with a common Redis Cluster hash tag ("{tag}rest"),
// for a store that decides a group in one slot of a Cluster and refuses
// keys in different ones.
func GroupHashTags() Option { return func(c *config) { c.groupTags = true } }

// groupKey names a key of the group keys named from tag: tag + rest, or
// with GroupHashTags "{" + tag + "}" + rest.
func (c config) groupKey(tag, rest string) string {
	if c.groupTags {
		return "{" + tag + "}" + rest
	}
	return tag + rest
}

func describeGroup(ops []engine.GroupOp) string {
	s := ""
	for _, g := range ops {
		s += fmt.Sprintf("[%s %v %+v]", g.Key, g.Params, g.Op)
	}
	return s
}

// RunGroupsConcurrent has callers goroutines each decide one group of two
// or three limits, from six keys, in random orders, all at one instant,
// and requires that the cost recorded on each key equals exactly the cost
// of the group requests reported admitted that include it: all or nothing,
// and no deadlock between groups that share keys in other orders.
//
// Options: [GroupHashTags].
func RunGroupsConcurrent(t *testing.T, st engine.Store, callers int, opts ...Option) {
	c := configure(opts)
	gs, ok := st.(engine.GroupStore)
	require.True(t, ok, "%T does not decide groups", st)
	ctx := context.Background()
	prefix := uniquePrefix()
	p := engine.Params{Kind: engine.KindFixedWindow, Limit: float64(callers) / 3, Interval: int64(time.Hour)}
	keys := make([]string, 6)
	for i := range keys {
		keys[i] = c.groupKey(prefix+"x", strconv.Itoa(i))
	}
	var mu sync.Mutex
	admitted := map[string]float64{}
	var wg sync.WaitGroup
	errs := make(chan error, callers)
	for c := range callers {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(c), 7))
			order := rng.Perm(len(keys))[:2+rng.IntN(2)]
			ops := make([]engine.GroupOp, len(order))
			for j, i := range order {
				ops[j] = engine.GroupOp{Key: keys[i], Params: &p, Op: engine.Op{Verb: engine.VerbAllow, Cost: 1, Now: base}}
			}
			d, err := gs.ApplyGroup(ctx, ops, make([]engine.Decision, len(ops)))
			if err != nil {
				errs <- err
				return
			}
			if d.Allowed {
				mu.Lock()
				for _, g := range ops {
					admitted[g.Key]++
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	total := 0.0
	for _, key := range keys {
		d, err := st.Apply(ctx, key, &p, engine.Op{Verb: engine.VerbCheck, Now: base})
		require.NoError(t, err)
		require.Equal(t, admitted[key], d.Used, "key %s records exactly the groups admitted", key)
		total += d.Used
	}
	require.Positive(t, total)
}
