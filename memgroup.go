package sluice

import (
	"context"
	"fmt"
	"slices"
	"unsafe"

	"github.com/sluice-go/sluice/engine"
)

// ApplyGroup decides ops as one ([DecideGroup]) with every shard holding
// one of their keys locked, taken in the order of the shards' addresses so
// that groups sharing shards never wait on each other in a cycle. It
// implements [GroupStore].
func (m *MemStore) ApplyGroup(_ context.Context, ops []engine.GroupOp, each []engine.Decision) (engine.Decision, error) {
	if err := engine.CheckGroup(ops, true); err != nil {
		return engine.Decision{}, err
	}
	if len(each) != len(ops) {
		return engine.Decision{}, fmt.Errorf("%w: %d decisions for %d limits", ErrInvalidConfig, len(each), len(ops))
	}
	clear(each) // decided into in place
	var d engine.Decision
	err := m.applyGroup(ops, each, &d)
	return d, err
}

// applyGroup is ApplyGroup for ops that passed CheckGroup, or that a Group
// built from validated limiters (checkGroupOps), deciding each limit into
// each and the group into *d, all zero, in place (see limiter.do).
func (m *MemStore) applyGroup(ops []engine.GroupOp, each []engine.Decision, d *engine.Decision) (err error) {
	if m.closed.Load() {
		return ErrStoreClosed
	}
	var g memGroup
	g.lock(m, ops)
	defer g.unlock()
	for i := range ops {
		o, k := &ops[i], g.key(i)
		k.sh.now = max(k.sh.now, o.Op.Now)
		if err := k.sh.load(k.id, o.Params, o.Op.Now, &k.state); err != nil {
			return fmt.Errorf("%w: key %q", err, o.Key)
		}
	}
	if ops[0].Op.Verb == engine.VerbAllow {
		g.allow(m, ops, each, d)
		return nil
	}
	*d, err = engine.DecideGroup(ops, func(i int, op engine.Op) (engine.Decision, error) {
		var e engine.Decision
		g.decide(m, ops, i, op, &e)
		return e, nil
	}, each)
	return err
}

// memGroup is a group decision's keys in a MemStore, locked. It holds the
// keys of the common groups in place: a larger group's others are on the
// heap, so that the common decision zeroes and copies no more than it
// uses.
type memGroup struct {
	n      int
	keys   [inlineGroup]memKey
	more   *[engine.MaxGroup - inlineGroup]memKey
	locked [engine.MaxGroup]*shard // the shards in address order, with repeats
}

// A memKey is one key of a memGroup: where it is, and its state.
type memKey struct {
	id    keyID
	sh    *shard
	state engine.State
}

// key returns key i of the group.
func (g *memGroup) key(i int) *memKey {
	if i < inlineGroup {
		return &g.keys[i]
	}
	return &g.more[i-inlineGroup]
}

// lock locates the keys of ops and locks their shards in address order,
// each once.
func (g *memGroup) lock(m *MemStore, ops []engine.GroupOp) {
	g.n = len(ops)
	if g.n > inlineGroup {
		g.more = new([engine.MaxGroup - inlineGroup]memKey)
	}
	// Located, and sorted by insertion: a group is small.
	for i := range g.n {
		k := g.key(i)
		k.id, k.sh = m.locate(ops[i].Key)
		j := i
		for ; j > 0 && uintptr(unsafe.Pointer(g.locked[j-1])) > uintptr(unsafe.Pointer(k.sh)); j-- {
			g.locked[j] = g.locked[j-1]
		}
		g.locked[j] = k.sh
	}
	for i, sh := range g.locked[:g.n] {
		if i == 0 || sh != g.locked[i-1] {
			sh.mu.Lock()
		}
	}
}

func (g *memGroup) unlock() {
	for i, sh := range g.locked[:g.n] {
		if i == 0 || sh != g.locked[i-1] {
			sh.mu.Unlock()
		}
	}
}

// decide runs op on key i's state and saves what it records.
func (g *memGroup) decide(m *MemStore, ops []engine.GroupOp, i int, op engine.Op, d *engine.Decision) {
	p, k := ops[i].Params, g.key(i)
	p.Decide(&k.state, op, d)
	if p.Records(op.Verb, d) {
		k.sh.save(k.id, p, op.Now, &k.state, d, m.perShard)
	}
}

// allow is DecideGroup for VerbAllow in one pass: every limit decides
// Allow on its state (a check and then an Allow decide alike); if all
// admit, the states are saved; if not, only the denials' states are (a
// penalty or counted denial), and the limits that admitted check a zero
// cost instead, as DecideGroup does. It sets *d to the group's decision.
func (g *memGroup) allow(m *MemStore, ops []engine.GroupOp, each []engine.Decision, d *engine.Decision) {
	all := true
	for i := range ops {
		o, k := &ops[i], g.key(i)
		if o.Params.Kind == engine.KindSlidingLog {
			// Allow may reuse the log's storage: keep the stored one.
			k.state.Log = slices.Clone(k.state.Log)
		}
		o.Params.Decide(&k.state, o.Op, &each[i])
		all = all && each[i].Allowed
	}
	if !all {
		// The limits that admitted check a zero cost on their keys as
		// they were, loaded again before any key of the group is saved
		// (a save can make room in a shard by evicting another key).
		for i := range ops {
			if o, k := &ops[i], g.key(i); each[i].Allowed {
				_ = k.sh.load(k.id, o.Params, o.Op.Now, &k.state) // loaded once: cannot fail
				each[i] = engine.Decision{}
				o.Params.Decide(&k.state, engine.Op{Verb: engine.VerbCheck, Now: o.Op.Now}, &each[i])
			}
		}
	}
	for i := range ops {
		o, k := &ops[i], g.key(i)
		if (all || !each[i].Allowed) && o.Params.Records(engine.VerbAllow, &each[i]) {
			k.sh.save(k.id, o.Params, o.Op.Now, &k.state, &each[i], m.perShard)
		}
	}
	engine.Combine(each, ops[0].Op, d)
}

// load sets *s to id's state for p under the shard's lock, or returns an
// error wrapping ErrKeyConflict if the key holds another algorithm's live
// state.
func (sh *shard) load(id keyID, p *engine.Params, now int64, s *engine.State) error {
	*s = engine.State{}
	var other engine.Kind // of another algorithm's live state that holds the key
	if p.Kind == engine.KindGCRA {
		if i, ok := sh.tats.find(id); ok {
			sh.tats.slots[i].used()
			s.Time = sh.tats.slots[i].expires
		} else {
			other = claim(sh, &sh.slots, id, now)
		}
	} else {
		i, ok := sh.slots.find(id)
		switch {
		case !ok:
			other = claim(sh, &sh.tats, id, now)
		case sh.slots.slots[i].kind() != p.Kind:
			other = claimAt(sh, &sh.slots, i, now)
		default:
			e := &sh.slots.slots[i]
			e.used()
			*s = engine.State{Time: e.time, A: e.a, B: e.b}
			if p.Kind == engine.KindSlidingLog {
				s.Log = sh.logs[id]
			}
		}
	}
	if other != 0 {
		return fmt.Errorf("%w: it holds %v state, not %v", ErrKeyConflict, other, p.Kind)
	}
	if sh.blocks != nil {
		sh.blocked(id, s, p.Kind == engine.KindGCRA)
	}
	return nil
}

// save writes the state a recorded decision d at now left for id, or
// forgets the key once it is fresh again.
func (sh *shard) save(id keyID, p *engine.Params, now int64, s *engine.State, d *engine.Decision, bound int) {
	gcra := p.Kind == engine.KindGCRA
	if d.ResetAfter <= 0 {
		if gcra {
			forget(sh, &sh.tats, id)
		} else {
			forget(sh, &sh.slots, id)
		}
		return
	}
	expires := now + int64(d.ResetAfter)
	if gcra {
		i, ok := sh.tats.find(id)
		if !ok {
			sh.makeRoom(id, bound, now)
			i = sh.tats.insert(id, p.Kind)
		}
		sh.tats.slots[i].expires = expires
	} else {
		i, ok := sh.slots.find(id)
		if !ok {
			sh.makeRoom(id, bound, now)
			i = sh.slots.insert(id, p.Kind)
		}
		e := &sh.slots.slots[i]
		e.time, e.a, e.b, e.expires = s.Time, s.A, s.B, expires
		if p.Kind == engine.KindSlidingLog {
			if sh.logs == nil {
				sh.logs = make(map[keyID][]engine.Entry)
			}
			sh.logs[id] = s.Log
		}
	}
	sh.block(id, s)
}
