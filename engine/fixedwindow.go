package engine

func (p *Params) stepFixedWindow(s *State, op *Op, d *Decision) {
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
