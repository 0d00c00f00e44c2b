package engine

// stepLeases is the concurrency limit: at most Limit of cost held at once
// in leases, each of which ends when released or at its expiry.
//
// State: Log holds the live leases, each an Entry whose Time is its expiry
// and Cost its cost, in increasing order of expiry; Time is the latest
// expiry the key has handed out (a high-water mark), so that every lease
// of a key, released or not, has an expiry of its own. The expiry is the
// lease's identity: Decision.At on the acquisition, Op.At on a release
// (VerbCancel) or an extension (VerbExtend).
//
// A lease expires at max(now + Interval, Time + 1): Interval is its time
// to live. An acquisition (VerbAllow) is admitted iff the live leases'
// cost plus its own stays within the limit and, for a cost above zero,
// fewer than MaxEntries leases are live; a cost of zero holds nothing and
// takes no lease. A release removes the live lease with expiry At; an
// extension gives it the next expiry, now + Interval at the earliest; on a
// lease that is not live (released, expired, never acquired) either is not
// allowed and changes nothing.
//
// Used is the live leases' cost after the op, summed in order of expiry.
// The key is fresh again once its high-water mark has passed: no live
// lease is left, and a new one cannot take a released one's expiry.
func (p *Params) stepLeases(s *State, op *Op, d *Decision) {
	live := s.Log
	for len(live) > 0 && live[0].Time <= op.Now {
		live = live[1:]
	}
	mark := s.Time
	var sum float64
	switch op.Verb {
	case VerbCancel, VerbExtend:
		i := leaseAt(live, op.At)
		if i < 0 {
			sum = leaseSum(live)
			break
		}
		d.Allowed = true
		lease := live[i]
		kept := s.Log[:copy(s.Log, live[:i])]
		kept = append(kept, live[i+1:]...)
		if op.Verb == VerbExtend {
			mark = max(op.Now+p.Interval, mark+1)
			d.At = mark
			kept = append(kept, Entry{Time: mark, Cost: lease.Cost})
			s.Time = mark
		}
		s.Log = kept
		sum = leaseSum(kept)
	default: // VerbAllow, VerbCheck
		sum = leaseSum(live)
		x := sum + op.Cost - p.Limit
		over := len(live) - p.MaxEntries // leases to expire before one more is live
		if op.Cost == 0 {
			over = -1
		}
		if x <= p.slack() && over < 0 {
			d.Allowed = true
			sum = p.fill(sum, op.Cost)
			if op.Cost > 0 {
				mark = max(op.Now+p.Interval, mark+1)
				if op.Verb == VerbAllow {
					d.At = mark
					kept := s.Log[:copy(s.Log, live)]
					s.Log = append(kept, Entry{Time: mark, Cost: op.Cost})
					s.Time = mark
				}
			}
			break
		}
		// Admitted once enough of the earliest leases have expired (a
		// release may come sooner).
		for i, e := range live {
			if x -= e.Cost; x <= p.slack() && i >= over {
				d.RetryAfter = after(e.Time, op.Now)
				break
			}
		}
	}
	p.describe(d, sum)
	d.ResetAfter = after(mark, op.Now)
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
