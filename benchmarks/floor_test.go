package benchmarks

import (
	"context"
	"hash/maphash"
	"sync"
	"time"
)

// floor is the least a keyed limiter in memory does per decision, for
// sluice's in-memory store to be measured against: a monotonic clock read,
// one hash of the key, a shard's mutex, and a GCRA's 24-byte slot found by
// open addressing and updated in place. It keeps no key strings (a 64-bit
// hash stands for the key), never evicts and never forgets a key: it is a
// yardstick, not a limiter to use.
type floor struct {
	seed   maphash.Seed
	start  time.Time
	shards [256]floorShard
	tau    int64 // the burst, in nanoseconds
	per    int64 // the time one unit takes to come back
}

type floorShard struct {
	mu    sync.Mutex
	slots []floorSlot // a power of two of them, at most half full
	n     int
	_     [24]byte // a shard to a cache line
}

// A floorSlot is a key's hash, its theoretical arrival time and when the
// key is fresh again: 24 bytes, as a sluice GCRA slot.
type floorSlot struct {
	hash, tat, expires int64
}

func newFloor(l limit) (keyed, error) {
	f := &floor{seed: maphash.MakeSeed(), start: time.Now(), tau: int64(l.burst) * int64(l.per), per: int64(l.per)}
	for i := range f.shards {
		f.shards[i].slots = make([]floorSlot, 8)
	}
	return f, nil
}

// decide admits cost units for key if they fit, as the GCRA does.
func (f *floor) decide(key string, cost int64) bool {
	now := int64(time.Since(f.start)) + 1 // never the empty slot's zero
	h := int64(maphash.String(f.seed, key) | 1)
	sh := &f.shards[uint64(h)>>56]
	sh.mu.Lock()
	s := sh.slot(h)
	tat := max(s.tat, now) + cost*f.per
	ok := tat-f.tau <= now
	if ok {
		s.tat, s.expires = tat, tat
	}
	sh.mu.Unlock()
	return ok
}

// slot returns the slot of hash h, occupying an empty one if h is new.
func (sh *floorShard) slot(h int64) *floorSlot {
	mask := len(sh.slots) - 1
	for i := int(h) & mask; ; i = (i + 1) & mask {
		switch s := &sh.slots[i]; s.hash {
		case h:
			return s
		case 0:
			if 2*(sh.n+1) > len(sh.slots) {
				sh.grow()
				return sh.slot(h)
			}
			s.hash = h
			sh.n++
			return s
		}
	}
}

// grow doubles the table.
func (sh *floorShard) grow() {
	old := sh.slots
	sh.slots = make([]floorSlot, 2*len(old))
	mask := len(sh.slots) - 1
	for _, s := range old {
		if s.hash == 0 {
			continue
		}
		i := int(s.hash) & mask
		for sh.slots[i].hash != 0 {
			i = (i + 1) & mask
		}
		sh.slots[i] = s
	}
}

func (f *floor) Allow(_ context.Context, key string) (bool, error) { return f.decide(key, 1), nil }

func (f *floor) Warm(_ context.Context, key string, n int) error {
	f.decide(key, int64(n))
	return nil
}

func (f *floor) Close() error { return nil }

// Len returns the number of keys the floor holds.
func (f *floor) Len() int {
	n := 0
	for i := range f.shards {
		sh := &f.shards[i]
		sh.mu.Lock()
		n += sh.n
		sh.mu.Unlock()
	}
	return n
}
