package pgstore_test

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

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/sluice-go/sluice"
	"github.com/sluice-go/sluice/internal/testserver"
	"github.com/sluice-go/sluice/pgstore"
)

// The tests across processes run the test binary again as the other
// processes, in a helper mode that the environment selects: TestMain runs
// the helper instead of the tests.
const (
	helperMode  = "SLUICE_PGSTORE_HELPER" // "holders" or "keeper"
	helperURL   = "SLUICE_PGSTORE_HELPER_URL"
	helperTable = "SLUICE_PGSTORE_HELPER_TABLE"
	helperOut   = "SLUICE_PGSTORE_HELPER_OUT" // the holders' record
)

func TestMain(m *testing.M) {
	if mode := os.Getenv(helperMode); mode != "" {
		if err := runHelper(mode); err != nil {
			fmt.Fprintln(os.Stderr, "helper:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// The holders: holderProcesses processes of holderGoroutines goroutines,
// each taking holderRounds leases of a limit of holderLimit in turn.
const (
	holderProcesses  = 3
	holderGoroutines = 4
	holderRounds     = 10
	holderLimit      = 2
	holderKey        = "shared"
	// holderWork is how long each holds its lease: the work a holder does
	// with it, long enough that the holders queue for the slots.
	holderWork = 2 * time.Millisecond
)

// keeperTTL is the time to live of the keeper's lease, and keeperSlack
// how much later than its expiry the test requires the slot to come back:
// a waiter sleeps until the expiry its denial gave (the database's clock),
// then takes a round trip or two; a second covers the lateness of its
// timer and of those round trips on a loaded machine, with the race
// detector on, and is far less than what an expiry missed would cost, a
// poll of an hour.
const (
	keeperTTL   = 2 * time.Second
	keeperSlack = time.Second
	keeperKey   = "kept"
)

// runHelper runs the helper mode, connected to the table the environment
// names.
func runHelper(mode string) error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	pool, err := pgxpool.New(ctx, os.Getenv(helperURL))
	if err != nil {
		return err
	}
	defer pool.Close()
	st, err := pgstore.New(pool, pgstore.WithTable(os.Getenv(helperTable)))
	if err != nil {
		return err
	}
	defer st.Close()
	switch mode {
	case "holders":
		return hold(ctx, st, os.Getenv(helperOut))
	case "keeper":
		return keep(ctx, st)
	}
	return fmt.Errorf("unknown mode %q", mode)
}

// hold runs the holders of one process: each goroutine acquires a lease,
// records its start, works, records its end, releases, and appends the
// interval, "start end" in Unix ns, to the file at out.
func hold(ctx context.Context, st *pgstore.Store, out string) error {
	lim, err := sluice.NewConcurrencyLimit(holderLimit, time.Minute, sluice.WithStore(st), sluice.WithLeasePoll(time.Hour))
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
	for range holderGoroutines {
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
	for range holderRounds {
		lease, err := lim.Acquire(ctx, holderKey, 1)
		if err != nil {
			return err
		}
		start := time.Now().UnixNano()
		time.Sleep(holderWork) // the work, not a wait for anything
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

// keep takes the keeper's lease, writes its identity (Decision.At, its
// expiry on the database's clock) to stdout, and holds it until stdin
// closes or the process is killed.
func keep(ctx context.Context, st *pgstore.Store) error {
	lim, err := sluice.NewConcurrencyLimit(1, keeperTTL, sluice.WithStore(st))
	if err != nil {
		return err
	}
	lease, err := lim.TryAcquire(ctx, keeperKey, 1)
	if err != nil {
		return err
	}
	if !lease.Allowed {
		return errors.New("the keeper's slot is taken")
	}
	fmt.Printf("held %d\n", lease.At)
	_, err = io.Copy(io.Discard, os.Stdin)
	return err
}

// helper returns the command that runs the test binary in mode, on table.
func helper(t *testing.T, mode, url, table string, env ...string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), helperMode+"="+mode, helperURL+"="+url, helperTable+"="+table)
	cmd.Env = append(cmd.Env, env...)
	return cmd
}

// TestLeasesAcrossProcessesNeverExceedTheLimit pins the concurrency
// limit's guarantee across processes: 3 processes on one database, each
// with 4 goroutines taking 10 leases in turn (woken by releases alone:
// their polls last an hour), never hold more than the limit at once,
// counted by the holders themselves. Each records the interval from the
// moment it has its lease to the moment before it releases it, inside the
// lease's life, so that intervals that overlap are leases that did.
func TestLeasesAcrossProcessesNeverExceedTheLimit(t *testing.T) {
	url := testserver.StartPostgres(t).URL
	_, table := newStore(t, newPool(t, url, 2))
	dir := t.TempDir()
	cmds := make([]*exec.Cmd, holderProcesses)
	outputs := make([]bytes.Buffer, holderProcesses)
	for i := range cmds {
		cmds[i] = helper(t, "holders", url, table, helperOut+"="+filepath.Join(dir, fmt.Sprintf("holds-%d.txt", i)))
		cmds[i].Stdout, cmds[i].Stderr = &outputs[i], &outputs[i]
		require.NoError(t, cmds[i].Start())
	}
	for i, cmd := range cmds {
		require.NoError(t, cmd.Wait(), "process %d: %s", i, outputs[i].String())
	}

	// An event is a start (+1) or an end (-1) of a hold; at one instant,
	// starts come first, so that intervals that touch count as
	// overlapping.
	type event struct {
		at    int64
		delta int
	}
	var events []event
	for i := range cmds {
		file, err := os.ReadFile(filepath.Join(dir, fmt.Sprintf("holds-%d.txt", i)))
		require.NoError(t, err)
		lines := strings.Split(strings.TrimSpace(string(file)), "\n")
		require.Len(t, lines, holderGoroutines*holderRounds, "process %d's holds", i)
		for _, line := range lines {
			var start, end int64
			_, err := fmt.Sscan(line, &start, &end)
			require.NoError(t, err, line)
			require.LessOrEqual(t, start, end, line)
			events = append(events, event{start, +1}, event{end, -1})
		}
	}
	slices.SortFunc(events, func(a, b event) int {
		if c := cmp.Compare(a.at, b.at); c != 0 {
			return c
		}
		return b.delta - a.delta
	})
	held, most := 0, 0
	for _, e := range events {
		held += e.delta
		most = max(most, held)
		require.LessOrEqual(t, held, holderLimit, "leases held at once at %d ns", e.at)
	}
	t.Logf("%d holds in %d processes, at most %d at once (limit %d)", len(events)/2, holderProcesses, most, holderLimit)
}

// TestSlotOfAKilledHolderComesBackAtItsExpiry pins what a holder killed
// with SIGKILL costs: its lease holds the slot until it expires, and no
// longer than that and the stated slack; the waiter's lease is granted no
// sooner than the expiry (both instants on the database's clock, as the
// store decides them).
func TestSlotOfAKilledHolderComesBackAtItsExpiry(t *testing.T) {
	url := testserver.StartPostgres(t).URL
	st, table := newStore(t, newPool(t, url, 2))
	keeper := helper(t, "keeper", url, table)
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
		// It ended without its lease: what it said is whole once it has.
		t.Fatalf("keeper: %v, %v: %s", err, keeper.Wait(), stderr.String())
	}
	kept, err := strconv.ParseInt(strings.TrimPrefix(strings.TrimSpace(line), "held "), 10, 64)
	require.NoError(t, err, line)
	require.NoError(t, keeper.Process.Kill()) // SIGKILL
	require.ErrorContains(t, keeper.Wait(), "killed")

	lim, err := sluice.NewConcurrencyLimit(1, keeperTTL, sluice.WithStore(st), sluice.WithLeasePoll(time.Hour))
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), keeperTTL+keeperSlack)
	defer cancel()
	lease, err := lim.Acquire(ctx, keeperKey, 1)
	require.NoError(t, err, "the slot came back within the time to live and %v", keeperSlack)
	require.True(t, lease.Allowed)
	// A lease expires at its grant plus the time to live, and the key's
	// expiries only grow: this one was granted at its At less the time
	// to live, at the killed one's expiry or later.
	require.GreaterOrEqual(t, lease.At-int64(keeperTTL), kept, "granted before the killed holder's lease expired")
}
