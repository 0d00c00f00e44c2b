package testserver_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sluice-go/sluice/internal/testserver"
)

// TestSentinelFailsOverAKilledMaster starts a master, two replicas and
// three Sentinels, kills the master, and finds a replica promoted.
func TestSentinelFailsOverAKilledMaster(t *testing.T) {
	s := testserver.StartRedisSentinel(t, 2)
	master := s.Master(t)
	require.Equal(t, s.Nodes[0], master)

	master.Stop(t)
	start := time.Now()
	promoted := s.WaitForFailover(t, master)
	require.Contains(t, s.Nodes[1:], promoted)
	t.Logf("failover took %v", time.Since(start))
}
