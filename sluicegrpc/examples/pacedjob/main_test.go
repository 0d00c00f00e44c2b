package main

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestPoliteJobIsNeverRefused(t *testing.T) {
	var out strings.Builder
	// 7 calls each. The greedy job spends the burst of 5; how many more
	// it gets depends on how fast the machine makes calls, so only the
	// polite job's figure is exact. It takes about 1.2 s.
	require.NoError(t, run(&out, 7))
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	require.Len(t, lines, 2)
	require.Regexp(t, `^greedy: [5-7] admitted, [0-2] refused`, lines[0])
	require.Equal(t, "polite: 7 admitted, 0 refused", lines[1])
}
