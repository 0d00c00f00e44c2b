package testserver

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// SentinelDownAfter is the down-after-milliseconds and failover-timeout
// of the Sentinels that [StartRedisSentinel] starts: a master that does
// not answer for this long is failed over to a replica. Redis's defaults
// are 30 s and 3 min; a second keeps failover tests short, and a replica
// takes over about 2 to 4 s after its master dies (the timeout, the
// Sentinels' agreement and election, then the promotion).
const SentinelDownAfter = time.Second

// RedisSentinel is a master, its replicas and three Sentinels watching
// them, started by [StartRedisSentinel].
type RedisSentinel struct {
	// MasterName is the name the Sentinels know the master by.
	MasterName string
	// Sentinels are the three Sentinels.
	Sentinels []*Redis
	// Nodes are the data servers: the master at start, then its replicas.
	Nodes []*Redis
}

// StartRedisSentinel starts for t a master with the given number of
// replicas (at least one) and three Sentinels (redis-server --sentinel)
// watching it with a quorum of two, each server as [StartRedis] starts
// it, and returns once every replica is in sync and every Sentinel knows
// the replicas and the other Sentinels, so that a failover can be agreed.
// The Sentinels' down-after-milliseconds and failover-timeout are
// [SentinelDownAfter]. Everything is stopped when t ends.
//
// It skips t when SLUICE_REDIS_ADDR is set, and when redis-server is not
// installed, except under CI=true, where that fails t.
func StartRedisSentinel(t testing.TB, replicas int) *RedisSentinel {
	t.Helper()
	if os.Getenv("SLUICE_REDIS_ADDR") != "" {
		t.Skip("testserver: Sentinel needs servers of its own, not SLUICE_REDIS_ADDR")
	}
	if replicas < 1 {
		t.Fatalf("testserver: Sentinel needs a replica to fail over to, not %d", replicas)
	}
	s := &RedisSentinel{MasterName: "sluice", Nodes: startReplicated(t, replicas)}
	host, port := splitAddr(s.Nodes[0].Addr)
	ms := strconv.FormatInt(SentinelDownAfter.Milliseconds(), 10)
	conf := strings.Join([]string{
		"sentinel monitor " + s.MasterName + " " + host + " " + port + " 2",
		"sentinel down-after-milliseconds " + s.MasterName + " " + ms,
		"sentinel failover-timeout " + s.MasterName + " " + ms,
		"",
	}, "\n")
	for range 3 {
		r := newRedis(t)
		// Sentinel rewrites its configuration file as it learns.
		r.conf = filepath.Join(r.dir, "sentinel.conf")
		if err := os.WriteFile(r.conf, []byte(conf), 0o600); err != nil {
			t.Fatalf("testserver: %v", err)
		}
		r.config = []string{"--sentinel"}
		r.Start(t)
		s.Sentinels = append(s.Sentinels, r)
	}
	// Sentinels find the replicas in the master's INFO, and each other by
	// its hello channel, every 2 s.
	want := fmt.Sprintf("status=ok,address=%s,slaves=%d,sentinels=3", s.Nodes[0].Addr, replicas)
	for _, sen := range s.Sentinels {
		waitUntil(t, "Sentinel "+sen.Addr+" to know the others", func() (bool, string) {
			info, err := send(sen.Addr, "INFO sentinel")
			return err == nil && strings.Contains(info, want), fmt.Sprint(info, err)
		})
	}
	return s
}

// SentinelAddrs returns the Sentinels' addresses.
func (s *RedisSentinel) SentinelAddrs() []string {
	addrs := make([]string, len(s.Sentinels))
	for i, sen := range s.Sentinels {
		addrs[i] = sen.Addr
	}
	return addrs
}

// StartRedisWithReplicas starts for t a master and the given number of
// replicas of it, each as [StartRedis] starts it, and returns them, the
// master first, once every replica is in sync. They are stopped when t
// ends.
//
// It skips t when SLUICE_REDIS_ADDR is set, and when redis-server is not
// installed, except under CI=true, where that fails t.
func StartRedisWithReplicas(t testing.TB, replicas int) []*Redis {
	t.Helper()
	if os.Getenv("SLUICE_REDIS_ADDR") != "" {
		t.Skip("testserver: replication needs servers of its own, not SLUICE_REDIS_ADDR")
	}
	return startReplicated(t, replicas)
}

func startReplicated(t testing.TB, replicas int) []*Redis {
	t.Helper()
	var nodes []*Redis
	for i := range 1 + replicas {
		r := newRedis(t)
		// A replica's first sync starts at once, and its master counts
		// it (for WAIT) as soon as the sync ends: after a diskless sync,
		// only at the replica's first acknowledgement, up to a second
		// later.
		r.config = []string{"--repl-diskless-sync", "no"}
		if i > 0 {
			host, port := splitAddr(nodes[0].Addr)
			r.config = append(r.config, "--replicaof", host, port)
		}
		r.Start(t)
		nodes = append(nodes, r)
	}
	for _, replica := range nodes[1:] {
		WaitForSync(t, nodes[0], replica)
	}
	return nodes
}

// Master returns the node that the first Sentinel to answer names as the
// master.
func (s *RedisSentinel) Master(t testing.TB) *Redis {
	t.Helper()
	for _, sen := range s.Sentinels {
		if !sen.running() {
			continue
		}
		reply, err := Do(sen.Addr, "SENTINEL", "GET-MASTER-ADDR-BY-NAME", s.MasterName)
		a, ok := reply.([]any)
		if err != nil || !ok || len(a) != 2 {
			continue
		}
		host, _ := a[0].(string)
		port, _ := a[1].(string)
		addr := host + ":" + port
		for _, n := range s.Nodes {
			if n.Addr == addr {
				return n
			}
		}
		t.Fatalf("testserver: Sentinel %s names an unknown master %s", sen.Addr, addr)
	}
	t.Fatalf("testserver: no Sentinel answers")
	return nil
}

// WaitForFailover waits until every Sentinel names a master other than
// old and that master reports the role of master, and returns it. It fails
// t if that takes longer than 30 s.
func (s *RedisSentinel) WaitForFailover(t testing.TB, old *Redis) *Redis {
	t.Helper()
	var master *Redis
	waitUntil(t, "a new master", func() (bool, string) {
		master = s.Master(t)
		if master == old {
			return false, "the Sentinels name the old master"
		}
		for _, sen := range s.Sentinels {
			reply, err := Do(sen.Addr, "SENTINEL", "GET-MASTER-ADDR-BY-NAME", s.MasterName)
			if a, ok := reply.([]any); err != nil || !ok || len(a) != 2 || fmt.Sprintf("%s:%s", a[0], a[1]) != master.Addr {
				return false, fmt.Sprintf("Sentinel %s names %v, %v", sen.Addr, reply, err)
			}
		}
		info, err := send(master.Addr, "INFO replication")
		return err == nil && strings.Contains(info, "role:master"), fmt.Sprint(info, err)
	})
	return master
}
