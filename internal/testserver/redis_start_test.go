package testserver

import (
	"net"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestRedisStartMovesAClusterNodeOffATakenPort gives a Cluster node a
// port whose bus port (10000 higher) cannot be had, as FreePort may: the
// node's first start moves it to another free port, where it serves.
func TestRedisStartMovesAClusterNodeOffATakenPort(t *testing.T) {
	for _, tc := range []struct {
		name string
		port func(t *testing.T) int
	}{
		{"bus port taken", func(t *testing.T) int {
			bus, err := net.Listen("tcp", "127.0.0.1:0")
			require.NoError(t, err)
			t.Cleanup(func() { bus.Close() })
			return bus.Addr().(*net.TCPAddr).Port - 10000
		}},
		{"bus port beyond 65535", func(t *testing.T) int {
			for port := 65535 - 10000 + 1; port < 65535; port++ {
				if l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port))); err == nil {
					l.Close()
					return port
				}
			}
			t.Fatal("no free port above 55535")
			return 0
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newRedis(t)
			r.cluster = true
			r.config = []string{"--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf"}
			first := net.JoinHostPort("127.0.0.1", strconv.Itoa(tc.port(t)))
			r.Addr = first
			r.Start(t)
			require.NotEqual(t, first, r.Addr)
			reply, err := Do(r.Addr, "PING")
			require.NoError(t, err)
			require.Equal(t, "PONG", reply)
		})
	}
}
