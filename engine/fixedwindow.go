package engine

func (p *Params) stepFixedWindow(s *State, op *Op, d *Decision) {
	if p.Calendar() {
		p.stepCalendarWindow(s, op, d)
		return
	}
	start, count := s.Time, s.A
	switch {
	case p.Anchored:
		if count <= 0 || op.Now-start >= p.Interval {
			start, count = max(op.Now, start), 0
		}
	default:
		// A clock that stepped back stays in the stored window; a window
		// counted under another length counts in the one that holds its
		// start.
		if w := alignedStart(op.Now, p.Interval); w != start {
			if start = alignedStart(start, p.Interval); w > start {
				start, count = w, 0
			}
		}
	}
	if count+op.Cost-p.Limit <= p.slack() {
		d.Allowed = true
		count = p.fill(count, op.Cost)
		if op.Verb == VerbAllow {
			*s = State{Time: start, A: count}
		}
	} else {
		d.RetryAfter = after(start+p.Interval, op.Now)
	}
	p.describe(d, count)
	if count > 0 {
		d.ResetAfter = after(start+p.Interval, op.Now)
	}
}

// stepCalendarWindow is the fixed window over the calendar's windows. Its
// State.Time is the end of the window it counted in, not its start: the
// end is what a decision needs, and a later window than now's (a clock
// that stepped back, another caller's clock ahead) is one the Windows may
// not hold.
func (p *Params) stepCalendarWindow(s *State, op *Op, d *Decision) {
	start, end := p.window(op.Now)
	count := s.A
	switch {
	case s.Time <= start:
		count = 0 // an earlier window's count, or none
	case s.Time > end:
		end = s.Time // a clock that stepped back stays in the stored window
	}
	// A count whose window ends within now's (counted under another
	// calendar) counts in now's.
	if count+op.Cost-p.Limit <= p.slack() {
		d.Allowed = true
		count = p.fill(count, op.Cost)
		if op.Verb == VerbAllow {
			*s = State{Time: end, A: count}
		}
	} else {
		d.RetryAfter = after(end, op.Now)
	}
	p.describe(d, count)
	if count > 0 {
		d.ResetAfter = after(end, op.Now)
	}
}
