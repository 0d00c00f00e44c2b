package redisstore_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/sluice-go/sluice/engine"
	"github.com/sluice-go/sluice/internal/testserver"
)

// TestClusterNeedsAClusterClient pins what the docs say of go-redis's
// clients on a Cluster of three masters: a universal client given one
// address is a plain client, whose decisions on the other masters' slots
// fail with MOVED; given IsClusterMode, or several addresses, it is a
// Cluster client, and so is NewClusterClient, on which every decision
// succeeds.
func TestClusterNeedsAClusterClient(t *testing.T) {
	cluster := testserver.StartRedisClusterWithReplicas(t)
	one := cluster.Nodes[0].Addr
	p := engine.Params{Kind: engine.KindGCRA, Limit: 5, Interval: int64(time.Second)}
	allow := engine.Op{Verb: engine.VerbAllow, Cost: 1}
	for _, tc := range []struct {
		name    string
		client  redis.UniversalClient
		cluster bool
	}{
		{"UniversalOneAddress", redis.NewUniversalClient(&redis.UniversalOptions{Addrs: []string{one}}), false},
		{"UniversalIsClusterMode", redis.NewUniversalClient(&redis.UniversalOptions{Addrs: []string{one}, IsClusterMode: true}), true},
		{"UniversalAddresses", redis.NewUniversalClient(&redis.UniversalOptions{Addrs: cluster.Addrs()}), true},
		{"ClusterClient", redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{one}}), true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Cleanup(func() { tc.client.Close() })
			st := newStore(t, tc.client)
			moved := 0
			for i := range 30 { // keys on every master
				_, err := st.Apply(t.Context(), fmt.Sprint("k", i), &p, allow)
				if err != nil {
					require.ErrorContains(t, err, "MOVED")
					moved++
				}
			}
			if tc.cluster {
				require.Zero(t, moved)
			} else {
				require.Positive(t, moved, "a plain client cannot follow the slots")
			}
		})
	}
}
