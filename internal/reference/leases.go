package reference

import (
	"cmp"
	"math"
	"math/big"
	"slices"

	"github.com/sluice-go/sluice/engine"
)

// leases is the concurrency limit, from its definition: a key holds a set
// of leases, each with a cost and an expiry, and the expiry is the lease's
// identity; and a line of waiters, each with a ticket and a deadline,
// served in the order of their tickets.
//
//   - A lease is live at now iff it was not released and its expiry is
//     after now (expiry > now). A waiter is in line at now iff it did not
//     leave (admitted, or by VerbLeave) and its deadline is after now
//     (deadline > now): at its deadline it is gone, as a lease is.
//   - An acquisition of cost c (VerbAllow) with ticket Op.At (0 for none)
//     is admitted iff no waiter in line is ahead of it, the live leases'
//     cost plus c is at most Limit and, for c > 0, fewer than MaxEntries
//     leases are live. A waiter is ahead of a ticket that a waiter in
//     line holds iff its ticket is smaller; of any other ticket (none,
//     one whose waiter is gone, one never handed out), every waiter in
//     line is ahead. An admitted c > 0 adds a lease whose expiry, its
//     identity, is the earliest instant at least now + Interval that is
//     later than every identity the key handed out while it lived:
//     identities are unique per key while it lives, and a release of an
//     old one never names a new lease. A cost of zero holds nothing and
//     takes no lease (and no identity). An admitted acquisition leaves the
//     line, if its ticket held a place there.
//   - A denied acquisition with a patience (Op.MaxDelay above zero) waits:
//     a waiter in line with its ticket keeps its place, with a new
//     deadline of now + patience; with any other ticket, it joins the end
//     of the line with the next ticket (one more than the latest handed
//     out while the key lived, the first being 1) and that deadline, if
//     fewer than MaxEntries wait and the next ticket is at most 2^53.
//     Its Decision.At is then its ticket; otherwise (no patience, or no
//     place) At is zero and nothing is recorded.
//   - A check (VerbCheck) decides as the acquisition would, recording
//     nothing, naming no lease and no ticket; its Op.MaxDelay is no
//     patience (only an acquisition waits).
//   - A release (VerbCancel) of identity Op.At ends the live lease with
//     that identity; an extension (VerbExtend) gives it a new identity and
//     expiry, chosen as an acquisition's is, keeping its cost. Op.Cost
//     plays no part. On an identity that no live lease has (released,
//     extended since, expired, never handed out) either is refused and
//     changes nothing.
//   - A leaving (VerbLeave) of ticket Op.At takes the waiter in line with
//     that ticket out of it, and is refused, changing nothing, if there is
//     none.
//   - Used is the live leases' cost after the op, the acquired one's
//     included for an admitted check too; RetryAfter is, for a denied
//     acquisition, the delay until the later of the earliest instant at
//     which enough of the live leases have expired for it to fit (no
//     release assumed; now if it fits now) and, if waiters are ahead of
//     it, the earliest of their deadlines; ResetAfter is the delay until
//     every identity handed out and every deadline of the line the op
//     leaves (a check: would leave) lies in the past, when the key is
//     fresh: no lease is live, no waiter in line, and no identity is left
//     to avoid.
//
// As the Store contract has it, the key's state changes only when a
// decision records, and then only if the decision changes the leases or
// the line (a lease taken, released or extended, a waiter that joins,
// keeps its place, is served or leaves): it then holds the leases live and
// the waiters in line at now, so that one that expired or left stays so
// if the clock later steps back. An admitted cost of zero that serves no
// waiter records but changes nothing, as a decision that records nothing:
// expired leases and gone waiters stay in the state, and they count again
// if the clock steps back before their expiry or deadline. A fresh key is
// the zero State: its tickets, like its identities, start over, whether
// the store forgot it or kept it.
//
// The comparisons are exact. Their margin is one-sided where the
// production code's slack makes it so (see [leases.margin]): an exact fit
// is admitted, and only a sum within [Band] above the limit may be
// decided either way. The line compares instants and tickets, integers,
// exactly.
type leases struct {
	limit      *big.Rat
	limitF     float64
	ttl        int64
	maxEntries int
	held       []lease  // the leases of the state, in no particular order
	latest     int64    // the latest identity handed out; 0 for none
	line       []waiter // the waiters of the state, in no particular order
	ticket     int64    // the latest ticket handed out; 0 for none
}

// lease is one lease: its expiry, which is its identity, and its cost.
type lease struct {
	expiry int64
	cost   *big.Rat
}

// waiter is one waiter in the line: its ticket, and the instant it leaves
// unless it asks again.
type waiter struct {
	ticket   int64
	deadline int64
}

// lastTicket is the latest ticket a line hands out: the integers a float64
// (State.A, an Entry's Cost) holds exactly.
const lastTicket = 1 << 53

func newLeases(p engine.Params) *leases {
	return &leases{limit: rat(p.Limit), limitF: p.Limit, ttl: p.Interval, maxEntries: p.MaxEntries}
}

func (l *leases) Reset() { l.held, l.latest, l.line, l.ticket = nil, 0, nil, 0 }

// Load takes the state as the engine writes it: the leases, each an Entry
// of its expiry and cost (above zero), and the waiters, each an Entry of
// its deadline and minus its ticket (below zero); Time the latest
// identity, A the latest ticket.
func (l *leases) Load(s engine.State) {
	l.held, l.line = l.held[:0], l.line[:0]
	for _, e := range s.Log {
		if e.Cost < 0 {
			l.line = append(l.line, waiter{ticket: int64(-e.Cost), deadline: e.Time})
		} else {
			l.held = append(l.held, lease{expiry: e.Time, cost: rat(e.Cost)})
		}
	}
	l.latest, l.ticket = s.Time, int64(s.A)
}

// State is the key's state as the engine writes it (see [leases.Load]):
// the leases in increasing order of expiry, then the waiters in
// increasing order of ticket.
func (l *leases) State() engine.State {
	s := engine.State{Time: l.latest, A: float64(l.ticket)}
	byExpiry := slices.SortedFunc(slices.Values(l.held), func(a, b lease) int { return cmp.Compare(a.expiry, b.expiry) })
	for _, e := range byExpiry {
		c, _ := e.cost.Float64() // exact: a cost is a float64
		s.Log = append(s.Log, engine.Entry{Time: e.expiry, Cost: c})
	}
	for _, w := range byTicket(l.line) {
		s.Log = append(s.Log, engine.Entry{Time: w.deadline, Cost: -float64(w.ticket)})
	}
	return s
}

// LeaseState returns the state of m, a model of the concurrency limit, as
// the engine writes it: leases by expiry, then waiters by ticket. It
// reports false for a model of another algorithm.
func LeaseState(m Model) (engine.State, bool) {
	if k, ok := m.(*key); ok {
		m = k.Model
	}
	l, ok := m.(*leases)
	if !ok {
		return engine.State{}, false
	}
	return l.State(), true
}

func (l *leases) Apply(op engine.Op) Decision {
	var live []lease
	for _, e := range l.held {
		if e.expiry > op.Now {
			live = append(live, e)
		}
	}
	var line []waiter
	for _, w := range l.line {
		if w.deadline > op.Now {
			line = append(line, w)
		}
	}
	switch op.Verb {
	case engine.VerbCancel, engine.VerbExtend:
		return l.end(op, live, line)
	case engine.VerbLeave:
		return l.leave(op, live, line)
	}
	return l.acquire(op, live, line)
}

// nextIdentity is the identity, and expiry, of a lease taken or extended
// at now.
func (l *leases) nextIdentity(now int64) int64 { return max(now+l.ttl, l.latest+1) }

// resetAfter is how long from now until every identity handed out, up to
// latest, and every deadline of line lies in the past.
func (l *leases) resetAfter(latest int64, line []waiter, now int64) int64 {
	end := latest
	for _, w := range line {
		end = max(end, w.deadline)
	}
	return max(end-now, 0)
}

// acquire decides an acquisition or a check of op.Cost, with ticket
// op.At, among the live leases and the waiters in line.
func (l *leases) acquire(op engine.Op, live []lease, line []waiter) Decision {
	c := rat(op.Cost)
	total := costOf(live)
	sum := add(total, c)
	room := c.Sign() == 0 || len(live) < l.maxEntries
	fits := room && sum.Cmp(l.limit) <= 0
	mine := slices.IndexFunc(line, func(w waiter) bool { return op.At != 0 && w.ticket == op.At })
	var ahead []waiter
	for _, w := range line {
		if mine < 0 || w.ticket < op.At {
			ahead = append(ahead, w)
		}
	}
	d := Decision{Allowed: fits && len(ahead) == 0, Used: total, Margin: math.Inf(1)}
	if room {
		// Without room for one more lease, the costs decide nothing.
		d.Margin = l.margin(sub(sum, l.limit), len(live)+1)
	}
	latest, after := l.latest, line // the identity mark and the line the op leaves
	tickets := l.ticket
	if l.latest <= op.Now && len(line) == 0 {
		tickets = 0 // fresh: as a key forgotten, its tickets start over
	}
	switch {
	case !d.Allowed:
		if !fits {
			retry, margin := l.retry(live, total, c, op.Now)
			d.RetryAfter, d.Margin = retry, min(d.Margin, margin)
		}
		if len(ahead) > 0 {
			first := slices.MinFunc(ahead, func(a, b waiter) int { return cmp.Compare(a.deadline, b.deadline) })
			d.RetryAfter = max(d.RetryAfter, first.deadline-op.Now)
		}
		if op.Verb != engine.VerbAllow || op.MaxDelay <= 0 {
			break // no wait: nothing recorded
		}
		deadline := op.Now + op.MaxDelay
		switch {
		case mine >= 0: // keeps its place
			after = slices.Clone(line)
			after[mine].deadline = deadline
			d.At = op.At
		case len(line) < l.maxEntries && tickets < lastTicket: // joins the end
			d.At = tickets + 1
			after = append(slices.Clone(line), waiter{ticket: d.At, deadline: deadline})
			l.ticket = d.At
		}
		if d.At != 0 {
			l.held, l.line = live, after
		}
	default:
		d.Used = sum
		if mine >= 0 {
			after = slices.Delete(slices.Clone(line), mine, mine+1) // served: out of the line
		}
		if c.Sign() > 0 {
			latest = l.nextIdentity(op.Now)
		}
		if op.Verb != engine.VerbAllow {
			break // a check records nothing
		}
		if c.Sign() == 0 && mine < 0 {
			break // nothing held, no place left: nothing changes
		}
		l.held, l.line, l.latest, l.ticket = live, after, latest, tickets
		if c.Sign() > 0 {
			d.At = latest
			l.held = append(live, lease{expiry: latest, cost: c})
		}
	}
	d.ResetAfter = l.resetAfter(latest, after, op.Now)
	return d
}

// retry returns how long from now until cost c fits among the live
// leases, of total cost, as they expire (the set changes only at their
// expiries), and the margin of the comparisons that decide it.
func (l *leases) retry(live []lease, total, c *big.Rat, now int64) (int64, float64) {
	byExpiry := slices.Clone(live)
	slices.SortFunc(byExpiry, func(a, b lease) int { return cmp.Compare(a.expiry, b.expiry) })
	margin := math.Inf(1)
	rest := total
	for i, e := range byExpiry {
		// From e's expiry on, the leases after it are live.
		rest = sub(rest, e.cost)
		if c.Sign() > 0 && len(byExpiry)-i-1 >= l.maxEntries {
			continue // still no room for one more lease
		}
		over := sub(add(rest, c), l.limit)
		margin = min(margin, l.margin(over, len(live)+i+2))
		if over.Sign() <= 0 {
			return e.expiry - now, margin
		}
	}
	// Unreachable for a valid op (c <= Limit): once every live lease has
	// expired, c fits.
	panic("reference: a cost no larger than the limit never fits")
}

// margin is the margin of an exact comparison of an amount with the limit,
// which the amount exceeds by over, made by the production code in float
// arithmetic with the given number of roundings (additions and
// subtractions of amounts no larger than the limit). The production code
// admits up to a slack of 2^-48 of the limit above it, so that rounding
// never turns an exact fit into a denial: a fit is not close to the
// threshold, as long as its roundings, each at most 2^-53 of the limit,
// stay within that slack (fewer than 32 of them). An amount above the
// limit, or a fit of more roundings, is as close as it is far from the
// limit.
func (l *leases) margin(over *big.Rat, roundings int) float64 {
	if over.Sign() <= 0 && roundings < exactFitRoundings {
		return math.Inf(1)
	}
	return relative(over, l.limitF)
}

// exactFitRoundings is how many float roundings of amounts up to the
// limit the production code's slack (2^-48 of the limit) covers.
const exactFitRoundings = 32

// end decides a release or an extension of the lease op.At names.
func (l *leases) end(op engine.Op, live []lease, line []waiter) Decision {
	i := slices.IndexFunc(live, func(e lease) bool { return e.expiry == op.At })
	if i < 0 {
		return Decision{Used: costOf(live), ResetAfter: l.resetAfter(l.latest, line, op.Now), Margin: math.Inf(1)}
	}
	kept := slices.Delete(slices.Clone(live), i, i+1)
	d := Decision{Allowed: true, Margin: math.Inf(1)}
	if op.Verb == engine.VerbExtend {
		d.At = l.nextIdentity(op.Now)
		kept = append(kept, lease{expiry: d.At, cost: live[i].cost})
		l.latest = d.At
	}
	l.held, l.line = kept, line
	d.Used = costOf(kept)
	d.ResetAfter = l.resetAfter(l.latest, line, op.Now)
	return d
}

// leave decides a leaving of the waiter of ticket op.At.
func (l *leases) leave(op engine.Op, live []lease, line []waiter) Decision {
	d := Decision{Used: costOf(live), Margin: math.Inf(1)}
	i := slices.IndexFunc(line, func(w waiter) bool { return op.At != 0 && w.ticket == op.At })
	if i >= 0 {
		d.Allowed = true
		line = slices.Delete(slices.Clone(line), i, i+1)
		l.held, l.line = live, line
	}
	d.ResetAfter = l.resetAfter(l.latest, line, op.Now)
	return d
}

// costOf is the exact cost of leases.
func costOf(leases []lease) *big.Rat {
	sum := new(big.Rat)
	for _, e := range leases {
		sum.Add(sum, e.cost)
	}
	return sum
}

// byTicket returns the waiters of line in increasing order of ticket.
func byTicket(line []waiter) []waiter {
	return slices.SortedFunc(slices.Values(line), func(a, b waiter) int { return cmp.Compare(a.ticket, b.ticket) })
}
