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
	if m.closed.Load() {
		return Decision{}, ErrStoreClosed
	}
	var (
		ids    [MaxGroup]keyID
		shards [MaxGroup]*shard
		states [MaxGroup]State
	)
	for i, g := range ops {
		ids[i], shards[i] = m.locate(g.Key)
	}
	var order [MaxGroup]*shard
	locked := order[:copy(order[:], shards[:len(ops)])]
	slices.SortFunc(locked, func(a, b *shard) int {
		return compareAddr(a, b)
	})
	locked = slices.Compact(locked)
	for _, sh := range locked {
		sh.mu.Lock()
	}
	defer func() {
		for _, sh := range locked {
			sh.mu.Unlock()
		}
	}()
	for i, g := range ops {
		sh := shards[i]
		sh.now = max(sh.now, g.Op.Now)
		s, err := sh.load(ids[i], g.Params, g.Op.Now)
		if err != nil {
			return Decision{}, fmt.Errorf("%w: key %q", err, g.Key)
		}
		states[i] = s
	}
	return DecideGroup(ops, func(i int, op Op) (Decision, error) {
		g := ops[i]
		var d Decision
		g.Params.step(&states[i], op, &d)
		if g.Params.records(op.Verb, &d) {
			shards[i].save(ids[i], g.Params, op, &states[i], &d, m.perShard)
		}
		return d, nil
	}, each)
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

// compareAddr orders shards by address.
func compareAddr(a, b *shard) int {
	x, y := uintptr(unsafe.Pointer(a)), uintptr(unsafe.Pointer(b))
	switch {
	case x < y:
		return -1
	case x > y:
		return 1
	}
	return 0
}
