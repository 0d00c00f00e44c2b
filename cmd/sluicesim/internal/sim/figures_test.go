package sim

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// figuresDir holds the committed figures, one directory per scenario with
// its sim.conf, the data behind its figures and the figures.
const figuresDir = "../../../../docs/figures"

const regenerate = "regenerate them with `go generate ./cmd/sluicesim` from the repository root"

// TestCommittedFiguresMatchAFreshRun simulates every committed scenario
// again and requires the data behind its figures (the summary, the
// requests per bin and the state lines) to be the committed data, byte for
// byte, and the committed figures to be the ones the scenario draws,
// nothing missing and nothing stale.
func TestCommittedFiguresMatchAFreshRun(t *testing.T) {
	confs, err := filepath.Glob(filepath.Join(figuresDir, "*", "sim.conf"))
	require.NoError(t, err)
	require.GreaterOrEqual(t, len(confs), 4, "the scenarios under %s", figuresDir)
	for _, conf := range confs {
		dir := filepath.Dir(conf)
		t.Run(filepath.Base(dir), func(t *testing.T) {
			f, err := os.Open(conf)
			require.NoError(t, err)
			c, err := ParseConfig(f, dir)
			require.NoError(t, f.Close())
			require.NoError(t, err)
			runs, err := Simulate(t.Context(), &c, Options{})
			require.NoError(t, err)
			data, err := Outputs(runs, &c, false, false)
			require.NoError(t, err)
			want := []string{"sim.conf"}
			for _, d := range data {
				committed, err := os.ReadFile(filepath.Join(dir, d.Name))
				require.NoError(t, err, "%s is missing: %s", d.Name, regenerate)
				require.Equal(t, string(d.Data), string(committed), "%s differs from a fresh run: %s", d.Name, regenerate)
				want = append(want, d.Name)
			}
			for _, name := range figureNames(runs, &c) {
				svg, err := os.ReadFile(filepath.Join(dir, name+".svg"))
				require.NoError(t, err, "%s.svg is missing: %s", name, regenerate)
				require.True(t, bytes.Contains(svg[:min(len(svg), 512)], []byte("<svg")), "%s.svg is an SVG document", name)
				png, err := os.ReadFile(filepath.Join(dir, name+".png"))
				require.NoError(t, err, "%s.png is missing: %s", name, regenerate)
				require.True(t, bytes.HasPrefix(png, []byte("\x89PNG\r\n\x1a\n")), "%s.png is a PNG image", name)
				require.Less(t, len(svg)+len(png), 600_000, "%s: committed figures stay small", name)
				want = append(want, name+".svg", name+".png")
			}
			entries, err := os.ReadDir(dir)
			require.NoError(t, err)
			var have []string
			for _, e := range entries {
				have = append(have, e.Name())
			}
			slices.Sort(want)
			require.Equal(t, want, have, "the files of %s are the ones a fresh run writes: %s", dir, regenerate)
		})
	}
}

// TestFiguresRenderTheSameBytesEveryTime pins that drawing is a function
// of the simulation alone: the same run gives the same SVG and PNG.
func TestFiguresRenderTheSameBytesEveryTime(t *testing.T) {
	c := Config{Duration: 3e9}
	require.NoError(t, c.Set("limiter", "gcra rate=5/s burst=5", ""))
	require.NoError(t, c.Set("limiter", "slidinglog limit=5 window=1s", ""))
	require.NoError(t, c.Set("traffic", "poisson rate=8/s seed=3", ""))
	runs, err := Simulate(t.Context(), &c, Options{})
	require.NoError(t, err)
	for _, format := range []string{"svg", "png"} {
		for _, f := range []Figure{LimiterFigure(runs[0], &c), CompareFigure(runs, &c)} {
			a, err := render(f, format)
			require.NoError(t, err)
			b, err := render(f, format)
			require.NoError(t, err)
			require.NotEmpty(t, a)
			require.Equal(t, a, b, format)
		}
	}
}

// TestGuideShowsWhatTheCommandsPrint requires docs/simulator.md to show
// the table its first command prints, each committed scenario's table, and
// the refusal of a simulation too large.
func TestGuideShowsWhatTheCommandsPrint(t *testing.T) {
	guide, err := os.ReadFile("../../../../docs/simulator.md")
	require.NoError(t, err)
	const command = "go run ./cmd/sluicesim -limiter 'gcra rate=10/s burst=5' -traffic 'uniform rate=20/s' -duration 5s -out /tmp/sim"
	require.Contains(t, string(guide), command)
	code, stdout, stderr := runMain(t, "-limiter", "gcra rate=10/s burst=5", "-traffic", "uniform rate=20/s", "-duration", "5s", "-out", "")
	require.Equal(t, exitOK, code, stderr)
	require.True(t, strings.Contains(string(guide), "```\n"+stdout+"```\n"), "docs/simulator.md shows what `%s` prints:\n%s", command, stdout)
	confs, err := filepath.Glob(filepath.Join(figuresDir, "*", "summary.txt"))
	require.NoError(t, err)
	for _, name := range confs {
		table, err := os.ReadFile(name)
		require.NoError(t, err)
		require.True(t, strings.Contains(string(guide), "```\n"+string(table)+"```\n"), "docs/simulator.md shows %s:\n%s", name, table)
	}
	code, _, stderr = runMain(t, "-limiter", "gcra rate=10/s burst=5", "-traffic", "uniform rate=1e12/s", "-duration", "1ms")
	require.Equal(t, exitUsage, code)
	refusal, _, _ := strings.Cut(stderr, "\n")
	require.True(t, strings.Contains(string(guide), "```\n"+refusal+"\n```\n"), "docs/simulator.md shows the refusal:\n%s", refusal)
}
