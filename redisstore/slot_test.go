package redisstore

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/sluice-go/sluice/internal/testserver"
)

func TestCRC16IsXMODEM(t *testing.T) {
	require.Equal(t, uint16(0x31c3), crc16("123456789"), "the CRC-16/XMODEM check value")
	require.Equal(t, uint16(0), crc16(""))
}

func TestHashTagIsWhatRedisHashes(t *testing.T) {
	for name, want := range map[string]string{
		"user:1000":                     "user:1000",
		"{user:1000}.followers":         "user:1000",
		"prefix:{{api:7}:second}":       "{api:7",
		"prefix:{{api:7}:day}":          "{api:7",
		"prefix:{plain}":                "plain",
		"{}{tag}":                       "{}{tag}", // an empty first tag: the whole name
		"{tag":                          "{tag",    // never closed
		"}{tag}":                        "tag",
		"a{b}c{d}":                      "b",
		"prefix:{{a}b}":                 "{a",
		"prefix:{}":                     "prefix:{}",
		"prefix:{{}:second}":            "{",
		"prefix:{x{y}z}":                "x{y",
		"prefix:{\xff\x00binary}:tail}": "\xff\x00binary",
	} {
		require.Equal(t, want, hashTag(name), "name %q", name)
	}
}

// TestSlotIsClusterKeySlot requires the slot computed here to be the one a
// real Redis Cluster node computes (CLUSTER KEYSLOT), for names of every
// shape the store makes: prefixes, plain keys, keys holding a hash tag of
// their own, braces anywhere, empty tags, bytes of any value.
func TestSlotIsClusterKeySlot(t *testing.T) {
	c := redis.NewClient(&redis.Options{Addr: testserver.StartRedisCluster(t).Addr})
	t.Cleanup(func() { c.Close() })
	rng := rand.New(rand.NewPCG(5, 6))
	st := &Store{prefix: "myapp:"}
	pieces := []string{"{", "}", "{}", "api:", "user", ":", "second", "day", "\x00", "\xff", "é"}
	var names []string
	for i := range 2000 {
		var key string
		for range rng.IntN(8) {
			if rng.IntN(3) == 0 {
				key += fmt.Sprint(rng.IntN(100000))
			} else {
				key += pieces[rng.IntN(len(pieces))]
			}
		}
		names = append(names, key)
		if i%2 == 0 {
			names = append(names, st.Key(key))
		}
	}
	pipe := c.Pipeline()
	cmds := make([]*redis.IntCmd, len(names))
	for i, name := range names {
		cmds[i] = pipe.ClusterKeySlot(t.Context(), name)
	}
	_, err := pipe.Exec(t.Context())
	require.NoError(t, err)
	for i, name := range names {
		require.Equal(t, cmds[i].Val(), int64(slot(name)), "name %q", name)
	}
}
