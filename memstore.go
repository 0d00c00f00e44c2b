package sluice

import (
	"context"
	"fmt"
	"hash/maphash"
	"math"
	"math/bits"
	"runtime"
	"sync"
	"sync/atomic"
	"time"
)

// MemStore is the in-memory [Store], and every limiter's default. It is
// safe for concurrent use.
//
// Keys are spread over power-of-two shards by a hash with a seed chosen per
// store, so that clients choosing keys cannot pile them into one shard, and
// each shard has its own mutex: a decision holds one shard's lock for the
// time of one step. State is kept in a slab of fixed-size entries per
// shard, found through one map lookup and updated in place, with no heap
// object per key, and a decision on an existing key allocates nothing.
//
// Keys expire: a key whose state has decayed back to fresh is
// indistinguishable from an absent one, so it may be removed at any time
// without changing a decision. Whenever a key is added, the store examines
// a few keys of the same shard and removes the expired ones, so memory
// follows the keys in use, not every key ever seen. A janitor goroutine
// that sweeps every shard periodically can be enabled too
// (MemStoreConfig.SweepInterval); Close stops it.
//
// MemStoreConfig.MaxKeys bounds memory under a flood of unique keys. When a
// shard is at its share of the bound, adding a key first removes the
// expired keys among a sample of the shard's keys; if none has expired, it
// evicts the sampled key that would have expired soonest: the one whose
// limit is closest to fresh, so that evicting it forgives the least.
type MemStore struct {
	seed     maphash.Seed
	mask     uint64
	shards   []shard
	perShard int // most keys per shard; 0 is unbounded
	closed   atomic.Bool
	stop     chan struct{}
	done     chan struct{}
}

// MemStoreConfig configures a [MemStore]. The zero value is a good default.
type MemStoreConfig struct {
	// Shards is the number of shards, rounded up to a power of two. The
	// default is 16 per CPU (GOMAXPROCS), and at least 64.
	Shards int
	// MaxKeys bounds the number of keys held, spread evenly over the
	// shards. The default, zero, is no bound.
	MaxKeys int
	// SweepInterval, when positive, starts a goroutine that calls Sweep
	// once per interval. The default, zero, relies on sweeping as keys are
	// added.
	SweepInterval time.Duration
}

// A shard keeps its keys' entries in a slab, found through an index map:
// a decision looks its key up once and updates the entry in place, where a
// map of entries would need a second lookup to write it back.
type shard struct {
	mu    sync.Mutex
	index map[string]uint32  // key -> its entry in slab
	slab  []entry            // entries; free ones are listed in free
	free  []uint32           // indexes of unused entries in slab
	logs  map[string][]Entry // sliding log entries, beside their key's entry
	now   int64              // latest time seen, for sweeps
	_     [8]byte            // keep shards' locks on separate cache lines
}

// entry is a key's State and when it expires.
type entry struct {
	time    int64
	a, b    float64
	expires int64 // when the state is fresh again
	kind    Kind
}

const (
	sweepSample = 2  // keys examined when a key is added
	evictSample = 16 // keys examined when a shard is full
)

// NewMemStore returns an in-memory store.
func NewMemStore(cfg MemStoreConfig) *MemStore {
	n := cfg.Shards
	if n <= 0 {
		n = max(16*runtime.GOMAXPROCS(0), 64)
	}
	n = 1 << bits.Len(uint(n-1))
	m := &MemStore{seed: maphash.MakeSeed(), mask: uint64(n - 1), shards: make([]shard, n)}
	for i := range m.shards {
		m.shards[i].index = make(map[string]uint32)
		m.shards[i].logs = make(map[string][]Entry)
	}
	if cfg.MaxKeys > 0 {
		m.perShard = max((cfg.MaxKeys+n-1)/n, 1)
	}
	if cfg.SweepInterval > 0 {
		m.stop, m.done = make(chan struct{}), make(chan struct{})
		go m.janitor(cfg.SweepInterval)
	}
	return m
}

func (m *MemStore) shard(key string) *shard {
	return &m.shards[maphash.String(m.seed, key)&m.mask]
}

// Apply runs op on key's state atomically under its shard's lock. It
// implements [Store].
func (m *MemStore) Apply(_ context.Context, key string, p *Params, op Op) (Decision, error) {
	if err := p.Validate(); err != nil {
		return Decision{}, err
	}
	if err := p.checkOp(op); err != nil {
		return Decision{Limit: p.Limit}, err
	}
	return m.apply(key, p, op)
}

// apply is Apply for params and op already validated.
func (m *MemStore) apply(key string, p *Params, op Op) (Decision, error) {
	if m.closed.Load() {
		return Decision{}, ErrStoreClosed
	}
	sh := m.shard(key)
	sh.mu.Lock()
	sh.now = max(sh.now, op.Now)
	i, found := sh.index[key]
	var s State
	if found {
		e := &sh.slab[i]
		if e.kind != p.Kind {
			if e.expires > op.Now {
				sh.mu.Unlock()
				return Decision{Limit: p.Limit}, fmt.Errorf("%w: key %q holds %v state, not %v", ErrKeyConflict, key, e.kind, p.Kind)
			}
			sh.remove(key, i) // expired: as if absent
			found = false
		} else {
			s = State{Time: e.time, A: e.a, B: e.b}
			if p.Kind == KindSlidingLog {
				s.Log = sh.logs[key]
			}
		}
	}
	var d Decision
	p.step(&s, op, &d)
	if op.Verb == VerbFill || op.Verb == VerbAllow && d.Allowed {
		switch {
		case d.ResetAfter <= 0: // fresh again, as if absent
			if found {
				sh.remove(key, i)
			}
		default:
			if !found {
				i = sh.add(key, m.perShard, op.Now)
			}
			sh.slab[i] = entry{time: s.Time, a: s.A, b: s.B, expires: op.Now + int64(d.ResetAfter), kind: p.Kind}
			if p.Kind == KindSlidingLog {
				sh.logs[key] = s.Log
			}
		}
	}
	sh.mu.Unlock()
	return d, nil
}

// add makes room for key and returns the index of its new entry.
func (sh *shard) add(key string, bound int, now int64) uint32 {
	sh.makeRoom(bound, now)
	var i uint32
	if n := len(sh.free); n > 0 {
		i, sh.free = sh.free[n-1], sh.free[:n-1]
	} else {
		i = uint32(len(sh.slab))
		sh.slab = append(sh.slab, entry{})
	}
	sh.index[key] = i
	return i
}

// remove forgets key, whose entry is slab[i].
func (sh *shard) remove(key string, i uint32) {
	if sh.slab[i].kind == KindSlidingLog {
		delete(sh.logs, key)
	}
	delete(sh.index, key)
	sh.slab[i] = entry{}
	sh.free = append(sh.free, i)
}

// makeRoom removes the keys expired by now among a sample of the shard's
// keys, and if the shard is still at its bound, evicts the sampled key
// closest to fresh.
func (sh *shard) makeRoom(bound int, now int64) {
	full := bound > 0 && len(sh.index) >= bound
	sample := sweepSample
	if full {
		sample = evictSample
	}
	var victim string
	var victimAt uint32
	soonest := int64(maxTime) + 1
	for k, i := range sh.index { // map iteration starts at a random key
		if e := sh.slab[i].expires; e <= now {
			sh.remove(k, i)
		} else if e < soonest {
			victim, victimAt, soonest = k, i, e
		}
		if sample--; sample == 0 {
			break
		}
	}
	if full && len(sh.index) >= bound && soonest <= maxTime {
		sh.remove(victim, victimAt)
	}
}

// Reset forgets key. It implements [Store].
func (m *MemStore) Reset(_ context.Context, key string) error {
	if m.closed.Load() {
		return ErrStoreClosed
	}
	sh := m.shard(key)
	sh.mu.Lock()
	if i, ok := sh.index[key]; ok {
		sh.remove(key, i)
	}
	sh.mu.Unlock()
	return nil
}

// Len returns the number of keys held, expired or not.
func (m *MemStore) Len() int {
	n := 0
	for i := range m.shards {
		sh := &m.shards[i]
		sh.mu.Lock()
		n += len(sh.index)
		sh.mu.Unlock()
	}
	return n
}

// Sweep removes every key that has expired by the latest time the store
// has seen, and returns how many it removed.
func (m *MemStore) Sweep() int {
	now := int64(math.MinInt64)
	for i := range m.shards {
		sh := &m.shards[i]
		sh.mu.Lock()
		now = max(now, sh.now)
		sh.mu.Unlock()
	}
	n := 0
	for i := range m.shards {
		sh := &m.shards[i]
		sh.mu.Lock()
		for k, i := range sh.index {
			if sh.slab[i].expires <= now {
				sh.remove(k, i)
				n++
			}
		}
		sh.mu.Unlock()
	}
	return n
}

func (m *MemStore) janitor(every time.Duration) {
	defer close(m.done)
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-t.C:
			m.Sweep()
		case <-m.stop:
			return
		}
	}
}

// Close stops the janitor, if any, and makes later calls fail with
// [ErrStoreClosed]. It is safe to call more than once.
func (m *MemStore) Close() error {
	if m.closed.Swap(true) || m.stop == nil {
		return nil
	}
	close(m.stop)
	<-m.done
	return nil
}
