package watch

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestWakeNeverBlocksAndWakesEachWaiterOnce pins the waiters of keys: a
// wake-up pending is not doubled, a waiter removed is not woken, and a key
// without waiters is forgotten.
func TestWakeNeverBlocksAndWakesEachWaiterOnce(t *testing.T) {
	a, b, c := make(chan struct{}, 1), make(chan struct{}, 1), make(chan struct{}, 1)
	k := Keyed{}
	k.Add("x", a)
	k.Add("x", b)
	k.Add("y", c)
	k.Wake("x")
	k.Wake("x") // a and b have one pending: no block, no second
	require.Len(t, a, 1)
	require.Len(t, b, 1)
	require.Empty(t, c)
	<-a
	<-b
	require.False(t, k.Remove("x", a))
	k.Wake("x")
	require.Empty(t, a, "removed: not woken")
	require.Len(t, b, 1)
	require.True(t, k.Remove("x", b))
	require.NotContains(t, k, "x", "a key without waiters is forgotten")
	k.WakeAll()
	require.Len(t, c, 1)
	k.Wake("none") // no waiters: nothing happens
}

// TestBackoffDoublesWithinItsBounds pins the reconnecting watch's waits.
func TestBackoffDoublesWithinItsBounds(t *testing.T) {
	var got []time.Duration
	for d := time.Duration(0); len(got) < 8; {
		d = NextBackoff(d)
		got = append(got, d)
	}
	ms := time.Millisecond
	require.Equal(t, []time.Duration{50 * ms, 100 * ms, 200 * ms, 400 * ms, 800 * ms, 1600 * ms, 2000 * ms, 2000 * ms}, got)
}
