package sluiceprom_test

import (
	"bytes"
	"context"
	"log/slog"
	"math"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"

	"github.com/sluice-go/sluice"
	"github.com/sluice-go/sluice/internal/metrics/metricstest"
	"github.com/sluice-go/sluice/sluiceprom"
)

func TestMetricsCountAKnownSequenceOfDecisions(t *testing.T) {
	m, err := sluiceprom.New(sluiceprom.WithBuckets([]float64{0.001, 0.01}))
	require.NoError(t, err)
	metricstest.Run(t, m.Observe)

	want := `
# HELP sluice_decisions_total Decisions made by sluice limiters, by limiter, algorithm, verb and outcome.
# TYPE sluice_decisions_total counter
sluice_decisions_total{algorithm="gcra",limiter="api",outcome="allowed",verb="allow"} 2
sluice_decisions_total{algorithm="gcra",limiter="api",outcome="denied",verb="allow"} 1
sluice_decisions_total{algorithm="gcra",limiter="api",outcome="denied",verb="check"} 1
sluice_decisions_total{algorithm="gcra",limiter="api",outcome="invalid",verb="allow"} 1
sluice_decisions_total{algorithm="token_bucket",limiter="broken",outcome="store_error",verb="allow"} 2
# HELP sluice_decision_duration_seconds Time sluice limiters took to decide, store round trip included.
# TYPE sluice_decision_duration_seconds histogram
sluice_decision_duration_seconds_bucket{algorithm="gcra",limiter="api",verb="allow",le="0.001"} 1
sluice_decision_duration_seconds_bucket{algorithm="gcra",limiter="api",verb="allow",le="0.01"} 4
sluice_decision_duration_seconds_bucket{algorithm="gcra",limiter="api",verb="allow",le="+Inf"} 4
sluice_decision_duration_seconds_sum{algorithm="gcra",limiter="api",verb="allow"} 0.009000000000000001
sluice_decision_duration_seconds_count{algorithm="gcra",limiter="api",verb="allow"} 4
sluice_decision_duration_seconds_bucket{algorithm="gcra",limiter="api",verb="check",le="0.001"} 0
sluice_decision_duration_seconds_bucket{algorithm="gcra",limiter="api",verb="check",le="0.01"} 1
sluice_decision_duration_seconds_bucket{algorithm="gcra",limiter="api",verb="check",le="+Inf"} 1
sluice_decision_duration_seconds_sum{algorithm="gcra",limiter="api",verb="check"} 0.003
sluice_decision_duration_seconds_count{algorithm="gcra",limiter="api",verb="check"} 1
sluice_decision_duration_seconds_bucket{algorithm="token_bucket",limiter="broken",verb="allow",le="0.001"} 2
sluice_decision_duration_seconds_bucket{algorithm="token_bucket",limiter="broken",verb="allow",le="0.01"} 2
sluice_decision_duration_seconds_bucket{algorithm="token_bucket",limiter="broken",verb="allow",le="+Inf"} 2
sluice_decision_duration_seconds_sum{algorithm="token_bucket",limiter="broken",verb="allow"} 0
sluice_decision_duration_seconds_count{algorithm="token_bucket",limiter="broken",verb="allow"} 2
# HELP sluice_store_errors_total Decisions that failed because the store timed out or failed.
# TYPE sluice_store_errors_total counter
sluice_store_errors_total{algorithm="token_bucket",limiter="broken",reason="store_error"} 2
`
	require.NoError(t, testutil.CollectAndCompare(m, strings.NewReader(want)))
	problems, err := testutil.CollectAndLint(m)
	require.NoError(t, err)
	require.Empty(t, problems, "names and help follow Prometheus conventions")
}

func TestMetricsCountLeasesHeldExpiredAndWaitedFor(t *testing.T) {
	m, err := sluiceprom.New(sluiceprom.WithWaitBuckets([]float64{0.1, 1}))
	require.NoError(t, err)
	metricstest.RunLeases(t, m.Observe)

	want := `
# HELP sluice_decisions_total Decisions made by sluice limiters, by limiter, algorithm, verb and outcome.
# TYPE sluice_decisions_total counter
sluice_decisions_total{algorithm="concurrency",limiter="jobs",outcome="allowed",verb="acquire"} 6
sluice_decisions_total{algorithm="concurrency",limiter="jobs",outcome="denied",verb="acquire"} 3
sluice_decisions_total{algorithm="concurrency",limiter="jobs",outcome="allowed",verb="extend"} 1
sluice_decisions_total{algorithm="concurrency",limiter="jobs",outcome="denied",verb="extend"} 1
sluice_decisions_total{algorithm="concurrency",limiter="jobs",outcome="allowed",verb="release"} 2
sluice_decisions_total{algorithm="concurrency",limiter="jobs",outcome="denied",verb="release"} 1
# HELP sluice_leases_held Leases of sluice concurrency limits held by this process's holders: granted, and neither released nor found expired.
# TYPE sluice_leases_held gauge
sluice_leases_held{limiter="jobs"} 1
# HELP sluice_lease_expiries_total Releases and extensions of sluice leases that found the lease expired: holders that outlived their lease's time to live.
# TYPE sluice_lease_expiries_total counter
sluice_lease_expiries_total{limiter="jobs"} 2
# HELP sluice_lease_wait_seconds Time Acquire waited for the sluice leases it was granted.
# TYPE sluice_lease_wait_seconds histogram
sluice_lease_wait_seconds_bucket{limiter="jobs",le="0.1"} 0
sluice_lease_wait_seconds_bucket{limiter="jobs",le="1"} 1
sluice_lease_wait_seconds_bucket{limiter="jobs",le="+Inf"} 1
sluice_lease_wait_seconds_sum{limiter="jobs"} 0.25
sluice_lease_wait_seconds_count{limiter="jobs"} 1
`
	require.NoError(t, testutil.CollectAndCompare(m, strings.NewReader(want),
		"sluice_decisions_total", "sluice_leases_held", "sluice_lease_expiries_total", "sluice_lease_wait_seconds"))
	problems, err := testutil.CollectAndLint(m)
	require.NoError(t, err)
	require.Empty(t, problems, "names and help follow Prometheus conventions")
}

func TestAllowOnAConcurrencyLimitIsNotCountedAsALease(t *testing.T) {
	m, err := sluiceprom.New()
	require.NoError(t, err)
	lim, err := sluice.NewConcurrencyLimit(1, time.Minute, sluice.WithName("jobs"), sluice.WithObserver(m.Observe))
	require.NoError(t, err)
	defer lim.Close()
	d, err := lim.Allow(context.Background(), "k", 1) // a lease nobody releases: not a lease's decision
	require.NoError(t, err)
	require.True(t, d.Allowed)
	require.Zero(t, testutil.CollectAndCount(m, "sluice_leases_held", "sluice_lease_expiries_total", "sluice_lease_wait_seconds"))
	require.Equal(t, 1, testutil.CollectAndCount(m, "sluice_decisions_total"))
}

func TestStoreErrorsAreLoggedAtMostOncePerSecond(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var buf bytes.Buffer
		logger := slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{
			ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr {
				if a.Key == slog.TimeKey {
					return slog.Attr{}
				}
				return a
			},
		}))
		m, err := sluiceprom.New(sluiceprom.WithLogger(logger))
		require.NoError(t, err)
		closed := sluice.NewMemStore(sluice.MemStoreConfig{})
		require.NoError(t, closed.Close())
		lim, err := sluice.NewGCRA(sluice.PerSecond(1), 1, sluice.WithName("api"), sluice.WithObserver(m.Observe), sluice.WithStore(closed))
		require.NoError(t, err)
		for range 5 {
			_, err = lim.Allow(context.Background(), "k", 1)
			require.Error(t, err)
			_, err = lim.Allow(context.Background(), "k", 5) // invalid: not the store's failure
			require.Error(t, err)
			time.Sleep(300 * time.Millisecond) // synctest's fake time
		}
		require.Equal(t, `level=ERROR msg="sluice: store error" limiter=api algorithm=gcra verb=allow outcome=store_error latency=0s suppressed=0 error="sluice: store closed"
level=ERROR msg="sluice: store error" limiter=api algorithm=gcra verb=allow outcome=store_error latency=0s suppressed=3 error="sluice: store closed"
`, buf.String())
	})
}

func TestNewRefusesBadOptions(t *testing.T) {
	for name, opt := range map[string]sluiceprom.Option{
		"no buckets":        sluiceprom.WithBuckets(nil),
		"unordered buckets": sluiceprom.WithBuckets([]float64{1, 0.5}),
		"repeated buckets":  sluiceprom.WithBuckets([]float64{1, 1}),
		"NaN bucket":        sluiceprom.WithBuckets([]float64{math.NaN(), 1}),
		"nil logger":        sluiceprom.WithLogger(nil),
		"no wait buckets":   sluiceprom.WithWaitBuckets(nil),
		"unordered waits":   sluiceprom.WithWaitBuckets([]float64{60, 1}),
	} {
		t.Run(name, func(t *testing.T) {
			_, err := sluiceprom.New(opt)
			require.ErrorIs(t, err, sluice.ErrInvalidConfig)
		})
	}
}

func TestObservingAllocatesNothingOnceASeriesExists(t *testing.T) {
	m, err := sluiceprom.New()
	require.NoError(t, err)
	lim, err := sluice.NewGCRA(sluice.PerSecond(1e6), 1e9, sluice.WithName("api"), sluice.WithObserver(m.Observe))
	require.NoError(t, err)
	ctx := context.Background()
	_, err = lim.Allow(ctx, "k", 1)
	require.NoError(t, err)
	require.Zero(t, testing.AllocsPerRun(1000, func() {
		if _, err := lim.Allow(ctx, "k", 1); err != nil {
			t.Fatal(err)
		}
	}))
}

func TestObservingLeasesAllocatesNothingOnceASeriesExists(t *testing.T) {
	m, err := sluiceprom.New()
	require.NoError(t, err)
	ctx := context.Background()
	round := metricstest.LeaseRound()
	for _, e := range round {
		m.Observe(ctx, e)
	}
	require.Zero(t, testing.AllocsPerRun(1000, func() {
		for _, e := range round {
			m.Observe(ctx, e)
		}
	}))
	require.NoError(t, testutil.CollectAndCompare(m, strings.NewReader(`
# HELP sluice_leases_held Leases of sluice concurrency limits held by this process's holders: granted, and neither released nor found expired.
# TYPE sluice_leases_held gauge
sluice_leases_held{limiter="jobs"} 0
`), "sluice_leases_held"), "each round takes three leases and lets go of three")
}

func BenchmarkObserve(b *testing.B) {
	m, err := sluiceprom.New()
	require.NoError(b, err)
	lim, err := sluice.NewGCRA(sluice.PerSecond(1e6), 1e9, sluice.WithName("api"), sluice.WithObserver(m.Observe))
	require.NoError(b, err)
	ctx := context.Background()
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := lim.Allow(ctx, "k", 1); err != nil {
				b.Error(err)
				return
			}
		}
	})
}

func TestConstLabelsAreOnEveryMetric(t *testing.T) {
	m, err := sluiceprom.New(sluiceprom.WithConstLabels(map[string]string{"service": "checkout"}))
	require.NoError(t, err)
	closed := sluice.NewMemStore(sluice.MemStoreConfig{})
	require.NoError(t, closed.Close())
	lim, err := sluice.NewGCRA(sluice.PerSecond(1), 1, sluice.WithName("api"), sluice.WithObserver(m.Observe), sluice.WithStore(closed))
	require.NoError(t, err)
	_, err = lim.Allow(context.Background(), "k", 1)
	require.Error(t, err)
	require.NoError(t, testutil.CollectAndCompare(m, strings.NewReader(`
# HELP sluice_decisions_total Decisions made by sluice limiters, by limiter, algorithm, verb and outcome.
# TYPE sluice_decisions_total counter
sluice_decisions_total{algorithm="gcra",limiter="api",outcome="store_error",service="checkout",verb="allow"} 1
# HELP sluice_store_errors_total Decisions that failed because the store timed out or failed.
# TYPE sluice_store_errors_total counter
sluice_store_errors_total{algorithm="gcra",limiter="api",reason="store_error",service="checkout"} 1
`), "sluice_decisions_total", "sluice_store_errors_total"))
}

func TestALimiterNameThatIsNotUTF8IsExportedWithReplacementCharacters(t *testing.T) {
	m, err := sluiceprom.New()
	require.NoError(t, err)
	lim, err := sluice.NewGCRA(sluice.PerSecond(1), 1, sluice.WithName("api\xff"), sluice.WithObserver(m.Observe))
	require.NoError(t, err)
	_, err = lim.Allow(context.Background(), "k", 1)
	require.NoError(t, err)
	require.NoError(t, testutil.CollectAndCompare(m, strings.NewReader(`
# HELP sluice_decisions_total Decisions made by sluice limiters, by limiter, algorithm, verb and outcome.
# TYPE sluice_decisions_total counter
sluice_decisions_total{algorithm="gcra",limiter="api`+"\uFFFD"+`",outcome="allowed",verb="allow"} 1
`), "sluice_decisions_total"))
}
