package sluiceotel_test

import (
	"context"
	"math"
	"testing"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"go.opentelemetry.io/otel/sdk/metric/metricdata/metricdatatest"

	"github.com/sluice-go/sluice"
	"github.com/sluice-go/sluice/engine"
	"github.com/sluice-go/sluice/internal/metrics/metricstest"
	"github.com/sluice-go/sluice/sluiceotel"
)

func attrs(limiter, alg, verb string, more ...attribute.KeyValue) attribute.Set {
	return attribute.NewSet(append([]attribute.KeyValue{
		attribute.String("sluice.limiter", limiter),
		attribute.String("sluice.algorithm", alg),
		attribute.String("sluice.verb", verb),
	}, more...)...)
}

// collect reads the metrics of reader's only scope, by name.
func collect(t *testing.T, reader *sdkmetric.ManualReader) map[string]metricdata.Metrics {
	t.Helper()
	var rm metricdata.ResourceMetrics
	require.NoError(t, reader.Collect(context.Background(), &rm))
	require.Len(t, rm.ScopeMetrics, 1)
	require.Equal(t, sluiceotel.ScopeName, rm.ScopeMetrics[0].Scope.Name)
	got := map[string]metricdata.Metrics{}
	for _, m := range rm.ScopeMetrics[0].Metrics {
		got[m.Name] = m
	}
	return got
}

func outcome(o string) attribute.KeyValue { return attribute.String("sluice.outcome", o) }

func TestMetricsRecordAKnownSequenceOfDecisions(t *testing.T) {
	reader := sdkmetric.NewManualReader()
	provider := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	defer provider.Shutdown(context.Background())
	bounds := []float64{0.001, 0.01}
	m, err := sluiceotel.New(provider, sluiceotel.WithBuckets(bounds))
	require.NoError(t, err)
	metricstest.Run(t, m.Observe)

	var rm metricdata.ResourceMetrics
	require.NoError(t, reader.Collect(context.Background(), &rm))
	require.Len(t, rm.ScopeMetrics, 1)
	require.Equal(t, sluiceotel.ScopeName, rm.ScopeMetrics[0].Scope.Name)
	got := rm.ScopeMetrics[0].Metrics
	require.Len(t, got, 3)

	sum := func(points ...metricdata.DataPoint[int64]) metricdata.Sum[int64] {
		return metricdata.Sum[int64]{Temporality: metricdata.CumulativeTemporality, IsMonotonic: true, DataPoints: points}
	}
	metricdatatest.AssertEqual(t, metricdata.Metrics{
		Name:        "sluice.decisions",
		Description: "Decisions made by sluice limiters, by limiter, algorithm, verb and outcome.",
		Unit:        "{decision}",
		Data: sum(
			metricdata.DataPoint[int64]{Attributes: attrs("api", "gcra", "allow", outcome("allowed")), Value: 2},
			metricdata.DataPoint[int64]{Attributes: attrs("api", "gcra", "allow", outcome("denied")), Value: 1},
			metricdata.DataPoint[int64]{Attributes: attrs("api", "gcra", "check", outcome("denied")), Value: 1},
			metricdata.DataPoint[int64]{Attributes: attrs("api", "gcra", "allow", outcome("invalid")), Value: 1},
			metricdata.DataPoint[int64]{Attributes: attrs("broken", "token_bucket", "allow", outcome("store_error")), Value: 2},
		),
	}, got[0], metricdatatest.IgnoreTimestamp())

	point := func(set attribute.Set, counts []uint64, lo, hi, total float64) metricdata.HistogramDataPoint[float64] {
		var n uint64
		for _, c := range counts {
			n += c
		}
		return metricdata.HistogramDataPoint[float64]{Attributes: set, Count: n, Bounds: bounds, BucketCounts: counts,
			Min: metricdata.NewExtrema(lo), Max: metricdata.NewExtrema(hi), Sum: total}
	}
	metricdatatest.AssertEqual(t, metricdata.Metrics{
		Name:        "sluice.decision.duration",
		Description: "Time sluice limiters took to decide, store round trip included.",
		Unit:        "s",
		Data: metricdata.Histogram[float64]{Temporality: metricdata.CumulativeTemporality, DataPoints: []metricdata.HistogramDataPoint[float64]{
			// Three store calls of 3ms, and the invalid cost refused at once.
			point(attrs("api", "gcra", "allow"), []uint64{1, 3, 0}, 0, 0.003, 0.009000000000000001),
			point(attrs("api", "gcra", "check"), []uint64{0, 1, 0}, 0.003, 0.003, 0.003),
			point(attrs("broken", "token_bucket", "allow"), []uint64{2, 0, 0}, 0, 0, 0),
		}},
	}, got[1], metricdatatest.IgnoreTimestamp())

	metricdatatest.AssertEqual(t, metricdata.Metrics{
		Name:        "sluice.store.errors",
		Description: "Decisions that failed because the store timed out or failed.",
		Unit:        "{error}",
		Data: sum(metricdata.DataPoint[int64]{
			Attributes: attribute.NewSet(
				attribute.String("sluice.limiter", "broken"),
				attribute.String("sluice.algorithm", "token_bucket"),
				attribute.String("error.type", "store_error"),
			),
			Value: 2,
		}),
	}, got[2], metricdatatest.IgnoreTimestamp())
}

func TestMetricsRecordLeasesHeldExpiredAndWaitedFor(t *testing.T) {
	reader := sdkmetric.NewManualReader()
	provider := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	defer provider.Shutdown(context.Background())
	bounds := []float64{0.1, 1}
	m, err := sluiceotel.New(provider, sluiceotel.WithWaitBuckets(bounds))
	require.NoError(t, err)
	metricstest.RunLeases(t, m.Observe)

	got := collect(t, reader)
	require.Len(t, got, 5, "no store errors")

	decision := func(verb, o string, n int64) metricdata.DataPoint[int64] {
		return metricdata.DataPoint[int64]{Attributes: attrs("jobs", "concurrency", verb, outcome(o)), Value: n}
	}
	metricdatatest.AssertEqual(t, metricdata.Metrics{
		Name:        "sluice.decisions",
		Description: "Decisions made by sluice limiters, by limiter, algorithm, verb and outcome.",
		Unit:        "{decision}",
		Data: metricdata.Sum[int64]{Temporality: metricdata.CumulativeTemporality, IsMonotonic: true, DataPoints: []metricdata.DataPoint[int64]{
			decision("acquire", "allowed", 6),
			decision("acquire", "denied", 3),
			decision("extend", "allowed", 1),
			decision("extend", "denied", 1),
			decision("release", "allowed", 2),
			decision("release", "denied", 1),
		}},
	}, got["sluice.decisions"], metricdatatest.IgnoreTimestamp())

	jobs := attribute.NewSet(attribute.String("sluice.limiter", "jobs"))
	metricdatatest.AssertEqual(t, metricdata.Metrics{
		Name:        "sluice.leases.held",
		Description: "Leases of sluice concurrency limits held by this process's holders: granted, and neither released nor found expired.",
		Unit:        "{lease}",
		Data: metricdata.Sum[int64]{Temporality: metricdata.CumulativeTemporality, IsMonotonic: false,
			DataPoints: []metricdata.DataPoint[int64]{{Attributes: jobs, Value: 1}}},
	}, got["sluice.leases.held"], metricdatatest.IgnoreTimestamp())

	metricdatatest.AssertEqual(t, metricdata.Metrics{
		Name:        "sluice.lease.expiries",
		Description: "Releases and extensions of sluice leases that found the lease expired: holders that outlived their lease's time to live.",
		Unit:        "{lease}",
		Data: metricdata.Sum[int64]{Temporality: metricdata.CumulativeTemporality, IsMonotonic: true,
			DataPoints: []metricdata.DataPoint[int64]{{Attributes: jobs, Value: 2}}},
	}, got["sluice.lease.expiries"], metricdatatest.IgnoreTimestamp())

	wait := metricstest.LeaseWait.Seconds()
	metricdatatest.AssertEqual(t, metricdata.Metrics{
		Name:        "sluice.lease.wait.duration",
		Description: "Time Acquire waited for the sluice leases it was granted.",
		Unit:        "s",
		Data: metricdata.Histogram[float64]{Temporality: metricdata.CumulativeTemporality, DataPoints: []metricdata.HistogramDataPoint[float64]{{
			Attributes: jobs, Count: 1, Bounds: bounds, BucketCounts: []uint64{0, 1, 0},
			Min: metricdata.NewExtrema(wait), Max: metricdata.NewExtrema(wait), Sum: wait,
		}}},
	}, got["sluice.lease.wait.duration"], metricdatatest.IgnoreTimestamp())
}

func TestNewRefusesBadOptions(t *testing.T) {
	provider := sdkmetric.NewMeterProvider()
	for name, opt := range map[string]sluiceotel.Option{
		"no buckets":        sluiceotel.WithBuckets(nil),
		"unordered buckets": sluiceotel.WithBuckets([]float64{1, 0.5}),
		"NaN bucket":        sluiceotel.WithBuckets([]float64{math.NaN(), 1}),
		"nil logger":        sluiceotel.WithLogger(nil),
		"no wait buckets":   sluiceotel.WithWaitBuckets(nil),
		"unordered waits":   sluiceotel.WithWaitBuckets([]float64{60, 1}),
	} {
		t.Run(name, func(t *testing.T) {
			_, err := sluiceotel.New(provider, opt)
			require.ErrorIs(t, err, sluice.ErrInvalidConfig)
		})
	}
	_, err := sluiceotel.New(nil)
	require.ErrorIs(t, err, sluice.ErrInvalidConfig)
}

func TestObservingAllocatesNothingOnceASeriesExists(t *testing.T) {
	reader := sdkmetric.NewManualReader()
	provider := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	defer provider.Shutdown(context.Background())
	m, err := sluiceotel.New(provider)
	require.NoError(t, err)
	ctx := context.Background()
	events := append(metricstest.LeaseRound(),
		sluice.Event{Limiter: "api", Kind: engine.KindGCRA, Verb: engine.VerbAllow, Decision: sluice.Decision{Allowed: true}})
	for _, e := range events {
		m.Observe(ctx, e)
	}
	require.Zero(t, testing.AllocsPerRun(1000, func() {
		for _, e := range events {
			m.Observe(ctx, e)
		}
	}))
	// Each round takes three leases and lets go of three.
	held := collect(t, reader)["sluice.leases.held"]
	metricdatatest.AssertEqual(t, metricdata.Metrics{
		Name:        "sluice.leases.held",
		Description: "Leases of sluice concurrency limits held by this process's holders: granted, and neither released nor found expired.",
		Unit:        "{lease}",
		Data: metricdata.Sum[int64]{Temporality: metricdata.CumulativeTemporality, DataPoints: []metricdata.DataPoint[int64]{
			{Attributes: attribute.NewSet(attribute.String("sluice.limiter", "jobs")), Value: 0},
		}},
	}, held, metricdatatest.IgnoreTimestamp())
}

func BenchmarkObserve(b *testing.B) {
	provider := sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewManualReader()))
	m, err := sluiceotel.New(provider)
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
