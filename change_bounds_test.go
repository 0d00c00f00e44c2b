package sluice_test

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sluice-go/sluice/engine"
	"github.com/sluice-go/sluice/internal/guarantees"
	"github.com/sluice-go/sluice/storetest"
)

// The change bounds drive each algorithm with the bound tests' adversarial
// traffic (guarantees.Adversaries; see bounds_test.go) under one limit,
// change the key's limit at an adversarial instant to another of its
// variants (storetest.Variants), or from one back to it, and go on with
// the same traffic under the new limit and then with the new limit's own
// adversary. The key keeps its state as a store does across the change
// (see "Limits that change" in package engine), and with it its expiry,
// from which it is fresh whatever the new limit (see "State and time"):
// the greedy adversaries ask again at the expiry when a denial's
// RetryAfter, read from the state under the new limit, lies past it. With
// G the bound guarantees.Bound(p, d, cost) of bounds_test.go, the most cost a
// limit lets through in an interval of d ns, and c the change's instant
// (for the buckets, the key's last recorded decision under the old limit,
// since the new rate counts from there; for GCRA and the others, the
// first decision under the new limit, which converts GCRA's TAT: a check,
// which records nothing, does not count), they check:
//
//   - Across the change: the cost admitted in any interval [a, b) with
//     a <= c < b is at most G_old(c-a+1) + G_new(b-c): the old limit's
//     bound over the instants a to c plus the new limit's over c to b-1.
//     (Every straddling interval, of every length: both sides are
//     maximized over the admissions' instants.) The expiry does not loosen
//     it: from the expiry on, the new limit decides from a fresh key,
//     which its own bound covers.
//   - For GCRA, the tighter max(B_old, B_new) + r_old*(c-a) + r_new*(b-c),
//     with B the burst and r the rate in units per ns: at most one burst,
//     and each side's time at its own rate. Its expiry, its TAT, forgets
//     nothing: under any interval a TAT in the past holds nothing.
//   - For the two buckets (the leaky bucket and the continuously refilled
//     token bucket), with e the key's expiry when the limit changed (c
//     plus the ResetAfter of that last decision, under the old limit:
//     when its level would be gone at the old rate), the same bound, plus,
//     when b > e and the new rate is the slower, (r_old-r_new)*(e-c): the
//     part of the level the key held at c that the new rate had not
//     drained by e, which the expiry forgets. That is, the stretch from c
//     to e counts at the faster of the two rates once the interval reaches
//     e. Without the term the bound does not hold: the adversaries exceed
//     it by up to 6 (a token bucket of 10 slowed from 10/s to 4/s, full at
//     c and again, fresh, at e = c+1s), and reach it with the term to
//     within the floats' rounding. (Not the interval-refill bucket: its
//     new interval counts from its last refill, which may come up to an
//     old interval before c.)
//   - After the change: the cost admitted under the new limit, in any
//     interval of length d (guarantees.MaxInWindow, over lengths of a
//     nanosecond to two and a half of the new limit's periods), is at most
//     G_new(d): the state carried over never lets the new limit admit
//     more than its own bound, nor does its expiry, after which the new
//     limit counts from a fresh key.
//
// The only slack is boundSlack, the float algorithms' (1e-12 of the larger
// limit). GCRA's conversion rounds the TAT to the nanosecond, which could
// in principle let half a nanosecond's worth of the new rate through
// beyond the tight bound; no adversary gets it to.

func TestAdmittedCostAcrossAChangedLimitStaysWithinBothBounds(t *testing.T) {
	start := time.Date(2026, 11, 21, 12, 0, 0, 123456789, time.UTC).UnixNano()
	for _, alg := range testAlgorithms(t) {
		t.Run(alg.name, func(t *testing.T) {
			t.Parallel()
			base := alg.params
			var closest changeTightness
			runs, early := 0, 0
			for vi, v := range storetest.Variants(base)[1:] {
				for di, pair := range [][2]engine.Params{{base, v}, {v, base}} {
					from, to := pair[0], pair[1]
					for ci, cost := range changeCosts(from, to) {
						advs, then := guarantees.Adversaries(from, cost), guarantees.Adversaries(to, cost)
						for i, adv := range advs {
							if skipChangeRun(from, to, i+vi+di+ci) {
								continue
							}
							where := fmt.Sprintf("%v changed to %v, cost %v, %s, then %s", from, to, cost, adv.Name, then[i%len(then)].Name)
							k := guarantees.NewKey(from)
							k.ChangeAt(changeInstant(from, start, i), to)
							require.NoError(t, adv.Run(k, start), where)
							require.NoError(t, then[i%len(then)].Run(k, start+12*guarantees.Period(from)), where)
							closest.add(requireChangeBounds(t, k, cost, where))
							runs, early = runs+1, early+k.Early()
						}
					}
				}
			}
			t.Logf("%d runs, %d denials whose RetryAfter lay past the key's expiry; %v", runs, early, closest)
			require.Positive(t, runs)
		})
	}
}

// heavyLimit is the limit from which an algorithm's adversaries, which
// run for ten periods at up to ten times the rate, take long enough to be
// sampled: a third of them, in turn, with unit costs only.
const heavyLimit = 100

// skipChangeRun reports whether the change bounds skip the run of index i
// (the adversary's, plus the variant's, direction's and cost's): under the
// race detector three in four, and for limits of heavyLimit or more, two
// in three.
func skipChangeRun(from, to engine.Params, i int) bool {
	n := 1
	if max(from.Limit, to.Limit) >= heavyLimit {
		n = 3
	}
	if raceEnabled {
		n *= 4
	}
	return i%n != 0
}

// changeCosts returns the costs the bounds of a change from one limit to
// another are checked with: those boundCosts gives both; for limits of
// heavyLimit or more, unit costs only.
func changeCosts(from, to engine.Params) []float64 {
	if max(from.Limit, to.Limit) >= heavyLimit {
		return []float64{1}
	}
	var costs []float64
	for _, c := range boundCosts(from) {
		if slices.Contains(boundCosts(to), c) && c <= from.Limit && c <= to.Limit {
			costs = append(costs, c)
		}
	}
	return costs
}

// changeInstant returns when the i-th adversary's key changes its limit,
// p: two periods in, a third of a period later, the last nanosecond of an
// interval (a window's, a refill's) or the first of the next, or seven
// nanoseconds after five periods.
func changeInstant(p engine.Params, start int64, i int) int64 {
	period := guarantees.Period(p)
	boundary := (start+4*period)/p.Interval*p.Interval + p.Interval
	return [...]int64{start + 2*period, start + 3*period + period/3 + 1, boundary - 1, boundary, start + 5*period + 7}[i%5]
}

// changeTightness is how close the admissions came to each bound of a
// change: the most cost admitted less the bound (zero when reached), and
// where.
type changeTightness struct {
	sum, tight, after                float64
	sumWhere, tightWhere, afterWhere string
	// Under a slower new rate, for the buckets: beyond is the most by
	// which the admissions exceeded the tight bound without its expiry's
	// term, and reach the closest they came to the tight bound over the
	// intervals that reach the expiry.
	beyond, reach           float64
	beyondWhere, reachWhere string
}

func (c *changeTightness) add(o changeTightness) {
	if o.beyondWhere != "" && (c.beyondWhere == "" || o.beyond > c.beyond) {
		c.beyond, c.beyondWhere = o.beyond, o.beyondWhere
	}
	if o.reachWhere != "" && (c.reachWhere == "" || o.reach > c.reach) {
		c.reach, c.reachWhere = o.reach, o.reachWhere
	}
	if c.sumWhere == "" || o.sum > c.sum {
		c.sum, c.sumWhere = o.sum, o.sumWhere
	}
	if o.tightWhere != "" && (c.tightWhere == "" || o.tight > c.tight) {
		c.tight, c.tightWhere = o.tight, o.tightWhere
	}
	if c.afterWhere == "" || o.after > c.after {
		c.after, c.afterWhere = o.after, o.afterWhere
	}
}

func (c changeTightness) String() string {
	s := fmt.Sprintf("closest to the sum of the bounds across the change: %.4g (%s); to the new limit's bound after it: %.4g (%s)",
		c.sum, c.sumWhere, c.after, c.afterWhere)
	if c.tightWhere != "" {
		s += fmt.Sprintf("; to the tight bound: %.4g (%s)", c.tight, c.tightWhere)
	}
	if c.beyondWhere != "" {
		s += fmt.Sprintf("; beyond it without the expiry's term: %.4g (%s)", c.beyond, c.beyondWhere)
	}
	if c.reachWhere != "" {
		s += fmt.Sprintf("; to it over the intervals that reach the expiry: %.4g (%s)", c.reach, c.reachWhere)
	}
	return s
}

// requireChangeBounds checks the admissions of k, whose limit changed,
// against the bounds of a change, and returns how close they came.
func requireChangeBounds(t *testing.T, k *guarantees.Key, cost float64, where string) changeTightness {
	t.Helper()
	ch := k.Change()
	require.True(t, ch.Made, "the limit changed: %s", where)
	from, to := ch.From, ch.To
	var before, after, all []guarantees.Admission
	for _, b := range k.Bookings() {
		a := guarantees.Admission{Time: b.Acts, Cost: b.Cost}
		if b.Changed {
			after = append(after, a)
		} else {
			before = append(before, a)
		}
		all = append(all, a)
	}
	require.NotEmpty(t, before, where)
	require.NotEmpty(t, after, where)
	c := ch.First
	if from.Kind == engine.KindLeakyBucket || from.Kind == engine.KindTokenBucket {
		c = ch.LastRecorded // the new rate counts from the key's last update
	}
	slack := boundSlack * max(from.Limit, to.Limit)
	var got changeTightness

	// Across the change: the old limit's admissions at or before c, the
	// new one's at or after it.
	excess, a, b := straddle(before, after, c,
		func(a int64) float64 { return guarantees.Bound(from, c-a+1, cost) },
		func(b int64) float64 { return guarantees.Bound(to, b-c, cost) })
	require.LessOrEqual(t, excess, slack,
		"%s: the interval [%d, %d) around the change at %d admitted %v more than the old bound over [a, c] and the new over [c, b)", where, a, b, c, excess)
	got.sum, got.sumWhere = excess, fmt.Sprintf("[c%+d, c%+d) of %s", a-c, b-c, where)

	if r1, b1, ok := rateAndBurst(from); ok {
		r2, b2, _ := rateAndBurst(to)
		var early, late []guarantees.Admission
		for _, x := range all {
			if x.Time < c {
				early = append(early, x)
			} else {
				late = append(late, x)
			}
		}
		// What a bucket's expiry forgets, for an interval that reaches
		// it: the level at c, r_old*(e-c), less what the new rate drained
		// of it by e (GCRA's expiry forgets nothing: its TAT holds
		// nothing after it under any interval).
		e, forgot := ch.Expires, 0.0
		if from.Kind != engine.KindGCRA {
			forgot = max(r1-r2, 0) * float64(e-c)
		}
		excess, a, b := straddle(early, late, c,
			func(a int64) float64 { return r1 * float64(c-a) },
			func(b int64) float64 {
				if b > e {
					return r2*float64(b-c) + forgot
				}
				return r2 * float64(b-c)
			})
		excess -= max(b1, b2)
		require.LessOrEqual(t, excess, slack,
			"%s: the interval [%d, %d) around the change at %d, the key's expiry at %d, admitted %v more than max(B_old, B_new) + r_old*(c-a) + r_new*(b-c) (+ (r_old-r_new)*(e-c) for a slower rate once b > e)", where, a, b, c, e, excess)
		got.tight, got.tightWhere = excess, fmt.Sprintf("[c%+d, c%+d) of %s", a-c, b-c, where)
		if forgot > 0 {
			// The statement without the expiry's term, which an interval
			// that reaches the expiry under a slower rate may exceed; and
			// the statement over those intervals alone, to see the term
			// reached.
			beyond, a, b := straddle(early, late, c,
				func(a int64) float64 { return r1 * float64(c-a) },
				func(b int64) float64 { return r2 * float64(b-c) })
			got.beyond, got.beyondWhere = beyond-max(b1, b2), fmt.Sprintf("[c%+d, c%+d), e = c%+d, of %s", a-c, b-c, e-c, where)
			reach, a, b := straddle(early, late, c,
				func(a int64) float64 { return r1 * float64(c-a) },
				func(b int64) float64 {
					if b > e {
						return r2*float64(b-c) + forgot
					}
					return math.Inf(1)
				})
			if !math.IsInf(reach, -1) {
				got.reach, got.reachWhere = reach-max(b1, b2), fmt.Sprintf("[c%+d, c%+d), e = c%+d, of %s", a-c, b-c, e-c, where)
			}
		}
	}

	period := guarantees.Period(to)
	got.after = math.Inf(-1)
	for _, d := range []int64{1, max(to.Interval/3, 1), to.Interval, period, period * 5 / 2} {
		most, bound := guarantees.MaxInWindow(after, d), guarantees.Bound(to, d, cost)
		require.LessOrEqual(t, most, bound+slack,
			"%s: %v admitted under the new limit in an interval of %v, its bound %v", where, most, time.Duration(d), bound)
		if most-bound > got.after {
			got.after, got.afterWhere = most-bound, fmt.Sprintf("%v of %s", time.Duration(d), where)
		}
	}
	return got
}

// rateAndBurst returns the rate in units per nanosecond and the burst of
// GCRA and the two buckets, the leaky bucket and the continuously refilled
// token bucket; ok is false for the other algorithms.
func rateAndBurst(p engine.Params) (rate, burst float64, ok bool) {
	switch {
	case p.Kind == engine.KindGCRA:
		return 1 / float64(p.Interval), p.Limit, true
	case p.Kind == engine.KindLeakyBucket, p.Kind == engine.KindTokenBucket && !p.IntervalRefill:
		return p.Amount / float64(p.Interval), p.Limit, true
	}
	return 0, 0, false
}

// straddle returns the most by which the cost admitted in an interval
// [a, b) with a <= c < b exceeds f(a) + g(b), and that interval, for
// bounds whose two terms grow as a moves before c and as b moves after
// it: the cost of early, admitted at or before c, from a on, and of late,
// admitted at or after c, before b. Each side is maximized on its own, at
// an admission's instant (or c, or c+1, for none).
func straddle(early, late []guarantees.Admission, c int64, f, g func(int64) float64) (excess float64, a, b int64) {
	byTime := func(x, y guarantees.Admission) int { return cmp.Compare(x.Time, y.Time) }
	early, late = slices.SortedFunc(slices.Values(early), byTime), slices.SortedFunc(slices.Values(late), byTime)
	bestA, a := -f(c), c
	sum := 0.0
	for i := len(early) - 1; i >= 0; i-- {
		sum += early[i].Cost
		if i > 0 && early[i-1].Time == early[i].Time {
			continue // the whole instant, or nothing of it
		}
		if v := sum - f(early[i].Time); v > bestA {
			bestA, a = v, early[i].Time
		}
	}
	bestB, b := -g(c+1), c+1
	sum = 0
	for i, x := range late {
		sum += x.Cost
		if i+1 < len(late) && late[i+1].Time == x.Time {
			continue
		}
		if v := sum - g(x.Time+1); v > bestB {
			bestB, b = v, x.Time+1
		}
	}
	return bestA + bestB, a, b
}
