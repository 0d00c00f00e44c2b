package redisstore

import (
	"testing"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/sluice-go/sluice/internal/testserver"
)

// TestLoadOnTheKeysMasterThenEverywhere loads the library into a Cluster
// whose masters hold none: first on the master of a key's slot alone, as
// for a call that found it missing, then on every master, as for a call
// that found it missing again, each node once however many calls ask.
func TestLoadOnTheKeysMasterThenEverywhere(t *testing.T) {
	cluster := testserver.StartRedisClusterWithReplicas(t)
	c := redis.NewClusterClient(&redis.ClusterOptions{Addrs: cluster.Addrs()})
	t.Cleanup(func() { c.Close() })
	st := &Store{client: c}
	ctx := t.Context()
	holds := func(addr string) bool {
		reply, err := testserver.Do(addr, "FUNCTION", "LIST", "LIBRARYNAME", lib.name)
		require.NoError(t, err)
		return len(reply.([]any)) == 1
	}
	masters := cluster.Nodes[:3]
	for _, m := range masters {
		_, err := testserver.Do(m.Addr, "FUNCTION", "FLUSH")
		require.NoError(t, err)
	}
	name := st.Key("k")
	keys := cluster.MasterOf(t, cluster.Slot(t, name))
	done := loads{}
	for range 2 {
		require.NoError(t, st.load(ctx, done, name, false))
	}
	require.Len(t, done, 1, "one load")
	for _, m := range masters {
		require.Equal(t, m == keys, holds(m.Addr), "%s holds the library iff it serves the key", m.Addr)
	}
	for range 2 {
		require.NoError(t, st.load(ctx, done, name, true))
	}
	require.Len(t, done, 2, "one load more, on every master")
	for _, m := range masters {
		require.True(t, holds(m.Addr), "%s holds the library", m.Addr)
	}
}
