package engine

// A request booked with an estimated cost is settled once its actual cost
// is known: the excess is charged (VerbCharge), what it did not use is
// refunded (VerbRefund). Both act on the key's latest point: now, or the
// later instant a reservation booked ahead (the GCRA's TAT, a bucket's
// point), which they keep.
//
// A charge is recorded whatever the key holds, beyond its limit if need
// be: the key is then in debt, admits nothing until its rate has repaid
// what it holds beyond the limit, and from then frees its allowance as
// after a burst. A key holds at most what its rate frees in maxSpan (2^60
// ns, about 36 years): a charge records up to that, and Decision.Granted
// says what it recorded. Read under a slower limit (see "Limits that
// change" in the package doc), a bucket's wait is capped there too: what
// it holds beyond what that limit frees in maxSpan is forgiven then.
//
// A refund gives back at most what the key holds at its latest point, so
// the key is never left fresher than empty there; Decision.Granted says
// what it gave back. It frees what the key recorded last: the GCRA's TAT,
// and a bucket's level at its latest point, stack the costs recorded, each
// on top of those before it, and a refund takes from the top. The turns
// booked furthest ahead come first: their places move earlier, and their
// callers still act at their instants, later than the key then needs.
//
// Counting each charge as a cost admitted when it is made, and each
// refund as taking back the costs at the top of that stack, at their
// instants, each algorithm's guarantee holds unchanged over every
// interval that ends with an admission made without a wait. For the costs
// requests actually had, counted at their instants, such an interval may
// see more than the guarantee by the excess of requests in it that are
// not settled yet, and by what refunds for requests outside it freed in
// it: the limiter cannot count a cost before it is told.

// stepSettle is VerbCharge and VerbRefund: op.Cost charged to the key or
// refunded, and the key described as a check of a zero cost would
// describe it, a penalty's block included (which it leaves as it is).
func (p *Params) stepSettle(s *State, op *Op, d *Decision) {
	p.carryOnce(s, op)
	until := s.Until // the buckets rewrite the whole state
	var moved float64
	switch {
	case p.Kind == KindGCRA:
		moved = p.settleGCRA(s, op)
	case p.IntervalRefill:
		moved = p.settleRefill(s, op)
	default:
		moved = p.settleMeter(s, op)
	}
	if p.emptied(s, op.Now) {
		*s = State{} // forgotten, as by every verb, even under a block
	}
	s.Until = until
	p.decide(s, &Op{Verb: VerbCheck, Now: op.Now}, d)
	d.Granted = moved
	p.settle(s, op.Verb, d)
}

// settleGCRA moves the TAT by the cost's nanoseconds: later for a charge,
// up to maxSpan past now; earlier for a refund, down to now at the
// earliest. It returns the cost moved.
func (p *Params) settleGCRA(s *State, op *Op) float64 {
	tat := max(s.Time, op.Now)
	s.A = float64(p.Interval)
	if op.Verb == VerbRefund {
		held := s.Time - op.Now
		if held <= 0 {
			return 0
		}
		if op.Cost*float64(p.Interval) >= float64(held) {
			s.Time = op.Now
			return float64(held) / float64(p.Interval)
		}
		// A product below held rounds to it at most, but for float64(held)
		// above 2^53, which may lie a few nanoseconds past it: the TAT then
		// lands that much before now, which reads as now.
		s.Time -= p.gcraNanos(op.Cost)
		return op.Cost
	}
	room := op.Now + maxSpan - tat
	switch {
	case room <= 0:
		return 0
	case op.Cost*float64(p.Interval) >= float64(room):
		s.Time = tat + room
		return float64(room) / float64(p.Interval)
	}
	s.Time = tat + p.gcraNanos(op.Cost)
	return op.Cost
}

// settleMeter moves the level at the key's latest point by the cost: up
// for a charge, to what leaks in maxSpan at most; down for a refund, to
// zero at the least. It returns the cost moved.
func (p *Params) settleMeter(s *State, op *Op) float64 {
	at := max(s.Time, op.Now)
	level, moved := move(op, p.levelAt(*s, at), float64(maxSpan)*p.Amount/float64(p.Interval))
	*s = State{Time: at, A: level}
	return moved
}

// settleRefill moves the tokens in use at the key's point, as seen now,
// by the cost: up for a charge, to what the refills of maxSpan bring at
// most; down for a refund, to none at the least. It returns
// the cost moved.
func (p *Params) settleRefill(s *State, op *Op) float64 {
	used, last := p.refillPoint(*s, op.Now)
	used, moved := move(op, used, float64(maxSpan/p.Interval)*p.Amount)
	*s = State{Time: last, A: used}
	return moved
}

// move moves held, what a bucket holds, by op.Cost: up for a charge, to
// ceiling at most; down for a refund, to zero at the least. It returns
// what the bucket holds after, and the cost moved.
func move(op *Op, held, ceiling float64) (after, moved float64) {
	if op.Verb == VerbCharge {
		moved = min(op.Cost, max(ceiling-held, 0))
		return held + moved, moved
	}
	moved = min(op.Cost, held)
	return held - moved, moved
}

// emptied reports whether s, as a settlement left it, is fresh again at
// now: the GCRA's TAT not after now, a bucket's point not after now and
// holding no more than rounding noise. A check of it would find its
// ResetAfter zero.
func (p *Params) emptied(s *State, now int64) bool {
	if p.Kind == KindGCRA {
		return s.Time <= now
	}
	return s.Time <= now && s.A <= p.slack()
}
