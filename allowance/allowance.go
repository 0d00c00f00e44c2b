// Package allowance decides requests in process under a limit that a
// remote store keeps for every process: a [Store] wraps a remote
// [engine.Store] (Redis, PostgreSQL) and takes allowance from it in
// blocks, so that most admissions cost no round trip.
//
// # How it works
//
// When a key's traffic is high enough, the Store asks the remote store
// for a block of units in one atomic call (a partial grant, as
// AllowAtMost makes: the store records the block as admitted, at that
// instant), admits the request from the block, and admits the next
// requests for the key from what is left, in process, with no round trip
// and no allocation. A block may be spent for the lease time
// (Config.LeaseTime) from the instant it was asked for; the unspent part
// of a block that is renewed before its lease ends is given back to the
// store (GCRA and the buckets, which can refund; the window algorithms
// cannot), and the unspent part of a block whose lease ended is lost to
// the limit: the store counted it as admitted.
//
// The block follows the key's traffic: half the cost asked for the key in
// the last lease time, at most Config.MaxShare of the limit. A key whose
// block would hold less than two units (a cold key, or a small limit)
// goes to the remote store on every request, as without the Store. When
// the remote store grants less than a request needs, the key is at its
// limit: the request is decided by the remote store itself (the rest of
// its cost asked for as an Allow), and otherwise the Store asks for no
// block until a whole one would fit, denying meanwhile the requests its
// block cannot cover, with RetryAfter at that instant; that wait doubles
// (up to eightfold) each time the next block still comes short, as it does
// when other processes take what comes back first. A key whose limit has a
// penalty or counts denials sends every request its block cannot cover to
// the remote store, so that an overflow blocks or counts there exactly as
// without the Store; a blocked key is not leased, and its denial is
// answered in process until the block ends.
//
// Only Allow and CanAccept are answered in process; every other verb, a
// request with a cost above the limit, the concurrency limit and groups go
// to the remote store. A limit that changes (other Params for the key)
// drops the key's block.
//
// # The bound
//
// Every unit admitted in process was admitted by the remote store at the
// instant its block was asked for, at most one lease time L earlier, so
// never more is admitted in total than the limit allows, whatever the
// number of processes. Over any interval of length d, the cost admitted
// by all processes together is at most what the algorithm admits in an
// interval of length d + L (see the algorithm's guarantee; for GCRA,
// burst + (d + L)/interval), and nothing more: the units leased before
// the interval and spent in it. A block given back is given back while
// its lease is live, which keeps that bound (it is checked on random
// traffic from several processes, with refunds, on every algorithm). The
// lease time is counted on the caller's clock from the instant the caller
// read before the round trip, which a store deciding on its own clock
// (Redis TIME) records no earlier if the clocks agree.
//
// What the Store gives away is the other way: units leased and not spent
// before their lease ends are admitted by the store and used by nobody,
// and a process denies the requests its block cannot cover while another
// process holds units. [Stats] counts the units leased, spent and given
// back; docs/allowance.md shows both sides measured.
//
// # When the remote store is down
//
// Requests a block covers are still admitted until the lease ends; every
// other request gets the remote store's error, as without the Store. There
// is no mode that admits without the store.
package allowance

import (
	"cmp"
	"context"
	"fmt"
	"hash/maphash"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluice-go/sluice"
	"github.com/sluice-go/sluice/engine"
)

// DefaultLeaseTime is how long a block may be spent unless
// Config.LeaseTime says otherwise.
const DefaultLeaseTime = 100 * time.Millisecond

// DefaultMaxShare is the most of a key's limit one block takes unless
// Config.MaxShare says otherwise.
const DefaultMaxShare = 1.0 / 8

// DefaultMaxKeys is the number of keys a Store follows at most unless
// Config.MaxKeys says otherwise.
const DefaultMaxKeys = 100_000

// minBlock is the smallest block worth a lease: below it, a key's
// requests go to the remote store.
const minBlock = 2

// maxBackoff bounds the doublings of a key's hold at its limit, and
// maxHold the hold (2^60 ns, as the algorithms bound their spans).
const (
	maxBackoff = 3
	maxHold    = 1 << 60
)

// shards is the number of independently locked parts of the Store.
const shards = 256

// evictSample is how many keys a full shard examines to make room.
const evictSample = 8

// Config configures a [Store]. The zero value is a good default.
type Config struct {
	// LeaseTime is how long a block may be spent after the instant it
	// was asked for, at most a minute; the default, zero, is
	// DefaultLeaseTime. It widens the limit's bound by itself (see the
	// package comment): shorter is closer to the limit, and costs more
	// round trips on keys that are not hot.
	LeaseTime time.Duration
	// MaxShare is the most of a key's limit one block takes, above 0 and
	// at most 1; the default, zero, is DefaultMaxShare. Smaller shares
	// leave more of a busy key's allowance to the other processes.
	MaxShare float64
	// MaxKeys bounds the keys followed, rounded up to a multiple of the
	// Store's 256 shards; the default, zero, is DefaultMaxKeys. A key
	// dropped to make room loses its block's unspent units.
	MaxKeys int
}

// Store is an [engine.Store] that leases allowance from a remote store, as
// the package comment explains. It is safe for concurrent use. It
// implements [engine.GroupStore] when the remote store does: a group
// decision goes to the remote store.
type Store struct {
	remote   engine.Store
	seed     maphash.Seed
	lease    int64
	share    float64
	perShard int
	shards   [shards]shard
	calls    atomic.Uint64 // to the remote store
}

var _ engine.GroupStore = (*Store)(nil)

type shard struct {
	mu   sync.Mutex
	keys map[string]*entry
	// epoch counts the Resets through the shard: a block asked for before
	// a Reset, arriving after it, is dropped.
	epoch uint64
	// The shard's counts (see Stats), under mu, which an answer and the
	// end of a renewal hold already.
	local, leases           uint64
	leased, refunded, spent float64
	_                       [64]byte // apart from the next shard's lock
}

// New returns a Store leasing allowance from remote.
func New(remote engine.Store, cfg Config) (*Store, error) {
	switch {
	case remote == nil:
		return nil, fmt.Errorf("%w: allowance: nil remote store", sluice.ErrInvalidConfig)
	case cfg.LeaseTime < 0 || cfg.LeaseTime > time.Minute:
		return nil, fmt.Errorf("%w: allowance: lease time %v is not between 0 and a minute", sluice.ErrInvalidConfig, cfg.LeaseTime)
	case !(cfg.MaxShare >= 0 && cfg.MaxShare <= 1):
		return nil, fmt.Errorf("%w: allowance: max share %v is not between 0 and 1", sluice.ErrInvalidConfig, cfg.MaxShare)
	case cfg.MaxKeys < 0:
		return nil, fmt.Errorf("%w: allowance: negative MaxKeys %d", sluice.ErrInvalidConfig, cfg.MaxKeys)
	}
	s := &Store{
		remote:   remote,
		seed:     maphash.MakeSeed(),
		lease:    int64(cmp.Or(cfg.LeaseTime, DefaultLeaseTime)),
		share:    cmp.Or(cfg.MaxShare, DefaultMaxShare),
		perShard: (cmp.Or(cfg.MaxKeys, DefaultMaxKeys)-1)/shards + 1,
	}
	for i := range s.shards {
		s.shards[i].keys = make(map[string]*entry)
	}
	return s, nil
}

func (s *Store) shard(key string) *shard {
	return &s.shards[maphash.String(s.seed, key)%shards]
}

// leasable reports whether op may be answered from a block: an Allow or a
// check of a cost the limit holds, at a time the algorithms accept, under
// an algorithm that grants part of a cost.
func leasable(p *engine.Params, op *engine.Op) bool {
	return (op.Verb == engine.VerbAllow || op.Verb == engine.VerbCheck) &&
		op.At == 0 && op.MaxDelay == 0 && op.Cost >= 0 && op.Cost <= p.Limit &&
		p.Kind != engine.KindConcurrency && engine.CheckTime(op.Now) == nil
}

// Apply answers an Allow or a check of key from its block when the block
// covers it, and otherwise takes a block from the remote store or passes
// op on to it, as the package comment explains. It implements
// [engine.Store].
func (s *Store) Apply(ctx context.Context, key string, p *engine.Params, op engine.Op) (engine.Decision, error) {
	if p == nil {
		return engine.Decision{}, fmt.Errorf("%w: allowance: no Params", sluice.ErrInvalidConfig)
	}
	if !leasable(p, &op) {
		return s.pass(ctx, key, p, op)
	}
	sh := s.shard(key)
	for {
		sh.mu.Lock()
		e, err := sh.entry(key, p, op.Now, s.perShard)
		if err != nil {
			sh.mu.Unlock()
			return engine.Decision{}, err
		}
		if op.Verb == engine.VerbAllow {
			e.demand.add(op.Now, op.Cost, s.lease)
		}
		if d, ok := e.answer(&op, sh); ok {
			sh.mu.Unlock()
			return d, nil
		}
		if wait := e.renewing; wait != nil {
			sh.mu.Unlock()
			select {
			case <-wait: // decide again, from the new block
				continue
			case <-ctx.Done():
				return engine.Decision{Limit: p.Limit}, ctx.Err()
			}
		}
		ask := e.block(s.share)
		if ask < minBlock || op.Verb == engine.VerbCheck || e.strictAtLimit(op.Now) {
			epoch := sh.epoch
			sh.mu.Unlock()
			return s.passHolding(ctx, sh, key, e, p, op, epoch)
		}
		done := make(chan struct{})
		e.renewing = done
		epoch, backoff := sh.epoch, e.backoff
		refund := e.giveBack(op.Now)
		sh.mu.Unlock()

		r := s.renew(ctx, key, p, op, max(ask, op.Cost), refund, backoff)

		sh.mu.Lock()
		if r.err == nil && sh.holds(key, e, p, epoch) {
			e.lease, e.hold, e.backoff = r.lease, r.hold, r.backoff
		}
		sh.counted(&r)
		e.renewing = nil
		close(done)
		sh.mu.Unlock()
		return r.decision, r.err
	}
}

// pass decides op on the remote store.
func (s *Store) pass(ctx context.Context, key string, p *engine.Params, op engine.Op) (engine.Decision, error) {
	s.calls.Add(1)
	return s.remote.Apply(ctx, key, p, op)
}

// passHolding decides op on the remote store for e, key's entry in sh as
// of epoch, and holds the key in process if the store says a penalty
// blocks it: a blocked key denies everything until its block ends.
func (s *Store) passHolding(ctx context.Context, sh *shard, key string, e *entry, p *engine.Params, op engine.Op, epoch uint64) (engine.Decision, error) {
	d, err := s.pass(ctx, key, p, op)
	if err == nil && d.Blocked {
		sh.mu.Lock()
		if sh.holds(key, e, p, epoch) {
			e.hold = blocked(op.Now, d)
		}
		sh.mu.Unlock()
	}
	return d, err
}

// renewal is what renew brings back: the request's decision, and the
// block and hold the key keeps.
type renewal struct {
	decision engine.Decision
	err      error
	lease    lease
	hold     hold
	backoff  uint8
	// What the renewal counts (see Stats): blocks taken, units leased,
	// given back, and spent on the request.
	leases                  uint64
	leased, refunded, spent float64
}

// renew gives refund back (if any), asks the remote store for a block of
// ask units for op, an Allow of a cost at most ask, and decides op from
// it: as the package comment explains, a block smaller than op's cost has
// the remote store decide the rest of it, and otherwise holds the key.
func (s *Store) renew(ctx context.Context, key string, p *engine.Params, op engine.Op, ask, refund float64, backoff uint8) (r renewal) {
	if refund > 0 {
		d, err := s.pass(ctx, key, p, engine.Op{Verb: engine.VerbRefund, Cost: refund, Now: op.Now})
		if err != nil {
			r.err = err
			return r
		}
		r.refunded = d.Granted
	}
	d, err := s.pass(ctx, key, p, engine.Op{Verb: engine.VerbAtMost, Cost: ask, Now: op.Now})
	if err != nil {
		r.err = err
		return r
	}
	r.leases, r.leased = 1, d.Granted
	r.lease = lease{
		start:   op.Now,
		end:     op.Now + s.lease,
		left:    d.Granted,
		basis:   d,
		resetAt: op.Now + int64(d.ResetAfter),
		short:   d.Granted < ask,
	}
	strict := p.Penalty > 0 || p.CountDenied
	r.backoff = backoff
	switch {
	case r.lease.short && !strict:
		// At the limit: what the block cannot cover is denied until a
		// whole block would fit, when the key asks again; the longer, the
		// more often other processes took what came back first.
		r.backoff = min(backoff+1, maxBackoff)
		r.hold = hold{until: op.Now + doubled(wait(p, &d, ask), backoff), denial: d}
	case !r.lease.short:
		r.backoff = backoff - min(backoff, 1)
	}
	if d.Granted >= op.Cost {
		r.lease.left -= op.Cost
		r.spent = op.Cost
		r.decision = r.lease.admitted(op.Now, p.Limit)
		return r
	}
	rest := op.Cost - d.Granted
	switch {
	case d.Blocked:
		r.hold = blocked(op.Now, d)
		r.decision = r.hold.denied(op.Now)
		return r
	case !strict && d.Remaining < rest:
		r.decision = r.hold.denied(op.Now)
		return r
	}
	top := op
	top.Cost = rest
	td, err := s.pass(ctx, key, p, top)
	if err != nil {
		r.err = err
		return r
	}
	r.hold = hold{} // the rest of the cost fits, or the store denied it
	if td.Allowed {
		r.spent = d.Granted // the block, spent with the rest on op
		r.lease.left, r.lease.basis = 0, td
		r.lease.resetAt = op.Now + int64(td.ResetAfter)
		r.decision = td
		return r
	}
	if td.Blocked {
		r.hold = blocked(op.Now, td)
	}
	r.decision = td
	return r
}

// wait is how long after d, a partial grant on p that left the key at its
// limit, a block of ask units would fit, if nothing else is recorded
// meanwhile: the units missing at the algorithm's rate, or the reset of a
// fixed window. It is at least a nanosecond, and never later than the key
// is fresh.
func wait(p *engine.Params, d *engine.Decision, ask float64) int64 {
	missing := ask - d.Granted - d.Remaining
	var per float64 // nanoseconds per unit freed
	switch p.Kind {
	case engine.KindGCRA:
		per = float64(p.Interval)
	case engine.KindLeakyBucket, engine.KindTokenBucket:
		per = float64(p.Interval) / p.Amount
	case engine.KindSlidingLog, engine.KindSlidingCounter:
		per = float64(p.Interval) / p.Limit
	default: // a fixed window frees its whole limit at its end
		per = math.Inf(1)
	}
	w := int64(d.ResetAfter)
	if t := missing * per; t < float64(w) {
		w = int64(math.Ceil(t))
	}
	return max(w, int64(d.RetryAfter), 1)
}

// doubled is w doubled n times, at most maxHold.
func doubled(w int64, n uint8) int64 {
	if w > maxHold>>n {
		return maxHold
	}
	return w << n
}

// Reset forgets key's block, and resets it in the remote store. It
// implements [engine.Store].
func (s *Store) Reset(ctx context.Context, key string) error {
	sh := s.shard(key)
	sh.forget(key)
	err := s.remote.Reset(ctx, key)
	// A block asked for before the remote Reset may arrive after the
	// first forget; the second epoch keeps it out.
	sh.forget(key)
	return err
}

// ApplyGroup decides a group on the remote store, which must be a
// [engine.GroupStore]; otherwise it returns an error wrapping
// [sluice.ErrUnsupported]. Blocks held for the group's keys stay: they
// were admitted by the remote store, which decides the group with them
// counted. It implements [engine.GroupStore].
func (s *Store) ApplyGroup(ctx context.Context, ops []engine.GroupOp, each []engine.Decision) (engine.Decision, error) {
	g, ok := s.remote.(engine.GroupStore)
	if !ok {
		return engine.Decision{}, fmt.Errorf("%w: allowance: %T cannot decide several limits atomically", sluice.ErrUnsupported, s.remote)
	}
	s.calls.Add(1)
	return g.ApplyGroup(ctx, ops, each)
}
