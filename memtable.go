package sluice

import (
	"unsafe"

	"github.com/sluice-go/sluice/engine"
)

// A keyID names a key inside a MemStore: 120 bits of its hash under the
// store's secrets (memhash.go). Two keys share state only if all 120 bits
// collide, which for n keys has a probability of about n²/2^121 (below
// 10^-24 at a billion keys), so the store keeps no key strings: no
// allocation per new key, no string to compare, and one slot per key.
type keyID struct {
	lo, hi uint64 // hi's top byte is zero; a slot keeps its Kind and idle age there
}

const (
	idBits   = 1<<56 - 1 // the bits of keyID.hi that belong to the key
	kindLow  = 56        // where a slot keeps its Kind in hi: 3 bits
	kindMask = 7
	idleLow  = 59 // where a slot keeps its idle age in hi: the top 5 bits
	idleOne  = 1 << idleLow
	idleMax  = 31
	minSlots = 8 // the smallest table
)

// slotHead begins every slot: the key, its Kind, its idle age, and when
// its state is fresh again. A slot whose hi is zero is empty: an occupied
// slot holds a non-zero Kind in hi's top byte.
//
// The idle age counts the times the store sampled the slot, to expire or
// evict keys, since the key's last decision (up to idleMax); every
// decision on the key sets it back to zero. Eviction takes the most idle
// key of its sample, so a key in use is not the one forgiven.
type slotHead struct {
	lo, hi  uint64
	expires int64
}

func (s *slotHead) kind() engine.Kind { return engine.Kind(s.hi >> kindLow & kindMask) }

// Every Kind fits in a slot's kind bits: this fails to compile otherwise.
var _ [kindMask - engine.KindConcurrency]struct{}

// idle returns the slot's idle age.
func (s *slotHead) idle() uint64 { return s.hi >> idleLow }

// used marks the key as just used. It writes only when the age is not
// already zero, so that a key decided over and over (a hammered key,
// denied each time) keeps its cache line shared between cores.
func (s *slotHead) used() {
	if s.hi >= idleOne {
		s.hi &^= idleMax << idleLow
	}
}

// aged counts one more sampling of the slot.
func (s *slotHead) aged() {
	if s.idle() < idleMax {
		s.hi += idleOne
	}
}

func (s *slotHead) id() keyID { return keyID{s.lo, s.hi & idBits} }

// A tatSlot holds a GCRA key in 24 bytes. A GCRA's whole state is its
// theoretical arrival time, which is also the instant the key is fresh
// again: its expiry.
type tatSlot struct {
	slotHead
}

// A slot holds a key of any other algorithm in 48 bytes: its State less
// the sliding log's entries, and its expiry.
type slot struct {
	slotHead
	time int64
	a, b float64
}

// slotType lists the layouts a table holds. Each begins with a slotHead,
// which is all the table's code reads.
type slotType interface{ tatSlot | slot }

// head returns the slotHead that s begins with. Go offers no field access
// through a type parameter; a pointer to a struct is a pointer to its
// first field, and a table instantiated for each layout indexes its slots
// with that layout's size, so this conversion costs nothing.
func head[S slotType](s *S) *slotHead { return (*slotHead)(unsafe.Pointer(s)) }

// table is an open-addressing hash table of slots with linear probing,
// kept at most three quarters full: a key's slot is found with one hash,
// in the cache line its hash points at or the next few. Removal shifts
// the following slots back instead of leaving tombstones, so lookups never
// slow down as keys come and go.
type table[S slotType] struct {
	slots []S // a power of two of them, or none
	n     int // occupied slots
}

// at returns slot i's head.
func (t *table[S]) at(i int) *slotHead { return head(&t.slots[i]) }

// home is where id's probe sequence starts.
func (t *table[S]) home(id keyID) int { return int(id.hi & uint64(len(t.slots)-1)) }

// find returns the index of id's slot, or of the empty slot where id
// would go and false.
func (t *table[S]) find(id keyID) (int, bool) {
	mask := len(t.slots) - 1
	if mask < 0 {
		return 0, false
	}
	for i := int(id.hi) & mask; ; i = (i + 1) & mask {
		s := head(&t.slots[i])
		if s.hi == 0 {
			return i, false
		}
		if s.lo == id.lo && s.hi&idBits == id.hi {
			return i, true
		}
	}
}

// insert occupies a slot for id, which is absent, growing the table if it
// is full, and returns its index. The slot holds id and kind, and zeros.
func (t *table[S]) insert(id keyID, kind engine.Kind) int {
	if (t.n+1)*4 > len(t.slots)*3 {
		t.resize(max(2*len(t.slots), minSlots))
	}
	i, _ := t.find(id)
	var empty S
	t.slots[i] = empty
	s := head(&t.slots[i])
	s.lo, s.hi = id.lo, id.hi|uint64(kind)<<kindLow
	t.n++
	return i
}

// remove empties slot i and moves back the slots of its probe run that
// can move, so that every key stays reachable from its home without
// passing an empty slot.
func (t *table[S]) remove(i int) {
	mask := len(t.slots) - 1
	for j := (i + 1) & mask; t.at(j).hi != 0; j = (j + 1) & mask {
		// Slot j may move to i unless its home lies cyclically in (i, j].
		h := t.home(t.at(j).id())
		if i <= j && i < h && h <= j || i > j && (i < h || h <= j) {
			continue
		}
		t.slots[i] = t.slots[j]
		i = j
	}
	var empty S
	t.slots[i] = empty
	t.n--
}

// resize moves every slot into a table of size slots.
func (t *table[S]) resize(size int) {
	old := t.slots
	t.slots = make([]S, size)
	for k := range old {
		if s := head(&old[k]); s.hi != 0 {
			i, _ := t.find(s.id())
			t.slots[i] = old[k]
		}
	}
}

// shrink halves the table while it is at most an eighth full, so that
// the memory of a burst of keys is given back once they expire.
func (t *table[S]) shrink() {
	size := len(t.slots)
	for size > minSlots && t.n*8 <= size {
		size /= 2
	}
	if size < len(t.slots) {
		if t.n == 0 {
			t.slots = nil
			return
		}
		t.resize(size)
	}
}
