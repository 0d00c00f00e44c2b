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
// what it admits (see [Booking]). It keeps its state as a store does
// (see "State and time" in package engine): written back when a decision
// records (Params.Records) or carries a state kept under another limit
// over (Params.Carries), with its expiry, now + the decision's
// ResetAfter; from its expiry on, a decision reads the zero State,
// whatever the limit then, and one that records nothing leaves the state
// and its expiry as they were. Its limit may change once (see
// [Key.ChangeAt]).
type Key struct {
	params   engine.Params
	state    engine.State
	expires  int64 // the state's expiry; zero for the zero State
	bookings []Booking
	waits    []int // the indexes of the reservations that waited
	regiven  float64
	settled  []Settlement
	store    func(engine.Op) (engine.Decision, error) // nil: Params.Step
	// next is the limit the key takes from the first decision at or
	// after changeAt on, if it is to change; recorded is the instant of
	// its latest decision that wrote its state; change is the change
	// made; early counts the denials whose RetryAfter lay past the
	// state's expiry (see [Key.Greedy]).
	next     *engine.Params
	changeAt int64
	recorded int64
	change   Change
	early    int
}

// Change is a change of a key's limit: Params travel with every request,
// and the key's state carries over to the new limit (see "Limits that
// change" in package engine).
type Change struct {
	// From and To are the old limit and the new.
	From, To engine.Params
	// LastRecorded is the instant of the key's last decision under the
	// old limit that wrote its state (zero for none): for the buckets,
	// the point from which the new rate counts. Expires is that state's
	// expiry, LastRecorded + its ResetAfter under the old limit (zero for
	// none): from then on the key is fresh, whatever the new limit. First
	// is the instant of the first decision under the new limit other than
	// a check (which records nothing): for GCRA, the instant its TAT is
	// converted to the new interval.
	LastRecorded, Expires, First int64
	// Made reports whether the change was made: a decision came at or
	// after the instant it was due.
	Made bool
}

// ChangeAt makes p the key's limit from its first decision at or after
// at on. p must be valid, and of the key's algorithm and mode.
func (k *Key) ChangeAt(at int64, p engine.Params) {
	k.next, k.changeAt = &p, at
}

// Change returns the change of the key's limit made so far, if any.
func (k *Key) Change() Change { return k.change }

// NewKey returns a fresh key of the algorithm p describes.
func NewKey(p engine.Params) *Key { return &Key{params: p} }

// NewStoreKey returns a key of the algorithm p describes whose decisions
// decide makes: a store's, on one of its keys, by the caller's clock.
func NewStoreKey(p engine.Params, decide func(engine.Op) (engine.Decision, error)) *Key {
	return &Key{params: p, store: decide}
}

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
	if k.next != nil && op.Now >= k.changeAt {
		k.change = Change{From: k.params, To: *k.next, LastRecorded: k.recorded, Expires: k.expires, Made: true}
		k.params, k.next = *k.next, nil
	}
	if k.change.Made && k.change.First == 0 && op.Verb != engine.VerbCheck {
		k.change.First = op.Now
	}
	d, err := k.decide(op)
	if err != nil {
		return d, err
	}
	b := Booking{Verb: op.Verb, Decided: op.Now, Acts: op.Now + int64(d.Delay), Cost: op.Cost, At: d.At, Changed: k.change.Made}
	switch {
	case op.Verb == engine.VerbAllow && d.Allowed, op.Verb == engine.VerbReserve && d.Allowed:
		k.bookings = append(k.bookings, b)
	case op.Verb == engine.VerbAtMost && d.Granted > 0:
		b.Cost = d.Granted
		k.bookings = append(k.bookings, b)
	}
	return d, nil
}

// decide decides op: by the key's store, or by Params.Step on the state
// it keeps as a store does.
func (k *Key) decide(op engine.Op) (engine.Decision, error) {
	if k.store != nil {
		return k.store(op)
	}
	state := k.read(op.Now)
	carried := k.params.Carries(&state, &op)
	s, d, err := k.params.Step(state, op)
	if err != nil {
		return d, err
	}
	if k.params.Records(op.Verb, &d) || carried {
		k.state, k.recorded, k.expires = s, op.Now, op.Now+int64(d.ResetAfter)
	}
	return d, nil
}

// read returns the state as a decision at now reads it: the zero State
// from its expiry on.
func (k *Key) read(now int64) engine.State {
	if now >= k.expires {
		return engine.State{}
	}
	return k.state
}

// Early returns how many denials Greedy saw whose RetryAfter lay past the
// key's expiry, where it asked instead (see [Key.Greedy]).
func (k *Key) Early() int { return k.early }

// Greedy asks for cost at start and then at every instant it is admitted,
// until end: after a denial it asks again exactly when RetryAfter says,
// or at the key's expiry if that comes first. It checks that the instant
// is exact: one nanosecond earlier the cost is still denied, and at that
// instant it is admitted.
//
// Under the limit that recorded the state, RetryAfter never lies past
// the state's expiry; under another, after a change, Step reads the state
// as it stands, and may name an instant past it, when the key is fresh
// and the cost (at most the limit) is admitted.
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
		if k.expires > now && k.expires < at {
			at = k.expires
			k.early++
		}
		if k.next != nil && at >= k.changeAt {
			// The limit changes before then: the old one's RetryAfter
			// says nothing of the new one.
			now = at
			continue
		}
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
