package engine

// stepLeases is the concurrency limit: at most Limit of cost held at once
// in leases, each of which ends when released or at its expiry, with a
// line of waiters that are served in the order they joined it.
//
// State: Log holds the live leases, each an Entry whose Time is its expiry
// and Cost its cost, in increasing order of expiry, then the line: each
// waiter an Entry whose Time is its deadline and Cost minus its ticket, in
// increasing order of ticket. Time is the latest expiry the key has handed
// out (a high-water mark), so that every lease of a key, released or not,
// has an expiry of its own; A is the latest ticket handed out. A lease's
// expiry is its identity: Decision.At on the acquisition, Op.At on a
// release (VerbCancel) or an extension (VerbExtend). A ticket is a
// waiter's: Decision.At on a denied acquisition that waits, Op.At on the
// waiter's next try and on its leaving (VerbLeave).
//
// A lease expires at max(now + Interval, Time + 1): Interval is its time
// to live. A waiter leaves the line at its deadline, now + Op.MaxDelay (its
// patience) as of its latest try: a waiter that stops asking (a process
// that died) holds the line up for its patience at most.
//
// An acquisition (VerbAllow) with ticket Op.At (0 for none) is admitted iff
// no live waiter is ahead of it (with a live ticket, none of a smaller
// ticket; without, none at all), the live leases' cost plus its own stays
// within the limit and, for a cost above zero, fewer than MaxEntries
// leases are live; a cost of zero holds nothing and takes no lease. An
// admitted acquisition leaves the line. A denied one with a patience above
// zero keeps its place, or joins the line with ticket A + 1 while fewer
// than MaxEntries wait (and tickets up to 2^53 last); Decision.At is then
// its ticket. Tickets start again from 1 once the key is fresh, as for a
// key the store forgot. VerbCheck decides as
// VerbAllow would, recording nothing.
//
// A release removes the live lease with expiry At; an extension gives it
// the next expiry, now + Interval at the earliest; on a lease that is not
// live (released, expired, never acquired) either is not allowed and
// changes nothing. VerbLeave takes the live waiter of ticket At out of the
// line, and is not allowed if there is none.
//
// Used is the live leases' cost after the op, summed in order of expiry. A
// denied acquisition may retry once enough of the earliest leases have
// expired and, if waiters are ahead, once the first of them could have
// left (a release may come sooner). The key is fresh again once its
// high-water mark and the deadlines of its waiters, as the op leaves them
// (a check, as the acquisition would), have passed: no live lease or
// waiter is left, and a new lease cannot take a released one's expiry.
func (p *Params) stepLeases(s *State, op *Op, d *Decision) {
	held, line := splitLeases(s.Log)
	n := len(held) // where the line starts in s.Log
	for len(held) > 0 && held[0].Time <= op.Now {
		held = held[1:]
	}
	mark := s.Time
	sum := leaseSum(held)
	var gone int64 // the ticket of a waiter that leaves the line, served or not
	tickets := s.A // handed out: none once the key is fresh again, as if forgotten
	if mark <= op.Now && !waits(line, op.Now) {
		tickets = 0
	}
	switch op.Verb {
	case VerbCancel, VerbExtend:
		i := leaseAt(held, op.At)
		if i < 0 {
			break
		}
		d.Allowed = true
		lease := held[i]
		kept := s.Log[:copy(s.Log, held[:i])]
		kept = append(kept, held[i+1:]...)
		if op.Verb == VerbExtend {
			mark = max(op.Now+p.Interval, mark+1)
			d.At = mark
			kept = append(kept, Entry{Time: mark, Cost: lease.Cost})
			s.Time = mark
		}
		sum = leaseSum(kept)
		s.Log = waiting(kept, line, op.Now, 0, 0)
	case VerbLeave:
		if _, mine, _ := place(line, op.Now, op.At); mine {
			d.Allowed, gone = true, op.At
			s.Log = waiting(s.Log[:copy(s.Log, held)], line, op.Now, op.At, 0)
		}
	default: // VerbAllow, VerbCheck
		ahead, mine, first := place(line, op.Now, op.At)
		x := sum + op.Cost - p.Limit
		over := len(held) - p.MaxEntries // leases to expire before one more is live
		if op.Cost == 0 {
			over = -1
		}
		if x <= p.slack() && over < 0 && ahead == 0 {
			d.Allowed = true
			sum = p.fill(sum, op.Cost)
			if op.Cost > 0 {
				mark = max(op.Now+p.Interval, mark+1)
			}
			if mine {
				gone = op.At
			}
			if op.Verb != VerbAllow || op.Cost == 0 && !mine {
				break
			}
			var kept []Entry
			if len(held) < n || len(line) == 0 {
				kept = s.Log[:copy(s.Log, held)] // room before the line
			} else {
				kept = append(make([]Entry, 0, n+1+len(line)), held...)
			}
			if op.Cost > 0 {
				d.At = mark
				kept = append(kept, Entry{Time: mark, Cost: op.Cost})
				s.Time = mark
			}
			s.Log = waiting(kept, line, op.Now, op.At, 0)
			s.A = tickets
			break
		}
		retry := first // when the first waiter ahead could have left
		if !(x <= p.slack() && over < 0) {
			// The leases alone admit once enough of the earliest have
			// expired.
			for i, e := range held {
				if x -= e.Cost; x <= p.slack() && i >= over {
					retry = max(retry, e.Time)
					break
				}
			}
		}
		d.RetryAfter = after(retry, op.Now)
		if op.Verb != VerbAllow || op.MaxDelay == 0 {
			break
		}
		deadline := op.Now + op.MaxDelay
		switch {
		case mine:
			d.At = op.At
			s.Log = waiting(s.Log[:copy(s.Log, held)], line, op.Now, op.At, deadline)
		case ahead < p.MaxEntries && tickets < maxTicket:
			s.A = tickets + 1
			d.At = int64(s.A)
			s.Log = append(waiting(s.Log[:copy(s.Log, held)], line, op.Now, 0, 0), Entry{Time: deadline, Cost: -s.A})
		}
	}
	p.describe(d, sum)
	// Fresh once the latest deadline has passed too, of the waiters as
	// the op leaves them (a check, as an admission would): the log it
	// wrote, or the line it found, whose storage it then left alone.
	if p.Records(op.Verb, d) {
		_, line = splitLeases(s.Log)
	}
	for _, w := range line {
		if -w.Cost != float64(gone) {
			mark = max(mark, w.Time)
		}
	}
	d.ResetAfter = after(mark, op.Now)
}

// splitLeases splits a concurrency limit's log into its leases and its
// line of waiters, whose costs are negative.
func splitLeases(log []Entry) (leases, line []Entry) {
	i := len(log)
	for i > 0 && log[i-1].Cost < 0 {
		i--
	}
	return log[:i], log[i:]
}

// waits reports whether any waiter of line is still waiting at now.
func waits(line []Entry, now int64) bool {
	for _, w := range line {
		if w.Time > now {
			return true
		}
	}
	return false
}

// place reports where the caller of ticket stands in line at now: how
// many live waiters are ahead of it, whether ticket is a live waiter's
// (if not, every live waiter is ahead), and the earliest deadline of
// those ahead (0 for none).
func place(line []Entry, now, ticket int64) (ahead int, mine bool, first int64) {
	for _, w := range line {
		if w.Time <= now {
			continue // left the line at its deadline
		}
		if -w.Cost == float64(ticket) {
			return ahead, true, first
		}
		if ahead == 0 || w.Time < first {
			first = w.Time
		}
		ahead++
	}
	return ahead, false, first
}

// waiting appends to kept, the leases that an op leaves at the start of the
// log's storage, the waiters of line that are still waiting at now, with
// the deadline of ticket's set to deadline, or ticket's left out if
// deadline is 0. line is the log's storage after the leases as the op
// found them, which kept does not reach, or another slice.
func waiting(kept, line []Entry, now, ticket, deadline int64) []Entry {
	for _, w := range line {
		switch {
		case w.Time <= now:
			continue
		case -w.Cost == float64(ticket):
			if deadline == 0 {
				continue
			}
			w.Time = deadline
		}
		kept = append(kept, w)
	}
	return kept
}

// leaseAt returns the index in live of the lease that expires at at, or
// -1 if none does.
func leaseAt(live []Entry, at int64) int {
	for i, e := range live {
		if e.Time == at {
			return i
		}
	}
	return -1
}

// leaseSum is the cost of leases, summed in order.
func leaseSum(leases []Entry) float64 {
	var sum float64
	for _, e := range leases {
		sum += e.Cost
	}
	return sum
}
