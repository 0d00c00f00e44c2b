package redisstore_test

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/sluice-go/sluice"
	"github.com/sluice-go/sluice/internal/testserver"
	"github.com/sluice-go/sluice/redisstore"
)

// staleChild is the environment variable that makes the test binary one
// of TestStoppedProcessDoesNotActOnItsStaleTurns's waiting processes: the
// Redis address, the key prefix, and when to start, in Unix nanoseconds.
const staleChild = "SLUICE_STALE_TURNS_CHILD"

const (
	staleInterval = 20 * time.Millisecond // GCRA: one call per interval, burst 1
	staleLateness = 50 * time.Millisecond // WithMaxLateness of the waiters
	staleRun      = 3500 * time.Millisecond
)

// TestStoppedProcessDoesNotActOnItsStaleTurns runs, on real time, three
// processes of 16 goroutines that Wait on one Redis key (GCRA 1 per 20
// ms, burst 1) and call as soon as Wait returns. One process is stopped
// (SIGSTOP) for 2 s, past the turns it booked, then continued (SIGCONT).
// Counted at the instants the calls are made, as the API on the other
// side sees them, no 400 ms holds more calls than the GCRA's bound for
// 400 ms plus the waiters' maximum lateness.
func TestStoppedProcessDoesNotActOnItsStaleTurns(t *testing.T) {
	if spec := os.Getenv(staleChild); spec != "" {
		runStaleChild(t, spec)
		return
	}
	srv := testserver.StartRedis(t)
	prefix := fmt.Sprintf("stale:%d:", time.Now().UnixNano())
	start := time.Now().Add(1500 * time.Millisecond) // every process has connected by then
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	procs := make([]*exec.Cmd, 3)
	outs := make([]bytes.Buffer, len(procs))
	for i := range procs {
		cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^TestStoppedProcessDoesNotActOnItsStaleTurns$", "-test.count=1")
		cmd.Env = append(os.Environ(), fmt.Sprintf("%s=%s,%s,%d", staleChild, srv.Addr, prefix, start.UnixNano()))
		cmd.Stdout, cmd.Stderr = &outs[i], &outs[i]
		require.NoError(t, cmd.Start())
		procs[i] = cmd
	}
	stopped := procs[0].Process
	time.Sleep(time.Until(start.Add(500 * time.Millisecond)))
	require.NoError(t, stopped.Signal(syscall.SIGSTOP))
	time.Sleep(2 * time.Second)
	require.NoError(t, stopped.Signal(syscall.SIGCONT))
	var acts []time.Duration
	for i, cmd := range procs {
		require.NoError(t, cmd.Wait(), "process %d:\n%s", i, outs[i].String())
		acts = append(acts, parseActs(t, &outs[i], start)...)
	}
	slices.Sort(acts)

	const window = 400 * time.Millisecond
	bound := 1 + int((window+staleLateness)/staleInterval)
	most, at := 0, time.Duration(0)
	for i, from := range acts {
		j, _ := slices.BinarySearch(acts, from+window)
		if j-i > most {
			most, at = j-i, from
		}
	}
	t.Logf("%d calls in %v from 3 processes, one stopped for 2 s: at most %d in any %v (from %v), bound %d",
		len(acts), staleRun, most, window, at, bound)
	require.Greater(t, len(acts), 100, "the waiters kept calling")
	require.LessOrEqual(t, most, bound)
}

// runStaleChild is one waiting process: 16 goroutines that Wait and call
// until the run ends, then print the instant of each call.
func runStaleChild(t *testing.T, spec string) {
	parts := strings.Split(spec, ",")
	require.Len(t, parts, 3)
	startNanos, err := strconv.ParseInt(parts[2], 10, 64)
	require.NoError(t, err)
	start := time.Unix(0, startNanos)
	c := redis.NewClient(&redis.Options{Addr: parts[0], ContextTimeoutEnabled: true})
	defer c.Close()
	st, err := redisstore.New(c, redisstore.WithPrefix(parts[1]))
	require.NoError(t, err)
	lim, err := sluice.NewGCRA(sluice.Per(1, staleInterval), 1, sluice.WithStore(st), sluice.WithMaxLateness(staleLateness))
	require.NoError(t, err)
	ctx, cancel := context.WithDeadline(context.Background(), start.Add(staleRun))
	defer cancel()
	require.NoError(t, c.Ping(ctx).Err())
	time.Sleep(time.Until(start))
	var (
		mu   sync.Mutex
		acts []int64
		wg   sync.WaitGroup
	)
	for range 16 {
		wg.Go(func() {
			for lim.Wait(ctx, "api", 1) == nil {
				now := time.Now().UnixNano() // the call
				mu.Lock()
				acts = append(acts, now)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	for _, a := range acts {
		fmt.Printf("act %d\n", a)
	}
}

// parseActs reads a waiting process's calls, as times since start.
func parseActs(t *testing.T, out *bytes.Buffer, start time.Time) []time.Duration {
	var acts []time.Duration
	sc := bufio.NewScanner(out)
	for sc.Scan() {
		if ns, ok := strings.CutPrefix(sc.Text(), "act "); ok {
			n, err := strconv.ParseInt(ns, 10, 64)
			require.NoError(t, err)
			acts = append(acts, time.Unix(0, n).Sub(start))
		}
	}
	return acts
}
