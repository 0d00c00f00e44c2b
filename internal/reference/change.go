package reference

import (
	"fmt"

	"github.com/sluice-go/sluice/engine"
)

// Change returns the model of m's key under another limit, p, which must
// be valid and of m's algorithm and mode (Kind, Anchored, IntervalRefill):
// Params travel with every request, so a key's limit may change between
// two of them, and the key keeps what it has used. m must be a model from
// [New], [NewStrict] or Change, and is not to be used after.
//
// The key's state carries over, in units of cost, as package engine's
// "Limits that change" defines it, and the new limit decides from it at
// once, until the state's expiry (now + ResetAfter of the decision that
// last recorded it or carried it over, under the limit of that time):
// from then on the key is fresh, whatever the new limit, as [Expiring]
// has it, which the model Change returns has in force:
//
//   - The buckets' point (the level or the tokens in use, and its time) is
//     read as it stands under p: the time after it counts at p's rate, and
//     the interval-refill bucket's refills come every p.Interval after its
//     point, its last refill. A point charged deep into debt under a
//     faster limit (up to what its rate frees in 2^60 ns, see [settler])
//     may hold more than p frees in 2^60 ns: p's durations are capped
//     then, as every duration is. The meter forgives whatever its level
//     holds beyond what p's rate leaks in 2^60 ns, whole, 2^60 ns after
//     its point (see [meter]); the interval refill counts the refills of
//     2^60 ns and one more at most in a wait, and forgives nothing: read
//     at that refill, it waits again (see [refill]).
//   - A window counted under another length counts in the window of p's
//     length that holds its start (an aligned window; the sliding
//     counter's current window, the previous one's count kept as the one
//     before it), and the usual rules follow. Anchored windows, the
//     sliding log's entries and the concurrency limit's leases and line
//     are read as they stand.
//   - GCRA's theoretical arrival time (TAT) is a time, not a cost: it
//     stays computed with the interval it was, and the first decision
//     under p converts the units it holds then, at that decision's own
//     now (see [gcra]); every decision but a check records the
//     conversion, whatever it decides.
//   - A block under a penalty keeps its end; p's penalty and counted
//     denials apply from now on.
//   - The state's expiry stays as it was computed: a decision that
//     records nothing under p leaves it, though p may read the state as
//     holding something after it (a level that a slower rate has not
//     drained, a count that a longer window still holds, log entries that
//     a longer window still counts), and its RetryAfter and ResetAfter,
//     read so, may lie past it. GCRA's TAT and the concurrency limit's
//     leases and line hold nothing after it under any limit.
//
// The conversion and the realignment happen when a decision reads the
// state, not when the limit changes, so that a limit changed twice before
// the key's next decision reads the state as the last one finds it: the
// change takes no instant.
func Change(m Model, p engine.Params) (Model, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	switch k := m.(type) {
	case *key:
		if err := sameMode(k.p, p); err != nil {
			return nil, err
		}
		c, ok := k.Model.(changer)
		if !ok {
			return nil, fmt.Errorf("reference: a model of %v does not change", k.p.Kind)
		}
		e := k.expiry
		e.forget = true
		return &key{Model: c.change(p), p: p, keeps: k.keeps, expiry: e}, nil
	case *Strict:
		alone := p
		alone.Penalty, alone.CountDenied = 0, false
		inner, err := Change(k.inner, alone)
		if err != nil {
			return nil, err
		}
		e := k.expiry
		e.forget = true
		return &Strict{inner: inner.(*key), limit: rat(p.Limit), limitF: p.Limit, penalty: p.Penalty, count: p.CountDenied,
			until: k.until, expiry: e}, nil
	}
	return nil, fmt.Errorf("reference: %T is not a model of a key", m)
}

// sameMode reports, as an error, a change of algorithm or mode.
func sameMode(from, to engine.Params) error {
	if from.Kind != to.Kind || from.Anchored != to.Anchored || from.IntervalRefill != to.IntervalRefill {
		return fmt.Errorf("reference: a limit of %v (anchored %v, interval refill %v) changed to %v (anchored %v, interval refill %v): the algorithm and its mode are the key's own",
			from.Kind, from.Anchored, from.IntervalRefill, to.Kind, to.Anchored, to.IntervalRefill)
	}
	return nil
}

// A changer is a model that can hand its key's state over to a model of
// the same algorithm under other Params (see [Change]).
type changer interface {
	change(p engine.Params) Model
}

// A carrier is a model whose state, kept under another limit, is converted
// by the first decision that reads it (GCRA's TAT), and recorded by every
// decision but a check. carry records the conversion, if a decision at
// now makes one, and reports whether it did, with its margin.
type carrier interface {
	carry(now int64) (bool, float64)
}

// A toucher is a model whose state is a point on the key's allowance over
// time (the buckets): touch records the key as it stands at now, moving
// the point there if it lies before, as a cost of nothing recorded at now
// would. The allowance the key has at every instant is unchanged, but not
// the point a limit that changes later reads it from.
type toucher interface {
	touch(now int64)
}

func (k *key) touch(now int64) {
	if t, ok := k.Model.(toucher); ok {
		t.touch(now)
	}
	k.note()
}

func (m *meter) touch(now int64) {
	if now > m.last {
		m.level, m.last = m.levelAt(m.last, m.level, now), now
		if m.level.Sign() == 0 {
			m.Reset()
		}
	}
}

func (r *refill) touch(now int64) {
	if now >= r.last && r.used.Sign() > 0 {
		r.used, r.last, _ = r.point(r.used, r.last, now)
		if r.used.Sign() == 0 {
			r.Reset()
		}
	}
}

func (m *meter) change(p engine.Params) Model {
	n := newMeter(p)
	n.level, n.last, n.peak = m.level, m.last, m.peak
	return n
}

func (r *refill) change(p engine.Params) Model {
	n := newRefill(p)
	n.used, n.last, n.peak = r.used, r.last, r.peak
	return n
}

// change keeps the window's start as it was counted: the decision that
// reads it aligns it to p's length (see [fixedWindow]).
func (f *fixedWindow) change(p engine.Params) Model {
	n := newFixedWindow(p)
	n.count, n.start = f.count, f.start
	return n
}

// change keeps the window's start as it was counted: the decision that
// reads it aligns it to p's length (see [slidingCounter]).
func (s *slidingCounter) change(p engine.Params) Model {
	n := newSlidingCounter(p)
	n.cur, n.prev, n.start = s.cur, s.prev, s.start
	return n
}

func (l *slidingLog) change(p engine.Params) Model {
	n := newSlidingLog(p)
	n.entries = l.entries
	return n
}

func (l *leases) change(p engine.Params) Model {
	n := newLeases(p)
	n.held, n.latest, n.line, n.ticket = l.held, l.latest, l.line, l.ticket
	return n
}

// carry records the conversion of the key's state to its limit, if a
// decision at now makes one, and reports whether it did, with its margin
// (+Inf when none).
func (s *Strict) carry(now int64) (bool, float64) {
	return s.inner.carry(now)
}
