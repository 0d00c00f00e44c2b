package ratelimitheader

import (
	"math"
	"sync/atomic"

	"github.com/sluice-go/sluice/engine"
)

// CacheSize bounds the entries of a [Cache]: as many distinct limits as
// a per-key limiter's lookup is expected to return (its tiers or plans),
// with room to spare.
const CacheSize = 1 << cacheBits

const cacheBits = 6

// Cache holds what is built from the policy of each limit a per-key
// limiter ([sluice.NewPerKey]) looks up, by the limit's Params, so that a
// request whose key's limit was seen before builds nothing. It is safe
// for concurrent use, and its lookups take no lock and allocate nothing.
//
// It holds at most [CacheSize] entries: up to that many distinct limits
// stay in it for good, and past it each new limit replaces an entry, in
// turn, so that a lookup that makes a limit per key (a limit of each
// customer's own) costs a policy built per request at worst, not memory
// without bound.
type Cache[V any] struct {
	c     Config
	wrap  func(*Policy) V
	slots [CacheSize]atomic.Pointer[cached[V]]
	// evict is the slot a limit replaces once every slot is taken: each
	// eviction takes the next, round the slots.
	evict atomic.Uint32
}

type cached[V any] struct {
	params engine.Params
	v      V
}

// NewCache returns a cache of the policies named by c, each wrapped with
// wrap, or an error wrapping [sluice.ErrInvalidConfig] if c could name
// none: a name or unit that is not printable ASCII, or a negative window.
// What depends on the limit (a limit below one whole unit, or below
// c.MinCost) can only be found by [Cache.Get].
func NewCache[V any](c Config, wrap func(*Policy) V) (*Cache[V], error) {
	if err := c.check(); err != nil {
		return nil, err
	}
	return &Cache[V]{c: c, wrap: wrap}, nil
}

// Get returns what wraps the policy of the limit p: from the cache, or
// built ([FromParams]) and kept. An error, which wraps
// [sluice.ErrInvalidConfig], says that p's limit cannot be stated, and is
// not kept.
//
// The slots are probed linearly from p's hash and never emptied, so that
// a search that meets an empty slot has found p absent; a limit that
// finds no empty slot replaces one. Two requests that miss the same limit
// at once may both keep it, in two slots: the second is never found, and
// in time replaced.
func (c *Cache[V]) Get(p engine.Params) (V, error) {
	home := hashParams(&p)
	for i := range uint64(CacheSize) {
		e := c.slots[(home+i)%CacheSize].Load()
		if e == nil {
			break
		}
		if e.params == p {
			return e.v, nil
		}
	}
	policy, err := FromParams(p, c.c)
	if err != nil {
		var zero V
		return zero, err
	}
	e := &cached[V]{params: p, v: c.wrap(policy)}
	for i := range uint64(CacheSize) {
		if c.slots[(home+i)%CacheSize].CompareAndSwap(nil, e) {
			return e.v, nil
		}
	}
	c.slots[c.evict.Add(1)%CacheSize].Store(e)
	return e.v, nil
}

// hashParams returns the hash of the fields that tell limits apart: the
// algorithm, the limit and the rates.
func hashParams(p *engine.Params) uint64 {
	const prime = 0x100000001b3
	h := uint64(p.Kind)
	h = h*prime ^ math.Float64bits(p.Limit)
	h = h*prime ^ uint64(p.Interval)
	h = h*prime ^ math.Float64bits(p.Amount)
	return (h * 0x9e3779b97f4a7c15) >> (64 - cacheBits)
}
