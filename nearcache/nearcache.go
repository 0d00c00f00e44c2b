// Package nearcache keeps, in process, the denials of a remote store, so
// that a client flooding one key costs one round trip per change of its
// state rather than one per request.
//
// A [Store] wraps a remote [engine.Store] (Redis, PostgreSQL). When the
// remote store denies a request of cost c on a key at time t (the caller's
// time, [engine.Op].Now) with a RetryAfter r, the cache remembers that the
// key denies every cost of at least c until t+r, and answers such requests
// itself until then, without a round trip. Everything else goes to the
// remote store: every admission, every denial the cache cannot vouch for,
// and every fill-up, reservation, cancel and partial grant. The cache
// never admits anything.
//
// # The guarantee
//
// A remote denial's RetryAfter is the earliest instant at which the same
// cost would be admitted if nothing else were recorded meanwhile, and a
// larger cost is admitted no earlier. Requests recorded by other processes
// can only postpone it. So, as long as the key's state is changed only by
// decisions, a request the cache denies would have been denied by the
// remote store at the same time: with the caller's clock, the cache
// changes no decision at all, which the tests check on random traces
// against real Redis and PostgreSQL servers.
//
// What the cache cannot see, it sees late, and only ever as a denial that
// lasts too long, never as an admission:
//
//   - a Reset, or a change of the state made elsewhere (another process,
//     another Store, a key deleted by hand or evicted by Redis under memory
//     pressure), is seen at the cached instant, when the entry expires; a
//     Reset, or a cancel that gives a reservation back, through this Store
//     clears its entry at once;
//   - a change of the limit in another process is seen at the cached
//     instant too; Params that differ from the cached denial's, in this
//     process, go to the remote store;
//   - a remote store that decides on its own clock (Redis TIME,
//     PostgreSQL clock_timestamp()) made its decision after op.Now, since
//     the round trip began then, so op.Now + RetryAfter is no later than the
//     instant the remote store computed; the entry is exact up to the
//     drift of the two clocks over RetryAfter, and a remote clock stepped
//     forward is seen late.
//
// A remote store that evicts keys under memory pressure forgives them,
// cache or not; but the denials the cache answers no longer touch their
// key, so a store that evicts its least recently used keys evicts a key
// the cache shields sooner than it would alone. Keep such a store from
// evicting limiter keys.
//
// A cached answer is a denial with the Limit, Used and Remaining of the
// latest remote decision on the key through this Store (the allowance can
// only have grown since, as time passed), and RetryAfter and ResetAfter
// counting down to the instants the remote store gave. RetryAfter is
// exact for the cost denied, if nothing was recorded on the key since; for
// a larger cost, or after smaller costs were admitted or fill-ups
// recorded, it is a lower bound: a client retrying then may be denied
// again, by the remote store, with a later instant.
//
// # Memory
//
// The cache holds at most Config.MaxKeys keys (default [DefaultMaxKeys]),
// rounded up to a multiple of its 32 shards: one entry per key denied and
// not yet due, about 190 bytes besides the key's own. A due entry is
// removed when its key is next decided; when a shard is full, adding a key
// first removes the due entries among a sample of the shard's others, and
// if none is due evicts the sampled entry that expires soonest. Losing an entry costs a round trip, never a wrong
// decision.
package nearcache

import (
	"context"
	"fmt"
	"hash/maphash"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluice-go/sluice"
	"github.com/sluice-go/sluice/engine"
	"github.com/sluice-go/sluice/internal/evict"
)

// DefaultMaxKeys is the number of keys a Store holds at most unless
// Config.MaxKeys sets another bound.
const DefaultMaxKeys = 100_000

// shards is the number of independently locked parts of the cache.
const shards = 32

// evictSample is how many entries a full shard examines to make room.
const evictSample = 8

// Config configures a [Store]. The zero value is a good default.
type Config struct {
	// MaxKeys bounds the keys held, rounded up to a multiple of the
	// cache's 32 shards, each of which holds an equal share; the default,
	// zero, is DefaultMaxKeys.
	MaxKeys int
}

// Store is an [engine.Store] that answers the remote store's recent
// denials itself, as the package comment explains. It is safe for
// concurrent use.
type Store struct {
	remote   engine.Store
	seed     maphash.Seed
	perShard int
	shards   [shards]shard
	local    atomic.Uint64
	remotes  atomic.Uint64
}

var _ engine.Store = (*Store)(nil)

type shard struct {
	mu      sync.Mutex
	entries map[string]entry
	// epoch counts the Resets through the shard: a denial the remote store
	// made before a Reset, arriving after it, is not cached.
	epoch uint64
	_     [40]byte // apart from the next shard's lock
}

// entry is a remote denial: every request under params of at least cost
// is denied until the instant until.
type entry struct {
	params  engine.Params
	cost    float64
	until   int64 // ns since the epoch, on the callers' clock
	resetAt int64 // when the key was due to be fresh
	denial  engine.Decision
}

// New returns a Store caching remote's denials.
func New(remote engine.Store, cfg Config) (*Store, error) {
	if remote == nil {
		return nil, fmt.Errorf("%w: nearcache: nil remote store", sluice.ErrInvalidConfig)
	}
	if cfg.MaxKeys < 0 {
		return nil, fmt.Errorf("%w: nearcache: negative MaxKeys %d", sluice.ErrInvalidConfig, cfg.MaxKeys)
	}
	n := cfg.MaxKeys
	if n == 0 {
		n = DefaultMaxKeys
	}
	s := &Store{remote: remote, seed: maphash.MakeSeed(), perShard: (n-1)/shards + 1}
	for i := range s.shards {
		s.shards[i].entries = make(map[string]entry)
	}
	return s, nil
}

// Stats counts a Store's answers.
type Stats struct {
	// Local is the number of requests answered from the cache.
	Local uint64
	// Remote is the number of requests passed to the remote store.
	Remote uint64
	// Keys is the number of keys held now.
	Keys int
}

// Stats returns the Store's counts since it was made.
func (s *Store) Stats() Stats {
	st := Stats{Local: s.local.Load(), Remote: s.remotes.Load()}
	for i := range s.shards {
		sh := &s.shards[i]
		sh.mu.Lock()
		st.Keys += len(sh.entries)
		sh.mu.Unlock()
	}
	return st
}

func (s *Store) shard(key string) *shard {
	return &s.shards[maphash.String(s.seed, key)%shards]
}

// Apply answers op from the cache if a remote denial covers it, and
// otherwise passes it to the remote store, caching a denial it returns.
// It implements [engine.Store].
func (s *Store) Apply(ctx context.Context, key string, p *engine.Params, op engine.Op) (engine.Decision, error) {
	if p == nil {
		return engine.Decision{}, fmt.Errorf("%w: nearcache: no Params", sluice.ErrInvalidConfig)
	}
	sh := s.shard(key)
	cacheable := op.Verb == engine.VerbAllow || op.Verb == engine.VerbCheck
	sh.mu.Lock()
	if e, ok := sh.entries[key]; ok && cacheable {
		switch {
		case op.Now >= e.until:
			delete(sh.entries, key) // due: the remote store decides again
		case e.params == *p && op.Cost >= e.cost:
			sh.mu.Unlock()
			if err := p.CheckCost(op.Verb, op.Cost); err != nil {
				return engine.Decision{Limit: p.Limit}, err
			}
			if err := engine.CheckTime(op.Now); err != nil {
				return engine.Decision{Limit: p.Limit}, err
			}
			s.local.Add(1)
			return e.answer(op.Now), nil
		}
	}
	epoch := sh.epoch
	sh.mu.Unlock()
	s.remotes.Add(1)
	d, err := s.remote.Apply(ctx, key, p, op)
	if err != nil {
		return d, err
	}
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if sh.epoch != epoch {
		return d, nil // a Reset may have come after this decision
	}
	if !cacheable {
		switch e, ok := sh.entries[key]; {
		case !ok:
		case op.Verb == engine.VerbCancel && d.Allowed, op.Verb == engine.VerbRefund && d.Granted > 0:
			// A reservation or a cost given back leaves the key looser
			// than the denial held: forget it, and (as Reset does) keep
			// out a denial decided before it and arriving after it.
			sh.epoch++
			delete(sh.entries, key)
		case e.params == *p && p.Records(op.Verb, &d):
			// A fill-up, a booked reservation, a partial grant or a charge,
			// which the cache never answers, only makes the key stricter: a denial
			// held still holds, and later answers carry the allowance left.
			e.recorded(op.Now, d)
			sh.entries[key] = e
		}
		return d, nil
	}
	if d.Allowed {
		e, ok := sh.entries[key]
		switch {
		case !ok:
		case op.Cost >= e.cost || e.params != *p:
			// An admission of a cost the cache would deny means the key
			// was changed elsewhere: forget the stale denial.
			delete(sh.entries, key)
		case op.Verb == engine.VerbAllow:
			// A smaller cost was recorded: the denial holds, and later
			// answers carry the key's latest allowance.
			e.recorded(op.Now, d)
			sh.entries[key] = e
		}
		return d, nil
	}
	until := op.Now + int64(d.RetryAfter)
	if d.RetryAfter <= 0 || engine.CheckTime(op.Now) != nil || until < op.Now {
		return d, nil // nothing to cache, or no instant to cache it until
	}
	if e, ok := sh.entries[key]; ok && e.params == *p && e.cost <= op.Cost && e.until >= until {
		return d, nil // the entry held already covers this denial
	}
	sh.put(key, entry{params: *p, cost: op.Cost, until: until, resetAt: op.Now + int64(d.ResetAfter), denial: d}, s.perShard, op.Now)
	return d, nil
}

// recorded takes in d, a decision at now that recorded a cost on the key
// and left e's denial standing: later answers carry the allowance it left.
func (e *entry) recorded(now int64, d engine.Decision) {
	e.denial.Used, e.denial.Remaining = d.Used, d.Remaining
	e.resetAt = now + int64(d.ResetAfter)
}

// answer is the cached denial as of now, before until.
func (e *entry) answer(now int64) engine.Decision {
	d := e.denial
	d.RetryAfter = time.Duration(e.until - now)
	d.ResetAfter = time.Duration(max(e.resetAt-now, int64(d.RetryAfter)))
	return d
}

// put stores e for key, making room if the shard holds limit entries.
func (sh *shard) put(key string, e entry, limit int, now int64) {
	if _, ok := sh.entries[key]; !ok && len(sh.entries) >= limit {
		sh.makeRoom(now)
	}
	sh.entries[key] = e
}

// makeRoom removes the due entries among a sample of the shard's, or if
// none is due the sampled entry that expires soonest.
func (sh *shard) makeRoom(now int64) {
	evict.Sample(sh.entries, evictSample, func(e entry) (int64, bool, bool) {
		return e.until, e.until <= now, false
	})
}

// Reset forgets key's cached denial, and resets it in the remote store.
// It implements [engine.Store].
func (s *Store) Reset(ctx context.Context, key string) error {
	sh := s.shard(key)
	sh.forget(key)
	err := s.remote.Reset(ctx, key)
	// A denial made before the remote Reset may arrive after the first
	// forget; the second epoch keeps it out.
	sh.forget(key)
	return err
}

func (sh *shard) forget(key string) {
	sh.mu.Lock()
	defer sh.mu.Unlock()
	sh.epoch++
	delete(sh.entries, key)
}
