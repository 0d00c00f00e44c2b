package sluice

import (
	"context"
	"fmt"
	"math"
	"math/bits"
	"runtime"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/sluice-go/sluice/engine"
)

// MemStore is the in-memory [engine.Store], and every limiter's default.
// It is safe for concurrent use, and a decision on a key it holds
// allocates nothing.
//
// Keys are spread over shards, each with its own mutex, and known by 120
// bits of one hash of their bytes under secrets drawn per store, not by
// their strings: two keys share state only if all 120 bits collide (about
// n²/2^121 for n keys, below 10^-24 at a billion), and clients cannot aim
// at a collision or pile keys into one shard without the secrets.
//
// A key whose state has decayed back to fresh is removed without changing
// any decision: adding a key removes the expired ones among a few keys of
// its shard, Sweep removes them all, and a janitor
// (MemStoreConfig.SweepInterval) sweeps periodically until Close.
//
// MemStoreConfig.MaxKeys bounds memory under a flood of unique keys: a full
// shard evicts, of a sample of its keys, the one longest without a decision,
// and of those the one closest to fresh, forgiving what it had spent. A key
// in use, allowed or denied, is not the one evicted: a client flooding the
// store with new keys cannot lift the limit of a key it keeps hammering.
// docs/memory.md describes the layout, with its figures.
type MemStore struct {
	hash     keyHash
	mask     uint64
	shards   []shard
	perShard int // most keys per shard; 0 is unbounded
	closed   atomic.Bool
	stop     chan struct{}
	done     chan struct{}
	watch    releaseWatch
}

// MemStoreConfig configures a [MemStore]. The zero value is a good default.
type MemStoreConfig struct {
	// Shards is the number of shards, rounded up to a power of two, and
	// at most 2^16 (8 MiB of shards). The default is 16 per CPU
	// (GOMAXPROCS), and at least 64.
	Shards int
	// MaxKeys bounds the number of keys held, spread evenly over the
	// shards: rounded up to a multiple of their number, so that each holds
	// at least one. The default, zero, is no bound.
	MaxKeys int
	// SweepInterval, when positive, starts a goroutine that calls Sweep
	// once per interval. The default, zero, relies on sweeping as keys are
	// added.
	SweepInterval time.Duration
}

// A shard is padded to a multiple of 64 bytes, the cache line of the
// machines this runs on, so that two cores working on neighbouring shards
// do not pass a line to and fro.
type shard struct {
	shardData
	_ [64 - unsafe.Sizeof(shardData{})%64]byte // never empty: a struct ending in one is padded
}

// A key is in at most one of a shard's tables: tats holds the GCRA keys,
// slots the others.
type shardData struct {
	// A decision on the shard's hot key (memhot.go) writes only these
	// first 56 bytes, one cache line whether the shards start on a line or
	// 8 bytes into one, after an allocation header.
	mu       sync.Mutex
	hot      hotKey
	last     uint64  // the low 64 bits of the key saveUsual saved last
	now      int64   // latest time seen, for sweeps
	primaryA float64 // the interval of the GCRA keys in tats, as State.A (memgcra.go)

	// What every other decision reads, in the next 64 bytes.
	blocks map[keyID]block // the penalty blocks of keys blocked
	tats   table[tatSlot]
	slots  table[slot]

	logs map[keyID][]engine.Entry // sliding log entries, beside their key's slot

	evicted, evictedBlocked uint64 // keys evicted by MaxKeys, and those of them blocked
}

// maxShards bounds MemStoreConfig.Shards: more cannot spread the lock
// further on any machine, and a huge count would not fit in memory.
const maxShards = 1 << 16

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
	n = 1 << bits.Len(uint(min(n, maxShards)-1))
	m := &MemStore{hash: newKeyHash(), mask: uint64(n - 1), shards: make([]shard, n)}
	if cfg.MaxKeys > 0 {
		m.perShard = (cfg.MaxKeys-1)/n + 1 // rounded up, without overflow
	}
	if cfg.SweepInterval > 0 {
		m.stop, m.done = make(chan struct{}), make(chan struct{})
		go m.janitor(cfg.SweepInterval)
	}
	return m
}

// locate returns key's identity and its shard.
func (m *MemStore) locate(key string) (keyID, *shard) {
	id := m.hash.id(key)
	return id, &m.shards[id.lo&m.mask]
}

// Apply runs op on key's state atomically under its shard's lock. It
// implements [engine.Store].
func (m *MemStore) Apply(_ context.Context, key string, p *engine.Params, op engine.Op) (d engine.Decision, err error) {
	if err := p.Validate(); err != nil {
		return engine.Decision{}, err
	}
	refused := p.Check(op)
	if refused != nil && !p.Overflows(op, refused) {
		return engine.Decision{Limit: p.Limit}, refused
	}
	if err = m.apply(key, p, op, &d); err != nil {
		return d, err
	}
	m.releasedBy(key, p, op, &d)
	return d, refused
}

// apply is Apply for params and op already validated, deciding into *d,
// which is zero: the key's state loaded, stepped and saved under its
// shard's lock, as each key of a group is (memgroup.go).
func (m *MemStore) apply(key string, p *engine.Params, op engine.Op, d *engine.Decision) error {
	if m.closed.Load() {
		return ErrStoreClosed
	}
	id, sh := m.locate(key)
	byTAT := p.DecidesTAT(op.Verb) // before the lock, which the test then does not lengthen
	sh.mu.Lock()
	sh.now = max(sh.now, op.Now)
	// The usual GCRA request, decided on the key's TAT where it lies.
	if byTAT && sh.decideTAT(id, p, op, d, m.perShard) {
		sh.mu.Unlock()
		return nil
	}
	var s engine.State
	at, other := sh.load(id, p, op.Now, &s)
	if other != 0 {
		sh.mu.Unlock()
		d.Limit = p.Limit
		return conflict(key, other, p.Kind)
	}
	a := s.A
	p.Decide(&s, op, d)
	// A denial records nothing, unless it carried a GCRA state over from
	// another interval (engine.Params.Carries), which changed A.
	if p.Records(op.Verb, d) || p.Kind == engine.KindGCRA && s.A != a {
		if p.Kind != engine.KindGCRA || !sh.saveUsual(id, at, op.Now, &s, d, op.Verb == engine.VerbAllow) {
			sh.save(id, at, p, op.Now, &s, d, m.perShard)
		}
	}
	sh.mu.Unlock()
	return nil
}

// releasedBy wakes the watchers of key if the decision d on op may let a
// waiter in ([engine.Params.Frees]). apply, on the usual path of every
// decision, does not: its callers that may free a slot call this after it.
func (m *MemStore) releasedBy(key string, p *engine.Params, op engine.Op, d *engine.Decision) {
	if p.Frees(&op, d) {
		m.released(key)
	}
}

// conflict is the error for key, which holds another algorithm's live
// state.
func conflict(key string, other, kind engine.Kind) error {
	return fmt.Errorf("%w: key %q holds %v state, not %v", ErrKeyConflict, key, other, kind)
}

// load sets *s, which is zero, to id's state for p under the shard's lock,
// and returns the key's slot in p's table, hotAt for the shard's hot key,
// or -1 if it holds none. If the key holds another algorithm's live state,
// it returns that algorithm.
func (sh *shard) load(id keyID, p *engine.Params, now int64, s *engine.State) (at int, other engine.Kind) {
	gcra := p.Kind == engine.KindGCRA
	if gcra {
		if id == sh.hot.id && sh.hot.expires != 0 { // sh.hot.holds(id), which inlined here costs two spills
			if sh.hot.expires <= now {
				return hotAt, 0 // fresh again, as below
			}
			s.Time, s.A, at = sh.hot.expires, sh.primaryA, hotAt
		} else {
			i, ok := sh.tats.find(id)
			if !ok {
				return sh.loadOtherGCRA(id, now, s)
			}
			e := &sh.tats.slots[i]
			e.used()
			if e.expires <= now {
				return i, 0 // fresh again, whatever its Params now: as if forgotten
			}
			s.Time, s.A, at = e.expires, sh.primaryA, i
		}
	} else {
		i, ok := sh.slots.find(id)
		switch {
		case !ok:
			sh.cool()
			return -1, claim(sh, &sh.tats, id, now)
		case sh.slots.slots[i].kind() != p.Kind:
			return -1, claimAt(sh, &sh.slots, i, now)
		}
		e := &sh.slots.slots[i]
		e.used()
		if e.expires <= now {
			return i, 0 // fresh again, whatever its Params now: as if forgotten
		}
		s.Time, s.A, s.B, at = e.time, e.a, e.b, i
		if p.Kind.Logs() {
			s.Log = sh.logs[id]
		}
	}
	if sh.blocks != nil {
		sh.blocked(id, s, gcra)
	}
	return at, 0
}

// save writes the state s that a recorded decision d at now left for id,
// or forgets the key once it is fresh again. at is the key's slot, as load
// found it (hotAt included), or -1.
func (sh *shard) save(id keyID, at int, p *engine.Params, now int64, s *engine.State, d *engine.Decision, bound int) {
	gcra := p.Kind == engine.KindGCRA
	if gcra && (at == hotAt || sh.hot.holds(id)) {
		// The hot key leaves its place beside the mutex; or, in a group,
		// it was cooled since it was loaded hot, and may have been evicted.
		sh.cool()
		at = resolve(&sh.tats, id, at)
	}
	if gcra && s.A != sh.primaryA && !sh.primaryOf(s) {
		sh.saveOtherGCRA(id, at, p, now, s, d, bound)
		return
	}
	if at <= otherGCRA { // a GCRA key now recorded with the primary interval
		sh.drop(false, slotOf(at))
		at = -1
	}
	if d.ResetAfter <= 0 { // fresh again, as if absent
		if at >= 0 {
			sh.drop(gcra, at)
		}
		return
	}
	if at < 0 {
		sh.makeRoom(id, bound, now)
		at = sh.insert(gcra, id, p.Kind)
	}
	expires := now + int64(d.ResetAfter)
	if gcra {
		// The TAT, s.Time, is when the key is fresh again: its expiry.
		sh.tats.slots[at].expires = expires
	} else {
		e := &sh.slots.slots[at]
		e.time, e.a, e.b, e.expires = s.Time, s.A, s.B, expires
		if p.Kind.Logs() {
			if sh.logs == nil {
				sh.logs = make(map[keyID][]engine.Entry)
			}
			sh.logs[id] = s.Log
		}
	}
	sh.block(id, s)
}

// drop forgets the key in slot i of the GCRA table or of the other.
func (sh *shard) drop(gcra bool, i int) {
	if gcra {
		dropIn(sh, &sh.tats, i)
	} else {
		dropIn(sh, &sh.slots, i)
	}
}

// insert adds id to the GCRA table or to the other, and returns its slot.
func (sh *shard) insert(gcra bool, id keyID, kind engine.Kind) int {
	if gcra {
		return sh.tats.insert(id, kind)
	}
	return sh.slots.insert(id, kind)
}

// resave is save for a key of a group, whose slot another key's save may
// have moved since it was loaded: at is checked, and id found again if it
// moved.
func (sh *shard) resave(id keyID, at int, p *engine.Params, now int64, s *engine.State, d *engine.Decision, bound int) {
	switch {
	case p.Kind != engine.KindGCRA:
		at = resolve(&sh.slots, id, at)
	case at == hotAt: // save finds it
	case at > otherGCRA: // the GCRA table's slot, or none
		at = resolve(&sh.tats, id, at)
	default: // a GCRA key of another interval, in the other table
		if at = resolve(&sh.slots, id, slotOf(at)); at >= 0 {
			at = otherAt(at)
		}
	}
	if p.Kind != engine.KindGCRA || !sh.saveUsual(id, at, now, s, d, false) { // a group heats no key
		sh.save(id, at, p, now, s, d, bound)
	}
}

// resolve returns id's slot in t: at, if it still holds id, or where id
// is found now, or -1.
func resolve[S slotType](t *table[S], id keyID, at int) int {
	if at >= 0 && at < len(t.slots) && t.at(at).id() == id {
		return at
	}
	if i, ok := t.find(id); ok {
		return i
	}
	return -1
}

// A block is a penalized key's block: when it ends, and for a GCRA key
// its TAT, since the slot's expiry, its only field, then holds the later
// of the two.
type block struct {
	until, tat int64
}

// block keeps the block of s for id, or forgets id's once s has none.
// Only penalized keys have an entry: other keys pay a nil map check.
func (sh *shard) block(id keyID, s *engine.State) {
	switch {
	case s.Until != 0:
		if sh.blocks == nil {
			sh.blocks = make(map[keyID]block)
		}
		sh.blocks[id] = block{until: s.Until, tat: s.Time}
	case sh.blocks != nil:
		delete(sh.blocks, id)
	}
}

// blocked reads id's block, if any, into s, as loaded from its slot.
func (sh *shard) blocked(id keyID, s *engine.State, gcra bool) {
	if b, ok := sh.blocks[id]; ok {
		s.Until = b.until
		if gcra {
			s.Time = b.tat // the slot keeps the expiry
		}
	}
}

// claim frees id of the state another algorithm left in t, if it has
// expired, and returns the Kind of a live one, or zero. A key is in at
// most one table: a decision that does not find its key in its own table
// claims it from the other.
func claim[S slotType](sh *shard, t *table[S], id keyID, now int64) engine.Kind {
	if i, ok := t.find(id); ok {
		return claimAt(sh, t, i, now)
	}
	return 0
}

// claimAt is claim for the key in slot i of t.
func claimAt[S slotType](sh *shard, t *table[S], i int, now int64) engine.Kind {
	if e := t.at(i); e.expires > now {
		return e.kind()
	}
	dropIn(sh, t, i)
	return 0
}

// forget forgets id if t holds it, and reports whether it did.
func forget[S slotType](sh *shard, t *table[S], id keyID) bool {
	i, ok := t.find(id)
	if ok {
		dropIn(sh, t, i)
	}
	return ok
}

// dropIn forgets the key in slot i of t, and its sliding log entries.
func dropIn[S slotType](sh *shard, t *table[S], i int) {
	e := t.at(i)
	if e.kind().Logs() {
		delete(sh.logs, e.id())
	}
	if sh.blocks != nil {
		delete(sh.blocks, e.id())
	}
	t.remove(i)
}

// makeRoom removes the keys expired by now among a sample of the shard's
// keys in each table, taken from where the new key id's probe starts (as
// random as id to whoever does not know the store's secrets), and ages the
// live ones. If the shard is still at its bound, it evicts the sampled key
// that has been idle longest, and of those the one closest to fresh.
//
// Idleness comes first because closeness to fresh alone forgives the keys
// being limited: a denied request does not move its key's expiry, so a
// key hammered at its limit soon expires sooner than the keys of a flood,
// each of which has just spent its whole limit. A key in use is set back
// to idle age zero at each of its decisions, while the flood's keys, used
// once, age with every sampling.
//
// A key under a penalty's block is idle while its client waits, and
// evicting it would lift the penalty: when every sampled key is blocked,
// the whole shard is searched for one that is not, and a blocked key is
// evicted (and counted) only when the shard holds no other.
func (sh *shard) makeRoom(id keyID, bound int, now int64) {
	sh.cool()
	full := bound > 0 && sh.tats.n+sh.slots.n >= bound
	sample := sweepSample
	if full {
		sample = evictSample
	}
	tat := expireSample(sh, &sh.tats, id, sample, now)
	other := expireSample(sh, &sh.slots, id, sample, now)
	if !full || sh.tats.n+sh.slots.n < bound {
		return
	}
	v := tat.or(other)
	if v.blocked {
		v = expireSample(sh, &sh.tats, id, sh.tats.n, now).or(expireSample(sh, &sh.slots, id, sh.slots.n, now))
	}
	if !v.found || sh.tats.n+sh.slots.n < bound {
		return // the search removed expired keys: room enough
	}
	sh.evicted++
	if v.blocked {
		sh.evictedBlocked++
	}
	_ = forget(sh, &sh.tats, v.id) || forget(sh, &sh.slots, v.id) // in one at most
}

// A victim is the key eviction would take from a sample.
type victim struct {
	id      keyID
	idle    uint64
	expires int64
	until   int64 // the end of its block, for a blocked key
	blocked bool
	found   bool
}

// or returns the better victim of v and w.
func (v victim) or(w victim) victim {
	if w.before(v) {
		return w
	}
	return v
}

// before reports whether v is a better victim than w: not blocked, or
// blocked and freed sooner; then idle longer, or as long and closer to
// fresh.
func (v victim) before(w victim) bool {
	switch {
	case v.found != w.found:
		return v.found
	case v.blocked != w.blocked:
		return !v.blocked
	case v.until != w.until:
		return v.until < w.until
	case v.idle != w.idle:
		return v.idle > w.idle
	}
	return v.expires < w.expires
}

// expireSample removes the expired keys among sample keys of t from id's
// home on, ages the live ones, and returns the best victim among them.
func expireSample[S slotType](sh *shard, t *table[S], id keyID, sample int, now int64) (best victim) {
	if t.n == 0 {
		return best
	}
	mask := len(t.slots) - 1
	for i, seen := t.home(id), 0; seen < len(t.slots) && sample > 0; seen++ {
		e := t.at(i)
		switch {
		case e.hi == 0:
			i = (i + 1) & mask
			continue
		case e.expires <= now:
			dropIn(sh, t, i) // a later slot may have moved into i: look again
		default:
			v := victim{id: e.id(), idle: e.idle(), expires: e.expires, found: true}
			if b, ok := sh.blocks[v.id]; ok && b.until > now {
				v.blocked, v.until = true, b.until
			}
			if v.before(best) {
				best = v
			}
			e.aged()
			i = (i + 1) & mask
		}
		sample--
	}
	return best
}

// Reset forgets key. It implements [engine.Store].
func (m *MemStore) Reset(_ context.Context, key string) error {
	if m.closed.Load() {
		return ErrStoreClosed
	}
	id, sh := m.locate(key)
	sh.mu.Lock()
	sh.cool()
	_ = forget(sh, &sh.tats, id) || forget(sh, &sh.slots, id) // in one at most
	sh.mu.Unlock()
	m.released(key) // whatever leases it held are free
	return nil
}

// Len returns the number of keys held, expired or not.
func (m *MemStore) Len() int {
	n := 0
	for i := range m.shards {
		sh := &m.shards[i]
		sh.mu.Lock()
		n += sh.tats.n + sh.slots.n
		sh.mu.Unlock()
	}
	return n
}

// MemStats counts what a [MemStore]'s bound on keys (MemStoreConfig.MaxKeys)
// has cost: keys evicted before they were fresh again, each of which was
// forgiven what it had spent.
type MemStats struct {
	// Evicted counts the keys evicted to make room for new ones.
	Evicted uint64
	// EvictedBlocked counts those of them that were under a penalty's
	// block, which their eviction lifted. A blocked key is evicted only
	// when every key its shard holds is blocked: a non-zero count means
	// MaxKeys is too small for the clients being penalized at once.
	EvictedBlocked uint64
}

// Stats returns the store's counts since it was made.
func (m *MemStore) Stats() MemStats {
	var st MemStats
	for i := range m.shards {
		sh := &m.shards[i]
		sh.mu.Lock()
		st.Evicted += sh.evicted
		st.EvictedBlocked += sh.evictedBlocked
		sh.mu.Unlock()
	}
	return st
}

// Sweep removes every key that has expired by the latest time the store
// has seen, halves the tables left at most an eighth full, and returns how
// many keys it removed.
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
		sh.cool()
		n += sweep(sh, &sh.tats, now) + sweep(sh, &sh.slots, now)
		sh.mu.Unlock()
	}
	return n
}

// sweep removes t's keys expired by now, shrinks t, and returns how many
// keys it removed.
func sweep[S slotType](sh *shard, t *table[S], now int64) int {
	n := 0
	for i := 0; i < len(t.slots); {
		if e := t.at(i); e.hi != 0 && e.expires <= now {
			dropIn(sh, t, i) // a later slot may have moved into i: look again
			n++
			continue
		}
		i++
	}
	t.shrink()
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
