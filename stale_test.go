package sluice_test

import (
	"context"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/benbjohnson/clock"
	"github.com/stretchr/testify/require"

	"github.com/sluice-go/sluice"
)

// pausingClock is the clock of a process that can be stopped (SIGSTOP)
// and continued: a timer that fires while the process is stopped wakes
// its sleeper only once the process continues. Inside a synctest bubble
// its time is the bubble's.
type pausingClock struct {
	mu      sync.Mutex
	running chan struct{} // closed while the process runs
}

func newPausingClock() *pausingClock {
	c := &pausingClock{running: make(chan struct{})}
	close(c.running)
	return c
}

func (c *pausingClock) Now() time.Time { return time.Now() }

func (c *pausingClock) After(d time.Duration) <-chan time.Time {
	ch := make(chan time.Time, 1)
	go func() {
		<-time.After(d)
		c.mu.Lock()
		running := c.running
		c.mu.Unlock()
		<-running
		ch <- time.Now()
	}()
	return ch
}

func (c *pausingClock) stop() {
	c.mu.Lock()
	c.running = make(chan struct{})
	c.mu.Unlock()
}

func (c *pausingClock) cont() {
	c.mu.Lock()
	close(c.running)
	c.mu.Unlock()
}

// mostInAnyWindow returns the most of the sorted instants acts that lie
// in any window [t, t+d).
func mostInAnyWindow(acts []time.Duration, d time.Duration) int {
	most := 0
	for i, from := range acts {
		j, _ := slices.BinarySearch(acts, from+d)
		most = max(most, j-i)
	}
	return most
}

// TestAStoppedProcessDoesNotActOnItsStaleTurns runs two processes of 16
// waiters on one key (GCRA 1 per 20 ms, burst 1), and stops one of them for
// 2 s: its booked turns pass unused. Counted at the instants the callers
// act, no 400 ms holds more calls than the bound for 400 ms plus the
// maximum lateness, because the woken waiters book new turns instead of
// all acting at once; with a lateness of an hour they do act at once, and
// the bound breaks.
func TestAStoppedProcessDoesNotActOnItsStaleTurns(t *testing.T) {
	const (
		interval = 20 * time.Millisecond
		window   = 400 * time.Millisecond
		// defaultLateness is WithMaxLateness's default, as documented.
		defaultLateness = 20 * time.Millisecond
	)
	tests := []struct {
		name     string
		lateness time.Duration // zero: the default
		within   bool
	}{
		{"default lateness: stale turns booked again", 0, true},
		{"lateness of an hour: stale turns acted on", time.Hour, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				st := sluice.NewMemStore(sluice.MemStoreConfig{})
				stopped := newPausingClock()
				newProcess := func(c sluice.Clock) *sluice.Limiter {
					opts := []sluice.Option{sluice.WithStore(st), sluice.WithClock(c)}
					if tt.lateness > 0 {
						opts = append(opts, sluice.WithMaxLateness(tt.lateness))
					}
					lim, err := sluice.NewGCRA(sluice.Per(1, interval), 1, opts...)
					require.NoError(t, err)
					return lim
				}
				begin := time.Now()
				ctx, cancel := context.WithDeadline(context.Background(), begin.Add(4*time.Second))
				defer cancel()
				var (
					mu   sync.Mutex
					acts []time.Duration
					wg   sync.WaitGroup
				)
				for _, lim := range []*sluice.Limiter{newProcess(stopped), newProcess(clock.New())} {
					for range 16 {
						wg.Go(func() {
							for lim.Wait(ctx, "api", 1) == nil {
								mu.Lock()
								acts = append(acts, time.Since(begin))
								mu.Unlock()
							}
						})
					}
				}
				time.Sleep(500 * time.Millisecond)
				stopped.stop()
				time.Sleep(2 * time.Second)
				stopped.cont()
				wg.Wait()

				slices.Sort(acts)
				// GCRA's bound for 400 ms plus the default lateness.
				bound := 1 + int((window+defaultLateness)/interval)
				most := mostInAnyWindow(acts, window)
				t.Logf("%d calls in 4 s; at most %d in any %v (bound %d)", len(acts), most, window, bound)
				require.Greater(t, len(acts), 150, "the waiters kept calling")
				if tt.within {
					require.LessOrEqual(t, most, bound)
				} else {
					require.Greater(t, most, bound, "the stopped waiters acted at once")
				}
			})
		})
	}
}

func TestReservationWaitRefusesAStaleTurn(t *testing.T) {
	ms := time.Millisecond
	tests := []struct {
		name   string
		delay  time.Duration // of the turn booked
		before time.Duration // from booking to Wait
		stop   time.Duration // the process stopped after Wait began, past the turn
		stale  bool
	}{
		{"woken on time", 100 * ms, 0, 0, false},
		{"woken within the lateness", 100 * ms, 0, 20 * ms, false},
		{"woken past the lateness", 100 * ms, 0, 21 * ms, true},
		{"called within the lateness of an immediate turn", 0, 20 * ms, 0, false},
		{"called past the lateness of an immediate turn", 0, 21 * ms, 0, true},
		{"called past the lateness of a later turn", 100 * ms, 121 * ms, 0, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				ctx := context.Background()
				clk := newPausingClock()
				lim, err := sluice.NewGCRA(sluice.Per(1, tt.delay+ms), 1, sluice.WithClock(clk))
				require.NoError(t, err)
				if tt.delay > 0 {
					_, err = lim.Allow(ctx, "k", 1)
					require.NoError(t, err)
					time.Sleep(ms) // the next turn is tt.delay away
				}
				r, err := lim.Reserve(ctx, "k", 1, time.Hour)
				require.NoError(t, err)
				require.Equal(t, tt.delay, r.Delay)
				time.Sleep(tt.before)
				done := make(chan error)
				go func() { done <- r.Wait(ctx) }()
				if tt.stop > 0 {
					synctest.Wait()
					clk.stop()
					time.Sleep(tt.delay - tt.before + tt.stop)
					clk.cont()
				}
				err = <-done
				if tt.stale {
					require.ErrorIs(t, err, sluice.ErrStaleTurn)
				} else {
					require.NoError(t, err)
				}
			})
		})
	}
}

func TestMaxLatenessMustBePositive(t *testing.T) {
	for _, d := range []time.Duration{0, -time.Millisecond} {
		_, err := sluice.NewGCRA(sluice.PerSecond(1), 1, sluice.WithMaxLateness(d))
		require.ErrorIs(t, err, sluice.ErrInvalidConfig)
	}
}
