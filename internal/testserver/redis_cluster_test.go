package testserver_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sluice-go/sluice/internal/testserver"
)

// TestClusterFailsOverAKilledMaster forms the cluster, kills the master
// of a slot, and finds its replica serving the slot.
func TestClusterFailsOverAKilledMaster(t *testing.T) {
	c := testserver.StartRedisClusterWithReplicas(t)
	slot := c.Slot(t, "{user:1}")
	master := c.MasterOf(t, slot)
	require.NotNil(t, master)
	replica := c.ReplicaOf(t, master)
	require.NotNil(t, replica)
	require.NotEqual(t, master, replica)

	master.Stop(t)
	start := time.Now()
	require.Equal(t, replica, c.WaitForFailover(t, slot, master))
	t.Logf("failover took %v", time.Since(start))
}
