package engine

import (
	"fmt"
	"time"
)

// A GroupOp is one limit of a group decision: a key, the algorithm it is
// decided under, and the op on it. The ops of one group decision share
// their Verb, Now and MaxDelay; their costs (and, for a cancel, their
// instants) are each limit's own.
type GroupOp struct {
	Key    string
	Params *Params
	Op     Op
}

// MaxGroup bounds the limits of one group decision.
const MaxGroup = 8

// CheckGroup reports whether ops can be decided as one group, as
// [DecideGroup] requires: between 1 and [MaxGroup] ops, each valid under
// its Params (as Step checks it; op.Now only if callerClock), on distinct
// keys, sharing their verb, time and maximum delay, with a verb a group
// runs (VerbAllow, VerbCheck, VerbReserve, VerbCancel, VerbExtend).
func CheckGroup(ops []GroupOp, callerClock bool) error {
	if len(ops) == 0 || len(ops) > MaxGroup {
		return fmt.Errorf("%w: a group has %d limits, not 1 to %d", ErrInvalidConfig, len(ops), MaxGroup)
	}
	first := ops[0].Op
	switch first.Verb {
	case VerbAllow, VerbCheck, VerbReserve, VerbCancel, VerbExtend:
	default:
		return fmt.Errorf("%w: a group does not %v", ErrUnsupported, first.Verb)
	}
	for i, g := range ops {
		if g.Params == nil {
			return fmt.Errorf("%w: group limit %d has no Params", ErrInvalidConfig, i)
		}
		if err := g.Params.Validate(); err != nil {
			return err
		}
		if g.Op.Verb != first.Verb || g.Op.Now != first.Now || g.Op.MaxDelay != first.MaxDelay {
			return fmt.Errorf("%w: group limit %d decides %+v, not as limit 0 (%+v)", ErrInvalidConfig, i, g.Op, first)
		}
		if callerClock {
			if err := CheckTime(g.Op.Now); err != nil {
				return err
			}
			if err := g.Params.CheckWindows(g.Op.Now); err != nil {
				return err
			}
		}
		if err := g.Params.CheckOp(g.Op); err != nil {
			return err
		}
		for _, h := range ops[:i] {
			if h.Key == g.Key {
				return fmt.Errorf("%w: key %q appears twice in one group", ErrInvalidKey, g.Key)
			}
		}
	}
	return nil
}

// DecideGroup is a group decision, the specification every GroupStore
// follows, over decide, which runs one limit's op on its key's state (the
// state as the previous call on that key left it) and records it as Step
// does. ops must have passed [CheckGroup]. It fills each and returns the
// group's decision:
//
//   - VerbAllow checks every limit; if every one admits, it admits the
//     cost in each. Otherwise nothing is admitted anywhere: the limits that
//     denied decide the request as Allow, so that a penalty or counted
//     denial of theirs applies, and the others check a zero cost, so that
//     their decisions (Allowed) describe their keys as the request left
//     them.
//   - VerbCheck decides as VerbAllow would, recording nothing: it checks
//     every limit, and if one denies, checks a zero cost on the others.
//   - VerbReserve checks every limit, and books every one at the latest
//     of their earliest instants, if it comes within the maximum delay;
//     otherwise it books nothing, and the limits that could not book
//     within the delay on their own decide it as a reservation that did
//     not fit.
//   - VerbCancel gives each limit's reservation back (releases each
//     lease), and VerbExtend extends each lease, each by its own rule.
//
// The group's decision is the most restrictive limit's: when every limit
// admits, the one with the least of its limit left; otherwise the denial
// that lasts longest, with RetryAfter the latest at which every limit
// would admit (for a reservation, would book). Blocked reports whether any
// limit is blocked by a penalty.
func DecideGroup(ops []GroupOp, decide func(i int, op Op) (Decision, error), each []Decision) (Decision, error) {
	first := ops[0].Op
	run := func(i int, op Op) error {
		d, err := decide(i, op)
		each[i] = d
		return err
	}
	if first.Verb == VerbCancel || first.Verb == VerbExtend {
		for i, g := range ops {
			if err := run(i, g.Op); err != nil {
				return Decision{}, err
			}
		}
		return combined(each, first), nil
	}
	var latest time.Duration // until every limit would admit
	all := true
	for i, g := range ops {
		check := g.Op // a concurrency limit's check keeps its ticket, At
		check.Verb, check.MaxDelay = VerbCheck, 0
		if first.Verb == VerbReserve {
			check.At = 0
		}
		if err := run(i, check); err != nil {
			return Decision{}, err
		}
		all = all && each[i].Allowed
		latest = max(latest, each[i].RetryAfter)
	}
	switch first.Verb {
	case VerbAllow, VerbCheck:
		for i, g := range ops {
			op := g.Op
			switch {
			case !all && each[i].Allowed:
				// Admitted by this limit, not by the group: its decision
				// describes the key as the request leaves it, untouched.
				op.Verb, op.Cost = VerbCheck, 0
			case first.Verb == VerbCheck:
				continue // checked already
			}
			if err := run(i, op); err != nil {
				return Decision{}, err
			}
		}
	case VerbReserve:
		fits := int64(latest) <= first.MaxDelay
		retry := latest - time.Duration(first.MaxDelay) // until the group would book
		for i, g := range ops {
			op := g.Op
			switch {
			case fits:
				op.At, op.MaxDelay = first.Now+int64(latest), int64(latest)
			case int64(each[i].RetryAfter) <= first.MaxDelay:
				continue // would have booked on its own: records nothing
			}
			if err := run(i, op); err != nil {
				return Decision{}, err
			}
			retry = max(retry, each[i].RetryAfter)
		}
		d := combined(each, first)
		if !fits {
			d.RetryAfter = retry
		}
		return d, nil
	}
	return combined(each, first), nil
}

// combined returns the group's decision from each limit's.
func combined(each []Decision, op Op) Decision {
	var d Decision
	Combine(each, op, &d)
	return d
}

// Combine sets *d, which is zero, to the group's decision from each
// limit's decision, as DecideGroup does: for a store that decides a group
// its own way (in one pass, say) and reports it as DecideGroup would.
func Combine(each []Decision, op Op, d *Decision) {
	best := -1
	allowed, blocked := true, false
	var retry, delay time.Duration
	for i := range each {
		e := &each[i]
		allowed = allowed && e.Allowed
		blocked = blocked || e.Blocked
		retry, delay = max(retry, e.RetryAfter), max(delay, e.Delay)
		if best < 0 || tighter(e, &each[best]) {
			best = i
		}
	}
	if !allowed {
		for i := range each { // the longest denial
			if e := &each[i]; !e.Allowed && (each[best].Allowed || e.RetryAfter > each[best].RetryAfter) {
				best = i
			}
		}
	}
	*d = each[best]
	if !allowed {
		d.Allowed, d.Delay, d.At = false, 0, 0
	} else if op.Verb == VerbReserve && delay > 0 {
		d.Delay, d.At = delay, op.Now+int64(delay)
	}
	d.RetryAfter, d.Blocked = retry, blocked
}

// tighter reports whether d has less of its limit left than e.
func tighter(d, e *Decision) bool {
	return d.Remaining*e.Limit < e.Remaining*d.Limit
}
