package allowance

import (
	"math"
	"sync/atomic"
)

// Stats counts a Store's answers and the units it leased.
type Stats struct {
	// Local is the number of requests answered in process: admitted from
	// a block, or denied by a hold.
	Local uint64
	// Remote is the number of calls made to the remote store: requests
	// passed on, blocks asked for, the rest of a request's cost, units
	// given back, groups.
	Remote uint64
	// Leases is the number of blocks asked for.
	Leases uint64
	// Leased is the units the remote store granted in blocks.
	Leased float64
	// Spent is the units of blocks admitted to requests.
	Spent float64
	// Refunded is the units given back to the remote store.
	Refunded float64
	// Keys is the number of keys followed now.
	Keys int
}

// Unspent returns the units leased and neither spent nor given back:
// those of live blocks, and those lost to the limit.
func (st Stats) Unspent() float64 { return st.Leased - st.Spent - st.Refunded }

// counts are a Store's counts kept outside the shards' locks.
type counts struct {
	remote, leases   atomic.Uint64
	leased, refunded atomicFloat
}

// atomicFloat is a float64 added to atomically.
type atomicFloat struct{ bits atomic.Uint64 }

func (f *atomicFloat) add(v float64) {
	for {
		old := f.bits.Load()
		if f.bits.CompareAndSwap(old, math.Float64bits(math.Float64frombits(old)+v)) {
			return
		}
	}
}

func (f *atomicFloat) load() float64 { return math.Float64frombits(f.bits.Load()) }

// Stats returns the Store's counts since it was made.
func (s *Store) Stats() Stats {
	st := Stats{
		Remote:   s.counts.remote.Load(),
		Leases:   s.counts.leases.Load(),
		Leased:   s.counts.leased.load(),
		Refunded: s.counts.refunded.load(),
	}
	for i := range s.shards {
		sh := &s.shards[i]
		sh.mu.Lock()
		st.Local += sh.local
		st.Spent += sh.spent
		st.Keys += len(sh.keys)
		sh.mu.Unlock()
	}
	return st
}
