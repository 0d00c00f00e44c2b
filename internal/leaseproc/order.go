package leaseproc

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sluice-go/sluice"
	"github.com/sluice-go/sluice/engine"
)

// The line: OrderWaiters waiters, spread over Processes processes in
// turn, wait on OrderKey for the one slot that the test holds.
const (
	OrderWaiters = 12
	OrderKey     = "line"
)

// waitInTurn runs the waiters of one process, one per line "wait i" on
// stdin: waiter i waits for a lease of OrderKey (woken by the store
// alone: its poll lasts an hour), prints "joined i" once its first try
// was denied (it has its place in line), and, once served, "served i at"
// with its lease's identity, which grows with each lease the key grants,
// then holds the lease a moment and releases it.
func waitInTurn(ctx context.Context, st engine.Store) error {
	var mu sync.Mutex // one line of stdout at a time
	say := func(format string, args ...any) {
		mu.Lock()
		defer mu.Unlock()
		fmt.Printf(format+"\n", args...)
	}
	var wg sync.WaitGroup
	errs := make(chan error, OrderWaiters)
	in := bufio.NewScanner(os.Stdin)
	for in.Scan() {
		var i int
		if _, err := fmt.Sscanf(in.Text(), "wait %d", &i); err != nil {
			return err
		}
		joined := make(chan struct{})
		var once sync.Once
		lim, err := sluice.NewConcurrencyLimit(1, time.Minute, sluice.WithStore(st), sluice.WithLeasePoll(time.Hour),
			sluice.WithObserver(func(_ context.Context, e sluice.Event) {
				if e.Lease && e.Err == nil && !e.Decision.Allowed {
					once.Do(func() { close(joined) })
				}
			}))
		if err != nil {
			return err
		}
		wg.Go(func() {
			lease, err := lim.Acquire(ctx, OrderKey, 1)
			if err != nil {
				errs <- fmt.Errorf("waiter %d: %w", i, err)
				once.Do(func() { close(joined) })
				return
			}
			say("served %d %d", i, lease.At)
			time.Sleep(work) // the work, not a wait for anything
			if err := lease.Release(ctx); err != nil {
				errs <- fmt.Errorf("waiter %d: %w", i, err)
			}
		})
		select {
		case <-joined:
			say("joined %d", i)
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		return err
	}
	return in.Err()
}

// Arrivals is the order in which Order's waiters join the line: what
// Order returns for a store that serves them in arrival order.
func Arrivals() []int {
	order := make([]int, OrderWaiters)
	for i := range order {
		order[i] = i
	}
	return order
}

// Order proves that waiters in different processes are served in the
// order they came: it holds OrderKey's one slot through lim (a
// concurrency limit of 1 on the store the processes open), runs
// Processes waiter processes of the test binary, with env added to their
// environment, has OrderWaiters waiters join the line one after the
// other, each in the next process, releases the slot, and returns the
// waiters in the order the store granted them their leases.
func Order(t *testing.T, lim *sluice.Limiter, env ...string) []int {
	t.Helper()
	ctx := t.Context()
	held, err := lim.TryAcquire(ctx, OrderKey, 1)
	require.NoError(t, err)
	require.True(t, held.Allowed, "the test holds the slot")

	type process struct {
		stdin  io.WriteCloser
		lines  chan string
		stderr bytes.Buffer
	}
	procs := make([]*process, Processes)
	for i := range procs {
		p := &process{lines: make(chan string, 2*OrderWaiters)}
		cmd := helper("waiters", env)
		p.stdin, err = cmd.StdinPipe()
		require.NoError(t, err)
		stdout, err := cmd.StdoutPipe()
		require.NoError(t, err)
		cmd.Stderr = &p.stderr
		require.NoError(t, cmd.Start())
		go func() {
			out := bufio.NewScanner(stdout)
			for out.Scan() {
				p.lines <- out.Text()
			}
			close(p.lines)
		}()
		t.Cleanup(func() {
			p.stdin.Close()
			if err := cmd.Wait(); err != nil {
				t.Errorf("waiter process %d: %v: %s", i, err, p.stderr.String())
			}
		})
		procs[i] = p
	}
	var served []string
	next := func(p *process) string {
		for {
			select {
			case line, ok := <-p.lines:
				if !ok { // its stderr is reported once it is waited for
					t.Fatal("a waiter process ended before its waiters were served")
				}
				if strings.HasPrefix(line, "served ") {
					served = append(served, line)
					continue
				}
				return line
			case <-ctx.Done():
				t.Fatalf("no answer: %v", ctx.Err())
			}
		}
	}
	for i := range OrderWaiters {
		p := procs[i%Processes]
		_, err := fmt.Fprintf(p.stdin, "wait %d\n", i)
		require.NoError(t, err)
		require.Equal(t, fmt.Sprintf("joined %d", i), next(p), "waiter %d in line", i)
	}
	require.NoError(t, held.Release(ctx))
	for _, p := range procs {
		p.stdin.Close() // no more waiters: each process ends once its own are served
		for line := range p.lines {
			served = append(served, line)
		}
	}
	type grant struct {
		waiter int
		at     int64
	}
	grants := make([]grant, 0, OrderWaiters)
	for _, line := range served {
		var g grant
		_, err := fmt.Sscanf(line, "served %d %d", &g.waiter, &g.at)
		require.NoError(t, err, line)
		grants = append(grants, g)
	}
	require.Len(t, grants, OrderWaiters, "every waiter served")
	slices.SortFunc(grants, func(a, b grant) int { return cmp.Compare(a.at, b.at) })
	order := make([]int, len(grants))
	for i, g := range grants {
		order[i] = g.waiter
	}
	return order
}
