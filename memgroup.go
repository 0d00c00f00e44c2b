package sluice

import (
	"context"
	"fmt"
	"slices"
	"unsafe"

	"github.com/sluice-go/sluice/engine"
)

// ApplyGroup decides ops as one ([engine.DecideGroup]) with every shard holding
// one of their keys locked, taken in the order of the shards' addresses so
// that groups sharing shards never wait on each other in a cycle. It
// implements [engine.GroupStore].
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
	if err == nil && d.Allowed && ops[0].Op.Verb == engine.VerbAllow {
		m.releasedIn(ops, each) // a waiter served: the next may be first
	}
	return d, err
}

// releasedIn wakes the watchers of the keys on which a group decision each
// on ops may let a waiter in ([engine.Params.Frees]).
func (m *MemStore) releasedIn(ops []engine.GroupOp, each []engine.Decision) {
	for i := range ops {
		if o := &ops[i]; o.Params.Frees(&o.Op, &each[i]) {
			m.released(o.Key)
		}
	}
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
		var other engine.Kind
		if k.at, other = k.sh.load(k.id, o.Params, o.Op.Now, &k.state); other != 0 {
			return conflict(o.Key, other, o.Params.Kind)
		}
	}
	if ops[0].Op.Verb == engine.VerbAllow {
		g.allow(m, ops, each, d) // a waiter served wakes the next in ApplyGroup, or Group.Acquire
		return nil
	}
	*d, err = engine.DecideGroup(ops, func(i int, op engine.Op) (engine.Decision, error) {
		var e engine.Decision
		g.decide(m, ops, i, op, &e)
		return e, nil
	}, each)
	if ops[0].Op.Verb == engine.VerbCancel {
		m.releasedIn(ops, each) // under the shards' locks: watchers take no shard lock
	}
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
	at    int // its slot, as loaded
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
	carried := p.Carries(&k.state, &op)
	p.Decide(&k.state, op, d)
	if p.Records(op.Verb, d) || carried {
		k.sh.resave(k.id, k.at, p, op.Now, &k.state, d, m.perShard)
	}
}

// allow is DecideGroup for VerbAllow in one pass: every limit decides
// Allow on its state (a check and then an Allow decide alike); if all
// admit, the states are saved; if not, only the denials' states are (a
// penalty or counted denial), and the limits that admitted check a zero
// cost instead, as DecideGroup does. It sets *d to the group's decision.
func (g *memGroup) allow(m *MemStore, ops []engine.GroupOp, each []engine.Decision, d *engine.Decision) {
	all := true
	var carried [engine.MaxGroup]bool
	for i := range ops {
		o, k := &ops[i], g.key(i)
		if o.Params.Kind.Logs() {
			// Allow may reuse the log's storage: keep the stored one.
			k.state.Log = slices.Clone(k.state.Log)
		}
		carried[i] = o.Params.Carries(&k.state, &o.Op)
		o.Params.Decide(&k.state, o.Op, &each[i])
		all = all && each[i].Allowed
	}
	if !all {
		// The limits that admitted check a zero cost on their keys as
		// they were, loaded again before any key of the group is saved
		// (a save can make room in a shard by evicting another key).
		for i := range ops {
			if o, k := &ops[i], g.key(i); each[i].Allowed {
				k.state = engine.State{}
				k.at, _ = k.sh.load(k.id, o.Params, o.Op.Now, &k.state) // loaded once: no conflict
				each[i] = engine.Decision{}
				o.Params.Decide(&k.state, engine.Op{Verb: engine.VerbCheck, Now: o.Op.Now, At: o.Op.At}, &each[i])
			}
		}
	}
	for i := range ops {
		o, k := &ops[i], g.key(i)
		if (all || !each[i].Allowed) && (o.Params.Records(engine.VerbAllow, &each[i]) || carried[i]) {
			k.sh.resave(k.id, k.at, o.Params, o.Op.Now, &k.state, &each[i], m.perShard)
		}
	}
	engine.Combine(each, ops[0].Op, d)
}
