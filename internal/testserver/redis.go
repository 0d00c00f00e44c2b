package testserver

import (
	"bytes"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// Redis is a redis-server started for a test by [StartRedis].
type Redis struct {
	// Addr is the server's address, "127.0.0.1:port".
	Addr string

	bin     string   // the redis-server binary; "" for SLUICE_REDIS_ADDR
	dir     string   // the server's working directory
	cluster bool     // a one-node Redis Cluster
	formed  bool     // the cluster's node owns its slots (kept in nodes.conf)
	started bool     // the server has run: Start keeps its port
	conf    string   // a configuration file given before the arguments, or ""
	config  []string // further configuration, as command-line arguments

	mu     sync.Mutex
	proc   *os.Process   // the running server, or nil
	exited chan struct{} // closed once proc has exited and been reaped
	output bytes.Buffer  // the server's log, complete once exited is closed
}

// redisReady bounds how long a starting server may take to answer PING.
const redisReady = 30 * time.Second

// StartRedis starts a redis-server for t and returns it: on 127.0.0.1, on
// a free port, with no persistence and its working directory in t's
// temporary directory. The server is stopped when t ends.
//
// If the environment variable SLUICE_REDIS_ADDR is set, it returns that
// server instead, which Stop and Start cannot restart: tests sharing it
// must keep to keys of their own. If redis-server is not installed, t is
// skipped or, under CI=true, fails.
func StartRedis(t testing.TB) *Redis {
	t.Helper()
	if addr := os.Getenv("SLUICE_REDIS_ADDR"); addr != "" {
		return &Redis{Addr: addr}
	}
	r := newRedis(t)
	r.Start(t)
	return r
}

// StartRedisCluster is [StartRedis] for a Redis Cluster of one node, which
// serves every slot: enough to run commands through a cluster client. It
// skips t when SLUICE_REDIS_ADDR is set.
func StartRedisCluster(t testing.TB) *Redis {
	t.Helper()
	if os.Getenv("SLUICE_REDIS_ADDR") != "" {
		t.Skip("testserver: a Redis Cluster needs a server of its own, not SLUICE_REDIS_ADDR")
	}
	r := newRedis(t)
	r.cluster = true
	r.config = []string{"--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf"}
	r.Start(t)
	return r
}

// newRedis returns a server, not yet started, on a free port, with a
// temporary directory of its own, and stops it when t ends. It skips or
// fails t if redis-server is not installed.
func newRedis(t testing.TB) *Redis {
	t.Helper()
	bin := redisBin()
	if bin == "" {
		Missing(t, "redis-server", "apt-get install -y redis-server")
	}
	r := &Redis{
		Addr: net.JoinHostPort("127.0.0.1", strconv.Itoa(FreePort(t))),
		bin:  bin,
		dir:  t.TempDir(),
	}
	t.Cleanup(r.stop)
	return r
}

// Stop stops the server at once, as a crash would (SIGKILL), and waits for
// it to exit. It skips t for a server given by SLUICE_REDIS_ADDR.
func (r *Redis) Stop(t testing.TB) {
	t.Helper()
	r.external(t)
	r.stop()
}

// Start starts the stopped server again, on the same port and empty, and
// returns once it answers PING (and, for a cluster, once the cluster is
// up). It skips t for a server given by SLUICE_REDIS_ADDR.
//
// A server's first start may find its port taken, since [FreePort] only
// saw it free: by another process, or for a Cluster node, whose bus
// listens 10000 ports higher, by another node (the bus port must also be
// at most 65535). A server that exits before answering PING on its first
// start is started again on another free port, up to three times.
func (r *Redis) Start(t testing.TB) {
	t.Helper()
	r.external(t)
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.proc != nil {
		return
	}
	for attempt := 1; ; attempt++ {
		err := r.launch(t)
		if err == nil {
			break
		}
		exited := false
		select {
		case <-r.exited:
			exited = true
		default:
		}
		r.kill()
		if r.started || !exited || attempt == 3 {
			t.Fatalf("testserver: redis-server on %s: %v\noutput:\n%s", r.Addr, err, r.output.String())
		}
		r.Addr = net.JoinHostPort("127.0.0.1", strconv.Itoa(FreePort(t)))
	}
	r.started = true
	if r.cluster {
		r.formCluster(t)
	}
}

// launch starts the server's process and waits until it answers PING.
func (r *Redis) launch(t testing.TB) error {
	t.Helper()
	_, port, _ := net.SplitHostPort(r.Addr)
	args := []string{
		"--bind", "127.0.0.1", "--port", port, "--dir", r.dir,
		"--save", "", "--appendonly", "no", "--daemonize", "no", "--logfile", "",
	}
	args = append(args, r.config...)
	if r.conf != "" {
		args = append([]string{r.conf}, args...)
	}
	cmd := exec.Command(r.bin, args...)
	cmd.Dir = r.dir
	r.output.Reset()
	cmd.Stdout, cmd.Stderr = &r.output, &r.output
	if err := cmd.Start(); err != nil {
		t.Fatalf("testserver: starting %s: %v", r.bin, err)
	}
	r.proc, r.exited = cmd.Process, make(chan struct{})
	go func(exited chan struct{}) {
		cmd.Wait()
		close(exited)
	}(r.exited)
	return waitForPing(r.Addr, r.exited)
}

// formCluster gives the node every slot, unless it has them from an
// earlier start, and waits until the cluster is up.
func (r *Redis) formCluster(t testing.TB) {
	t.Helper()
	if !r.formed {
		if reply, err := send(r.Addr, "CLUSTER ADDSLOTSRANGE 0 16383"); err != nil || reply != "OK" {
			t.Fatalf("testserver: assigning slots to %s: %q, %v", r.Addr, reply, err)
		}
		r.formed = true
	}
	r.waitFor(t, "CLUSTER INFO", func(reply string) bool { return strings.Contains(reply, "cluster_state:ok") })
}

// stop kills the server, if it runs, by its process ID.
func (r *Redis) stop() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.proc != nil {
		r.kill()
	}
}

// kill kills the running server and waits until it has been reaped.
func (r *Redis) kill() {
	r.proc.Kill()
	<-r.exited
	r.proc = nil
}

// Pause freezes the server's process (SIGSTOP) until [Redis.Resume]: its
// connections stay open but it answers nothing, as a server that hangs or
// is cut off by the network would. It skips t for a server given by
// SLUICE_REDIS_ADDR.
func (r *Redis) Pause(t testing.TB) {
	t.Helper()
	r.signal(t, syscall.SIGSTOP)
}

// Resume lets a paused server run again (SIGCONT).
func (r *Redis) Resume(t testing.TB) {
	t.Helper()
	r.signal(t, syscall.SIGCONT)
}

func (r *Redis) signal(t testing.TB, sig os.Signal) {
	t.Helper()
	r.external(t)
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.proc == nil {
		t.Fatalf("testserver: redis-server on %s is not running", r.Addr)
	}
	if err := r.proc.Signal(sig); err != nil {
		t.Fatalf("testserver: signalling redis-server on %s: %v", r.Addr, err)
	}
}

// running reports whether the server's process runs.
func (r *Redis) running() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.proc != nil
}

func (r *Redis) external(t testing.TB) {
	t.Helper()
	if r.bin == "" {
		t.Skip("testserver: cannot restart the server at SLUICE_REDIS_ADDR")
	}
}

// waitForPing polls addr until the server answers PING, exits, or takes
// longer than redisReady.
func waitForPing(addr string, exited <-chan struct{}) error {
	deadline := time.Now().Add(redisReady)
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		reply, err := send(addr, "PING")
		if err == nil && reply != "PONG" {
			err = fmt.Errorf("PING answered %q", reply)
		}
		if err == nil || time.Now().After(deadline) {
			return err
		}
		select {
		case <-exited:
			return fmt.Errorf("exited before answering PING (last attempt: %v)", err)
		case <-tick.C:
		}
	}
}

// waitFor polls the server with command until ready accepts its reply, or
// fails t after redisReady.
func (r *Redis) waitFor(t testing.TB, command string, ready func(reply string) bool) {
	t.Helper()
	deadline := time.Now().Add(redisReady)
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		reply, err := send(r.Addr, command)
		if err == nil && ready(reply) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("testserver: %s on %s: %q, %v", command, r.Addr, reply, err)
		}
		<-tick.C
	}
}

// redisBin returns the path of redis-server: from PATH, /usr/bin or
// /usr/sbin, or "" if there is none.
func redisBin() string {
	if p, err := exec.LookPath("redis-server"); err == nil {
		return p
	}
	for _, dir := range []string{"/usr/bin", "/usr/sbin"} {
		p := filepath.Join(dir, "redis-server")
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	return ""
}
