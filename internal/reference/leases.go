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
// identity.
//
//   - A lease is live at now iff it was not released and its expiry is
//     after now (expiry > now).
//   - An acquisition of cost c (VerbAllow) is admitted iff the live
//     leases' cost plus c is at most Limit and, for c > 0, fewer than
//     MaxEntries leases are live. An admitted c > 0 adds a lease whose
//     expiry, its identity, is the earliest instant at least now +
//     Interval that is later than every identity the key handed out while
//     it lived: identities are unique per key while it lives, and a
//     release of an old one never names a new lease. A cost of zero holds
//     nothing and takes no lease (and no identity).
//   - A check (VerbCheck) decides as the acquisition would, recording
//     nothing and naming no lease.
//   - A release (VerbCancel) of identity Op.At ends the live lease with
//     that identity; an extension (VerbExtend) gives it a new identity and
//     expiry, chosen as an acquisition's is, keeping its cost. Op.Cost
//     plays no part. On an identity that no live lease has (released,
//     extended since, expired, never handed out) either is refused and
//     changes nothing.
//   - Used is the live leases' cost after the op, the acquired one's
//     included for an admitted check too; RetryAfter is, for a denied
//     acquisition, the delay until the earliest instant at which enough
//     of the live leases have expired for it to be admitted (no release
//     assumed); ResetAfter is the delay until every identity handed out
//     lies in the past, when the key is fresh: no lease is live, and no
//     identity is left to avoid.
//
// As the Store contract has it, the key's state changes only when a
// decision records (a lease taken, released or extended): it then holds
// the leases live at now, so that one that expired stays expired if the
// clock later steps back. A decision that records nothing leaves expired
// leases in the state, and they count again if the clock steps back
// before their expiry: that is the stored state, unchanged.
//
// The comparisons are exact. Their margin is one-sided where the
// production code's slack makes it so (see [leases.margin]): an exact fit
// is admitted, and only a sum within [Band] above the limit may be
// decided either way.
type leases struct {
	limit      *big.Rat
	limitF     float64
	ttl        int64
	maxEntries int
	held       []lease // the leases of the state, in no particular order
	latest     int64   // the latest identity handed out; 0 for none
}

// lease is one lease: its expiry, which is its identity, and its cost.
type lease struct {
	expiry int64
	cost   *big.Rat
}

func newLeases(p engine.Params) *leases {
	return &leases{limit: rat(p.Limit), limitF: p.Limit, ttl: p.Interval, maxEntries: p.MaxEntries}
}

func (l *leases) Reset() { l.held, l.latest = nil, 0 }

func (l *leases) Load(s engine.State) {
	l.held = l.held[:0]
	for _, e := range s.Log {
		l.held = append(l.held, lease{expiry: e.Time, cost: rat(e.Cost)})
	}
	l.latest = s.Time
}

func (l *leases) Apply(op engine.Op) Decision {
	var live []lease
	for _, e := range l.held {
		if e.expiry > op.Now {
			live = append(live, e)
		}
	}
	if op.Verb == engine.VerbCancel || op.Verb == engine.VerbExtend {
		return l.end(op, live)
	}
	return l.acquire(op, live)
}

// nextIdentity is the identity, and expiry, of a lease taken or extended
// at now.
func (l *leases) nextIdentity(now int64) int64 { return max(now+l.ttl, l.latest+1) }

// resetAfter is how long from now until every identity handed out lies
// in the past.
func (l *leases) resetAfter(latest, now int64) int64 { return max(latest-now, 0) }

// acquire decides an acquisition or a check of op.Cost among the live
// leases.
func (l *leases) acquire(op engine.Op, live []lease) Decision {
	c := rat(op.Cost)
	total := costOf(live)
	sum := add(total, c)
	room := c.Sign() == 0 || len(live) < l.maxEntries
	d := Decision{Allowed: room && sum.Cmp(l.limit) <= 0, Used: total, Margin: math.Inf(1)}
	if room {
		// Without room for one more lease, the costs decide nothing.
		d.Margin = l.margin(sub(sum, l.limit), len(live)+1)
	}
	latest := l.latest
	switch {
	case !d.Allowed:
		retry, margin := l.retry(live, total, c, op.Now)
		d.RetryAfter, d.Margin = retry, min(d.Margin, margin)
	case c.Sign() > 0:
		d.Used = sum
		latest = l.nextIdentity(op.Now)
		if op.Verb == engine.VerbAllow {
			d.At = latest
			l.held = append(live, lease{expiry: latest, cost: c})
			l.latest = latest
		}
	default:
		d.Used = sum
	}
	d.ResetAfter = l.resetAfter(latest, op.Now)
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
func (l *leases) end(op engine.Op, live []lease) Decision {
	i := slices.IndexFunc(live, func(e lease) bool { return e.expiry == op.At })
	if i < 0 {
		return Decision{Used: costOf(live), ResetAfter: l.resetAfter(l.latest, op.Now), Margin: math.Inf(1)}
	}
	kept := slices.Delete(slices.Clone(live), i, i+1)
	d := Decision{Allowed: true, Margin: math.Inf(1)}
	if op.Verb == engine.VerbExtend {
		d.At = l.nextIdentity(op.Now)
		kept = append(kept, lease{expiry: d.At, cost: live[i].cost})
		l.latest = d.At
	}
	l.held = kept
	d.Used = costOf(kept)
	d.ResetAfter = l.resetAfter(l.latest, op.Now)
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
