package vectors

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/sluice-go/sluice/engine"
	"github.com/sluice-go/sluice/internal/arith"
)

const (
	maxTime = arith.MaxTime // the latest time a step accepts
	maxSpan = arith.MaxSpan // the longest delay, penalty or span
	// exactSpan bounds every span the vectors' Params compute: below
	// 2^53 ns, what a store computing in doubles (Redis's Lua) runs
	// exactly.
	exactSpan = 1 << 53
)

// Today is the realistic time cases start from, and storetest's random
// traces too: far above 2^53 ns, so that a store that loses precision
// there fails.
var Today = time.Date(2026, 11, 21, 12, 0, 0, 123456789, time.UTC).UnixNano()

// An algorithm is one of storetest.Algorithms, by the name its cases
// start with.
type algorithm struct {
	name string
	p    engine.Params
	// strict says that the rules of penalties and counted denials run on
	// it: the first of each algorithm and variant.
	strict bool
}

// second is a second in nanoseconds.
const second = int64(time.Second)

// algorithms are every algorithm and variant the vectors and storetest's
// random traces run (storetest.Algorithms is their Params), each of which
// storetest requires a vector of with every verb.
var algorithms = []algorithm{
	{"leaky-bucket", engine.Params{Kind: engine.KindLeakyBucket, Limit: 3, Interval: second, Amount: 1.5}, true},
	{"leaky-bucket-fractional", engine.Params{Kind: engine.KindLeakyBucket, Limit: 30.5, Interval: 7 * second, Amount: 3.25}, false},
	{"gcra", engine.Params{Kind: engine.KindGCRA, Limit: 5, Interval: second / 10}, true},
	{"gcra-fractional", engine.Params{Kind: engine.KindGCRA, Limit: 2.5, Interval: 333333333}, false},
	{"token-bucket", engine.Params{Kind: engine.KindTokenBucket, Limit: 10, Interval: second, Amount: 4}, true},
	{"token-bucket-interval-refill", engine.Params{Kind: engine.KindTokenBucket, Limit: 10, Interval: second, Amount: 4, IntervalRefill: true}, true},
	{"fixed-window", engine.Params{Kind: engine.KindFixedWindow, Limit: 5, Interval: second}, true},
	{"fixed-window-anchored", engine.Params{Kind: engine.KindFixedWindow, Limit: 5, Interval: second, Anchored: true}, true},
	{"sliding-log", engine.Params{Kind: engine.KindSlidingLog, Limit: 5, Interval: second, MaxEntries: 5}, true},
	{"sliding-log-fractional", engine.Params{Kind: engine.KindSlidingLog, Limit: 7.5, Interval: 3 * second, MaxEntries: 4}, false},
	{"sliding-counter", engine.Params{Kind: engine.KindSlidingCounter, Limit: 5, Interval: second}, true},
	{"sliding-counter-fractional", engine.Params{Kind: engine.KindSlidingCounter, Limit: 12.25, Interval: 2 * second}, false},
	{"concurrency", engine.Params{Kind: engine.KindConcurrency, Limit: 3, Interval: 30 * second, MaxEntries: 3}, false},
	{"concurrency-fractional", engine.Params{Kind: engine.KindConcurrency, Limit: 2.5, Interval: 7*second + 1, MaxEntries: 4}, false},
}

// Params returns the Params of every algorithm, in order.
func Params() []engine.Params {
	ps := make([]engine.Params, len(algorithms))
	for i, a := range algorithms {
		ps[i] = a.p
	}
	return ps
}

// Generate builds every case: each rule of the recipes on each algorithm
// it applies to, from a realistic time, and the rules about time from the
// epoch and up to the latest time a step accepts as well. It panics if a
// recipe's op does not come out as the rule says (say, an op meant to be
// denied is admitted), so that every name is true of its case.
func Generate() []Case {
	var cases []Case
	for _, a := range algorithms {
		for _, r := range slices.Concat(recipes, calendarRecipes) {
			if r.applies != nil && !r.applies(a) {
				continue
			}
			p := a.p
			if r.with != nil {
				r.with(&p)
			}
			name := a.name + "/" + r.verb + "/" + r.rule
			cases = append(cases, run(name, p, Today, r.build))
			if r.everywhere {
				cases = append(cases,
					run(name+"-from-the-epoch", p, 0, r.build),
					run(name+"-up-to-the-end-of-time", p, endStart(p, r.build), r.build))
			}
		}
	}
	seen := map[string]bool{}
	for _, c := range cases {
		if seen[c.Name] {
			panic("vectors: two cases named " + c.Name)
		}
		seen[c.Name] = true
		for _, p := range limits(c) {
			if span := LongestSpan(p); span >= exactSpan {
				panic(fmt.Sprintf("vectors: %s: %v spans %v, at least 2^53 ns", c.Name, p, time.Duration(span)))
			}
		}
	}
	return cases
}

// limits returns the Params c's steps run under: the case's, then those
// of its steps that have their own.
func limits(c Case) []engine.Params {
	ps := []engine.Params{c.Params}
	for _, s := range c.Steps {
		if s.Params != nil && !slices.Contains(ps, *s.Params) {
			ps = append(ps, *s.Params)
		}
	}
	return ps
}

// run builds the case name of p from start.
func run(name string, p engine.Params, start int64, build func(*builder)) Case {
	if p.Calendar() {
		p = at(p, start)
	}
	b := &builder{c: Case{Name: name, Params: p}, p: p, now: start}
	build(b)
	return b.c
}

// endStart returns the start from which build's ops end at the latest
// time a step accepts: exactly, or, for windows aligned on the epoch,
// whose decisions depend on where in a window a case starts, in the last
// period before it, the least common multiple of the windows' lengths
// the case's steps run under.
func endStart(p engine.Params, build func(*builder)) int64 {
	c := run("", p, Today, build)
	last := Today
	for _, s := range c.Steps {
		if engine.CheckTime(s.Op.Now) == nil {
			last = max(last, s.Op.Now)
		}
	}
	shift := maxTime - last
	if p.Kind == engine.KindSlidingCounter || p.Kind == engine.KindFixedWindow && !p.Anchored && !p.Calendar() {
		period := int64(1)
		for _, q := range limits(c) {
			period = lcm(period, q.Interval)
		}
		shift = arith.FloorDiv(shift, period) * period
	}
	return Today + shift
}

// lcm returns the least common multiple of a and b, which are positive,
// and panics if it takes more than a fraction of the years the times span.
func lcm(a, b int64) int64 {
	x, y := a, b
	for y != 0 {
		x, y = y, x%y
	}
	if a/x > maxTime/16/b {
		panic(fmt.Sprintf("vectors: windows of %v and %v are aligned together too rarely", time.Duration(a), time.Duration(b)))
	}
	return a / x * b
}

// LongestSpan returns the longest duration, in nanoseconds, that p's
// algorithm computes with, as a store bounds it: the window (twice it for
// the sliding counter, which remembers the previous window), GCRA's burst,
// or the time a full bucket takes to drain or refill.
func LongestSpan(p engine.Params) float64 {
	switch p.Kind {
	case engine.KindGCRA:
		return max(float64(p.Interval), arith.GCRASpan(p.Limit, p.Interval))
	case engine.KindLeakyBucket, engine.KindTokenBucket:
		return arith.BucketSpan(p.Limit, p.Amount, p.Interval)
	case engine.KindSlidingCounter:
		return 2 * float64(p.Interval)
	}
	return float64(p.Interval)
}

// A builder runs a case's ops through Step on one key, from a fresh
// state, and records each with its outcome. It keeps the state as a store
// does: the state an op leaves is written back iff Params.Records the
// decision or Params.Carries the state the op read.
type builder struct {
	c Case
	// p are the Params the next op runs under: the case's, until the key's
	// limit changes (see as).
	p   engine.Params
	s   engine.State
	now int64 // the time of the next op
	// latest is the latest time an op was decided at, and expires when
	// the state kept is fresh again: a store may forget the key once it
	// has seen its expiry.
	latest, expires int64
}

// step decides op by Step from the key's state, under the Params of the
// moment, records it with its outcome, and returns Step's decision and
// error.
func (b *builder) step(op engine.Op) (engine.Decision, error) {
	p := b.p
	next, d, err := p.Step(clone(b.s), op)
	s := Step{Op: op, Err: sentinelName(err)}
	if p != b.c.Params {
		s.Params = &p
	}
	decided := err == nil || p.Overflows(op, err)
	if decided {
		want := d
		s.Want = &want
	}
	b.c.Steps = append(b.c.Steps, s)
	// Written back as a store does: what the op left, if it recorded or
	// carried the state over to p's limit.
	writes := decided && (p.Records(op.Verb, &d) || p.Carries(&b.s, &op))
	inRange := engine.CheckTime(op.Now) == nil
	switch {
	case p.Kind != b.c.Params.Kind || p.Anchored != b.c.Params.Anchored || p.IntervalRefill != b.c.Params.IntervalRefill ||
		p.Calendar() != b.c.Params.Calendar():
		b.fail("runs under another algorithm or mode than the case's")
	case err != nil && s.Err == "":
		b.fail(fmt.Sprintf("no sentinel in %v", err))
	case inRange && op.Now < b.expires && b.expires <= b.latest:
		// A store that forgot the key after its expiry would decide from a
		// fresh state: either answer is right, and a vector has one.
		b.fail("steps back before an expiry the store may have acted on")
	case inRange && b.expires <= op.Now && !b.asIfForgotten(op, next, d, err, writes):
		// The expiry is the one the last write computed, under the Params
		// of the moment: a limit that changed since may find the key
		// forgotten sooner than its own rules would.
		b.fail("decides otherwise from a state past its expiry, which a store may have forgotten")
	}
	if writes {
		b.s = next
		b.expires = op.Now + int64(d.ResetAfter)
	}
	if inRange {
		b.latest = max(b.latest, op.Now)
	}
	return d, err
}

// asIfForgotten reports whether op, which Step decided as d and err from
// the key's state, leaving next (written back iff writes), is decided
// alike from a fresh state, and leaves the same state.
func (b *builder) asIfForgotten(op engine.Op, next engine.State, d engine.Decision, err error, writes bool) bool {
	var fresh engine.State
	again, e, errAgain := b.p.Step(fresh, op)
	decided := errAgain == nil || b.p.Overflows(op, errAgain)
	if sentinelName(errAgain) != sentinelName(err) || (errAgain == nil) != (err == nil) || d != e ||
		writes != (decided && (b.p.Records(op.Verb, &e) || b.p.Carries(&fresh, &op))) {
		return false
	}
	return !writes || sameState(next, again)
}

// clone returns s with a log of its own, which a step may rewrite.
func clone(s engine.State) engine.State {
	s.Log = slices.Clone(s.Log)
	return s
}

// sameState reports whether a and b are the same state, an empty log
// being none.
func sameState(a, b engine.State) bool {
	return slices.Equal(a.Log, b.Log) && a.Time == b.Time && a.Until == b.Until &&
		math.Float64bits(a.A) == math.Float64bits(b.A) && math.Float64bits(a.B) == math.Float64bits(b.B)
}

// admit decides op, which must be admitted (for a cancel, give its cost
// back).
func (b *builder) admit(op engine.Op) engine.Decision {
	d, err := b.step(op)
	b.expect(err == nil && d.Allowed, "admitted")
	return d
}

// deny decides op, which must be decided and not admitted.
func (b *builder) deny(op engine.Op) engine.Decision {
	d, err := b.step(op)
	b.expect(err == nil && !d.Allowed, "denied")
	return d
}

// decide decides op, which must be decided, admitted or not.
func (b *builder) decide(op engine.Op) engine.Decision {
	d, err := b.step(op)
	b.expect(err == nil, "decided")
	return d
}

// refuse decides op, which must be refused with sentinel.
func (b *builder) refuse(op engine.Op, sentinel error) engine.Decision {
	d, err := b.step(op)
	b.expect(errors.Is(err, sentinel), fmt.Sprintf("refused with %v", sentinel))
	return d
}

// expect panics unless the rule the case pins holds.
func (b *builder) expect(ok bool, what string) {
	if !ok {
		b.fail("is not " + what)
	}
}

// fail panics, naming the case and its last op.
func (b *builder) fail(why string) {
	i := len(b.c.Steps) - 1
	s := b.c.Steps[i]
	outcome := s.Err
	if s.Want != nil {
		outcome = fmt.Sprintf("%+v %s", *s.Want, s.Err)
	}
	panic(fmt.Sprintf("vectors: %s: op %d %+v: %s: %s", b.c.Name, i, s.Op, outcome, why))
}

func (b *builder) op(verb engine.Verb, cost float64) engine.Op {
	return engine.Op{Verb: verb, Cost: cost, Now: b.now}
}

func (b *builder) allow(cost float64) engine.Op  { return b.op(engine.VerbAllow, cost) }
func (b *builder) check(cost float64) engine.Op  { return b.op(engine.VerbCheck, cost) }
func (b *builder) fill(cost float64) engine.Op   { return b.op(engine.VerbFill, cost) }
func (b *builder) atMost(cost float64) engine.Op { return b.op(engine.VerbAtMost, cost) }

func (b *builder) reserve(cost float64, maxDelay int64) engine.Op {
	op := b.op(engine.VerbReserve, cost)
	op.MaxDelay = maxDelay
	return op
}

func (b *builder) cancel(cost float64, at int64) engine.Op {
	op := b.op(engine.VerbCancel, cost)
	op.At = at
	return op
}

// exhaust makes the key full for the next delay nanoseconds, described as
// a check of cost.
func (b *builder) exhaust(cost float64, delay int64) engine.Op {
	op := b.op(engine.VerbExhaust, cost)
	op.MaxDelay = delay
	return op
}

func (b *builder) charge(cost float64) engine.Op { return b.op(engine.VerbCharge, cost) }
func (b *builder) refund(cost float64) engine.Op { return b.op(engine.VerbRefund, cost) }

// release is a cancel of the lease at: the concurrency limit's release.
func (b *builder) release(at int64) engine.Op { return b.cancel(1, at) }

func (b *builder) extend(at int64) engine.Op {
	op := b.op(engine.VerbExtend, 1)
	op.At = at
	return op
}

// wait is an acquisition of cost by the waiter of ticket (0 for none)
// with patience, which a denial lines up.
func (b *builder) wait(cost float64, ticket, patience int64) engine.Op {
	op := b.allow(cost)
	op.At, op.MaxDelay = ticket, patience
	return op
}

// checkAs is a check of cost by the waiter of ticket.
func (b *builder) checkAs(cost float64, ticket int64) engine.Op {
	op := b.check(cost)
	op.At = ticket
	return op
}

// leave takes the waiter of ticket out of line.
func (b *builder) leave(ticket int64) engine.Op {
	op := b.op(engine.VerbLeave, 0)
	op.At = ticket
	return op
}

// as runs the next ops under q instead of the Params of the moment: the
// key's limit changes (to the case's own Params again, if q is them).
func (b *builder) as(q engine.Params) {
	if err := q.Validate(); err != nil {
		panic(fmt.Sprintf("vectors: %s: %v", b.c.Name, err))
	}
	b.p = q
}

// changed returns the case's Params changed by f.
func (b *builder) changed(f func(q *engine.Params)) engine.Params {
	q := b.c.Params
	f(&q)
	return q
}

// limit is the limit of the Params of the moment.
func (b *builder) limit() float64 { return b.p.Limit }

// interval is the interval of the Params of the moment.
func (b *builder) interval() int64 { return b.p.Interval }

// up returns the next float64 above x: one ulp over.
func up(x float64) float64 { return math.Nextafter(x, math.Inf(1)) }

// down returns the next float64 below x: one ulp under.
func down(x float64) float64 { return math.Nextafter(x, math.Inf(-1)) }
