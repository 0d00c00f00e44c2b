package sim

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// runMain runs the command as a user would and returns its exit code,
// stdout and stderr.
func runMain(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	code := Main(t.Context(), args, &stdout, &stderr)
	return code, stdout.String(), stderr.String()
}

func TestMainRefusesBadInputWithExitCode2(t *testing.T) {
	dir := t.TempDir()
	conf := filepath.Join(dir, "bad.conf")
	require.NoError(t, os.WriteFile(conf, []byte("limiter gcra rate=1/s burst=1\ntraffic greedy\nlimiter nonsense\n"), 0o644))
	tests := map[string]struct {
		args []string
		want string
	}{
		"nothing to simulate":   {nil, "no limiter: give at least one, as in -limiter 'gcra rate=10/s burst=5'"},
		"no traffic":            {[]string{"-limiter", "gcra rate=1/s burst=1"}, "no traffic: give at least one pattern"},
		"a bad limiter":         {[]string{"-limiter", "gcra rate=1/s", "-traffic", "greedy"}, `limiter "gcra rate=1/s": burst is required`},
		"a bad traffic":         {[]string{"-limiter", "gcra rate=1/s burst=1", "-traffic", "uniform"}, `traffic "uniform": rate is required`},
		"an unquoted spec":      {[]string{"-limiter", "gcra", "rate=1/s", "burst=1"}, `unexpected argument "rate=1/s": limiters and traffic go in -limiter and -traffic flags, quoted`},
		"an unknown flag":       {[]string{"-limiters", "gcra"}, "flag provided but not defined: -limiters"},
		"a bad duration":        {[]string{"-duration", "long"}, `duration "long" is not a duration`},
		"a bad format":          {[]string{"-format", "gif"}, `-format "gif": want svg, png or svg,png`},
		"a bad config file":     {[]string{"-config", conf}, "bad.conf: line 3: limiter \"nonsense\": unknown algorithm"},
		"a missing config file": {[]string{"-config", filepath.Join(dir, "none.conf")}, "no such file"},
		"a cost over the limit": {[]string{"-limiter", "gcra rate=1/s burst=1", "-traffic", "uniform rate=1/s cost=2", "-out", ""},
			"request at 0s on key \"client\" costing 2: sluice: cost exceeds limit: cost 2 > limit 1"},
		"a key no traffic uses": {[]string{"-limiter", "gcra rate=1/s burst=1", "-traffic", "greedy clients=2 key=k", "-watch", "k"},
			`watch "k": no traffic uses that key (its keys: k-1, k-2)`},
		"a duration past 2100": {[]string{"-limiter", "gcra rate=1/s burst=1", "-traffic", "greedy", "-duration", "1000000h"}, "duration 1000000h0m0s: at most 700800h0m0s"},
		"a negative progress":  {[]string{"-limiter", "gcra rate=1/s burst=1", "-traffic", "greedy", "-progress", "-1"}, "-progress -1: want 0 or more"},
		"no requests allowed":  {[]string{"-limiter", "gcra rate=1/s burst=1", "-traffic", "greedy", "-max-requests", "0"}, "-max-requests 0: want 1 or more"},
		"a run too large": {[]string{"-limiter", "gcra rate=1/s burst=1", "-traffic", "uniform rate=1e12/s", "-duration", "1ms"},
			"cannot simulate: the traffic would offer a limiter about 1,000,000,000 requests in 1ms (up to about 100 GB of memory)"},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			code, stdout, stderr := runMain(t, tt.args...)
			require.Equal(t, exitUsage, code, stderr)
			require.Empty(t, stdout)
			require.Contains(t, stderr, tt.want)
		})
	}
}

func TestMainHelpListsTheWords(t *testing.T) {
	code, _, stderr := runMain(t, "-h")
	require.Equal(t, exitOK, code)
	for _, w := range []string{"gcra rate=10/s burst=5", "fixedwindow limit=10 window=1s [anchored]", "edge n=5", "csv file=", "-limiter", "-out"} {
		require.Contains(t, stderr, w)
	}
}

func TestMainWritesTheTableTheDataAndTheFigures(t *testing.T) {
	dir := t.TempDir()
	conf := filepath.Join(dir, "sim.conf")
	require.NoError(t, os.WriteFile(conf, []byte("limiter gcra rate=5/s burst=5\ntraffic csv file=log.csv\n"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "log.csv"), []byte("timestamp,key,cost\n0,a,\n0,a,\n0,a\n0.5,b,2\n1.25,a,1\n"), 0o644))
	out := filepath.Join(dir, "out")
	code, stdout, stderr := runMain(t, "-config", conf, "-limiter", "fixedwindow limit=2 window=1s name=strict", "-out", out)
	require.Equal(t, exitOK, code, stderr)
	require.Equal(t, strings.Join([]string{
		"limiter                offered  admitted  denied  largest burst  most in any 1s  long-run rate  RetryAfter p50  p99",
		"gcra rate=5/s burst=5        5         5       0              3               3         1.67/s               -    -",
		"strict                       5         4       1              2               2         1.67/s              1s   1s",
		""}, "\n"), stdout)
	require.Contains(t, stderr, "wrote 10 files to "+out)
	entries, err := os.ReadDir(out)
	require.NoError(t, err)
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	require.Equal(t, []string{"compare.png", "compare.svg", "gcra-rate-5-s-burst-5.png", "gcra-rate-5-s-burst-5.svg",
		"series.csv", "state.csv", "strict.png", "strict.svg", "summary.csv", "summary.txt"}, names)
	csv, err := os.ReadFile(filepath.Join(out, "summary.csv"))
	require.NoError(t, err)
	require.Equal(t, "limiter,offered,admitted,denied,largest_burst,window_s,most_in_window,long_run_rate_per_s,retry_after_p50_s,retry_after_p99_s\n"+
		"gcra rate=5/s burst=5,5,5,0,3,1,3,1.6666666666666665,0,0\n"+
		"strict,5,4,1,2,1,2,1.6666666666666665,1,1\n", string(csv))
}

func TestMainReportsProgressOnLongSimulations(t *testing.T) {
	code, _, stderr := runMain(t, "-limiter", "gcra rate=100/s burst=10", "-traffic", "uniform rate=1000/s",
		"-duration", "5s", "-progress", "2000", "-out", "")
	require.Equal(t, exitOK, code, stderr)
	require.Equal(t, strings.Join([]string{
		"sluicesim: gcra rate=100/s burst=10: 2000 requests, 40% of 5s simulated",
		"sluicesim: gcra rate=100/s burst=10: 4000 requests, 80% of 5s simulated",
		"sluicesim: gcra rate=100/s burst=10: done, 5000 requests in 5s simulated",
		""}, "\n"), stderr)

	code, _, stderr = runMain(t, "-limiter", "gcra rate=100/s burst=10", "-traffic", "uniform rate=1000/s",
		"-duration", "1s", "-progress", "2000", "-out", "")
	require.Equal(t, exitOK, code)
	require.Empty(t, stderr, "a short simulation says nothing")
}

// TestAMillionRequestsTakeLittleTime runs a million requests, which with
// a clock that paused for every step would take minutes, and requires the
// default progress line.
func TestAMillionRequestsTakeLittleTime(t *testing.T) {
	c := Config{Duration: 100 * time.Second}
	require.NoError(t, c.Set("limiter", "gcra rate=5000/s burst=100", ""))
	require.NoError(t, c.Set("traffic", "uniform rate=10000/s", ""))
	var progress bytes.Buffer
	runs, err := Simulate(t.Context(), &c, Options{Progress: &progress})
	require.NoError(t, err)
	require.Equal(t, int64(1_000_000), runs[0].Summary.Offered)
	require.InDelta(t, 5000, runs[0].Summary.LongRunRate, 1)
	require.Equal(t, "sluicesim: gcra rate=5000/s burst=100: 1000000 requests, 100% of 1m40s simulated\n"+
		"sluicesim: gcra rate=5000/s burst=100: done, 1000000 requests in 1m40s simulated\n", progress.String())
}

func TestSimulateStopsWhenTheContextEnds(t *testing.T) {
	c := Config{Duration: time.Hour}
	require.NoError(t, c.Set("limiter", "gcra rate=5/s burst=5", ""))
	require.NoError(t, c.Set("traffic", "uniform rate=1000/s", ""))
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	_, err := Simulate(ctx, &c, Options{})
	require.ErrorIs(t, err, context.Canceled)
}
