package sluice

import (
	"math"

	"github.com/sluice-go/sluice/engine"
)

// A shard's hot key is a GCRA key of its GCRA table that an Allow saved
// right after the shard saved it before: its TAT is kept beside the
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

// holds reports whether h is id's: the shard's hot key is id.
func (h *hotKey) holds(id keyID) bool { return h.id == id && h.expires != 0 }

// saveUsual is save for a GCRA key, live, of the shard's primary interval
// and without a penalty's block, in its slot or hot, and reports whether
// the key was one. It makes no call that the general save would have to
// save its arguments for, and the decisions of the other algorithms do
// not call it. An Allow that saves the key the shard saved last makes it
// the hot key; the shard knows its last key by its low 64 bits, and two
// keys that share them, once in 2^64, only make the wrong one hot.
func (sh *shard) saveUsual(id keyID, at int, now int64, s *engine.State, d *engine.Decision, allow bool) bool {
	if s.A != sh.primaryA || d.ResetAfter <= 0 || s.Until != 0 || sh.blocks != nil {
		return false
	}
	expires := now + int64(d.ResetAfter)
	switch {
	case at == hotAt && sh.hot.holds(id):
		sh.hot.expires = expires
	case at >= 0:
		sh.tats.slots[at].expires = expires
		if allow && id.lo == sh.last {
			sh.heat(id, expires)
		}
		sh.last = id.lo
	default:
		return false
	}
	return true
}

// heat makes id, live until expires, the shard's hot key, cooling the
// one before it.
func (sh *shard) heat(id keyID, expires int64) {
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
