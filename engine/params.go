package engine

import (
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/sluice-go/sluice/internal/arith"
)

// Kind names an algorithm.
type Kind uint8

// The algorithms. Each one's file documents its State and guarantees.
const (
	KindLeakyBucket    Kind = iota + 1 // leaky bucket meter: level and last update
	KindGCRA                           // generic cell rate algorithm: theoretical arrival time
	KindTokenBucket                    // token bucket: tokens in use and last refill
	KindFixedWindow                    // fixed window: count and window start (or a calendar window's end)
	KindSlidingLog                     // sliding log: admitted requests of the last window
	KindSlidingCounter                 // sliding counter: two window counts and window start
	KindConcurrency                    // concurrency limit: the leases held
)

var kindNames = [...]string{
	KindLeakyBucket:    "leaky bucket",
	KindGCRA:           "GCRA",
	KindTokenBucket:    "token bucket",
	KindFixedWindow:    "fixed window",
	KindSlidingLog:     "sliding log",
	KindSlidingCounter: "sliding counter",
	KindConcurrency:    "concurrency",
}

// String returns the algorithm's name.
func (k Kind) String() string {
	if k > 0 && int(k) < len(kindNames) {
		return kindNames[k]
	}
	return fmt.Sprintf("kind(%d)", uint8(k))
}

// Logs reports whether k keeps a list of entries in its State (see
// State.Log): the sliding log's requests, the concurrency limit's leases.
func (k Kind) Logs() bool {
	// KindSlidingLog (5) and KindConcurrency (7) are the kinds that differ
	// from 7 in bit 1 at most: one comparison, on the memory store's path.
	return k|2 == KindConcurrency
}

// Params describes one configured algorithm completely: it is what a
// [Store] receives with every decision, and [Params.Step] is the algorithm
// itself. Build Params with a limiter constructor (and read them with its
// Params method) rather than by hand, so that they are validated.
type Params struct {
	// Kind is the algorithm.
	Kind Kind
	// Limit is the most cost a key can hold: the leaky bucket's capacity,
	// the GCRA and token bucket burst, the limit per window, the most cost
	// in flight at once.
	Limit float64
	// Interval is a time in nanoseconds: GCRA's emission interval (the time
	// one unit of cost takes), the leaky and token buckets' rate period,
	// the window length, or a lease's time to live.
	Interval int64
	// Amount is how much the leaky bucket leaks, or the token bucket
	// refills, per Interval. It is zero for the other algorithms.
	Amount float64
	// IntervalRefill makes the token bucket add tokens only once per whole
	// elapsed Interval, instead of continuously.
	IntervalRefill bool
	// Anchored makes fixed windows start at a key's first request instead
	// of at multiples of Interval since the Unix epoch.
	Anchored bool
	// MaxEntries bounds the sliding log's entries per key, or the live
	// leases of a concurrency limit's key.
	MaxEntries int
	// Penalty, when positive, blocks a key for that many nanoseconds once
	// a request overflows it (an Allow denied, a reservation beyond its
	// maximum delay, a fill-up past capacity, an Allow or a reservation of
	// a cost above the limit: see Overflows): until the block ends every
	// request is denied, with RetryAfter at its end at the earliest, and
	// the Decision says Blocked. Up to 2^60 ns.
	Penalty int64
	// CountDenied makes a denied request count too ("no relaxation"): it
	// fills the key up to its limit, as much of its cost as fits, so that
	// a client that keeps overflowing stays limited instead of getting
	// through at each instant the limit allows.
	CountDenied bool
	// Windows, when its last boundary is not zero, makes the fixed window
	// a calendar window (see [Params.Calendar]): it holds the boundaries,
	// in nanoseconds since the Unix epoch, of three consecutive windows
	// of a calendar (local days, weeks, months or years in a time zone),
	// [Windows[0], Windows[1]), [Windows[1], Windows[2]) and [Windows[2],
	// Windows[3]), the middle one holding the caller's time, whose length
	// is Interval. A decision counts in the window that holds its time, on
	// the clock the store decides by: a store that reads its own clock
	// finds its window among the three, and refuses a time outside them
	// with [ErrTimeOutOfRange], never deciding by the caller's clock
	// instead. Boundaries come from the calendar, which only the caller
	// knows: sluice.NewCalendarWindow computes them around its clock's
	// time for each decision.
	Windows [4]int64
}

const (
	// maxSpan bounds the spans the algorithms compute (about 36 years): a
	// delay asked for, a drain, the refills a wait takes (one interval
	// more at most), so that a time plus a few spans stays far from int64
	// overflow.
	maxSpan = arith.MaxSpan
	// tolerance is the relative slack of float comparisons: amounts within
	// Limit*tolerance of each other are equal, and durations computed from
	// float amounts forgive the same relative error before rounding up.
	tolerance = arith.Tolerance
	// maxLimit bounds Limit, so that a sum of a few amounts up to it
	// (the log's cost and a request's, less the limit) never overflows.
	maxLimit = 0x1p1000
	// maxLogEntries bounds MaxEntries.
	maxLogEntries = 1 << 20
	// maxTime is the latest time the algorithms accept, 2^62 ns.
	maxTime = arith.MaxTime
	// maxLeaseAt bounds a lease's identity, its expiry: now + Interval,
	// or a nanosecond after the key's latest, which only 2^60 leases
	// taken faster than the clock moves could push past 2^62 + 2^61.
	maxLeaseAt = maxTime + 2*maxSpan
	// maxTicket bounds a ticket in a concurrency limit's line: the
	// integers a float64 holds exactly.
	maxTicket = 1 << 53
)

// String formats p for logs.
func (p Params) String() string {
	s := fmt.Sprintf("%v{limit=%g interval=%v amount=%g", p.Kind, p.Limit, time.Duration(p.Interval), p.Amount)
	if p.Penalty > 0 {
		s += " penalty=" + time.Duration(p.Penalty).String()
	}
	if p.CountDenied {
		s += " count-denied"
	}
	if p.Calendar() {
		s += fmt.Sprintf(" windows=%v..%v", time.Unix(0, p.Windows[1]).UTC(), time.Unix(0, p.Windows[2]).UTC())
	}
	return s + "}"
}

// Validate reports whether p describes a usable algorithm. The error wraps
// [ErrInvalidConfig], for nil Params too.
func (p *Params) Validate() error {
	if p == nil {
		return fmt.Errorf("%w: no Params", ErrInvalidConfig)
	}
	if p.Kind == 0 || int(p.Kind) >= len(kindNames) {
		return p.invalid("unknown algorithm")
	}
	if !(p.Limit > 0) || p.Limit > maxLimit {
		return p.invalid("limit must be positive and finite, at most 2^1000")
	}
	if p.Interval <= 0 || p.Interval > maxSpan {
		return p.invalid("interval must be positive and at most " + time.Duration(maxSpan).String())
	}
	meter := p.Kind == KindLeakyBucket || p.Kind == KindTokenBucket
	switch {
	case meter && (!(p.Amount > 0) || math.IsInf(p.Amount, 0)):
		return p.invalid("rate amount must be positive and finite")
	case !meter && p.Amount != 0:
		return p.invalid("rate amount applies only to the leaky and token buckets")
	case p.IntervalRefill && p.Kind != KindTokenBucket:
		return p.invalid("interval refill applies only to the token bucket")
	case p.Anchored && p.Kind != KindFixedWindow:
		return p.invalid("anchored windows apply only to the fixed window")
	case p.Kind.Logs() && (p.MaxEntries < 1 || p.MaxEntries > maxLogEntries):
		return p.invalid(fmt.Sprintf("max entries must be between 1 and %d", maxLogEntries))
	case !p.Kind.Logs() && p.MaxEntries != 0:
		return p.invalid("max entries apply only to the sliding log and the concurrency limit")
	case p.Penalty < 0 || p.Penalty > maxSpan:
		return p.invalid("penalty must be between 0 and " + time.Duration(maxSpan).String())
	case p.Kind == KindConcurrency && (p.Penalty > 0 || p.CountDenied):
		// A lease is held until released, not spent: there is no
		// overflow to punish, nor a denial to count.
		return p.invalid("penalties and counted denials apply only to rate limits")
	case p.Windows != [4]int64{}:
		if err := p.checkWindows(); err != nil {
			return err
		}
	}
	// The longest span an algorithm computes must fit: the GCRA burst, and
	// the time a full bucket takes to drain or refill.
	var span float64
	switch p.Kind {
	case KindGCRA:
		span = arith.GCRASpan(p.Limit, p.Interval)
	case KindLeakyBucket, KindTokenBucket:
		span = arith.BucketSpan(p.Limit, p.Amount, p.Interval)
	}
	if span > maxSpan {
		return p.invalid("limit takes longer than " + time.Duration(maxSpan).String() + " to drain or refill")
	}
	return nil
}

// checkWindows reports whether the calendar windows of p are usable: of a
// fixed window that is not anchored, ascending, each at most 2^60 ns long,
// the middle one Interval long, from -2^60 ns to 2^62 + 2^60 ns, so that
// every time a step accepts may lie in the middle window.
func (p *Params) checkWindows() error {
	w := p.Windows
	switch {
	case !p.Calendar():
		return p.invalid("calendar windows need a last boundary")
	case p.Kind != KindFixedWindow || p.Anchored:
		return p.invalid("calendar windows apply only to the fixed window, not anchored")
	case w[0] < -maxSpan || w[3] > maxTime+maxSpan:
		return p.invalid("calendar windows must lie between -2^60 and 2^62 + 2^60 ns")
	case !(w[0] < w[1] && w[1] < w[2] && w[2] < w[3]):
		return p.invalid("calendar windows must be ascending")
	case w[1]-w[0] > maxSpan || w[3]-w[2] > maxSpan:
		return p.invalid("a calendar window must be at most " + time.Duration(maxSpan).String())
	case p.Interval != w[2]-w[1]:
		return p.invalid("the interval of calendar windows is the middle window's length")
	}
	return nil
}

// Calendar reports whether p is a calendar window: a fixed window whose
// windows are the calendar's in Windows rather than multiples of Interval
// since the epoch.
func (p *Params) Calendar() bool { return p.Windows[3] != 0 }

// window returns the calendar window of p that holds now, which
// [Params.Check] required to lie in Windows.
func (p *Params) window(now int64) (start, end int64) {
	w := &p.Windows
	switch {
	case now < w[1]:
		return w[0], w[1]
	case now < w[2]:
		return w[1], w[2]
	}
	return w[2], w[3]
}

// CheckWindows reports whether now, a time in nanoseconds since the Unix
// epoch, lies in the calendar windows of p, or an error wrapping
// [ErrTimeOutOfRange]: a store that reads its own clock calls it with its
// time, which must then lie within a window of the caller's. Any time
// lies in the windows of Params that are not a calendar window.
func (p *Params) CheckWindows(now int64) error {
	if p.Calendar() && (now < p.Windows[0] || now >= p.Windows[3]) {
		return fmt.Errorf("%w: %v is outside the calendar windows from %v to %v, computed on the caller's clock",
			ErrTimeOutOfRange, time.Unix(0, now).UTC(), time.Unix(0, p.Windows[0]).UTC(), time.Unix(0, p.Windows[3]).UTC())
	}
	return nil
}

func (p *Params) invalid(why string) error {
	return fmt.Errorf("%w: %v: %s", ErrInvalidConfig, p.Kind, why)
}

// Check reports whether op can run under p, as Step checks it: op.Now
// with [CheckTime], the rest with [Params.CheckOp].
func (p *Params) Check(op Op) error {
	if p.Usual(op.Verb, op.Cost, op.Now) && op.At == 0 && op.MaxDelay == 0 || p.booking(&op) {
		return nil
	}
	return p.check(op)
}

// booking reports whether op is a reservation or a cancel that check
// accepts, under valid Params that book (never a calendar window): a turn
// booked and given back (each Wait of a GCRA or a bucket books one) is
// checked in a few comparisons, not by every rule of check.
func (p *Params) booking(op *Op) bool {
	return (op.Verb == VerbReserve || op.Verb == VerbCancel) && p.Reservable() && p.inRange(op.Cost, op.Now) &&
		uint64(op.At) <= maxTime+maxSpan && (op.Verb == VerbCancel || uint64(op.MaxDelay) <= maxSpan)
}

func (p *Params) check(op Op) error {
	if err := CheckTime(op.Now); err != nil {
		return err
	}
	if err := p.CheckWindows(op.Now); err != nil {
		return err
	}
	return p.CheckOp(op)
}

// Usual reports whether an op of verb, cost and now is the common request,
// which Check accepts: an Allow or a check of a cost that fits, at a time
// in range and, for a calendar window, in its windows. It is five
// comparisons (seven for a calendar window), small enough to be inlined,
// for a store's hot path to call Check only when it is false.
func (p *Params) Usual(verb Verb, cost float64, now int64) bool {
	return verb-VerbAllow <= VerbCheck-VerbAllow && p.inRange(cost, now) &&
		(p.Windows[3] == 0 || p.Windows[0] <= now && now < p.Windows[3])
}

// inRange reports whether cost fits the limit, a number from zero to Limit
// (so neither NaN nor infinite, Limit being finite), at a time now in
// range: what Check asks of every usual request and every booking.
func (p *Params) inRange(cost float64, now int64) bool {
	return cost >= 0 && cost <= p.Limit && uint64(now) <= maxTime
}

// CheckCost reports whether verb and cost can run under p: an error
// wrapping [ErrInvalidCost] for a negative, NaN or infinite cost,
// [ErrCostExceedsLimit] for a cost above the limit (except for VerbFill,
// VerbCharge and VerbRefund, which take any cost, and VerbAtMost, which
// does unless the limit is below one unit), and [ErrUnsupported] for an
// unknown verb or one the algorithm does not run: a fill-up of another
// algorithm than the leaky bucket; a reservation, cancel, exhaust, charge
// or refund of a window algorithm; a reservation, fill-up, exhaust,
// charge, refund or partial grant of the concurrency limit; an extension
// or a leaving of any other.
func (p *Params) CheckCost(verb Verb, cost float64) error {
	if !(cost >= 0) || math.IsInf(cost, 0) {
		return fmt.Errorf("%w: %v", ErrInvalidCost, cost)
	}
	switch verb {
	case VerbAllow, VerbCheck:
	case VerbFill:
		if p.Kind != KindLeakyBucket {
			return fmt.Errorf("%w: %v does not support fill-ups", ErrUnsupported, p.Kind)
		}
		return nil
	case VerbCancel:
		if !p.Reservable() && p.Kind != KindConcurrency {
			return fmt.Errorf("%w: %v does not support reservations", ErrUnsupported, p.Kind)
		}
	case VerbReserve:
		if !p.Reservable() {
			return fmt.Errorf("%w: %v does not support reservations", ErrUnsupported, p.Kind)
		}
	case VerbExhaust:
		if !p.Reservable() {
			return fmt.Errorf("%w: %v cannot be exhausted until an instant", ErrUnsupported, p.Kind)
		}
	case VerbCharge, VerbRefund:
		if !p.Reservable() {
			return fmt.Errorf("%w: %v does not settle costs", ErrUnsupported, p.Kind)
		}
		return nil
	case VerbExtend, VerbLeave:
		if p.Kind != KindConcurrency {
			return fmt.Errorf("%w: %v holds no leases to %v", ErrUnsupported, p.Kind, verb)
		}
	case VerbAtMost:
		if p.Kind == KindConcurrency {
			return fmt.Errorf("%w: %v does not grant part of a cost", ErrUnsupported, p.Kind)
		}
		if cost > p.Limit && p.Limit < 1 {
			// Neither the whole cost nor a whole unit of it ever fits.
			return fmt.Errorf("%w: cost %v > limit %v, which holds no whole unit", ErrCostExceedsLimit, cost, p.Limit)
		}
		return nil
	default:
		return fmt.Errorf("%w: %v", ErrUnsupported, verb)
	}
	if cost > p.Limit {
		return fmt.Errorf("%w: cost %v > limit %v", ErrCostExceedsLimit, cost, p.Limit)
	}
	return nil
}

// CheckOp reports whether op can run under p, as Step checks it, except
// for op.Now, which only a store deciding by the caller's clock checks
// (with [CheckTime]): the verb and cost as [Params.CheckCost] does, a
// reservation's MaxDelay and a concurrency limit's patience (0 to 2^60
// ns), the At of a reservation or a cancel (0 to 2^62 + 2^60 ns) or of a
// lease's release or extension (0 to 2^62 + 2^61 ns), and a ticket (0 to
// 2^53), with errors wrapping [ErrInvalidDelay], [ErrTimeOutOfRange] and
// [ErrInvalidConfig].
//
// A cost above the limit is reported last, after every other error, so
// that [Params.Overflows] can tell an op that is otherwise valid.
func (p *Params) CheckOp(op Op) error {
	err := p.CheckCost(op.Verb, op.Cost)
	if err != nil && !errors.Is(err, ErrCostExceedsLimit) {
		return err
	}
	waits := p.Kind == KindConcurrency && op.Verb == VerbAllow // a patience is a wait
	ticket := p.Kind == KindConcurrency && (op.Verb == VerbAllow || op.Verb == VerbCheck || op.Verb == VerbLeave)
	switch {
	case (op.Verb == VerbReserve || op.Verb == VerbExhaust || waits) && (op.MaxDelay < 0 || op.MaxDelay > maxSpan):
		return fmt.Errorf("%w: %v is not between 0 and %v", ErrInvalidDelay, time.Duration(op.MaxDelay), time.Duration(maxSpan))
	case ticket && (op.At < 0 || op.At > maxTicket):
		return fmt.Errorf("%w: ticket %d is not between 0 and 2^53", ErrInvalidConfig, op.At)
	case p.Kind == KindConcurrency && (op.Verb == VerbCancel || op.Verb == VerbExtend) && (op.At < 0 || op.At > maxLeaseAt):
		return fmt.Errorf("%w: lease instant %d ns", ErrTimeOutOfRange, op.At)
	case p.Kind != KindConcurrency && (op.Verb == VerbCancel || op.Verb == VerbReserve) && (op.At < 0 || op.At > maxTime+maxSpan):
		return fmt.Errorf("%w: reservation instant %d ns", ErrTimeOutOfRange, op.At)
	}
	return err
}

// Overflows reports whether op, which [Params.CheckOp] refused with err,
// is still to be decided: an Allow or a reservation whose cost exceeds
// the limit, under a penalty. Such a request can never fit, and a client
// that sends it is the client a penalty exists for, so a store decides it
// as [Params.Step] does, which starts the key's block, and returns the
// decision with err. Any other error, that of nil Params included, is not
// such an op.
func (p *Params) Overflows(op Op, err error) bool {
	return errors.Is(err, ErrCostExceedsLimit) && p.Penalty > 0 && (op.Verb == VerbAllow || op.Verb == VerbReserve)
}

// Reservable reports whether p's algorithm books reservations
// (VerbReserve, VerbCancel): the GCRA, the leaky bucket and the token
// bucket, whose state can describe a key's allowance at a future instant.
// The window algorithms cannot without keeping more than one window, and
// refuse them with [ErrUnsupported].
func (p *Params) Reservable() bool {
	return p.Kind == KindGCRA || p.Kind == KindLeakyBucket || p.Kind == KindTokenBucket
}

// CheckTime reports whether ns, a time in nanoseconds since the Unix epoch,
// is one the algorithms accept: from the epoch to 2^62 ns (in 2116), or an
// error wrapping [ErrTimeOutOfRange]. A store that takes the caller's time
// checks it before a round trip.
func CheckTime(ns int64) error {
	if ns < 0 || ns > maxTime {
		return fmt.Errorf("%w: %v", ErrTimeOutOfRange, time.Unix(0, ns).UTC())
	}
	return nil
}

// Step is the algorithm as a pure function: from a key's state, the time
// and the request, it returns the key's new state and the decision. It
// never reads a clock and keeps no state of its own, so callers can keep
// State wherever they like; a denied request and VerbCheck return s
// unchanged, except a GCRA state carried over to p from another limit
// (see [Params.Carries]). Every [Store] gives the same decisions as Step.
// An op that [Params.Overflows] comes back decided, with its error.
func (p Params) Step(s State, op Op) (State, Decision, error) {
	if err := p.Validate(); err != nil {
		return s, Decision{}, err
	}
	err := p.Check(op)
	if err != nil && !p.Overflows(op, err) {
		return s, Decision{Limit: p.Limit}, err
	}
	var d Decision
	p.Decide(&s, op, &d)
	return s, d, err
}

// Decide is Step in place, for a store that keeps State in its own
// memory: for p that Validate accepted and op that Check accepted (or that
// Overflows), it updates *s when the decision records (see
// [Params.Records]) or carries a state over from another limit (see
// [Params.Carries]), and writes the decision into *d, which must be zero.
// A state that is fresh again becomes the zero State, so that keeping it
// and forgetting the key are the same, even for a clock that later steps
// back.
func (p *Params) Decide(s *State, op Op, d *Decision) {
	switch {
	case op.Verb >= VerbAtMost: // one comparison for the verbs that are not the usual's
		p.decideOther(s, &op, d)
	case p.Penalty > 0 || p.CountDenied:
		p.decideStrict(s, &op, d)
	case p.Kind == KindGCRA:
		// decideKind for the usual limiter, called without its frame, and
		// an Allow or a check on a state of its interval without stepGCRA's.
		if op.Verb-VerbAllow <= VerbCheck-VerbAllow && !p.foreign(s, op.Now) {
			if tat := p.DecideTAT(s.Time, op, d); d.Allowed && op.Verb == VerbAllow {
				s.Time, s.A = tat, float64(p.Interval)
			}
		} else {
			p.stepGCRA(s, &op, d)
		}
		p.settle(s, op.Verb, d)
	default:
		p.decideKind(s, &op, d)
	}
}

// decideOther is Decide for VerbAtMost, VerbExtend, VerbLeave,
// VerbExhaust, VerbCharge and VerbRefund.
func (p *Params) decideOther(s *State, op *Op, d *Decision) {
	switch op.Verb {
	case VerbAtMost:
		p.stepAtMost(s, op, d)
	case VerbExhaust:
		p.stepExhaust(s, op, d)
	case VerbCharge, VerbRefund:
		p.stepSettle(s, op, d)
	default:
		p.decide(s, op, d)
	}
}

// stepExhaust is VerbExhaust: the key full at op.MaxDelay from now, and
// described as a check of op.Cost would describe it, a penalty's block
// included (which it leaves as it is).
func (p *Params) stepExhaust(s *State, op *Op, d *Decision) {
	p.carryOnce(s, op)
	until := s.Until // a bucket's fullAt rewrites the whole state
	p.fullAt(s, op.Now+op.MaxDelay)
	s.Until = until
	p.decide(s, &Op{Verb: VerbCheck, Cost: op.Cost, Now: op.Now}, d)
	p.settle(s, VerbExhaust, d)
}

// decide runs the algorithm for every verb but VerbAtMost, VerbExhaust,
// VerbCharge and VerbRefund, which are made of decisions of the others.
func (p *Params) decide(s *State, op *Op, d *Decision) {
	if p.Penalty > 0 || p.CountDenied {
		p.decideStrict(s, op, d)
		return
	}
	p.decideKind(s, op, d)
}

// decideKind runs the algorithm itself.
func (p *Params) decideKind(s *State, op *Op, d *Decision) {
	switch p.Kind {
	case KindLeakyBucket:
		p.stepMeter(s, op, d)
	case KindGCRA:
		p.stepGCRA(s, op, d)
	case KindTokenBucket:
		if p.IntervalRefill {
			p.stepIntervalRefill(s, op, d)
		} else {
			p.stepMeter(s, op, d)
		}
	case KindFixedWindow:
		p.stepFixedWindow(s, op, d)
	case KindSlidingLog:
		p.stepSlidingLog(s, op, d)
	case KindConcurrency:
		p.stepLeases(s, op, d)
	default:
		p.stepSlidingCounter(s, op, d)
	}
	p.settle(s, op.Verb, d)
}

// settle makes a state that a decision *d on verb left fresh again the
// zero State.
func (p *Params) settle(s *State, verb Verb, d *Decision) {
	if d.ResetAfter == 0 && p.Records(verb, d) {
		*s = State{}
	}
}

// Records reports whether a decision *d on an op of verb changed the key's
// state, so that a store writes the state back: a fill-up, an exhaust, a
// charge and a refund always do; an admission, a booked reservation, a
// cancel that gave its cost back (or released a lease), an extended
// lease, a waiter's leaving and a partial grant of something do; so does
// a denied Allow or reservation under a penalty or with denials counted,
// and a denied Allow that waits in a concurrency limit's line (its
// Decision.At is its ticket); a check never does.
func (p *Params) Records(verb Verb, d *Decision) bool {
	switch verb {
	case VerbAllow:
		return d.Allowed || d.Blocked || p.CountDenied || d.At != 0
	case VerbReserve:
		return d.Allowed || d.Blocked || p.CountDenied
	case VerbFill, VerbExhaust, VerbCharge, VerbRefund:
		return true
	case VerbAtMost:
		return d.Granted > 0
	}
	return (verb == VerbCancel || verb == VerbExtend || verb == VerbLeave) && d.Allowed
}

// Carries reports whether deciding op on s, a GCRA state whose theoretical
// arrival time was computed with another emission interval (recorded in
// its A) and is still ahead of op.Now, converts it to p's (see "Limits that
// change" in the package doc). A store asks before it decides, and then
// writes the state back after any decision but a check, whatever
// [Params.Records] says: the conversion is made once, at the first
// decision under the new limit, so that a raised limit applies at once.
func (p *Params) Carries(s *State, op *Op) bool {
	return p.Kind == KindGCRA && p.foreign(s, op.Now) && op.Verb != VerbCheck
}

// Frees reports whether a decision *d on op may let a waiter of p's
// concurrency limit in: a lease released, a waiter leaving the line, or a
// waiter served with room left, after which the next may be first and
// fit. A store that tells waiters of releases tells them after each such
// decision.
func (p *Params) Frees(op *Op, d *Decision) bool {
	return p.Kind == KindConcurrency && d.Allowed &&
		(op.Verb == VerbCancel || op.Verb == VerbLeave || op.Verb == VerbAllow && op.At != 0 && d.Remaining > 0)
}

// slack is the amount below which float differences are rounding noise.
func (p *Params) slack() float64 { return p.Limit * tolerance }

// describe fills in the amounts of d from the allowance in use.
func (p *Params) describe(d *Decision, used float64) {
	switch {
	case used < 0:
		used = 0
	case used > p.Limit:
		used = p.Limit
	}
	d.Limit, d.Used, d.Remaining = p.Limit, used, p.Limit-used
}

// after returns how long from now until t, never negative.
func after(t, now int64) time.Duration {
	if t <= now {
		return 0
	}
	return time.Duration(t - now)
}
