package engine

import (
	"github.com/sluice-go/sluice/internal/arith"
)

func (p *Params) stepSlidingLog(s *State, op *Op, d *Decision) {
	live := s.Log
	for len(live) > 0 && live[0].Time+p.Interval <= op.Now {
		live = live[1:]
	}
	var sum float64
	for _, e := range live {
		sum += e.Cost
	}
	newest, empty := int64(0), len(live) == 0
	if !empty {
		newest = live[len(live)-1].Time
	}
	if x := sum + op.Cost - p.Limit; x <= p.slack() {
		d.Allowed = true
		sum = p.fill(sum, op.Cost)
		if op.Cost > 0 {
			if empty || op.Now > newest {
				newest = op.Now
			}
			empty = false
			if op.Verb == VerbAllow {
				s.Log = p.record(s.Log, live, op)
			}
		}
	} else {
		// Admitted once enough of the oldest entries have left the window.
		for _, e := range live {
			if x -= e.Cost; x <= p.slack() {
				d.RetryAfter = after(e.Time+p.Interval, op.Now)
				break
			}
		}
	}
	p.describe(d, sum)
	if !empty {
		d.ResetAfter = after(newest+p.Interval, op.Now)
	}
}

// record appends op to the log, dropping the entries that left the window
// and reusing the log's storage.
func (p *Params) record(log, live []Entry, op *Op) []Entry {
	log = log[:copy(log, live)]
	t := op.Now
	if n := len(log); n > 0 {
		// Keep the log sorted even when the clock stepped back.
		t = max(t, log[n-1].Time)
		if n >= p.MaxEntries {
			log[n-1] = Entry{Time: t, Cost: log[n-1].Cost + op.Cost}
			return log
		}
	}
	return append(log, Entry{Time: t, Cost: op.Cost})
}

func (p *Params) stepSlidingCounter(s *State, op *Op, d *Decision) {
	w := p.Interval
	start, cur, prev := p.counterWindow(s, op.Now)
	elapsed := max(op.Now-start, 0)
	estimate := cur + prev*float64(w-elapsed)/float64(w)
	if at := p.counterAdmitAt(start, cur, prev, op.Cost); start+elapsed >= at {
		d.Allowed = true
		estimate += op.Cost
		cur += op.Cost
		if op.Verb == VerbAllow {
			*s = State{Time: start, A: cur, B: prev}
		}
	} else {
		d.RetryAfter = after(at, op.Now)
	}
	p.describe(d, estimate)
	switch {
	case cur > 0:
		d.ResetAfter = after(start+2*w, op.Now)
	case prev > 0:
		d.ResetAfter = after(start+w, op.Now)
	}
}

// counterWindow returns the window of now, and its count and the previous
// window's, as s leaves them. A state whose start is not a multiple of the
// window, counted under another window length, counts in the window that
// holds its start.
func (p *Params) counterWindow(s *State, now int64) (start int64, cur, prev float64) {
	w := p.Interval
	start, cur, prev = s.Time, s.A, s.B
	if ws := arith.FloorDiv(now, w) * w; ws != start {
		start = alignedStart(start, w)
		if ws > start {
			if ws-start == w {
				prev = cur
			} else {
				prev = 0
			}
			start, cur = ws, 0
		}
	}
	return start, cur, prev
}

// alignedStart returns the start of the window of length w that holds t,
// a multiple of w since the epoch.
func alignedStart(t, w int64) int64 { return arith.FloorDiv(t, w) * w }

// counterAdmitAt returns the first instant at which cost fits, given the
// window starting at start with counts cur and prev.
func (p *Params) counterAdmitAt(start int64, cur, prev, cost float64) int64 {
	w := float64(p.Interval)
	if cur+cost-p.Limit <= p.slack() {
		// It fits in this window once the previous window's weight has
		// fallen to r.
		if prev <= 0 {
			return start
		}
		r := max((p.Limit-cur-cost)/prev, 0)
		if r >= 1 {
			return start
		}
		return start + arith.CeilNanos(w*(1-r))
	}
	// It fits in the next window, where this window's count is the
	// previous one, once that count's weight has fallen to r.
	r := (p.Limit - cost) / cur
	return start + p.Interval + arith.CeilNanos(w*(1-r))
}
