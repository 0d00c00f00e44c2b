package engine

import (
	"math"
)

// stepAtMost is VerbAtMost: the first of these costs that fits is admitted
// as VerbAllow would admit it: the whole cost; the whole units that the
// allowance left now holds, and one less (a float allowance may round
// either side of a whole number); one unit. Only the admission is recorded.
func (p *Params) stepAtMost(s *State, op *Op, d *Decision) {
	p.carryOnce(s, op)
	whole := math.Ceil(op.Cost) - 1 // the most whole units less than cost
	if op.Cost == 0 {
		// Nothing to grant, and nothing recorded: what a check says, but
		// not admitted, since nothing was.
		p.decide(s, &Op{Verb: VerbCheck, Now: op.Now}, d)
		d.Allowed = false
		return
	}
	if op.Cost <= p.Limit && p.fits(s, op.Now, op.Cost) {
		p.grant(s, op.Now, op.Cost, d)
		return
	}
	var left Decision
	p.decide(s, &Op{Verb: VerbCheck, Now: op.Now}, &left)
	g := min(math.Floor(left.Remaining+p.slack()), whole, math.Floor(p.Limit))
	for _, c := range [...]float64{g, g - 1, 1} {
		if c >= 1 && c <= whole && p.fits(s, op.Now, c) {
			p.grant(s, op.Now, c, d)
			return
		}
	}
	// Nothing fits: the decision on the least cost worth granting.
	p.decide(s, &Op{Verb: VerbCheck, Cost: min(op.Cost, 1), Now: op.Now}, d)
}

// fits reports whether cost would be admitted now.
func (p *Params) fits(s *State, now int64, cost float64) bool {
	var d Decision
	p.decide(s, &Op{Verb: VerbCheck, Cost: cost, Now: now}, &d)
	return d.Allowed
}

// grant admits cost, which fits, into *d as a partial grant.
func (p *Params) grant(s *State, now int64, cost float64, d *Decision) {
	p.decide(s, &Op{Verb: VerbAllow, Cost: cost, Now: now}, d)
	d.Granted = cost
}
