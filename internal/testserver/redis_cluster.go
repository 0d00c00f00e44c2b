package testserver

import (
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"
)

// ClusterNodeTimeout is the cluster-node-timeout of the clusters that
// [StartRedisClusterWithReplicas] starts: a master that does not answer
// for this long is failed over to its replica. Redis's default is 15 s;
// a second keeps failover tests short, and a replica takes over about
// 1.5 to 3 s after its master dies (the timeout, the spread of the news,
// then the replica's election delay of 0.5 to 1 s).
const ClusterNodeTimeout = time.Second

// RedisCluster is a Redis Cluster of three masters, each with one replica,
// started by [StartRedisClusterWithReplicas].
type RedisCluster struct {
	// Nodes are the cluster's six servers: the masters at start, serving
	// the slots 0-5460, 5461-10922 and 10923-16383, then their replicas,
	// Nodes[i+3] replicating Nodes[i].
	Nodes []*Redis
}

// StartRedisClusterWithReplicas starts a Redis Cluster of three masters
// and three replicas for t, formed with the servers' own commands (CLUSTER
// ADDSLOTSRANGE, MEET and REPLICATE), and returns once every node sees the
// whole cluster up and every replica is in sync. Each node is a
// redis-server as [StartRedis] starts it, with cluster-node-timeout set
// to [ClusterNodeTimeout] (longer while the cluster forms, so that a
// loaded machine cannot lose a handshake) and a replica's right to take
// over never expiring (cluster-replica-validity-factor 0). Every node is
// stopped when t ends.
//
// It skips t when SLUICE_REDIS_ADDR is set, and when redis-server is not
// installed, except under CI=true, where that fails t.
func StartRedisClusterWithReplicas(t testing.TB) *RedisCluster {
	t.Helper()
	if os.Getenv("SLUICE_REDIS_ADDR") != "" {
		t.Skip("testserver: a Redis Cluster needs servers of its own, not SLUICE_REDIS_ADDR")
	}
	c := startClusterNodes(t)
	c.form(t)
	return c
}

// startClusterNodes starts the six nodes of a cluster, not yet formed.
func startClusterNodes(t testing.TB) *RedisCluster {
	t.Helper()
	c := &RedisCluster{}
	for range 6 {
		r := newRedis(t)
		r.config = []string{
			"--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf",
			"--cluster-node-timeout", strconv.FormatInt(ClusterNodeTimeout.Milliseconds(), 10),
			"--cluster-replica-validity-factor", "0",
			"--cluster-allow-replica-migration", "no",
			// A replica's first sync starts at once, and its master counts
			// it (for WAIT) as soon as the sync ends: after a diskless
			// sync, only at the replica's first acknowledgement, up to a
			// second later.
			"--repl-diskless-sync", "no",
		}
		r.Start(t)
		c.Nodes = append(c.Nodes, r)
	}
	return c
}

// formingNodeTimeout is the cluster-node-timeout of the nodes while the
// cluster forms. A node forgets a handshake that has not completed within
// the node timeout, and a MEET is sent once: on a loaded machine, a second
// can pass before a node answers, and the node met would stay outside the
// cluster.
const formingNodeTimeout = 15 * time.Second

// form assigns the slots, introduces the nodes to each other, makes the
// last three replicas of the first three, and waits until every node sees
// the cluster as formed.
func (c *RedisCluster) form(t testing.TB) {
	t.Helper()
	c.formAround(t, func() {})
}

// formAround is form, calling meeting just before the nodes are introduced.
func (c *RedisCluster) formAround(t testing.TB, meeting func()) {
	t.Helper()
	ids := make([]string, len(c.Nodes))
	for i, n := range c.Nodes {
		ids[i] = mustString(t, n.Addr, "CLUSTER", "MYID")
	}
	c.setNodeTimeout(t, formingNodeTimeout)
	// Distinct config epochs, set while each node knows only itself, as
	// redis-cli --cluster create sets them: otherwise the masters start
	// with equal epochs and resolve the collision by gossip, and a master
	// killed before that is done leaves its replica an election to win
	// with an epoch the others may still dispute.
	for i, n := range c.Nodes {
		mustOK(t, n.Addr, "CLUSTER", "SET-CONFIG-EPOCH", strconv.Itoa(i+1))
	}
	for i, slots := range [][2]int{{0, 5460}, {5461, 10922}, {10923, 16383}} {
		mustOK(t, c.Nodes[i].Addr, "CLUSTER", "ADDSLOTSRANGE", strconv.Itoa(slots[0]), strconv.Itoa(slots[1]))
	}
	meeting()
	for _, n := range c.Nodes[1:] {
		host, port := splitAddr(n.Addr)
		mustOK(t, c.Nodes[0].Addr, "CLUSTER", "MEET", host, port)
	}
	// A node can replicate a master only once it knows it, by gossip.
	for i, replica := range c.Nodes[3:] {
		waitUntil(t, "node "+replica.Addr+" replicates "+c.Nodes[i].Addr, func() (bool, string) {
			reply, err := Do(replica.Addr, "CLUSTER", "REPLICATE", ids[i])
			return err == nil && reply == "OK", fmt.Sprint(reply, err)
		})
	}
	for _, n := range c.Nodes {
		waitUntil(t, "node "+n.Addr+" to know every node", func() (bool, string) {
			nodes, err := clusterNodes(n.Addr)
			if err != nil {
				return false, err.Error()
			}
			masters, replicas := 0, 0
			for _, cn := range nodes {
				switch {
				case cn.failing():
				case cn.master() && len(cn.slots) > 0:
					masters++
				case strings.Contains(cn.flags, "slave"):
					replicas++
				}
			}
			return masters == 3 && replicas == 3, fmt.Sprintf("%d masters, %d replicas", masters, replicas)
		})
	}
	// Every handshake is done. The timeout is set back before the
	// cluster comes up: a master waits min(timeout, 5 s) before it
	// declares the cluster up.
	c.setNodeTimeout(t, ClusterNodeTimeout)
	for _, n := range c.Nodes {
		n.waitFor(t, "CLUSTER INFO", func(info string) bool { return strings.Contains(info, "cluster_state:ok") })
	}
	for i, replica := range c.Nodes[3:] {
		WaitForSync(t, c.Nodes[i], replica)
	}
}

// setNodeTimeout sets every node's cluster-node-timeout.
func (c *RedisCluster) setNodeTimeout(t testing.TB, d time.Duration) {
	t.Helper()
	for _, n := range c.Nodes {
		mustOK(t, n.Addr, "CONFIG", "SET", "cluster-node-timeout", strconv.FormatInt(d.Milliseconds(), 10))
	}
}

// Addrs returns the addresses of every node, dead or alive.
func (c *RedisCluster) Addrs() []string {
	addrs := make([]string, len(c.Nodes))
	for i, n := range c.Nodes {
		addrs[i] = n.Addr
	}
	return addrs
}

// Slot returns the hash slot of a Redis key, as the cluster computes it.
func (c *RedisCluster) Slot(t testing.TB, key string) int {
	t.Helper()
	for _, n := range c.Nodes {
		if !n.running() {
			continue
		}
		reply, err := Do(n.Addr, "CLUSTER", "KEYSLOT", key)
		if err == nil {
			if slot, ok := reply.(int64); ok {
				return int(slot)
			}
		}
	}
	t.Fatalf("testserver: no node answered CLUSTER KEYSLOT %q", key)
	return 0
}

// MasterOf returns the node that serves slot as master now, as the first
// running node that answers sees it, or nil if no master that node does
// not think failing serves it (during a failover).
func (c *RedisCluster) MasterOf(t testing.TB, slot int) *Redis {
	t.Helper()
	for _, n := range c.Nodes {
		if !n.running() {
			continue
		}
		nodes, err := clusterNodes(n.Addr)
		if err != nil {
			continue
		}
		for _, cn := range nodes {
			if cn.master() && !cn.failing() && cn.serves(slot) {
				return c.node(t, cn.addr)
			}
		}
		return nil
	}
	t.Fatalf("testserver: no node of the cluster answers")
	return nil
}

// ReplicaOf returns the running node that replicates master, as master
// sees it, or nil if none does.
func (c *RedisCluster) ReplicaOf(t testing.TB, master *Redis) *Redis {
	t.Helper()
	nodes, err := clusterNodes(master.Addr)
	if err != nil {
		t.Fatalf("testserver: CLUSTER NODES on %s: %v", master.Addr, err)
	}
	var id string
	for _, cn := range nodes {
		if strings.Contains(cn.flags, "myself") {
			id = cn.id
		}
	}
	for _, cn := range nodes {
		if cn.masterID == id && !cn.failing() {
			if r := c.node(t, cn.addr); r.running() {
				return r
			}
		}
	}
	return nil
}

// WaitForFailover waits until a node other than old serves slot as
// master, as every running node sees it, and returns that node. It fails
// t if that takes longer than 30 s.
func (c *RedisCluster) WaitForFailover(t testing.TB, slot int, old *Redis) *Redis {
	t.Helper()
	var master *Redis
	waitUntil(t, fmt.Sprintf("a new master for slot %d", slot), func() (bool, string) {
		master = c.MasterOf(t, slot)
		if master == nil || master == old {
			return false, "no new master yet"
		}
		for _, n := range c.Nodes {
			if !n.running() {
				continue
			}
			info, err := send(n.Addr, "CLUSTER INFO")
			if err != nil || !strings.Contains(info, "cluster_state:ok") {
				return false, fmt.Sprintf("%s: %v", n.Addr, err)
			}
		}
		return true, ""
	}, c.describe)
	return master
}

// describe returns what every running node says of the cluster, for a
// failure message: when a failover does not come, the nodes' views show
// why (a master still thought alive, a replica not known as one).
func (c *RedisCluster) describe() string {
	var b strings.Builder
	for _, n := range c.Nodes {
		if !n.running() {
			fmt.Fprintf(&b, "\n%s: stopped", n.Addr)
			continue
		}
		nodes, err := send(n.Addr, "CLUSTER NODES")
		info, _ := send(n.Addr, "CLUSTER INFO")
		state, _, _ := strings.Cut(info, "\r\n")
		fmt.Fprintf(&b, "\n%s (%s) sees:\n%s%v", n.Addr, state, nodes, errOrEmpty(err))
	}
	return b.String()
}

func errOrEmpty(err error) any {
	if err == nil {
		return ""
	}
	return err
}

func (c *RedisCluster) node(t testing.TB, addr string) *Redis {
	t.Helper()
	for _, n := range c.Nodes {
		if n.Addr == addr {
			return n
		}
	}
	t.Fatalf("testserver: the cluster has no node %s", addr)
	return nil
}

// A clusterNode is one line of CLUSTER NODES.
type clusterNode struct {
	id, addr, flags, masterID string
	slots                     [][2]int
}

func (n *clusterNode) master() bool  { return strings.Contains(n.flags, "master") }
func (n *clusterNode) failing() bool { return strings.Contains(n.flags, "fail") }

func (n *clusterNode) serves(slot int) bool {
	for _, r := range n.slots {
		if r[0] <= slot && slot <= r[1] {
			return true
		}
	}
	return false
}

// clusterNodes returns the cluster as the node at addr sees it.
func clusterNodes(addr string) ([]clusterNode, error) {
	reply, err := send(addr, "CLUSTER NODES")
	if err != nil {
		return nil, err
	}
	var nodes []clusterNode
	for line := range strings.Lines(reply) {
		f := strings.Fields(line)
		if len(f) < 8 {
			continue
		}
		// The address is "ip:port@cport", possibly followed by ",hostname".
		a, _, _ := strings.Cut(f[1], "@")
		n := clusterNode{id: f[0], addr: a, flags: f[2], masterID: f[3]}
		for _, s := range f[8:] {
			if strings.HasPrefix(s, "[") { // a slot being migrated
				continue
			}
			lo, hi, isRange := strings.Cut(s, "-")
			if !isRange {
				hi = lo
			}
			l, err1 := strconv.Atoi(lo)
			h, err2 := strconv.Atoi(hi)
			if err1 != nil || err2 != nil {
				return nil, fmt.Errorf("CLUSTER NODES on %s: bad slots %q", addr, s)
			}
			n.slots = append(n.slots, [2]int{l, h})
		}
		nodes = append(nodes, n)
	}
	return nodes, nil
}

// WaitForSync waits until replica has finished its sync with master and
// master counts it online, as WAIT does. It fails t after 30 s.
func WaitForSync(t testing.TB, master, replica *Redis) {
	t.Helper()
	waitUntil(t, "replica "+replica.Addr+" in sync", func() (bool, string) {
		info, err := send(replica.Addr, "INFO replication")
		return err == nil && strings.Contains(info, "master_link_status:up") &&
			strings.Contains(info, "master_sync_in_progress:0"), fmt.Sprint(info, err)
	})
	host, port := splitAddr(replica.Addr)
	online := fmt.Sprintf("ip=%s,port=%s,state=online,", host, port)
	waitUntil(t, "master "+master.Addr+" to count replica "+replica.Addr+" online", func() (bool, string) {
		info, err := send(master.Addr, "INFO replication")
		return err == nil && strings.Contains(info, online), fmt.Sprint(info, err)
	})
}

// waitUntil polls done every 10 ms until it reports true, or fails t,
// with what done said last, after redisReady.
func waitUntil(t testing.TB, what string, done func() (bool, string), explain ...func() string) {
	t.Helper()
	deadline := time.Now().Add(redisReady)
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		ok, last := done()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			for _, e := range explain {
				last += e()
			}
			t.Fatalf("testserver: waiting for %s: %s", what, last)
		}
		<-tick.C
	}
}

// mustOK runs a command that answers OK, or fails t.
func mustOK(t testing.TB, addr string, args ...string) {
	t.Helper()
	if reply := mustString(t, addr, args...); reply != "OK" {
		t.Fatalf("testserver: %v on %s: %q", args, addr, reply)
	}
}

// mustString runs a command that answers a string and returns it, or
// fails t.
func mustString(t testing.TB, addr string, args ...string) string {
	t.Helper()
	reply, err := Do(addr, args...)
	s, ok := reply.(string)
	if err != nil || !ok {
		t.Fatalf("testserver: %v on %s: %v, %v", args, addr, reply, err)
	}
	return s
}

func splitAddr(addr string) (host, port string) {
	host, port, _ = net.SplitHostPort(addr)
	return host, port
}
