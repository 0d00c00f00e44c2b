package sim

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestClockFiresAfterOnlyWhenSetPastIt(t *testing.T) {
	c := NewClock(Epoch)
	ch := c.After(time.Second)
	now := c.After(0)
	require.Equal(t, Epoch, <-now, "a zero wait fires at once")
	c.Set(Epoch.Add(time.Second - 1))
	select {
	case <-ch:
		t.Fatal("fired a nanosecond early")
	default:
	}
	c.Set(Epoch.Add(time.Second))
	require.Equal(t, Epoch.Add(time.Second), <-ch)
	require.Equal(t, Epoch.Add(time.Second), c.Now())
}
