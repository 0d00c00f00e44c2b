package sluice

import "github.com/sluice-go/sluice/engine"

// A GCRA key records the emission interval its state was computed with
// (State.A: engine's "Limits that change"). A shard's GCRA table keeps its
// keys in 24-byte slots that have no room for it: they all have the
// shard's primary interval, the first a GCRA key was saved with there. A
// GCRA key recorded with another interval (a limit per key, or one that
// changed) lives in the other table, in a 48-byte slot of Kind GCRA, with
// its interval; a key moves between the tables when its interval does.
// load and save give its slot there as otherGCRA - i.

// otherGCRA is the highest slot number that names slot 0 of the other
// table, for a GCRA key recorded with another interval than the primary.
const otherGCRA = -2

// otherAt names slot i of the other table as a GCRA key's.
func otherAt(i int) int { return otherGCRA - i }

// slotOf is the slot of the other table that at names.
func slotOf(at int) int { return otherGCRA - at }

// primaryOf reports whether a GCRA state s goes in the GCRA table: it was
// computed with the shard's primary interval, which the first such state
// sets, or with none.
func (sh *shard) primaryOf(s *engine.State) bool {
	if s.A == 0 {
		return true
	}
	if sh.primaryA == 0 {
		sh.primaryA = s.A
	}
	return s.A == sh.primaryA
}

// loadOtherGCRA is load for a GCRA key that the GCRA table does not hold:
// absent, or recorded with another interval, or a key of another
// algorithm.
func (sh *shard) loadOtherGCRA(id keyID, now int64, s *engine.State) (at int, other engine.Kind) {
	i, ok := sh.slots.find(id)
	if !ok {
		return -1, 0
	}
	e := &sh.slots.slots[i]
	if e.kind() != engine.KindGCRA {
		return -1, claimAt(sh, &sh.slots, i, now)
	}
	e.used()
	if e.expires <= now {
		return otherAt(i), 0 // fresh again, whatever its Params now: as if forgotten
	}
	s.Time, s.A = e.time, e.a
	if sh.blocks != nil {
		sh.blocked(id, s, true)
	}
	return otherAt(i), 0
}

// saveOtherGCRA is save for a GCRA state recorded with another interval
// than the shard's primary, in the other table.
func (sh *shard) saveOtherGCRA(id keyID, at int, p *engine.Params, now int64, s *engine.State, d *engine.Decision, bound int) {
	switch {
	case at >= 0: // in the GCRA table, with the primary interval until now
		sh.drop(true, at)
		at = -1
	case at <= otherGCRA:
		at = slotOf(at)
	}
	if d.ResetAfter <= 0 { // fresh again, as if absent
		if at >= 0 {
			sh.drop(false, at)
		}
		return
	}
	if at < 0 {
		sh.makeRoom(id, bound, now)
		at = sh.insert(false, id, p.Kind)
	}
	e := &sh.slots.slots[at]
	e.time, e.a, e.b, e.expires = s.Time, s.A, 0, now+int64(d.ResetAfter)
	sh.block(id, s)
}

// decideTAT decides op under p, which DecidesTAT, on the GCRA key id from
// its TAT where the shard keeps it, beside the mutex or in its slot, and
// reports whether it could: for a key the GCRA table holds, while no key
// of the shard is blocked. It makes the decision and the changes to the
// shard that load, Decide and save would, with no State between them.
func (sh *shard) decideTAT(id keyID, p *engine.Params, op engine.Op, d *engine.Decision, bound int) bool {
	if sh.blocks != nil || float64(p.Interval) != sh.primaryA {
		return false
	}
	// load's lookup, written out: as a call it costs the usual request 2 to 4 %.
	at, tat := hotAt, sh.hot.expires
	if !sh.hot.holds(id) {
		i, ok := sh.tats.find(id)
		if !ok {
			return false
		}
		e := &sh.tats.slots[i]
		e.used()
		at, tat = i, e.expires
	}
	tat = p.DecideTAT(tat, op, d)
	if op.Verb != engine.VerbAllow || !d.Allowed {
		return true
	}
	if at == hotAt && d.ResetAfter > 0 {
		sh.hot.expires = tat // saveUsual's first case, without its call
		return true
	}
	if s := (engine.State{Time: tat, A: sh.primaryA}); !sh.saveUsual(id, at, op.Now, &s, d, true) {
		sh.save(id, at, p, op.Now, &engine.State{}, d, bound) // fresh again: forgotten
	}
	return true
}
