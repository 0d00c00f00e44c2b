package sluice

import (
	"fmt"
	"math"
	"math/bits"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// keysOfEveryLength returns random keys of each length from 0 to 80, which
// covers every branch of keyHash.id: short reads, one block, and several.
func keysOfEveryLength(r *rand.Rand) []string {
	keys := make([]string, 0, 81)
	for n := range 81 {
		b := make([]byte, n)
		for i := range b {
			b[i] = byte(r.Uint32())
		}
		keys = append(keys, string(b))
	}
	return keys
}

// eachBitFlipped calls f with each key of keys and, in turn, the key with
// one of its bits flipped, and that bit's index.
func eachBitFlipped(keys []string, f func(key, flipped string, bit int)) {
	for _, key := range keys {
		for i := range len(key) * 8 {
			b := []byte(key)
			b[i/8] ^= 1 << (i % 8)
			f(key, string(b), i)
		}
	}
}

func TestKeyHashReadsEveryBitOfTheKey(t *testing.T) {
	h := newKeyHash()
	keys := keysOfEveryLength(rand.New(rand.NewPCG(1, 2)))
	for _, key := range keys {
		require.Equal(t, h.id(key), h.id(strings.Clone(key)), "same key, same identity")
	}
	eachBitFlipped(keys, func(key, flipped string, bit int) {
		id, f := h.id(key), h.id(flipped)
		require.NotEqual(t, id.lo, f.lo, "lane 0 ignores bit %d of a %d-byte key", bit, len(key))
		require.NotEqual(t, id.hi, f.hi, "lane 1 ignores bit %d of a %d-byte key", bit, len(key))
	})
}

func TestKeyHashTellsLengthsApart(t *testing.T) {
	h := newKeyHash()
	seen := map[keyID]string{h.id(""): ""}
	for _, c := range []string{"\x00", " ", "\xff"} {
		for n := 1; n < 40; n++ {
			key := strings.Repeat(c, n)
			id := h.id(key)
			require.NotContains(t, seen, id, "%q and %q", key, seen[id])
			seen[id] = key
		}
	}
}

func TestKeyHashStaysWithinItsBits(t *testing.T) {
	h := newKeyHash()
	for _, key := range keysOfEveryLength(rand.New(rand.NewPCG(3, 4))) {
		require.Zero(t, h.id(key).hi&^idBits, "hi's top byte belongs to the slot")
	}
}

// TestKeyHashGivesNoCollisionAmongLikelyKeys names half a million keys of
// the shapes services use, each lane on its own: at 64 and 56 bits, a
// collision among them has a probability below 10^-5.
func TestKeyHashGivesNoCollisionAmongLikelyKeys(t *testing.T) {
	h := newKeyHash()
	lanes := [2]map[uint64]string{make(map[uint64]string, 1<<19), make(map[uint64]string, 1<<19)}
	add := func(key string) {
		id := h.id(key)
		for lane, v := range [2]uint64{id.lo, id.hi} {
			other, ok := lanes[lane][v]
			require.False(t, ok, "lane %d: %q and %q", lane, key, other)
			lanes[lane][v] = key
		}
	}
	for i := range 1 << 17 {
		add(fmt.Sprintf("10.%d.%d.%d", i>>16, i>>8&255, i&255))
		add(fmt.Sprintf("user:%d", i))
		add(fmt.Sprintf("tenant-%08x/api/v1/items", i))
		add(fmt.Sprintf("%d", i))
	}
}

// TestKeyHashSpreadsKeysEvenly checks the bits that choose a shard (lane
// 0's low bits) and a slot (lane 1's) on sequential keys: a chi-squared
// test over 256 buckets, whose 99.99th percentile is about 363.
func TestKeyHashSpreadsKeysEvenly(t *testing.T) {
	h := newKeyHash()
	const keys, buckets = 1 << 18, 256
	var shard, slot [buckets]float64
	for i := range keys {
		id := h.id(fmt.Sprintf("user:%d", i))
		shard[id.lo%buckets]++
		slot[id.hi%buckets]++
	}
	for name, counts := range map[string]*[buckets]float64{"shard": &shard, "slot": &slot} {
		var chi2 float64
		for _, c := range counts {
			chi2 += (c - keys/buckets) * (c - keys/buckets) / (keys / buckets)
		}
		require.Less(t, chi2, 363.0, "%s bits", name)
	}
}

// TestKeyHashAvalanches flips one bit of a key at a time: about half of
// each lane's bits should change, as in an ideal hash (within 0.01 of a
// half over many flips).
func TestKeyHashAvalanches(t *testing.T) {
	h := newKeyHash()
	var changed [2]float64
	flips := 0
	eachBitFlipped(keysOfEveryLength(rand.New(rand.NewPCG(5, 6))), func(key, flipped string, _ int) {
		id, f := h.id(key), h.id(flipped)
		changed[0] += float64(bits.OnesCount64(id.lo^f.lo)) / 64
		changed[1] += float64(bits.OnesCount64(id.hi^f.hi)) / 56
		flips++
	})
	for lane, c := range changed {
		require.Less(t, math.Abs(c/float64(flips)-0.5), 0.01, "lane %d", lane)
	}
}

func TestKeyHashDependsOnTheStoresSecrets(t *testing.T) {
	a, b := newKeyHash(), newKeyHash()
	for _, key := range []string{"", "a", "user:1", "203.0.113.7", strings.Repeat("k", 100)} {
		ia, ib := a.id(key), b.id(key)
		require.NotEqual(t, ia.lo, ib.lo, "%q", key)
		require.NotEqual(t, ia.hi, ib.hi, "%q", key)
	}
}
