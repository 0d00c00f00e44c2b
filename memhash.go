package sluice

import (
	"encoding/binary"
	"math/bits"
	"math/rand/v2"
	"unsafe"
)

// keyHash names keys in one pass over their bytes: two lanes of
// multiply-and-fold mixing, each under secrets of its own, read the same
// words, so a key's 120-bit identity costs one read of the key and four
// multiplications, two per lane, the lanes side by side, when it is at
// most 16 bytes long (most keys: an address, a user or tenant id). The
// secrets are drawn when a store is made; without them, nobody can choose
// keys that collide or that pile into one shard.
//
// Each lane folds a 64x64-bit product into 64 bits, high half xor low
// half, so that every output bit depends on every input bit; the key's
// words are xored with a secret before each product and the length is
// mixed in last, so that keys of different lengths differ and no
// multiplier is known to the keys' authors.
type keyHash struct {
	seed [2]uint64 // each lane's start
	in   [2]uint64 // xored into a word of each block, per lane
	out  [2]uint64 // xored into the length at the end, per lane
}

// newKeyHash returns a keyHash under fresh random secrets, drawn from the
// runtime's cryptographically seeded generator.
func newKeyHash() keyHash {
	return keyHash{
		seed: [2]uint64{rand.Uint64(), rand.Uint64()},
		in:   [2]uint64{rand.Uint64(), rand.Uint64()},
		out:  [2]uint64{rand.Uint64(), rand.Uint64()},
	}
}

// fold is the high half of a*b xored with its low half.
func fold(a, b uint64) uint64 {
	hi, lo := bits.Mul64(a, b)
	return hi ^ lo
}

// id returns key's identity: lane 0 in lo, lane 1's top 56 bits in hi.
//
// A key of at most 16 bytes is read as two words a and b that hold every
// byte (overlapping when shorter than 16), so that keys of one length that
// differ give different (a, b). A longer one is read in 16-byte blocks,
// each mixed into both lanes, and its last 16 bytes are (a, b).
func (h *keyHash) id(key string) keyID {
	b := unsafe.Slice(unsafe.StringData(key), len(key))
	n := len(b)
	x, y := h.seed[0], h.seed[1]
	var w0, w1 uint64
	switch {
	case n > 16:
		for ; len(b) > 16; b = b[16:] {
			w0, w1 = binary.LittleEndian.Uint64(b), binary.LittleEndian.Uint64(b[8:])
			x = fold(w0^h.in[0], w1^x)
			y = fold(w0^h.in[1], w1^y)
		}
		b = unsafe.Slice(unsafe.StringData(key), n)[n-16:]
		fallthrough
	case n > 8:
		w0, w1 = binary.LittleEndian.Uint64(b), binary.LittleEndian.Uint64(b[len(b)-8:])
	case n >= 4:
		w0, w1 = uint64(binary.LittleEndian.Uint32(b)), uint64(binary.LittleEndian.Uint32(b[n-4:]))
	case n > 0:
		w0 = uint64(b[0])<<16 | uint64(b[n>>1])<<8 | uint64(b[n-1])
	}
	x = fold(h.out[0]^uint64(n), fold(w0^h.in[0], w1^x))
	y = fold(h.out[1]^uint64(n), fold(w0^h.in[1], w1^y))
	return keyID{x, y >> 8}
}
