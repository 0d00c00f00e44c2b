package reference

import (
	"math/big"

	"github.com/sluice-go/sluice/engine"
)

// fixedWindow counts cost per window of length Interval: aligned windows
// are [k*W, (k+1)*W) (k = floor(now/W)), an anchored window starts at the
// first request that finds no window open. c is admitted iff count+c <=
// Limit; denied requests are not counted. A clock that steps back stays in
// the open window. An aligned window counted under another length (see
// [Change]) counts in the window of length W that holds its start.
type fixedWindow struct {
	limit    *big.Rat
	limitF   float64
	window   int64
	anchored bool
	count    *big.Rat // zero when no window is open
	start    int64
}

func newFixedWindow(p engine.Params) *fixedWindow {
	f := &fixedWindow{limit: rat(p.Limit), limitF: p.Limit, window: p.Interval, anchored: p.Anchored}
	f.Reset()
	return f
}

func (f *fixedWindow) Reset() { f.count, f.start = new(big.Rat), 0 }

func (f *fixedWindow) Load(s engine.State) { f.count, f.start = rat(s.A), s.Time }

func (f *fixedWindow) Apply(op engine.Op) Decision {
	count, start := f.count, f.start
	if !f.anchored {
		start = alignedStart(start, f.window) // the same start, unless counted under another length
	}
	if count.Sign() == 0 || (op.Now-start) >= f.window {
		count, start = new(big.Rat), op.Now
		if !f.anchored {
			start = alignedStart(op.Now, f.window)
		}
	}
	sum := add(count, rat(op.Cost))
	d := Decision{Allowed: sum.Cmp(f.limit) <= 0, Used: count, Margin: relative(sub(sum, f.limit), f.limitF)}
	end := start + f.window
	if d.Allowed {
		d.Used = sum
	} else {
		d.RetryAfter = end - op.Now
	}
	if d.Used.Sign() > 0 {
		d.ResetAfter = end - op.Now
	}
	if op.Verb == engine.VerbAllow && d.Allowed {
		f.count, f.start = d.Used, start
	}
	return d
}

// alignedStart returns the start of the aligned window of length w holding
// t: floor(t/w)*w (t is not negative).
func alignedStart(t, w int64) int64 { return t / w * w }

// slidingCounter weighs the previous aligned window's count by the part of
// it still inside the sliding window ending now:
//
//	estimate = prev*(W - elapsed)/W + cur,   elapsed = now - window start
//
// and admits c iff estimate + c <= Limit. A clock that steps back before
// the window's start counts as no time: elapsed is then zero. Counts kept
// under another window length (see [Change]) count in the window of
// length W that holds their window's start, and the previous window's
// count as the one before it.
type slidingCounter struct {
	limit  *big.Rat
	limitF float64
	window int64
	cur    *big.Rat
	prev   *big.Rat
	start  int64 // meaningful only while cur or prev is positive
}

func newSlidingCounter(p engine.Params) *slidingCounter {
	s := &slidingCounter{limit: rat(p.Limit), limitF: p.Limit, window: p.Interval}
	s.Reset()
	return s
}

func (s *slidingCounter) Reset() { s.cur, s.prev, s.start = new(big.Rat), new(big.Rat), 0 }

func (s *slidingCounter) Load(st engine.State) {
	s.cur, s.prev, s.start = rat(st.A), rat(st.B), st.Time
}

func (s *slidingCounter) Apply(op engine.Op) Decision {
	cur, prev, start := s.cur, s.prev, alignedStart(s.start, s.window)
	switch {
	case cur.Sign() == 0 && prev.Sign() == 0, op.Now-start >= 2*s.window:
		cur, prev, start = new(big.Rat), new(big.Rat), alignedStart(op.Now, s.window)
	case op.Now-start >= s.window:
		cur, prev, start = new(big.Rat), cur, start+s.window
	}
	c := rat(op.Cost)
	elapsed := max(op.Now-start, 0)
	estimate := add(mul(prev, big.NewRat(s.window-elapsed, s.window)), cur)
	sum := add(estimate, c)
	excess := sub(sum, s.limit)
	d := Decision{Allowed: excess.Sign() <= 0, Used: estimate, Margin: relative(excess, s.limitF)}
	if d.Allowed {
		d.Used = sum
	} else {
		// The first instant from+e at which base*(W-e)/W + rest + c fits:
		// in this window if cur+c fits at all (base prev, rest cur), or
		// else in the next one, where cur is the previous count.
		base, rest, from := prev, cur, start
		over := sub(add(cur, c), s.limit)
		d.Margin = min(d.Margin, relative(over, s.limitF))
		if over.Sign() > 0 {
			base, rest, from = cur, new(big.Rat), start+s.window
		}
		// base*(W-e)/W <= limit-rest-c  <=>  e >= W*(1 - (limit-rest-c)/base)
		room := quo(sub(sub(s.limit, rest), c), base)
		w := ratInt(s.window)
		d.RetryAfter = from + ceilNanos(mul(w, sub(big.NewRat(1, 1), room))) - op.Now
		d.Drain, _ = quo(w, base).Float64()
	}
	next := cur
	if d.Allowed {
		next = add(cur, c)
	}
	switch {
	case next.Sign() > 0:
		d.ResetAfter = max(start+2*s.window-op.Now, 0)
	case prev.Sign() > 0:
		d.ResetAfter = max(start+s.window-op.Now, 0)
	}
	if op.Verb == engine.VerbAllow && d.Allowed {
		s.cur, s.prev, s.start = next, prev, start
	}
	return d
}
