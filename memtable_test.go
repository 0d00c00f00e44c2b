package sluice

import (
	"math/rand/v2"
	"testing"
	"unsafe"

	"github.com/sluice-go/sluice/engine"
	"github.com/stretchr/testify/require"
)

// TestTableMatchesAMapUnderChurn drives a table and a map with the same
// random inserts, updates and removals and requires the same contents
// after every step. Homes are drawn from a few values so that probe runs
// are long, collide, and wrap around the end of the table, which is where
// backward-shift removal can lose a key.
func TestTableMatchesAMapUnderChurn(t *testing.T) {
	t.Run("GCRA slots", testTableChurn[tatSlot])
	t.Run("other slots", testTableChurn[slot])
}

func testTableChurn[S slotType](t *testing.T) {
	for _, tc := range []struct {
		name  string
		homes uint64 // distinct home positions ids are drawn from
		keys  uint64 // distinct ids
	}{
		{name: "one home, runs wrap around", homes: 1, keys: 40},
		{name: "homes at the end of the table", homes: 3, keys: 200},
		{name: "spread homes", homes: 1 << 20, keys: 5000},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(1, tc.homes))
			var tab table[S]
			want := map[keyID]int64{}
			for step := range 20000 {
				k := rng.Uint64N(tc.keys)
				// The home is the low bits of hi: all ones minus a small
				// number is near the end of a table of any size.
				id := keyID{lo: k, hi: (k<<20 | (1<<20 - 1 - k%tc.homes)) & idBits}
				i, found := tab.find(id)
				_, inMap := want[id]
				require.Equal(t, inMap, found, "step %d: find(%v)", step, id)
				switch {
				case found && rng.IntN(2) == 0:
					tab.remove(i)
					delete(want, id)
				case found:
					tab.at(i).expires = int64(step)
					want[id] = int64(step)
				default:
					i = tab.insert(id, engine.KindGCRA)
					tab.at(i).expires = int64(step)
					want[id] = int64(step)
				}
				if step%97 == 0 {
					requireTableHolds(t, &tab, want)
				}
			}
			requireTableHolds(t, &tab, want)
			for id := range want {
				i, ok := tab.find(id)
				require.True(t, ok)
				tab.remove(i)
			}
			require.Zero(t, tab.n)
			tab.shrink()
			require.Nil(t, tab.slots, "an empty table gives its slots back")
		})
	}
}

// requireTableHolds requires tab to hold exactly want: every id found
// with its value, and no other slot occupied.
func requireTableHolds[S slotType](t *testing.T, tab *table[S], want map[keyID]int64) {
	t.Helper()
	require.Equal(t, len(want), tab.n)
	occupied := 0
	for i := range tab.slots {
		if tab.at(i).hi != 0 {
			occupied++
			require.Equal(t, engine.KindGCRA, tab.at(i).kind())
		}
	}
	require.Equal(t, len(want), occupied)
	for id, v := range want {
		i, ok := tab.find(id)
		require.True(t, ok, "%v lost", id)
		require.Equal(t, v, tab.at(i).expires, "%v", id)
	}
	require.LessOrEqual(t, tab.n*4, len(tab.slots)*3, "more than three quarters full")
}

// TestTableShrinksOnceMostlyEmpty pins that memory follows the keys in
// use: a table that held many keys halves while at most an eighth full.
func TestTableShrinksOnceMostlyEmpty(t *testing.T) {
	var tab table[slot]
	for k := range uint64(1000) {
		tab.insert(keyID{lo: k, hi: k * 0x9e3779b97f4a7c15 & idBits}, engine.KindGCRA)
	}
	require.Equal(t, 2048, len(tab.slots))
	for k := range uint64(990) {
		i, ok := tab.find(keyID{lo: k, hi: k * 0x9e3779b97f4a7c15 & idBits})
		require.True(t, ok)
		tab.remove(i)
	}
	tab.shrink()
	require.Equal(t, 64, len(tab.slots))
	for k := uint64(990); k < 1000; k++ {
		_, ok := tab.find(keyID{lo: k, hi: k * 0x9e3779b97f4a7c15 & idBits})
		require.True(t, ok, "key %d lost when shrinking", k)
	}
}

// TestShardsFillWholeCacheLines pins the padding that keeps two shards'
// locks off one cache line.
func TestShardsFillWholeCacheLines(t *testing.T) {
	require.Equal(t, uintptr(24), unsafe.Sizeof(tatSlot{}), "a GCRA key's slot")
	require.Equal(t, uintptr(48), unsafe.Sizeof(slot{}), "another key's slot")
	require.Zero(t, unsafe.Sizeof(shard{})%64, "a shard is %d bytes", unsafe.Sizeof(shard{}))
}

// TestShardKeepsItsHotFieldsInTheMutexsCacheLine pins the layout that a
// decision on a shard's hot key relies on (memhot.go): what it writes lies
// in one cache line. The shards start on a 64-byte boundary, or 8 bytes
// past one, after the 8-byte header Go's allocator puts before a mid-sized
// object holding pointers, so that line is the shard's first 56 bytes.
func TestShardKeepsItsHotFieldsInTheMutexsCacheLine(t *testing.T) {
	var sh shardData
	for _, end := range []uintptr{
		unsafe.Offsetof(sh.mu) + unsafe.Sizeof(sh.mu),
		unsafe.Offsetof(sh.hot) + unsafe.Sizeof(sh.hot),
		unsafe.Offsetof(sh.last) + unsafe.Sizeof(sh.last),
		unsafe.Offsetof(sh.now) + unsafe.Sizeof(sh.now),
		unsafe.Offsetof(sh.primaryA) + unsafe.Sizeof(sh.primaryA),
	} {
		require.LessOrEqual(t, end, uintptr(56))
	}
	for _, shards := range []int{1, 2, 4, 64, 128, 1024} {
		m := NewMemStore(MemStoreConfig{Shards: shards})
		t.Cleanup(func() { _ = m.Close() })
		require.Contains(t, []uintptr{0, 8}, uintptr(unsafe.Pointer(&m.shards[0]))%64, "%d shards", shards)
	}
}
