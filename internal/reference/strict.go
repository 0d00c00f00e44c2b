package reference

import (
	"fmt"
	"math"
	"math/big"
	"time"

	"github.com/sluice-go/sluice/engine"
)

// Strict is the exact model of an algorithm under a penalty
// (Params.Penalty) or with denials counted (Params.CountDenied), written
// from their definitions around the algorithm's own model, which decides
// everything a block or a counted denial leaves to the algorithm:
//
//   - A block is a gate in front of the algorithm, from the overflow that
//     starts it to Until = then + Penalty. While it lasts (now < Until) the
//     key admits nothing: an Allow, a check, a partial grant and a fill-up
//     are denied (the fill-up still records its cost), and a reservation is
//     booked no earlier than Until. Their RetryAfter is the latest of Until
//     and the instant the algorithm would admit the cost; a reservation's
//     is that less its MaxDelay.
//   - An overflow (an Allow the algorithm denies, a reservation it cannot
//     book within its MaxDelay, a fill-up that does not fit) starts a block
//     unless one is in force: requests in a block never extend it. A check,
//     a cancel, a lease's extension, a partial grant, an exhaust, a charge
//     and a refund never start one.
//   - With denials counted, a denied Allow or reservation, in a block or
//     not, fills the key to its limit: the algorithm admits as much as it
//     holds room for, at now.
//   - A decision describes the key as it leaves it: Used, Remaining and
//     ResetAfter are those of the state after it (after the fill, if one),
//     ResetAfter reaching at least the block's end; RetryAfter is how long
//     until the same request would be admitted, if nothing else is
//     recorded meanwhile.
//   - An exhaust (VerbExhaust) makes the key's whole limit in use at now +
//     MaxDelay, as the algorithm's model does (see [key.exhaust]), and is
//     decided as a check of its cost on the key it leaves: denied in a
//     block in force, which it neither starts nor ends. It always records,
//     and leaves the block as it found it, an ended one included (unless
//     it leaves the key fresh, which a GCRA whose burst rounds to no
//     nanoseconds may be, and is then forgotten whole).
//   - A charge or a refund (VerbCharge, VerbRefund) settles its cost at
//     the key's latest point, as the algorithm's model does (see
//     [key.settle]), and is decided as a check of nothing on the key it
//     leaves, with Granted the cost moved: denied in a block in force,
//     which it neither starts nor ends, and while the key is in debt. It
//     always records, and leaves the block as an exhaust does. As after
//     every decision the algorithm records, an algorithm's state it
//     leaves fresh (a refund that empties the key) is forgotten, a block
//     in force or not: only the block is kept, so that a clock that steps
//     back reads the key as fresh but for its block, as without a penalty.
//   - The block is part of the key's state, which changes only when a
//     decision records (Params.Records: an admission, a booking, a
//     fill-up, an exhaust, a charge, a refund, a given-back cancel, a
//     partial grant of something, and a denied Allow or reservation that
//     counts or is penalized). A recorded decision after the block's end
//     writes the key back without it (but an exhaust, a charge or a
//     refund); one that records nothing leaves it, so that a clock
//     stepping back before its end finds the key blocked again.
//
// Strict implements [Model]; its Apply returns [StrictDecision.Decision].
type Strict struct {
	inner   *key
	limit   *big.Rat
	limitF  float64
	penalty int64
	count   bool
	until   int64 // when the block ends; 0 when none was recorded
	// The key's expiry (see [expiry]): the Strict keeps it for the whole
	// state, its block included, and its algorithm's key keeps none.
	expiry
}

// StrictDecision is a [Decision] of a [Strict] model, with the block.
type StrictDecision struct {
	Decision
	// Blocked reports whether a block is in force after the request: one
	// it found, or one it started.
	Blocked bool
	// Until is the block's end when Blocked, and zero otherwise.
	Until int64
}

// NewStrict returns a fresh model of the algorithm p describes, with its
// penalty and counted denials. p must be valid; without either option the
// model decides as [New]'s.
func NewStrict(p engine.Params) (*Strict, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	alone := p
	alone.Penalty, alone.CountDenied = 0, false
	m, err := newKey(alone, false)
	if err != nil {
		return nil, err
	}
	return &Strict{inner: m, limit: rat(p.Limit), limitF: p.Limit, penalty: p.Penalty, count: p.CountDenied}, nil
}

// Reset forgets the key, and with it any block.
func (s *Strict) Reset() { s.inner.Reset(); s.until, s.timed = 0, false }

// Load replaces the key's state by the exact value of a production state,
// its block included. The key keeps no expiry until a decision records
// (see [LoadExpiry]).
func (s *Strict) Load(st engine.State) { s.inner.Load(st); s.until, s.timed = st.Until, false }

// Until returns the end of the block the key's state holds, zero for none:
// it may lie in the past, until a recorded decision writes the key back.
func (s *Strict) Until() int64 { return s.until }

// Apply runs op and returns its exact decision without the block.
func (s *Strict) Apply(op engine.Op) Decision { return s.Decide(op).Decision }

// Decide runs op, which must be valid for the model's Params, and returns
// its exact decision. Every decision but a check first carries a state
// kept under another limit over to the key's (see [Change]), and records
// that, whether or not it records anything else. With the rule in force
// (see [Expiring]), it decides from a fresh key from the key's expiry on,
// as [key] does.
func (s *Strict) Decide(op engine.Op) StrictDecision {
	if s.expired(op.Now) {
		f := s.fresh()
		d := f.Decide(op)
		if s.records(op.Verb, d) {
			*s = *f
		}
		return d
	}
	converted, margin := false, math.Inf(1)
	if op.Verb != engine.VerbCheck {
		converted, margin = s.carry(op.Now)
	}
	peak := s.inner.note() // before the decision, which may leave the key fresh
	d := s.decide(op)
	d.Margin = min(d.Margin, margin)
	d.Held = max(d.Held, peak, s.inner.note()) // the decisions a block makes describe the key as it stands
	if converted || s.records(op.Verb, d) {
		s.record(op.Now, d.ResetAfter)
	}
	return d
}

// fresh returns a fresh key of s's limit, which forgets as s does.
func (s *Strict) fresh() *Strict {
	f := *s
	f.inner = s.inner.fresh()
	f.until, f.timed = 0, false
	return &f
}

// records reports whether decision d on verb records, as the Store
// contract defines it (see [Records]) with a penalty or counted denials:
// a denied Allow or reservation records too when denials are counted or
// a block is in force after it (one it found, or one it started).
func (s *Strict) records(verb engine.Verb, d StrictDecision) bool {
	if Records(verb, d.Decision) {
		return true
	}
	return (verb == engine.VerbAllow || verb == engine.VerbReserve) && (s.count || d.Blocked)
}

// decide is Decide on a state carried over.
func (s *Strict) decide(op engine.Op) StrictDecision {
	now := op.Now
	until := s.until
	if until <= now {
		until = 0 // the block, if any, has ended
	}
	var d StrictDecision
	if op.Cost > s.limitF && (op.Verb == engine.VerbAllow || op.Verb == engine.VerbReserve) {
		// Only a penalty lets a cost that never fits through: denied, the
		// key as it stands, and blocked.
		d.Decision = s.inner.Apply(engine.Op{Verb: engine.VerbCheck, Now: now})
		d.Allowed = false
		if until == 0 {
			until = now + s.penalty
			s.until = until
		}
		d.RetryAfter = max(d.RetryAfter, until-now)
		return s.blocked(d.Decision, now, until)
	}
	switch op.Verb {
	case engine.VerbExhaust, engine.VerbCharge, engine.VerbRefund:
		// The key full at now + MaxDelay, or the cost charged or refunded
		// at its latest point, described as a check describes it (of the
		// exhaust's cost, of nothing for a settlement); the block, in
		// force or ended, stays as it is.
		d.Decision = s.inner.Apply(op)
		if until == 0 {
			if d.ResetAfter == 0 {
				s.until = 0 // fresh again, and forgotten: an ended block with it
			}
			return d
		}
		cost := op.Cost
		if op.Verb != engine.VerbExhaust {
			cost = 0
		}
		h := s.held(cost, now, until)
		h.Margin = min(h.Margin, d.Margin)
		h.Granted, h.Held = d.Granted, d.Held
		return s.blocked(h, now, until)
	case engine.VerbCheck:
		if until == 0 {
			d.Decision = s.inner.Apply(op)
			return d
		}
		return s.blocked(s.held(op.Cost, now, until), now, until)
	case engine.VerbAtMost:
		if until == 0 {
			d.Decision = s.inner.Apply(op)
			s.recorded(op.Verb, d.Decision)
			return d
		}
		// Nothing fits: the decision on the least cost worth granting.
		return s.blocked(s.held(min(op.Cost, 1), now, until), now, until)
	case engine.VerbCancel, engine.VerbExtend:
		d.Decision = s.inner.Apply(op)
		if until == 0 {
			s.recorded(op.Verb, d.Decision)
			return d
		}
		return s.blocked(d.Decision, now, until)
	case engine.VerbFill:
		d.Decision = s.inner.Apply(op) // recorded whatever it costs
		switch {
		case until != 0:
			d.Allowed = false
			d.RetryAfter = until - now
			return s.blocked(d.Decision, now, until)
		case !d.Allowed && s.penalty > 0:
			s.until = now + s.penalty
			d.RetryAfter = s.penalty
			return s.blocked(d.Decision, now, s.until)
		}
		s.until = 0
		return d
	case engine.VerbAllow:
		if until != 0 {
			d.Decision = s.held(op.Cost, now, until)
		} else {
			d.Decision = s.inner.Apply(op)
		}
	default: // engine.VerbReserve
		kop := op
		if until != 0 {
			kop.At = max(op.At, until)
		}
		d.Decision = s.inner.Apply(kop)
	}
	if d.Allowed { // an admission or a booking, recorded
		if until == 0 {
			s.until = 0
			return d
		}
		return s.blocked(d.Decision, now, until)
	}
	return s.overflow(op, d.Decision, until)
}

// overflow finishes a denied Allow or reservation: the denial is counted,
// and starts a block if none is in force.
func (s *Strict) overflow(op engine.Op, d Decision, until int64) StrictDecision {
	now := op.Now
	if s.penalty > 0 && until == 0 {
		until = now + s.penalty
	}
	if !s.count && until == 0 {
		return StrictDecision{Decision: d} // nothing recorded
	}
	if s.count {
		d = s.fill(now, d)
	}
	// How long until the same request would be admitted, from the key as
	// the denial left it: the instant the algorithm would admit the cost
	// (after the fill), the block's end, and a reservation's own earliest
	// instant, less its MaxDelay.
	fit := now
	check := s.inner.Apply(engine.Op{Verb: engine.VerbCheck, Cost: op.Cost, Now: now})
	if !check.Allowed {
		fit += check.RetryAfter
	}
	d.Margin, d.Drain = min(d.Margin, check.Margin), max(d.Drain, check.Drain)
	at := max(fit, until)
	if op.Verb == engine.VerbReserve {
		at = max(at, op.At) - op.MaxDelay
	}
	d.RetryAfter = at - now
	s.until = until
	if until == 0 {
		return StrictDecision{Decision: d}
	}
	return s.blocked(d, now, until)
}

// fill fills the key to its limit at now, as the algorithm admits a cost
// of what room is left, and returns denial d describing the key then. The
// room is exact; the cost, a float64 as every cost is, is the largest
// float within a few units in the last place of it that the algorithm
// admits (the float nearest an exact room may lie a hair above it).
//
// The fill is recorded at now even when it adds nothing: a bucket's point
// moves to now (to its last refill at or before now, for the interval
// refill), as for any cost recorded then. Its level over time is the same
// either way; the point is what a limit that changes later reads the
// state from (see [Change]).
func (s *Strict) fill(now int64, d Decision) Decision {
	s.inner.touch(now)
	zero := s.inner.Apply(engine.Op{Verb: engine.VerbCheck, Now: now})
	used := zero.Used
	if used.Cmp(s.limit) > 0 {
		used = s.limit
	}
	room, _ := sub(s.limit, used).Float64()
	// Whether there is room at all is a threshold: a float amount within
	// rounding of the limit may leave none, or a hair, and a fill of a
	// hair still changes a log's reset (an entry at now, or the newest
	// merged and moved to now) and a sliding counter's (a count in the
	// current window). A key exactly full lies on it, unless the float
	// code sums what it holds exactly too (see [floatSum]).
	if f, ok := s.inner.Model.(floatSum); ok && room == 0 && zero.Used.Cmp(s.limit) == 0 && !f.exactSum(now) {
		d.Margin = 0
	}
	if room <= 0 {
		return d
	}
	d.Margin = min(d.Margin, room/s.limitF)
	fits := func(c float64) bool {
		return c > 0 && c <= s.limitF && s.inner.Apply(engine.Op{Verb: engine.VerbCheck, Cost: c, Now: now}).Allowed
	}
	c := room
	for range 64 {
		if fits(c) {
			break
		}
		c = math.Nextafter(c, 0)
	}
	if !fits(c) {
		return d // no room the algorithm can admit
	}
	for range 4 {
		next := math.Nextafter(c, math.Inf(1))
		if !fits(next) {
			break
		}
		c = next
	}
	// The fill lies on its threshold by design (the key ends full): its
	// own margin says nothing of this decision's.
	full := s.inner.Apply(engine.Op{Verb: engine.VerbAllow, Cost: c, Now: now})
	d.Used, d.ResetAfter = full.Used, full.ResetAfter
	d.Drain = max(d.Drain, full.Drain)
	return d
}

// held is the denial of a request of cost at now by the block ending at
// until: nothing is recorded, so it describes the key as it stands.
func (s *Strict) held(cost float64, now, until int64) Decision {
	zero := s.inner.Apply(engine.Op{Verb: engine.VerbCheck, Now: now})
	check := s.inner.Apply(engine.Op{Verb: engine.VerbCheck, Cost: cost, Now: now})
	fit := now
	if !check.Allowed {
		fit += check.RetryAfter
	}
	return Decision{
		Used:       zero.Used,
		RetryAfter: max(fit, until) - now,
		ResetAfter: zero.ResetAfter,
		// Near a threshold of the cost's check, the instant the algorithm
		// admits it jumps (from now to an entry leaving, a refill), and so
		// may RetryAfter.
		Margin: min(zero.Margin, check.Margin),
		Drain:  max(zero.Drain, check.Drain),
	}
}

// blocked marks d as made while the block ending at until is in force.
// Its ResetAfter reaches the block's end at least: a store keeps a
// blocked key.
func (s *Strict) blocked(d Decision, now, until int64) StrictDecision {
	d.ResetAfter = max(d.ResetAfter, until-now)
	return StrictDecision{Decision: d, Blocked: true, Until: until}
}

// recorded writes the key back without an ended block when decision d on
// verb records.
func (s *Strict) recorded(verb engine.Verb, d Decision) {
	if Records(verb, d) {
		s.until = 0
	}
}

// CompareStrict checks the production decision got of p, which may have a
// penalty or count denials, against the exact decision want, as [Compare]
// does, and then that both agree on Blocked. A fill-up that a block
// denies has a RetryAfter (the block's end), which Compare's invariants
// refuse a fill-up: it is compared to the nanosecond on its own. A
// reservation that both find in a block is compared as the algorithm
// decided it: booked no earlier than the block's end.
func CompareStrict(p engine.Params, op engine.Op, got engine.Decision, want StrictDecision) (lenient bool, err error) {
	eff, g, w := op, got, want.Decision
	if got.Blocked && want.Blocked && op.Verb == engine.VerbReserve {
		eff.At = max(op.At, want.Until)
	}
	if op.Verb == engine.VerbFill {
		if got.Blocked {
			g.RetryAfter = 0
		}
		w.RetryAfter = 0
	}
	if lenient, err = Compare(p, eff, g, w); err != nil || lenient {
		return lenient, err
	}
	switch {
	case got.Blocked != want.Blocked:
		return false, fmt.Errorf("Blocked = %v, want %v (block until %d)", got.Blocked, want.Blocked, want.Until)
	case op.Verb == engine.VerbFill && int64(got.RetryAfter) != want.RetryAfter:
		return false, fmt.Errorf("RetryAfter = %v of a fill-up, want %v", got.RetryAfter, time.Duration(want.RetryAfter))
	}
	return false, nil
}

// A floatSum is a model whose allowance in use is a sum of amounts that
// the production code adds in float arithmetic, a hair from the exact sum
// where it rounds. exactSum reports whether, at now, it cannot: every
// amount it holds is a float64, and every partial sum too, in any order
// (they are multiples of the finest one's last place, and their total
// lies below 2^53 of them), or weighs nothing.
type floatSum interface {
	exactSum(now int64) bool
}

func (l *slidingLog) exactSum(now int64) bool {
	var amounts []*big.Rat
	for _, e := range l.entries {
		if now-e.time < l.window {
			amounts = append(amounts, e.cost)
		}
	}
	return exactInFloat(amounts...)
}

// exactSum reports whether the counter's count in the window of now is
// exact in float, and the previous window's weighs nothing (a weight of
// the time left in the window is a quotient, a hair from the exact one).
func (s *slidingCounter) exactSum(now int64) bool {
	start := alignedStart(s.start, s.window)
	switch {
	case now-start >= 2*s.window || s.cur.Sign() == 0 && s.prev.Sign() == 0:
		return true
	case now-start >= s.window: // cur is the previous window's
		return s.cur.Sign() == 0
	}
	return s.prev.Sign() == 0 && exactInFloat(s.cur)
}

// exactInFloat reports whether amounts, which are not negative, and every
// partial sum of them in any order, are float64 values: all multiples of
// the finest last place among them, with a total below 2^53 of it.
func exactInFloat(amounts ...*big.Rat) bool {
	unit := new(big.Int).SetInt64(1) // the largest denominator: 2^k
	total := new(big.Rat)
	for _, a := range amounts {
		if _, exact := a.Float64(); !exact {
			return false
		}
		if a.Denom().Cmp(unit) > 0 {
			unit = a.Denom()
		}
		total = add(total, a)
	}
	scaled := mul(total, new(big.Rat).SetInt(unit))
	return scaled.Cmp(new(big.Rat).SetInt(new(big.Int).Lsh(big.NewInt(1), 53))) < 0
}
