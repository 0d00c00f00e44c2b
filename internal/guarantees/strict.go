package guarantees

import (
	"fmt"
	"math"
	"math/rand/v2"

	"github.com/sluice-go/sluice/engine"
)

// Block is one block of a key under a penalty: from the overflow that
// started it to its end.
type Block struct {
	From, Until int64
}

// StrictKey is a [Key] of an algorithm under a penalty or with denials
// counted, that also records the key's blocks and what each request was
// decided in. Time moves forward on it.
type StrictKey struct {
	*Key
	blocks []Block
	// decided holds, for each booking of the Key, the end of the block in
	// force when it was decided (zero for none).
	decided []int64
	// windows holds, for each booking, the key's State.Time after it:
	// for the fixed window, the start of the window it was counted in.
	windows []int64
}

// NewStrictKey returns a fresh key of the algorithm p describes.
func NewStrictKey(p engine.Params) *StrictKey { return &StrictKey{Key: NewKey(p)} }

// Blocks returns the key's blocks so far, in the order they started.
func (k *StrictKey) Blocks() []Block { return k.blocks }

// DecidedInBlock returns, for booking i, the end of the block in force
// when it was decided, or zero.
func (k *StrictKey) DecidedInBlock(i int) int64 { return k.decided[i] }

// Window returns the start of the fixed window that booking i was counted
// in: where it was anchored, which under counted denials or a penalty may
// be a denied request.
func (k *StrictKey) Window(i int) int64 { return k.windows[i] }

// do runs op on the key, as Key.do does, and records a block it starts
// and the block each booking was decided in.
func (k *StrictKey) do(op engine.Op) (engine.Decision, error) {
	until := k.state.Until
	if until <= op.Now {
		until = 0
	}
	n := len(k.bookings)
	d, err := k.Key.do(op)
	if err != nil {
		return d, err
	}
	for range k.bookings[n:] {
		k.decided = append(k.decided, until)
		k.windows = append(k.windows, k.state.Time)
	}
	if next := k.state.Until; until == 0 && next > op.Now {
		k.blocks = append(k.blocks, Block{From: op.Now, Until: next})
	}
	return d, nil
}

// Apply runs a request on the key.
func (k *StrictKey) Apply(verb engine.Verb, now int64, cost float64) (engine.Decision, error) {
	return k.do(engine.Op{Verb: verb, Cost: cost, Now: now})
}

// Reserve books cost at now if it conforms within maxDelay.
func (k *StrictKey) Reserve(now int64, cost float64, maxDelay int64) (engine.Decision, error) {
	return k.do(engine.Op{Verb: engine.VerbReserve, Cost: cost, Now: now, MaxDelay: maxDelay})
}

// Obey asks for cost from start until end, and after each denial asks
// again exactly when its RetryAfter says, less early nanoseconds: a client
// that follows the decisions (early = 0), or one just too impatient to.
func (k *StrictKey) Obey(start, end, early int64, cost float64) error {
	for now := start; now < end; {
		d, err := k.Apply(engine.VerbAllow, now, cost)
		if err != nil {
			return err
		}
		if !d.Allowed {
			now += max(int64(d.RetryAfter)-early, 1)
		}
	}
	return nil
}

// Flood offers cost every gap nanoseconds from start until end.
func (k *StrictKey) Flood(start, end, gap int64, cost float64) error {
	for now := start; now < end; now += gap {
		if _, err := k.Apply(engine.VerbAllow, now, cost); err != nil {
			return err
		}
	}
	return nil
}

// StrictAdversary is a pattern of traffic on a [StrictKey].
type StrictAdversary struct {
	Name string
	Run  func(k *StrictKey, start int64) error
}

// StrictAdversaries returns traffic patterns of requests of cost each
// that push an algorithm under a penalty or with denials counted: clients
// that retry exactly when told, and a nanosecond too early, from rest and
// from just before a window boundary; floods at twice and ten times the
// rate; bursts on both sides of every boundary; and seeded random mixes of
// every verb the algorithm runs (Allow, checks, fill-ups, reservations
// with any maximum delay, cancels, partial grants). Each runs for about
// ten of p's periods, or three penalties if longer.
func StrictAdversaries(p engine.Params, cost float64) []StrictAdversary {
	period := Period(p)
	horizon := max(10*period, 3*p.Penalty)
	boundary := func(t int64) int64 { return (t/p.Interval + 1) * p.Interval }
	burst := max(int(math.Ceil(p.Limit/cost)), 1)
	gap := max(int64(float64(period)*cost/p.Limit), 1) // one cost's worth of time at the rate
	advs := []StrictAdversary{
		{"obeys RetryAfter from rest", func(k *StrictKey, start int64) error { return k.Obey(start, start+horizon, 0, cost) }},
		{"obeys RetryAfter from 1ns before a boundary", func(k *StrictKey, start int64) error {
			b := boundary(start) - 1
			return k.Obey(b, b+horizon, 0, cost)
		}},
		{"retries 1ns before RetryAfter", func(k *StrictKey, start int64) error { return k.Obey(start, start+horizon, 1, cost) }},
		{"floods at twice the rate", func(k *StrictKey, start int64) error {
			return k.Flood(start, start+horizon, max(gap/2, 1), cost)
		}},
		{"floods at ten times the rate", func(k *StrictKey, start int64) error {
			return k.Flood(start, start+horizon, max(gap/10, 1), cost)
		}},
		{"bursts 1ns either side of each boundary", func(k *StrictKey, start int64) error {
			for b := boundary(start); b < start+horizon; b += p.Interval {
				for _, t := range []int64{b - 1, b} {
					for range burst + 1 {
						if _, err := k.Apply(engine.VerbAllow, t, cost); err != nil {
							return err
						}
					}
				}
			}
			return nil
		}},
	}
	for seed := range uint64(4) {
		advs = append(advs, StrictAdversary{fmt.Sprintf("random mix of every verb, seed %d", seed), func(k *StrictKey, start int64) error {
			return k.randomMix(rand.New(rand.NewPCG(seed, 0x5791c7)), start, horizon, cost)
		}})
	}
	return advs
}

// randomMix offers a random mix of every verb p runs, with costs of cost
// (partial grants of up to three times the limit, in whole units of it).
func (k *StrictKey) randomMix(rng *rand.Rand, start, horizon int64, cost float64) error {
	p := k.params
	period, gap := Period(p), unitGap(p)
	var waiting []int // reservations that waited, not cancelled yet
	for now := start; now < start+horizon; {
		var err error
		switch r := rng.IntN(10); {
		case r < 3:
			_, err = k.Apply(engine.VerbAllow, now, cost)
		case r < 4:
			_, err = k.Apply(engine.VerbCheck, now, cost)
		case r < 5 && p.Kind == engine.KindLeakyBucket:
			_, err = k.Apply(engine.VerbFill, now, cost*float64(1+rng.IntN(2)))
		case r < 7 && p.Reservable():
			delays := [...]int64{0, period / 4, period, 4 * period, p.Penalty, 1 << 60}
			n := len(k.bookings)
			_, err = k.Reserve(now, cost, delays[rng.IntN(len(delays))])
			if len(k.bookings) > n && k.bookings[n].At != 0 {
				waiting = append(waiting, n)
			}
		case r < 8 && len(waiting) > 0:
			j := rng.IntN(len(waiting))
			b := k.bookings[waiting[j]]
			var d engine.Decision
			d, err = k.do(engine.Op{Verb: engine.VerbCancel, Cost: b.Cost, Now: now, At: b.At})
			if d.Allowed {
				k.bookings[waiting[j]].GivenBack = true
			}
			waiting = append(waiting[:j], waiting[j+1:]...)
		default:
			_, err = k.Apply(engine.VerbAtMost, now, cost*float64(1+rng.IntN(int(math.Ceil(3*p.Limit/cost)))))
		}
		if err != nil {
			return err
		}
		now = nextNow(rng, now, gap)
	}
	return nil
}
