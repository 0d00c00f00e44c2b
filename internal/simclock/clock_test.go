package simclock_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sluice-go/sluice/internal/simclock"
)

func TestClockWakesSleepersOnlyOnceTheirInstantIsReached(t *testing.T) {
	start := time.Unix(1000, 0)
	c := simclock.New(start)
	now := c.After(0)
	require.Equal(t, start, <-now, "a sleep of no time wakes at once")

	early, late := c.After(time.Second), c.After(3*time.Second)
	c.Add(time.Second - 1)
	requireSilent(t, early, late) // a nanosecond early
	c.Add(1)
	require.Equal(t, start.Add(time.Second), <-early, "woken at its instant, with the time")
	requireSilent(t, late)
	c.Set(start.Add(5 * time.Second))
	require.Equal(t, start.Add(5*time.Second), <-late, "a jump past the instant wakes with the new time")
	require.Equal(t, start.Add(5*time.Second), c.Now())
}

func TestWaitForSleepersReturnsOnceThatManySleep(t *testing.T) {
	c := simclock.New(time.Unix(0, 0))
	woke := make(chan time.Time, 3)
	for i := range 3 {
		go func() { woke <- <-c.After(time.Duration(i+1) * time.Second) }()
	}
	c.WaitForSleepers(3)
	c.Add(3 * time.Second)
	for range 3 {
		require.Equal(t, time.Unix(3, 0), <-woke)
	}
}

func requireSilent(t *testing.T, chs ...<-chan time.Time) {
	t.Helper()
	for i, ch := range chs {
		select {
		case got := <-ch:
			t.Fatalf("sleeper %d woke early, at %v", i, got)
		default:
		}
	}
}
