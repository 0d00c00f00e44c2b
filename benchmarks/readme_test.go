package benchmarks

import (
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestREADMEShowsTheLatestResults requires the tables in this module's
// README to be results/table.md as run.sh wrote it, so that it shows no
// numbers by hand or from an older run.
func TestREADMEShowsTheLatestResults(t *testing.T) {
	table, err := os.ReadFile("results/table.md")
	require.NoError(t, err)
	_, want, ok := strings.Cut(string(table), "\n\n") // less the title
	require.True(t, ok, "results/table.md has no title line")
	for _, path := range []string{"README.md"} {
		readme, err := os.ReadFile(path)
		require.NoError(t, err)
		_, rest, ok := strings.Cut(string(readme), "<!-- results -->\n")
		require.True(t, ok, "%s has no <!-- results --> line", path)
		got, _, ok := strings.Cut(rest, "<!-- /results -->\n")
		require.True(t, ok, "%s has no <!-- /results --> line", path)
		require.Equal(t, want, got, "%s's tables differ from results/table.md: run benchmarks/run.sh", path)
	}
}
