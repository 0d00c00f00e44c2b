package testserver

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// Redis is a redis-server started for a test by [StartRedis].
type Redis struct {
	// Addr is the server's address, "127.0.0.1:port".
	Addr string

	bin     string // the redis-server binary; "" for SLUICE_REDIS_ADDR
	dir     string // the server's working directory
	cluster bool   // a one-node Redis Cluster
	formed  bool   // the cluster's node owns its slots (kept in nodes.conf)

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
	return startRedis(t, false)
}

// StartRedisCluster is [StartRedis] for a Redis Cluster of one node, which
// serves every slot: enough to run commands through a cluster client. It
// skips t when SLUICE_REDIS_ADDR is set.
func StartRedisCluster(t testing.TB) *Redis {
	t.Helper()
	if os.Getenv("SLUICE_REDIS_ADDR") != "" {
		t.Skip("testserver: a Redis Cluster needs a server of its own, not SLUICE_REDIS_ADDR")
	}
	return startRedis(t, true)
}

func startRedis(t testing.TB, cluster bool) *Redis {
	t.Helper()
	bin := redisBin()
	if bin == "" {
		Missing(t, "redis-server", "apt-get install -y redis-server")
	}
	r := &Redis{
		Addr:    net.JoinHostPort("127.0.0.1", strconv.Itoa(FreePort(t))),
		bin:     bin,
		dir:     t.TempDir(),
		cluster: cluster,
	}
	t.Cleanup(r.stop)
	r.Start(t)
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
func (r *Redis) Start(t testing.TB) {
	t.Helper()
	r.external(t)
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.proc != nil {
		return
	}
	_, port, _ := net.SplitHostPort(r.Addr)
	args := []string{
		"--bind", "127.0.0.1", "--port", port, "--dir", r.dir,
		"--save", "", "--appendonly", "no", "--daemonize", "no", "--logfile", "",
	}
	if r.cluster {
		args = append(args, "--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf")
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
	if err := waitForPing(r.Addr, r.exited); err != nil {
		r.kill()
		t.Fatalf("testserver: redis-server on %s: %v\noutput:\n%s", r.Addr, err, r.output.String())
	}
	if r.cluster {
		r.formCluster(t)
	}
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

// send sends one command in the inline protocol and returns its reply: a
// simple string, or a bulk string's contents.
func send(addr, command string) (string, error) {
	conn, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return "", err
	}
	defer conn.Close()
	if err := conn.SetDeadline(time.Now().Add(time.Second)); err != nil {
		return "", err
	}
	if _, err := conn.Write([]byte(command + "\r\n")); err != nil {
		return "", err
	}
	rd := bufio.NewReader(conn)
	line, err := rd.ReadString('\n')
	if err != nil {
		return "", err
	}
	line = strings.TrimSuffix(line, "\r\n")
	switch {
	case strings.HasPrefix(line, "+"):
		return line[1:], nil
	case strings.HasPrefix(line, "$"):
		n, err := strconv.Atoi(line[1:])
		if err != nil || n < 0 {
			return "", fmt.Errorf("bad bulk length %q", line)
		}
		buf := make([]byte, n+2) // and the closing CRLF
		if _, err := io.ReadFull(rd, buf); err != nil {
			return "", err
		}
		return string(buf[:n]), nil
	}
	return "", fmt.Errorf("reply %q", line)
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
