// Package reference holds exact models of sluice's algorithms, written from
// their definitions rather than from the production step functions, in
// rational arithmetic: times are integer nanoseconds (from 0 to 2^62, the
// range a request's time may take, so that their differences and sums
// with spans of up to 2^60 fit an int64), amounts are [big.Rat] values
// equal to the float64 inputs, and nothing is rounded except where a
// definition rounds (GCRA's nanoseconds, ceilings of durations).
//
// A model answers each operation with the exact decision and, beside it,
// how close the decision came to a threshold (its margin): within a tiny
// band of a threshold the production code's float arithmetic may fall
// either side, and [Compare] says so instead of failing.
//
// A key's limit may change from one request to the next: [Change] carries
// a model over to another limit of its algorithm, keeping what the key has
// used, as package engine's "Limits that change" defines it, until the
// state's expiry, from which the key is fresh whatever its limit, as
// "State and time" there has a store treat it (see [Expiring]).
package reference

import (
	"fmt"
	"math"
	"math/big"

	"github.com/sluice-go/sluice/engine"
)

// Model is the exact reference of one algorithm for one key.
type Model interface {
	// Apply runs op, which must be valid for the model's Params, on the key
	// and returns the exact decision. It records what the Store contract
	// says a decision records ([Records]): a fill-up, an exhaust, a
	// charge, a refund, an admission, a booked reservation, a cancel that
	// gave its cost back (or released a lease), an extended lease, a
	// partial grant of more than zero, a denied acquisition that waits in
	// a concurrency limit's line, a waiter's leaving.
	Apply(op engine.Op) Decision
	// Reset forgets the key.
	Reset()
	// Load replaces the key's state by the exact value of a production
	// state, so that a comparison can follow the production code through a
	// decision its float arithmetic was entitled to take either way.
	Load(s engine.State)
}

// Decision is an exact decision with what a comparison needs to judge a
// float implementation of it.
type Decision struct {
	// Allowed reports whether the cost is admitted (for VerbFill: whether
	// it fitted below the limit).
	Allowed bool
	// Used is the allowance in use after the request, unclamped.
	Used *big.Rat
	// RetryAfter is the smallest delay in nanoseconds after which the same
	// cost would be admitted (for a refused reservation: booked with the
	// same MaxDelay); zero when admitted.
	RetryAfter int64
	// ResetAfter is the smallest delay in nanoseconds after which the key
	// is fresh.
	ResetAfter int64
	// Margin is the distance from the decision's inputs to the nearest
	// threshold that would change it (admission, a count of refills, the
	// half nanosecond GCRA rounds at), relative to the quantity compared
	// there. It is +Inf when no threshold is near in that sense.
	Margin float64
	// Drain is how many nanoseconds it takes for one unit of the amount
	// that RetryAfter, ResetAfter and Delay wait on to go away; zero when
	// those durations are exact instants (window ends, entry times,
	// refills, GCRA's integer arithmetic).
	Drain float64
	// Delay is, for a booked reservation, how long from now until the
	// caller may act, in nanoseconds, and At that instant when Delay is
	// positive (zero otherwise). For a lease taken or extended (the
	// concurrency limit's VerbAllow and VerbExtend), At is its identity,
	// its expiry, and Delay zero; for a denied VerbAllow of the
	// concurrency limit that waits in its line, At is the waiter's ticket.
	Delay, At int64
	// Granted is, for VerbAtMost, the cost admitted: the whole cost, the
	// most whole units less than it that fit, or zero; for VerbCharge, the
	// cost recorded, and for VerbRefund, the cost given back, each the
	// float64 nearest the exact amount (see [key.settle]).
	Granted float64
	// Held is the most the key has held at its point, in units of cost,
	// since it was fresh or loaded (the buckets' level or tokens in use,
	// see [peaker]), and for VerbCharge and VerbRefund at least what it
	// held before or after the op (the GCRA's too): the production's
	// float amounts round relative to it, which [Compare] forgives where
	// it exceeds the limit (a debt).
	Held float64
}

// Records reports whether a decision d on verb changes the key's state,
// as the Store contract defines it: a fill-up, an exhaust, a charge and a
// refund always; an admission, a booked reservation, a cancel that gave
// its cost back (or released a lease), an extension of a lease and a
// waiter's leaving the concurrency limit's line when Allowed; a denied
// acquisition when it waits in that line (its At is its ticket); a
// partial grant when it granted more than zero; a check or another
// denial never.
func Records(verb engine.Verb, d Decision) bool {
	switch verb {
	case engine.VerbFill, engine.VerbExhaust, engine.VerbCharge, engine.VerbRefund:
		return true
	case engine.VerbAllow:
		return d.Allowed || d.At != 0
	case engine.VerbReserve, engine.VerbCancel, engine.VerbExtend, engine.VerbLeave:
		return d.Allowed
	case engine.VerbAtMost:
		return d.Granted > 0
	}
	return false
}

// New returns a fresh model of the algorithm p describes. p must be valid.
func New(p engine.Params) (Model, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	return newKey(p, true)
}

// newKey returns a fresh key of the algorithm p describes, which keeps
// its state's expiry if keeps.
func newKey(p engine.Params, keeps bool) (*key, error) {
	m, err := newModel(p)
	if err != nil {
		return nil, err
	}
	return &key{Model: m, p: p, keeps: keeps}, nil
}

// key is a model as a store holds it: it forgets the key as soon as a
// recorded request leaves it fresh (ResetAfter zero), as the Store
// contract lets every store do, so that whatever its state still holds (a
// log entry that has left the window, a level at a past time) no longer
// counts if the clock steps back; and it makes VerbAtMost of the other
// verbs, VerbExhaust of a check and the model's own fill-up (see
// [key.exhaust]), and VerbCharge and VerbRefund of a check and the
// model's own settlement (see [key.settle]).
//
// Every decision but a check first carries a state kept under another
// limit over to the key's (see [Change]), and records that, whatever it
// decides.
//
// It keeps its state's expiry (see [expiry]), and with the rule in force
// (see [Expiring]) decides a request at or after it from a fresh key. A
// Strict's key keeps none: the Strict keeps the expiry of the whole
// state, its block included.
type key struct {
	Model
	p     engine.Params
	keeps bool // whether it keeps its state's expiry
	expiry
}

// expiry is a key's expiry as a store keeps it beside the state (package
// engine's "State and time"): at = now + ResetAfter of the latest
// decision that recorded the state or carried it over, under the limit in
// force then; timed is false while no decision has, since the key was
// made, reset or loaded (see [LoadExpiry]).
//
// With the rule in force (forget), the key is fresh from its expiry on,
// whatever its limit: a decision at or after it is decided from a fresh
// key, and recorded as such if it records; one that records nothing
// leaves the state and its expiry as they were (a store may have kept
// the key), so that a clock that steps back before the expiry finds them
// again. Under the limit that recorded it the state is fresh at its
// expiry anyway; under another it may still hold something (a level that
// a slower rate has not drained, a count that a longer window still
// holds, log entries that a longer window still counts), which no longer
// counts. A decision's RetryAfter and ResetAfter are read from the state
// as the limit in force reads it, as [engine.Params.Step] reads it: after
// a change, one that records nothing may name an instant after the
// expiry, from which the key is fresh.
type expiry struct {
	at            int64
	timed, forget bool
}

// expired reports whether the rule is in force and a decision at now
// finds the key's state expired.
func (e *expiry) expired(now int64) bool { return e.forget && e.timed && now >= e.at }

// record keeps the expiry of a state recorded at now with resetAfter.
func (e *expiry) record(now, resetAfter int64) { e.at, e.timed = now+resetAfter, true }

func (k *key) Reset() { k.Model.Reset(); k.timed = false }

func (k *key) Load(s engine.State) { k.Model.Load(s); k.timed = false }

// fresh returns a fresh key of k's limit, which keeps its expiry, and
// forgets, as k does.
func (k *key) fresh() *key {
	f, err := newKey(k.p, k.keeps)
	if err != nil {
		panic(err) // k.p made k
	}
	f.forget = k.forget
	return f
}

func (k *key) Apply(op engine.Op) Decision {
	if k.expired(op.Now) {
		f := k.fresh()
		d := f.Apply(op)
		if Records(op.Verb, d) {
			*k = *f
		}
		return d
	}
	converted, margin := false, math.Inf(1)
	if op.Verb != engine.VerbCheck {
		converted, margin = k.carry(op.Now)
	}
	peak := k.note() // before the decision, which may leave the key fresh
	var d Decision
	switch op.Verb {
	case engine.VerbAtMost:
		d = k.atMost(op)
	case engine.VerbExhaust:
		d = k.exhaust(op)
	case engine.VerbCharge, engine.VerbRefund:
		d = k.settle(op)
	default:
		d = k.Model.Apply(op)
	}
	if op.Verb != engine.VerbAtMost && d.ResetAfter == 0 && Records(op.Verb, d) {
		k.Reset() // atMost's own Allow has done so
	}
	if k.keeps && (converted || Records(op.Verb, d)) {
		k.record(op.Now, d.ResetAfter)
	}
	d.Margin = min(d.Margin, margin)
	d.Held = max(d.Held, peak, k.note())
	return d
}

// carry carries the key's state over to its limit at now, if it was kept
// under another one and the algorithm converts it (see [Change]), and
// reports whether it did, with the margin of the conversion.
func (k *key) carry(now int64) (bool, float64) {
	if c, ok := k.Model.(carrier); ok {
		return c.carry(now)
	}
	return false, math.Inf(1)
}

// Expiring returns m, a model from [New], [NewStrict] or [Change], with
// the rule of package engine's "State and time" in force: from its
// state's expiry on, the key is fresh, whatever its limit (see [expiry]),
// as a store decides it. A model from Change has it in force already;
// one from New or NewStrict that never changed decides from the state it
// kept whatever the time, as the property tests' checkers keep a key.
// Both decide alike at every instant, except after a decision at or after
// the expiry that records and keeps part of the state as it was (a
// counted or penalized denial keeps a bucket's point, a sliding log its
// old entries): the rule records it from a fresh key, which a clock that
// steps back later finds, where the state kept still holds what it held
// then.
func Expiring(m Model) Model {
	switch k := m.(type) {
	case *key:
		k.forget = true
	case *Strict:
		k.forget = true
	}
	return m
}

// Expiry returns the expiry m keeps for its key's state (see [expiry]):
// now + ResetAfter of the latest decision that recorded it or carried it
// over. ok is false when m keeps none: no decision recorded the state
// since m was made, reset or loaded, or m is not a model from [New],
// [NewStrict] or [Change].
func Expiry(m Model) (at int64, ok bool) {
	switch k := m.(type) {
	case *key:
		return k.at, k.keeps && k.timed
	case *Strict:
		return k.at, k.timed
	}
	return 0, false
}

// LoadExpiry sets the expiry m keeps for its key's state to at, as a
// store keeps it beside the state: with [Model.Load], so that a
// comparison can follow a production store through a decision whose
// ResetAfter its float arithmetic rounded another way, or that it took
// the other way.
func LoadExpiry(m Model, at int64) {
	switch k := m.(type) {
	case *key:
		k.at, k.timed = at, k.keeps
	case *Strict:
		k.at, k.timed = at, true
	}
}

// atMost is VerbAtMost: it admits the whole cost if it conforms now, and
// otherwise the most whole units less than the cost that conform (each
// algorithm admits less whenever it admits more, so a binary search finds
// them), recording them as VerbAllow does. When nothing conforms, its
// decision is that of a check of one unit (or of the cost, if less).
// Granted is the amount admitted, and Allowed whether it is more than
// zero; a decision that granted nothing records nothing, not even a whole
// cost of zero.
func (k *key) atMost(op engine.Op) Decision {
	check := func(cost float64) Decision {
		return k.Model.Apply(engine.Op{Verb: engine.VerbCheck, Cost: cost, Now: op.Now})
	}
	margin := math.Inf(1)
	if op.Cost <= k.p.Limit {
		whole := check(op.Cost)
		margin = whole.Margin
		if whole.Allowed {
			d := whole
			if op.Cost > 0 {
				d = k.Apply(engine.Op{Verb: engine.VerbAllow, Cost: op.Cost, Now: op.Now})
			}
			d.Granted, d.Margin = op.Cost, min(d.Margin, margin)
			d.Allowed = op.Cost > 0 // a grant of nothing admits nothing
			return d
		}
	}
	// The most whole units less than the cost, and no more than the limit.
	most := int64(min(math.Ceil(op.Cost)-1, math.Floor(k.p.Limit)))
	lo, hi := int64(0), most // units lo conform (0 trivially), hi+1 do not
	for lo < hi {
		mid := lo + (hi-lo+1)/2
		if check(float64(mid)).Allowed {
			lo = mid
		} else {
			hi = mid - 1
		}
	}
	if lo < most {
		margin = min(margin, check(float64(lo+1)).Margin)
	}
	if lo >= 1 {
		margin = min(margin, check(float64(lo)).Margin)
		d := k.Apply(engine.Op{Verb: engine.VerbAllow, Cost: float64(lo), Now: op.Now})
		d.Granted, d.Margin = float64(lo), min(d.Margin, margin)
		return d
	}
	d := check(min(op.Cost, 1))
	d.Margin = min(d.Margin, margin)
	return d
}

func newModel(p engine.Params) (Model, error) {
	switch p.Kind {
	case engine.KindLeakyBucket:
		return newMeter(p), nil
	case engine.KindGCRA:
		return newGCRA(p), nil
	case engine.KindTokenBucket:
		if p.IntervalRefill {
			return newRefill(p), nil
		}
		return newMeter(p), nil
	case engine.KindFixedWindow:
		return newFixedWindow(p), nil
	case engine.KindSlidingLog:
		return newSlidingLog(p), nil
	case engine.KindSlidingCounter:
		return newSlidingCounter(p), nil
	case engine.KindConcurrency:
		return newLeases(p), nil
	}
	return nil, fmt.Errorf("reference: no model of %v", p.Kind)
}

// rat returns f exactly. f must be finite.
func rat(f float64) *big.Rat { return new(big.Rat).SetFloat64(f) }

// ratInt returns n exactly.
func ratInt(n int64) *big.Rat { return new(big.Rat).SetInt64(n) }

func add(a, b *big.Rat) *big.Rat { return new(big.Rat).Add(a, b) }
func sub(a, b *big.Rat) *big.Rat { return new(big.Rat).Sub(a, b) }
func mul(a, b *big.Rat) *big.Rat { return new(big.Rat).Mul(a, b) }
func quo(a, b *big.Rat) *big.Rat { return new(big.Rat).Quo(a, b) }

// floorInt returns the largest integer at most x.
func floorInt(x *big.Rat) *big.Int {
	// big.Int.Div is Euclidean division: for a positive divisor it rounds
	// toward negative infinity.
	return new(big.Int).Div(x.Num(), x.Denom())
}

// ceilNanos returns the smallest integer at least x, saturating at the
// int64 range, so that an out-of-range duration shows as a mismatch rather
// than wrapping.
func ceilNanos(x *big.Rat) int64 {
	q := floorInt(x)
	if !x.IsInt() {
		q.Add(q, big.NewInt(1))
	}
	switch {
	case q.IsInt64():
		return q.Int64()
	case q.Sign() > 0:
		return math.MaxInt64
	}
	return math.MinInt64
}

// relative returns |diff| / scale, the margin of a comparison whose two
// sides differ by diff. Its float rounding (a part in 2^52) is far below
// the Band it is compared with.
func relative(diff *big.Rat, scale float64) float64 {
	f, _ := diff.Float64()
	return math.Abs(f) / scale
}

// isFresh reports whether s is the zero State, a fresh key.
func isFresh(s engine.State) bool {
	return s.Time == 0 && s.A == 0 && s.B == 0 && len(s.Log) == 0
}
