package allowance

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

// counted adds what a renewal counts to the shard's counts.
func (sh *shard) counted(r *renewal) {
	sh.leases += r.leases
	sh.leased += r.leased
	sh.refunded += r.refunded
	if r.err == nil {
		sh.spent += r.spent
	}
}

// Stats returns the Store's counts since it was made.
func (s *Store) Stats() Stats {
	st := Stats{Remote: s.calls.Load()}
	for i := range s.shards {
		sh := &s.shards[i]
		sh.mu.Lock()
		st.Local += sh.local
		st.Leases += sh.leases
		st.Leased += sh.leased
		st.Refunded += sh.refunded
		st.Spent += sh.spent
		st.Keys += len(sh.keys)
		sh.mu.Unlock()
	}
	return st
}
