package guarantees

import (
	"fmt"
	"math"
	"math/rand/v2"

	"github.com/sluice-go/sluice/engine"
)

// Booking is one admission on a [Key]: a request Allow admitted, a
// reservation Reserve booked, or a partial grant. It counts at the
// instant its caller may act, now plus the reservation's Delay, unless a
// cancel gave it back.
type Booking struct {
	// Verb is the verb that admitted it.
	Verb engine.Verb
	// Decided is when it was decided, and Acts when its caller may act.
	Decided, Acts int64
	// Cost is what it admitted: the cost, or the amount granted.
	Cost float64
	// At is a reservation's Decision.At, which its cancel names.
	At int64
	// GivenBack reports whether a cancel gave its cost back.
	GivenBack bool
	// Changed reports whether it was decided under the key's new limit,
	// after a change (see [Key.ChangeAt]).
	Changed bool
}

// Bookings returns every admission so far, in the order it was decided.
func (k *Key) Bookings() []Booking { return k.bookings }

// Regiven returns the cost that cancels gave back for bookings that were
// given back already: a cancel that counts twice.
func (k *Key) Regiven() float64 { return k.regiven }

// Reserve books cost at now if it conforms within maxDelay, and returns
// the decision and the booking's index (or -1).
func (k *Key) Reserve(now int64, cost float64, maxDelay int64) (engine.Decision, int, error) {
	d, err := k.do(engine.Op{Verb: engine.VerbReserve, Cost: cost, Now: now, MaxDelay: maxDelay})
	if err != nil || !d.Allowed {
		return d, -1, err
	}
	i := len(k.bookings) - 1
	if d.At != 0 {
		k.waits = append(k.waits, i)
	}
	return d, i, nil
}

// Cancel gives back booking i at now, as its caller would: a cancel of its
// instant and cost. A booking that did not have to wait has no instant to
// name, and is not cancelled.
func (k *Key) Cancel(now int64, i int) (engine.Decision, error) {
	b := &k.bookings[i]
	if b.Verb != engine.VerbReserve || b.At == 0 {
		return engine.Decision{}, fmt.Errorf("booking %d (%+v) is no reservation that waits", i, *b)
	}
	d, err := k.do(engine.Op{Verb: engine.VerbCancel, Cost: b.Cost, Now: now, At: b.At})
	if err != nil || !d.Allowed {
		return d, err
	}
	if b.GivenBack {
		k.regiven += b.Cost
	}
	b.GivenBack = true
	return d, nil
}

// AllowAtMost grants as much of cost as fits at now.
func (k *Key) AllowAtMost(now int64, cost float64) (engine.Decision, error) {
	return k.do(engine.Op{Verb: engine.VerbAtMost, Cost: cost, Now: now})
}

// waiting returns the index of the nth latest reservation that waited
// and was not given back (n from 1), or -1.
func (k *Key) waiting(n int) int {
	// A cancel gives back only the key's latest booking, so bookings given
	// back gather at the end of waits, where they are dropped.
	for len(k.waits) > 0 && k.bookings[k.waits[len(k.waits)-1]].GivenBack {
		k.waits = k.waits[:len(k.waits)-1]
	}
	for j := len(k.waits) - 1; j >= 0; j-- {
		if i := k.waits[j]; !k.bookings[i].GivenBack {
			if n--; n == 0 {
				return i
			}
		}
	}
	return -1
}

// ShapingAdversaries returns traffic patterns of the shaping verbs on one
// key of an algorithm that reserves (p.Reservable()), with requests of
// cost each and time moving forward: waiters booked at one instant and
// arriving at twice the rate; cancels of the latest booking followed at
// once by a new reservation or an Allow; cancels of a booking in the
// middle, twice in a row, after the booked instant, and of a booking after
// another took its instant; partial grants of three times the limit; and
// seeded random mixes of Allow, Reserve with any maximum delay, Cancel of
// any booking and AtMost. Each runs for about ten of p's periods.
func ShapingAdversaries(p engine.Params, cost float64) []Adversary {
	period := Period(p)
	horizon := 10 * period
	step := max(int64(float64(period)*cost/p.Limit), 1) // one cost's worth of time at the rate
	const anyDelay = 1 << 60
	advs := []Adversary{
		{"64 waiters at one instant", func(k *Key, start int64) error {
			for range 64 {
				if _, _, err := k.Reserve(start, cost, anyDelay); err != nil {
					return err
				}
			}
			return nil
		}},
		{"waiters at twice the rate, waiting up to a period", func(k *Key, start int64) error {
			for now := start; now < start+horizon; now += max(step/2, 1) {
				if _, _, err := k.Reserve(now, cost, period); err != nil {
					return err
				}
			}
			return nil
		}},
		{"the latest booking cancelled and booked again at once", func(k *Key, start int64) error {
			return k.repeat(start, horizon, step, func(now int64) error {
				for range 3 {
					if _, _, err := k.Reserve(now, cost, 2*period); err != nil {
						return err
					}
				}
				return k.cancelAndThen(now, 1, func() error {
					_, _, err := k.Reserve(now, cost, 2*period)
					return err
				})
			})
		}},
		{"the latest booking cancelled and its place taken by Allow", func(k *Key, start int64) error {
			return k.repeat(start, horizon, step, func(now int64) error {
				if _, _, err := k.Reserve(now, cost, 2*period); err != nil {
					return err
				}
				return k.cancelAndThen(now, 1, func() error {
					for range 3 {
						if _, err := k.Apply(engine.VerbAllow, now, cost); err != nil {
							return err
						}
					}
					return nil
				})
			})
		}},
		{"a booking in the middle cancelled", func(k *Key, start int64) error {
			return k.repeat(start, horizon, step, func(now int64) error {
				for range 4 {
					if _, _, err := k.Reserve(now, cost, 4*period); err != nil {
						return err
					}
				}
				return k.cancelAndThen(now, 3, func() error {
					_, err := k.Apply(engine.VerbAllow, now, cost)
					return err
				})
			})
		}},
		{"the latest booking cancelled twice", func(k *Key, start int64) error {
			return k.repeat(start, horizon, step, func(now int64) error {
				for range 2 {
					if _, _, err := k.Reserve(now, cost, 2*period); err != nil {
						return err
					}
				}
				// The same one again: it is no longer waiting, so name it.
				i := k.waiting(1)
				if i < 0 {
					return nil
				}
				for range 2 {
					if _, err := k.Cancel(now, i); err != nil {
						return err
					}
				}
				return nil
			})
		}},
		{"a booking cancelled, its instant booked again, and cancelled again", func(k *Key, start int64) error {
			return k.repeat(start, horizon, step, func(now int64) error {
				if _, _, err := k.Reserve(now, cost, 2*period); err != nil {
					return err
				}
				first := k.waiting(1)
				if first < 0 {
					return nil
				}
				if _, err := k.Cancel(now, first); err != nil {
					return err
				}
				if _, _, err := k.Reserve(now, cost, 2*period); err != nil {
					return err
				}
				_, err := k.Cancel(now, first) // the first one's caller, again
				return err
			})
		}},
		{"the latest booking cancelled at and after its instant", func(k *Key, start int64) error {
			return k.repeat(start, horizon, step, func(now int64) error {
				_, i, err := k.Reserve(now, cost, 2*period)
				if err != nil || i < 0 || k.bookings[i].At == 0 {
					return err
				}
				at := k.bookings[i].At
				if _, err := k.Cancel(at, i); err != nil {
					return err
				}
				_, err = k.Cancel(at+step, i)
				return err
			})
		}},
		{"partial grants of three times the limit, greedy", func(k *Key, start int64) error {
			for now := start; now < start+horizon; {
				d, err := k.AllowAtMost(now, 3*p.Limit)
				if err != nil {
					return err
				}
				now += int64(d.RetryAfter)
			}
			return nil
		}},
	}
	for seed := range uint64(4) {
		advs = append(advs,
			Adversary{fmt.Sprintf("random reservations, cancels, grants and admissions, seed %d", seed), func(k *Key, start int64) error {
				return k.randomShaping(rand.New(rand.NewPCG(seed, 0x5ba9e)), start, horizon, cost, false)
			}},
			Adversary{fmt.Sprintf("random reservations, cancels retried, grants and admissions, seed %d", seed), func(k *Key, start int64) error {
				return k.randomShaping(rand.New(rand.NewPCG(seed, 0x5ba9e)), start, horizon, cost, true)
			}})
	}
	return advs
}

// repeat runs round at start and then at random times about one cost's
// worth of time apart, until horizon has passed.
func (k *Key) repeat(start, horizon, step int64, round func(now int64) error) error {
	rng := rand.New(rand.NewPCG(uint64(start), uint64(step)))
	for now := start; now < start+horizon; now += 1 + rng.Int64N(2*step) {
		if err := round(now); err != nil {
			return err
		}
	}
	return nil
}

// cancelAndThen cancels at now the nth latest reservation still waiting,
// if there is one, and runs then.
func (k *Key) cancelAndThen(now int64, n int, then func() error) error {
	i := k.waiting(n)
	if i < 0 {
		return nil
	}
	if _, err := k.Cancel(now, i); err != nil {
		return err
	}
	return then()
}

// randomShaping offers a random mix of Allow, Reserve with maximum delays
// from none to any, Cancel of the latest, a middle or any booking (some
// after their instant) and AtMost of up to three times the limit (in
// whole units of cost, which GCRA's bound in amounts needs). Each booking
// is cancelled at most once, as Reservation.Cancel does, unless retries:
// then a cancel may be made again, as by a caller that retries a cancel
// whose answer it did not get.
func (k *Key) randomShaping(rng *rand.Rand, start, horizon int64, cost float64, retries bool) error {
	p := k.params
	period, gap := Period(p), unitGap(p)
	var booked []int // every reservation that waited, in booking order
	for now := start; now < start+horizon; {
		var err error
		switch r := rng.IntN(10); {
		case r < 2:
			_, err = k.Apply(engine.VerbAllow, now, cost)
		case r < 5:
			delays := [...]int64{0, period / 4, period, 4 * period, 1 << 60}
			var i int
			_, i, err = k.Reserve(now, cost, delays[rng.IntN(len(delays))])
			if i >= 0 && k.bookings[i].At != 0 {
				booked = append(booked, i)
			}
		case r < 8 && len(booked) > 0:
			j := len(booked) - 1
			switch rng.IntN(3) {
			case 0:
				j = rng.IntN(len(booked))
			case 1:
				j = len(booked) / 2
			}
			_, err = k.Cancel(now, booked[j])
			if !retries {
				booked = append(booked[:j], booked[j+1:]...)
			}
		default:
			_, err = k.AllowAtMost(now, cost*float64(1+rng.IntN(int(math.Ceil(3*p.Limit/cost)))))
		}
		if err != nil {
			return err
		}
		now = nextNow(rng, now, gap)
	}
	return nil
}

// nextNow returns the instant of a random trace's next request after now:
// the same instant, a few nanoseconds later, or less than gap (at least
// one nanosecond) later.
func nextNow(rng *rand.Rand, now, gap int64) int64 {
	switch rng.IntN(4) {
	case 0: // another request at the same instant
		return now
	case 1:
		return now + 1 + rng.Int64N(1000)
	}
	return now + rng.Int64N(max(gap, 1))
}

// unitGap is twice the time p's period gives each unit of its limit: the
// gap nextNow draws within for a random trace of p.
func unitGap(p engine.Params) int64 {
	return Period(p) * 2 / max(int64(p.Limit), 1)
}
