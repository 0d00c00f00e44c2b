package sluice

import "math"

// A shard's hot key is the GCRA key of its GCRA table that it saved last,
// if it also saved that key the time before: its TAT is kept beside the
// shard's mutex, in the cache line that taking the mutex brings to the
// deciding core, and its slot, in another line, is not touched while it
// stays hot. Goroutines hammering one key then pass one cache line
// between their cores, not two, and none waits for the slot's line while
// holding the mutex.
//
// While a key is hot, its slot stays in the table, but the slot's expiry
// is stale: hot.expires is the key's. Code that reads other
// keys' slots by their expiry or removes slots (sampling, sweeping,
// claiming, forgetting) cools the key first, writing its expiry back.
type hotKey struct {
	id      keyID
	expires int64 // zero when no key is hot: a hot key's is after a time, and times are not negative
}

// hotAt is the slot load returns for the hot key, whose state save keeps
// beside the mutex.
const hotAt = math.MinInt

// saveTAT writes the TAT of id, a GCRA key of the GCRA table, to its slot
// at, as its expiry, and makes id the hot key if the shard saved it the
// time before too, as known by its low 64 bits: two keys that share them,
// once in 2^64, only make the wrong one hot.
func (sh *shard) saveTAT(id keyID, at int, expires int64) {
	sh.tats.slots[at].expires = expires
	if id.lo != sh.last {
		sh.last = id.lo
		return
	}
	sh.cool()
	sh.hot = hotKey{id: id, expires: expires}
}

// cool writes the hot key's expiry back to its slot and leaves the shard
// with no hot key. The slot's idle age is still zero, as its last load
// from the table left it: only sampling ages a slot, and it cools first.
func (sh *shard) cool() {
	if sh.hot.expires == 0 {
		return
	}
	if i, ok := sh.tats.find(sh.hot.id); ok {
		sh.tats.at(i).expires = sh.hot.expires
	}
	sh.hot = hotKey{}
}
