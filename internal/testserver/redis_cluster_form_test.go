package testserver

import (
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestClusterFormsAroundANodeThatAnswersLate freezes a master for twice
// ClusterNodeTimeout as the nodes are introduced, as a loaded machine may:
// its handshakes complete once it answers, and the cluster forms, with
// ClusterNodeTimeout in force afterwards.
func TestClusterFormsAroundANodeThatAnswersLate(t *testing.T) {
	c := startClusterNodes(t)
	late := c.Nodes[1]
	c.formAround(t, func() {
		late.Pause(t)
		time.AfterFunc(2*ClusterNodeTimeout, func() {
			late.mu.Lock()
			defer late.mu.Unlock()
			if late.proc != nil { // not killed by a failed test's end
				late.proc.Signal(syscall.SIGCONT)
			}
		})
	})
	for _, n := range c.Nodes {
		reply, err := Do(n.Addr, "CONFIG", "GET", "cluster-node-timeout")
		require.NoError(t, err)
		require.Equal(t, []any{"cluster-node-timeout", "1000"}, reply)
	}
	require.Equal(t, late, c.MasterOf(t, 5461))
}
