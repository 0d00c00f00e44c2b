// Package guarantees measures what each of sluice's algorithms admits: the
// burst from rest, the most admitted in any window of the limit's period
// under adversarial traffic, and the long-run rate, by driving the
// algorithms' step functions with simulated time. The README's table of
// guarantees is its output (go run ./internal/guarantees/cmd/table).
package guarantees

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"sort"

	"github.com/sluice-go/sluice/engine"
)

// Admission is one admitted request.
type Admission struct {
	// Time is when it was admitted, in nanoseconds.
	Time int64
	// Cost is what it consumed.
	Cost float64
}

// MaxInWindow returns the most cost admitted in any half-open interval
// [a, a+d) of length d > 0.
//
// Some interval of maximum cost starts at an admission (move any other to
// the right until it does), so it is enough to try those, with a second
// index following each interval's end.
func MaxInWindow(admitted []Admission, d int64) float64 {
	a := slices.Clone(admitted)
	sort.SliceStable(a, func(i, j int) bool { return a[i].Time < a[j].Time })
	var best, sum float64
	end := 0
	for start := range a {
		for end < len(a) && a[end].Time-a[start].Time < d {
			sum += a[end].Cost
			end++
		}
		best = max(best, sum)
		sum -= a[start].Cost
	}
	return best
}

// Key is one key of an algorithm driven through Params.Step, recording
// what it admits (see [Booking]).
type Key struct {
	params   engine.Params
	state    engine.State
	bookings []Booking
	waits    []int // the indexes of the reservations that waited
	regiven  float64
}

// NewKey returns a fresh key of the algorithm p describes.
func NewKey(p engine.Params) *Key { return &Key{params: p} }

// Admitted returns the cost admitted so far that stands, each at the
// instant its caller may act, in the order it was admitted: requests
// Allow admitted, reservations booked and not given back, partial grants.
func (k *Key) Admitted() []Admission {
	a := make([]Admission, 0, len(k.bookings))
	for _, b := range k.bookings {
		if !b.GivenBack {
			a = append(a, Admission{Time: b.Acts, Cost: b.Cost})
		}
	}
	return a
}

// Apply runs a request on the key.
func (k *Key) Apply(verb engine.Verb, now int64, cost float64) (engine.Decision, error) {
	return k.do(engine.Op{Verb: verb, Cost: cost, Now: now})
}

// do runs op on the key and records what it admits.
func (k *Key) do(op engine.Op) (engine.Decision, error) {
	s, d, err := k.params.Step(k.state, op)
	if err != nil {
		return d, err
	}
	k.state = s
	b := Booking{Verb: op.Verb, Decided: op.Now, Acts: op.Now + int64(d.Delay), Cost: op.Cost, At: d.At}
	switch {
	case op.Verb == engine.VerbAllow && d.Allowed, op.Verb == engine.VerbReserve && d.Allowed:
		k.bookings = append(k.bookings, b)
	case op.Verb == engine.VerbAtMost && d.Granted > 0:
		b.Cost = d.Granted
		k.bookings = append(k.bookings, b)
	}
	return d, nil
}

// Greedy asks for cost at start and then at every instant it is admitted,
// until end: after a denial it asks again exactly when RetryAfter says.
// It checks that RetryAfter is exact: one nanosecond earlier the cost is
// still denied, and at that instant it is admitted.
func (k *Key) Greedy(start, end int64, cost float64) error {
	for now := start; now < end; {
		d, err := k.Apply(engine.VerbAllow, now, cost)
		if err != nil {
			return err
		}
		if d.Allowed {
			continue
		}
		at := now + int64(d.RetryAfter)
		if before, err := k.Apply(engine.VerbCheck, at-1, cost); err != nil || before.Allowed {
			return fmt.Errorf("%v: cost %v denied at %d with RetryAfter %v, but admitted 1ns earlier than that (err %v)",
				k.params, cost, now, d.RetryAfter, err)
		}
		if on, err := k.Apply(engine.VerbCheck, at, cost); err != nil || !on.Allowed {
			return fmt.Errorf("%v: cost %v denied at %d with RetryAfter %v, and still denied then (err %v)",
				k.params, cost, now, d.RetryAfter, err)
		}
		now = at
	}
	return nil
}

// Uniform offers cost every gap nanoseconds from start until end.
func (k *Key) Uniform(start, end, gap int64, cost float64) error {
	for now := start; now < end; now += gap {
		if _, err := k.Apply(engine.VerbAllow, now, cost); err != nil {
			return err
		}
	}
	return nil
}

// Adversary is a pattern of traffic on one key.
type Adversary struct {
	// Name says what the pattern does.
	Name string
	// Run offers the pattern's traffic to k, starting at start.
	Run func(k *Key, start int64) error
}

// Period returns the time scale over which p's limit applies: the window,
// or the time the whole burst takes to come back at the rate.
func Period(p engine.Params) int64 {
	switch p.Kind {
	case engine.KindLeakyBucket, engine.KindTokenBucket:
		return int64(math.Ceil(p.Limit/p.Amount)) * p.Interval
	case engine.KindGCRA:
		return int64(math.Ceil(p.Limit)) * p.Interval
	}
	return p.Interval
}

// Adversaries returns traffic patterns of requests of cost each that push
// an algorithm to its limits: hammering at every admission instant from
// rest or from just before a window boundary, priming a window and then
// hammering at its very end, bursts clustered on both sides of every
// boundary, ten times the sustainable rate, and seeded random traffic.
// Each runs for about ten of p's periods.
func Adversaries(p engine.Params, cost float64) []Adversary {
	period := Period(p)
	horizon := 10 * period
	// boundary returns the first multiple of the interval after t: where
	// aligned windows turn and interval refills land.
	boundary := func(t int64) int64 { return (t/p.Interval + 1) * p.Interval }
	burst := max(int(math.Ceil(p.Limit/cost)), 1)
	advs := []Adversary{
		{"greedy from rest", func(k *Key, start int64) error { return k.Greedy(start, start+horizon, cost) }},
		{"greedy from 1ns before a boundary", func(k *Key, start int64) error {
			b := boundary(start) - 1
			return k.Greedy(b, b+horizon, cost)
		}},
		{"10x the rate", func(k *Key, start int64) error {
			gap := max(int64(float64(period)*cost/p.Limit/10), 1)
			return k.Uniform(start, start+horizon, gap, cost)
		}},
		{"bursts 1ns either side of each boundary", func(k *Key, start int64) error {
			for b := boundary(start); b < start+horizon; b += p.Interval {
				for _, t := range []int64{b - 1, b} {
					for range burst {
						if _, err := k.Apply(engine.VerbAllow, t, cost); err != nil {
							return err
						}
					}
				}
			}
			return nil
		}},
	}
	for _, primed := range []int{1, max(burst/2, 1), burst} {
		for _, at := range []struct {
			name string
			from func(start int64) int64
		}{
			{"at rest", func(start int64) int64 { return start }},
			{"at a boundary", boundary},
		} {
			advs = append(advs, Adversary{
				fmt.Sprintf("%d requests %s, then greedy from 1ns before the window ends", primed, at.name),
				func(k *Key, start int64) error {
					t := at.from(start)
					for range primed {
						if _, err := k.Apply(engine.VerbAllow, t, cost); err != nil {
							return err
						}
					}
					return k.Greedy(t+p.Interval-1, t+horizon, cost)
				},
			})
		}
	}
	gap := period * int64(math.Ceil(cost)) / int64(burst)
	for seed := range uint64(4) {
		advs = append(advs, Adversary{fmt.Sprintf("random traffic, seed %d", seed), func(k *Key, start int64) error {
			rng := rand.New(rand.NewPCG(seed, 0xad5e))
			for now := start; now < start+horizon; {
				if _, err := k.Apply(engine.VerbAllow, now, cost); err != nil {
					return err
				}
				now = nextNow(rng, now, gap)
			}
			return nil
		}})
	}
	return advs
}
