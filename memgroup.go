package sluice

import (
	"context"
	"fmt"
	"slices"
	"unsafe"
)

// ApplyGroup decides ops as one ([DecideGroup]) with every shard holding
// one of their keys locked, taken in the order of the shards' addresses so
// that groups sharing shards never wait on each other in a cycle. It
// implements [GroupStore].
func (m *MemStore) ApplyGroup(_ context.Context, ops []GroupOp, each []Decision) (Decision, error) {
	if err := CheckGroup(ops, true); err != nil {
		return Decision{}, err
	}
	if len(each) != len(ops) {
		return Decision{}, fmt.Errorf("%w: %d decisions for %d limits", ErrInvalidConfig, len(each), len(ops))
	}
	return m.applyGroup(ops, each)
}

// applyGroup is ApplyGroup for ops that passed CheckGroup, or that a Group
// built from validated limiters (checkGroupOps).
func (m *MemStore) applyGroup(ops []GroupOp, each []Decision) (Decision, error) {
	if m.closed.Load() {
		return Decision{}, ErrStoreClosed
	}
	var g memGroup
	g.lock(m, ops)
	defer g.unlock()
	for i, o := range ops {
		sh := g.shards[i]
		sh.now = max(sh.now, o.Op.Now)
		s, err := sh.load(g.ids[i], o.Params, o.Op.Now)
		if err != nil {
			return Decision{}, fmt.Errorf("%w: key %q", err, o.Key)
		}
		g.states[i] = s
	}
	if ops[0].Op.Verb == VerbAllow {
		return g.allow(m, ops, each), nil
	}
	h := new(memGroup) // the decide function below keeps it
	*h = g
	return DecideGroup(ops, func(i int, op Op) (Decision, error) {
		var d Decision
		h.decide(m, ops, i, op, &d)
		return d, nil
	}, each)
}

// memGroup is a group decision's keys in a MemStore, locked.
type memGroup struct {
	n      int
	ids    [MaxGroup]keyID
	shards [MaxGroup]*shard
	states [MaxGroup]State
	locked [MaxGroup]*shard // distinct, in address order
	nlock  int
}

// lock locates the keys of ops and locks their shards in address order.
func (g *memGroup) lock(m *MemStore, ops []GroupOp) {
	g.n = len(ops)
	for i, o := range ops {
		g.ids[i], g.shards[i] = m.locate(o.Key)
	}
	// Insertion into address order, skipping repeats: a group is small.
	for _, sh := range g.shards[:g.n] {
		j := g.nlock
		for j > 0 && uintptr(unsafe.Pointer(g.locked[j-1])) > uintptr(unsafe.Pointer(sh)) {
			j--
		}
		if j > 0 && g.locked[j-1] == sh {
			continue
		}
		copy(g.locked[j+1:g.nlock+1], g.locked[j:g.nlock])
		g.locked[j] = sh
		g.nlock++
	}
	for _, sh := range g.locked[:g.nlock] {
		sh.mu.Lock()
	}
}

func (g *memGroup) unlock() {
	for _, sh := range g.locked[:g.nlock] {
		sh.mu.Unlock()
	}
}

// decide runs op on key i's state and saves what it records.
func (g *memGroup) decide(m *MemStore, ops []GroupOp, i int, op Op, d *Decision) {
	p := ops[i].Params
	p.step(&g.states[i], op, d)
	if p.records(op.Verb, d) {
		g.shards[i].save(g.ids[i], p, op, &g.states[i], d, m.perShard)
	}
}

// allow is DecideGroup for VerbAllow in one pass: every limit decides
// Allow on a copy of its state (a check and then an Allow decide alike);
// if all admit, the copies are saved; if not, only the denials' states
// are (a penalty or counted denial), and the limits that admitted check a
// zero cost instead, as DecideGroup does.
func (g *memGroup) allow(m *MemStore, ops []GroupOp, each []Decision) Decision {
	var next [MaxGroup]State
	all := true
	for i, o := range ops {
		next[i] = g.states[i]
		if o.Params.Kind == KindSlidingLog {
			// Allow may reuse the log's storage: keep the stored one.
			next[i].Log = slices.Clone(next[i].Log)
		}
		each[i] = Decision{}
		o.Params.step(&next[i], o.Op, &each[i])
		all = all && each[i].Allowed
	}
	for i, o := range ops {
		switch {
		case all || !each[i].Allowed:
			if o.Params.records(VerbAllow, &each[i]) {
				g.states[i] = next[i]
				g.shards[i].save(g.ids[i], o.Params, o.Op, &g.states[i], &each[i], m.perShard)
			}
		default:
			each[i] = Decision{}
			o.Params.step(&g.states[i], Op{Verb: VerbCheck, Now: o.Op.Now}, &each[i])
		}
	}
	return combine(each, ops[0].Op)
}

// load returns id's state for p under the shard's lock, or an error
// wrapping ErrKeyConflict if the key holds another algorithm's live state.
func (sh *shard) load(id keyID, p *Params, now int64) (State, error) {
	var s State
	if p.Kind == KindGCRA {
		if i, ok := sh.tats.find(id); ok {
			sh.tats.slots[i].used()
			s.Time = sh.tats.slots[i].expires
		} else if other := claim(sh, &sh.slots, id, now); other != 0 {
			return s, fmt.Errorf("%w: it holds %v state, not %v", ErrKeyConflict, other, p.Kind)
		}
	} else {
		i, ok := sh.slots.find(id)
		switch {
		case !ok:
			if other := claim(sh, &sh.tats, id, now); other != 0 {
				return s, fmt.Errorf("%w: it holds %v state, not %v", ErrKeyConflict, other, p.Kind)
			}
		case sh.slots.slots[i].kind() != p.Kind:
			if other := claimAt(sh, &sh.slots, i, now); other != 0 {
				return s, fmt.Errorf("%w: it holds %v state, not %v", ErrKeyConflict, other, p.Kind)
			}
		default:
			e := &sh.slots.slots[i]
			e.used()
			s = State{Time: e.time, A: e.a, B: e.b}
			if p.Kind == KindSlidingLog {
				s.Log = sh.logs[id]
			}
		}
	}
	if sh.blocks != nil {
		sh.blocked(id, &s, p.Kind == KindGCRA)
	}
	return s, nil
}

// save writes the state a recorded decision d at op left for id, or
// forgets the key once it is fresh again.
func (sh *shard) save(id keyID, p *Params, op Op, s *State, d *Decision, bound int) {
	gcra := p.Kind == KindGCRA
	if d.ResetAfter <= 0 {
		if gcra {
			forget(sh, &sh.tats, id)
		} else {
			forget(sh, &sh.slots, id)
		}
		return
	}
	expires := op.Now + int64(d.ResetAfter)
	if gcra {
		i, ok := sh.tats.find(id)
		if !ok {
			sh.makeRoom(id, bound, op.Now)
			i = sh.tats.insert(id, p.Kind)
		}
		sh.tats.slots[i].expires = expires
	} else {
		i, ok := sh.slots.find(id)
		if !ok {
			sh.makeRoom(id, bound, op.Now)
			i = sh.slots.insert(id, p.Kind)
		}
		e := &sh.slots.slots[i]
		e.time, e.a, e.b, e.expires = s.Time, s.A, s.B, expires
		if p.Kind == KindSlidingLog {
			if sh.logs == nil {
				sh.logs = make(map[keyID][]Entry)
			}
			sh.logs[id] = s.Log
		}
	}
	sh.block(id, s)
}
