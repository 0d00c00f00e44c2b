// Package leaseproc proves a concurrency limit across processes, on any
// store that processes share: it runs the test binary again as holder
// processes, which count their own leases, and as a keeper, which takes
// leases and is killed with SIGKILL while it holds them. The Redis and
// PostgreSQL stores' tests use it.
//
// A store's test package calls [Main] from its TestMain, with a function
// that opens the store from the environment its tests pass on. The
// package also holds what every store's lease tests and benchmarks share:
// [Denials], [Receive], [Handoffs] and [TakeAndRelease].
package leaseproc

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sluice-go/sluice"
	"github.com/sluice-go/sluice/engine"
)

// The environment of a helper process.
const (
	envMode  = "SLUICE_LEASEPROC_MODE"  // "holders", "waiters" or "keeper"
	envOut   = "SLUICE_LEASEPROC_OUT"   // the holders' record
	envSlots = "SLUICE_LEASEPROC_SLOTS" // the keeper's leases
)

// The holders: Processes processes of Goroutines goroutines, each taking
// Rounds leases in turn of a limit of Limit on the key HoldersKey.
const (
	Processes  = 3
	Goroutines = 4
	Rounds     = 10
	Limit      = 2
	HoldersKey = "shared"
	// work is how long each holds its lease: the work a holder does with
	// it, long enough that the holders queue for the slots.
	work = 2 * time.Millisecond
)

// KeeperTTL is the time to live of the keeper's leases, on the key
// KeeperKey, and KeeperSlack how much later than their expiry a test
// requires their slots back. A waiter sleeps until the expiry its denial
// gave, on the clock the store decides by, then asks again: a round trip
// or two. On one host the store's clock and the processes' are one, so no
// skew enters; a second covers the lateness of the waiter's timer and of
// its round trips on a loaded machine with the race detector on, and is
// far less than what an expiry missed would cost: a lease poll of an hour.
const (
	KeeperTTL   = 2 * time.Second
	KeeperSlack = time.Second
	KeeperKey   = "kept"
)

// Main runs the helper the environment selects, on the store open opens,
// and exits; without one, it runs m's tests. Call it from TestMain.
func Main(m *testing.M, open func(ctx context.Context) (st engine.Store, close func(), err error)) {
	mode := os.Getenv(envMode)
	if mode == "" {
		os.Exit(m.Run())
	}
	if err := runHelper(mode, open); err != nil {
		fmt.Fprintln(os.Stderr, "helper:", err)
		os.Exit(1)
	}
	os.Exit(0)
}

func runHelper(mode string, open func(ctx context.Context) (engine.Store, func(), error)) error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	st, closeStore, err := open(ctx)
	if err != nil {
		return err
	}
	defer closeStore()
	switch mode {
	case "holders":
		return hold(ctx, st, os.Getenv(envOut))
	case "waiters":
		return waitInTurn(ctx, st)
	case "keeper":
		slots, err := strconv.Atoi(os.Getenv(envSlots))
		if err != nil {
			return err
		}
		return keep(ctx, st, slots)
	}
	return fmt.Errorf("unknown mode %q", mode)
}

// hold runs the holders of one process: each goroutine acquires a lease
// (woken by releases alone: its poll lasts an hour), records its start,
// works, records its end, releases, and appends the interval, "start end"
// in Unix ns, to the file at out.
func hold(ctx context.Context, st engine.Store, out string) error {
	lim, err := sluice.NewConcurrencyLimit(Limit, time.Minute, sluice.WithStore(st), sluice.WithLeasePoll(time.Hour))
	if err != nil {
		return err
	}
	f, err := os.OpenFile(out, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	defer f.Close()
	var mu sync.Mutex
	var errs []error
	var wg sync.WaitGroup
	for range Goroutines {
		wg.Go(func() {
			if err := holdRounds(ctx, lim, f); err != nil {
				mu.Lock()
				errs = append(errs, err)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}

// holdRounds is one holder's rounds.
func holdRounds(ctx context.Context, lim *sluice.Limiter, f *os.File) error {
	for range Rounds {
		lease, err := lim.Acquire(ctx, HoldersKey, 1)
		if err != nil {
			return err
		}
		start := time.Now().UnixNano()
		time.Sleep(work) // the work, not a wait for anything
		end := time.Now().UnixNano()
		if err := lease.Release(ctx); err != nil {
			return err
		}
		// One write per line: O_APPEND keeps lines whole.
		if _, err := fmt.Fprintf(f, "%d %d\n", start, end); err != nil {
			return err
		}
	}
	return nil
}

// keep takes slots leases of KeeperTTL on KeeperKey, writes their
// identities (Decision.At, each its expiry on the clock the store decides
// by) on one line of stdout, and holds them until stdin closes or the
// process is killed.
func keep(ctx context.Context, st engine.Store, slots int) error {
	lim, err := sluice.NewConcurrencyLimit(float64(slots), KeeperTTL, sluice.WithStore(st))
	if err != nil {
		return err
	}
	var ats []string
	for range slots {
		lease, err := lim.TryAcquire(ctx, KeeperKey, 1)
		if err != nil {
			return err
		}
		if !lease.Allowed {
			return errors.New("the keeper's slot is taken")
		}
		ats = append(ats, strconv.FormatInt(lease.At, 10))
	}
	fmt.Printf("held %s\n", strings.Join(ats, " "))
	_, err = io.Copy(io.Discard, os.Stdin)
	return err
}

// helper returns the command that runs the test binary in mode, with env
// added to the environment.
func helper(mode string, env []string) *exec.Cmd {
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(append(os.Environ(), envMode+"="+mode), env...)
	return cmd
}

// An Interval is a hold of a lease, as its holder saw it: from the moment
// it had the lease to the moment it stopped working with it, in Unix ns,
// inside the lease's life.
type Interval struct{ Start, End int64 }

// Holders runs Processes holder processes of the test binary, with env
// added to their environment (what their store opens), waits for them,
// and returns their holds. It fails t unless every process completed
// every acquisition. Timestamps are time.Now().UnixNano() in each
// process: one host, one clock.
func Holders(t *testing.T, env ...string) []Interval {
	t.Helper()
	dir := t.TempDir()
	out := func(i int) string { return filepath.Join(dir, fmt.Sprintf("holds-%d.txt", i)) }
	cmds := make([]*exec.Cmd, Processes)
	outputs := make([]bytes.Buffer, Processes)
	for i := range cmds {
		cmds[i] = helper("holders", append(env, envOut+"="+out(i)))
		cmds[i].Stdout, cmds[i].Stderr = &outputs[i], &outputs[i]
		require.NoError(t, cmds[i].Start())
	}
	for i, cmd := range cmds {
		require.NoError(t, cmd.Wait(), "process %d: %s", i, outputs[i].String())
	}
	var holds []Interval
	for i := range cmds {
		file, err := os.ReadFile(out(i))
		require.NoError(t, err)
		lines := strings.Split(strings.TrimSpace(string(file)), "\n")
		require.Len(t, lines, Goroutines*Rounds, "process %d's holds: every acquisition completed", i)
		for _, line := range lines {
			var h Interval
			_, err := fmt.Sscan(line, &h.Start, &h.End)
			require.NoError(t, err, line)
			require.LessOrEqual(t, h.Start, h.End, line)
			holds = append(holds, h)
		}
	}
	return holds
}

// MostAtOnce returns the most holds that overlap at one instant, and the
// first instant at which that many do. Holds that touch count as
// overlapping.
func MostAtOnce(holds []Interval) (most int, at int64) {
	// An event is a start (+1) or an end (-1) of a hold; at one instant,
	// starts come first.
	type event struct {
		at    int64
		delta int
	}
	events := make([]event, 0, 2*len(holds))
	for _, h := range holds {
		events = append(events, event{h.Start, +1}, event{h.End, -1})
	}
	slices.SortFunc(events, func(a, b event) int {
		if c := cmp.Compare(a.at, b.at); c != 0 {
			return c
		}
		return b.delta - a.delta
	})
	held := 0
	for _, e := range events {
		held += e.delta
		if held > most {
			most, at = held, e.at
		}
	}
	return most, at
}

// KillKeeper runs a keeper process of the test binary that takes slots
// leases, with env added to its environment, kills it with SIGKILL once
// it holds them, and returns their identities, each its expiry on the
// clock the store decides by.
func KillKeeper(t *testing.T, slots int, env ...string) []int64 {
	t.Helper()
	keeper := helper("keeper", append(env, envSlots+"="+strconv.Itoa(slots)))
	stdin, err := keeper.StdinPipe()
	require.NoError(t, err)
	defer stdin.Close()
	stdout, err := keeper.StdoutPipe()
	require.NoError(t, err)
	var stderr bytes.Buffer
	keeper.Stderr = &stderr
	require.NoError(t, keeper.Start())
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		// It ended without its leases: what it said is whole once it has.
		t.Fatalf("keeper: %v, %v: %s", err, keeper.Wait(), stderr.String())
	}
	var kept []int64
	for _, f := range strings.Fields(strings.TrimPrefix(line, "held ")) {
		at, err := strconv.ParseInt(f, 10, 64)
		require.NoError(t, err, line)
		kept = append(kept, at)
	}
	require.Len(t, kept, slots, line)
	require.NoError(t, keeper.Process.Kill()) // SIGKILL
	require.ErrorContains(t, keeper.Wait(), "killed")
	slices.Sort(kept)
	return kept
}
