package main

import (
	"io"
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestQuickstartAdmitsTheBurstAndTheRatePerClient(t *testing.T) {
	r, w, err := os.Pipe()
	require.NoError(t, err)
	stdout := os.Stdout
	os.Stdout = w
	runErr := run()
	os.Stdout = stdout
	require.NoError(t, w.Close())
	out, err := io.ReadAll(r)
	require.NoError(t, err)
	require.NoError(t, runErr)
	// 9 requests fit the burst (each adds 100ms of backlog while 50ms
	// pass, up to 500ms), then one per 100ms from 500ms to 2.9s.
	require.Contains(t, string(out), "sent 60 requests and got 34 through")
	require.Contains(t, string(out), "sent 12 and got 12 through")
	rows := 0
	for _, line := range strings.Split(string(out), "\n") {
		if f := strings.Fields(line); len(f) == 5 && (f[1] == "greedy" || f[1] == "polite") {
			rows++
		}
	}
	require.Equal(t, 20+4, rows, "a row per request of the first second")
}
