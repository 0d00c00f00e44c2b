package sim

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sluice-go/sluice/internal/simclock"
)

// TestExpectedRequestsBoundWhatTheTrafficOffers requires the estimate
// that refuses a simulation too large to be what each pattern offers:
// exactly for evenly spaced requests and bursts, within a tenth for
// random arrivals, and never below what edge bursts and greedy clients
// offer, nor more than twice it.
func TestExpectedRequestsBoundWhatTheTrafficOffers(t *testing.T) {
	log := filepath.Join(t.TempDir(), "log.csv")
	require.NoError(t, os.WriteFile(log, []byte("0,a\n1,b\n9.5,a\n10,a\n12,b\n"), 0o644))
	tests := map[string]struct {
		limiter, traffic string
		low, high        float64 // bounds of expected/offered
	}{
		"uniform, per client":         {"gcra rate=5/s burst=5", "uniform rate=10/s clients=3", 1, 1},
		"poisson, on average":         {"gcra rate=5/s burst=5", "poisson rate=10/s clients=3 seed=1", 0.9, 1.1},
		"bursts from a start":         {"gcra rate=5/s burst=5", "bursts n=7 every=700ms start=1s", 1, 1},
		"edge":                        {"gcra rate=5/s burst=5", "edge n=5 start=300ms gap=400ms", 1, 1.1},
		"csv rows before the end":     {"gcra rate=5/s burst=5", "csv file=" + log, 1, 1},
		"greedy at a rate":            {"gcra rate=5/s burst=5", "greedy clients=2", 1, 2},
		"greedy at a fraction a cost": {"leakybucket capacity=5 leak=5/s", "greedy cost=0.5", 1, 2},
		"greedy at a window's start":  {"fixedwindow limit=5 window=1s", "greedy", 1, 2},
		"greedy at interval refills":  {"tokenbucket rate=5/s intervalrefill", "greedy", 1, 2},
		"greedy at a weighted count":  {"slidingcounter limit=5 window=1s", "greedy cost=0.3", 1, 2},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			r := simulateOne(t, tt.limiter, 10*time.Second, tt.traffic)
			ts, err := ParseTraffic(tt.traffic, "")
			require.NoError(t, err)
			ls, err := ParseLimiter(tt.limiter)
			require.NoError(t, err)
			l, err := ls.New(simclock.New(Epoch))
			require.NoError(t, err)
			require.NoError(t, l.Close())
			p, _ := l.Params()
			ratio := ts.expected(10*time.Second, p) / float64(r.Summary.Offered)
			require.GreaterOrEqual(t, ratio, tt.low, "offered %d", r.Summary.Offered)
			require.LessOrEqual(t, ratio, tt.high, "offered %d", r.Summary.Offered)
		})
	}
}

// TestSimulateRefusesARunOverMaxRequestsBeforeAnyWork pins that the
// library, not only the command, refuses a simulation whose traffic would
// offer a limiter more than Options.MaxRequests requests, before deciding
// any (no progress line is written), with the count, the memory and how to
// offer fewer; and that a simulation at the limit runs.
func TestSimulateRefusesARunOverMaxRequestsBeforeAnyWork(t *testing.T) {
	tests := map[string]struct {
		limiter  string
		traffic  []string
		duration time.Duration
		most     int64
		want     string // "" when it runs
	}{
		"a rate per client, times the clients, at the limit": {"gcra rate=5/s burst=5", []string{"uniform rate=100/s clients=10"}, time.Second, 1000, ""},
		"one request over the limit": {"gcra rate=5/s burst=5", []string{"uniform rate=100/s clients=10"}, time.Second, 999,
			`cannot simulate: the traffic would offer a limiter about 1,000 requests in 1s (up to about 100 kB of memory), most of them from "uniform rate=100/s clients=10", ` +
				"more than the 999 a run may offer (-max-requests): offer fewer, with a lower rate= (which is per client), fewer clients= or a shorter -duration"},
		"the issue's runaway, by default": {"gcra rate=5/s burst=5", []string{"uniform rate=1e12/s"}, time.Millisecond, 0,
			"about 1,000,000,000 requests in 1ms (up to about 100 GB of memory)"},
		"a count past float64": {"gcra rate=5/s burst=5", []string{"poisson rate=1e300/1ns clients=1000"}, 700000 * time.Hour, 0,
			"more than 10^15 requests in 700000h0m0s (more than 100 PB of memory)"},
		"the larger of two patterns": {"gcra rate=5/s burst=5", []string{"uniform rate=1/s", "bursts n=1000 every=1ms"}, time.Minute, 0,
			`about 60,000,060 requests in 1m0s (up to about 6 GB of memory), most of them from "bursts n=1000 every=1ms", ` +
				"more than the 10,000,000 a run may offer (-max-requests): offer fewer, with a smaller n=, a longer every=, fewer clients= or a shorter -duration"},
		"greedy, as fast as a limiter admits": {"gcra rate=1000/s burst=5", []string{"greedy cost=0.001"}, time.Hour, 0,
			`about 7,200,020,000 requests in 1h0m0s (up to about 720 GB of memory), most of them from "greedy cost=0.001", ` +
				"more than the 10,000,000 a run may offer (-max-requests): offer fewer, with a higher cost=, fewer clients=, a slower limiter or a shorter -duration"},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			c := Config{Duration: tt.duration}
			require.NoError(t, c.Set("limiter", tt.limiter, ""))
			for _, tr := range tt.traffic {
				require.NoError(t, c.Set("traffic", tr, ""))
			}
			var progress bytes.Buffer
			runs, err := Simulate(t.Context(), &c, Options{Progress: &progress, ProgressEvery: 1, MaxRequests: tt.most})
			if tt.want == "" {
				require.NoError(t, err)
				require.Equal(t, tt.most, runs[0].Summary.Offered)
				return
			}
			require.ErrorIs(t, err, errConfig)
			require.ErrorContains(t, err, tt.want)
			require.Empty(t, progress.String(), "no request was decided")
			require.Nil(t, runs)
		})
	}
}

func TestMainRefusesARunOverMaxRequestsUntilRaised(t *testing.T) {
	args := []string{"-limiter", "gcra rate=5/s burst=5", "-traffic", "uniform rate=1000/s clients=2", "-duration", "1s", "-out", ""}
	code, stdout, stderr := runMain(t, append(args, "-max-requests", "1999")...)
	require.Equal(t, exitUsage, code)
	require.Empty(t, stdout)
	require.Contains(t, stderr, "about 2,000 requests in 1s")
	require.True(t, strings.HasSuffix(stderr, "run sluicesim -h for the words it takes\n"), stderr)

	code, stdout, stderr = runMain(t, append(args, "-max-requests", "2000")...)
	require.Equal(t, exitOK, code, stderr)
	require.Contains(t, stdout, "gcra rate=5/s burst=5     2000")
}
