// Package sluiceotel records the decisions of sluice limiters as
// OpenTelemetry metrics.
//
// A [Metrics]'s Observe method is a [sluice.Observer]: make a Metrics from
// a MeterProvider, and give its Observe method to each limiter with a
// name of its own:
//
//	m, err := sluiceotel.New(otel.GetMeterProvider(), sluiceotel.WithLogger(slog.Default()))
//	if err != nil {
//		return err
//	}
//	lim, err := sluice.NewGCRA(sluice.PerSecond(10), 20,
//		sluice.WithName("api"), sluice.WithObserver(m.Observe))
//
// Its meter, named after this package's import path, records
//
//	sluice.decisions            counter, {decision}:      sluice.limiter, sluice.algorithm, sluice.verb, sluice.outcome
//	sluice.decision.duration    histogram, s:             sluice.limiter, sluice.algorithm, sluice.verb
//	sluice.store.errors         counter, {error}:         sluice.limiter, sluice.algorithm, error.type
//	sluice.leases.held          up-down counter, {lease}: sluice.limiter
//	sluice.lease.expiries       counter, {lease}:         sluice.limiter
//	sluice.lease.wait.duration  histogram, s:             sluice.limiter
//
// with the attribute values of the sluiceprom adapter: the name given
// with [sluice.WithName] ("" if none); leaky_bucket, gcra, token_bucket,
// fixed_window, sliding_log, sliding_counter or concurrency; allow,
// check, fill, reserve, cancel or "at most", and for a lease of a
// concurrency limit acquire (TryAcquire, Acquire), release or extend;
// allowed, denied, invalid, canceled, timeout or store_error
// ([sluice.Event.Outcome]); and for a store error, error.type timeout or
// store_error. Every attribute value is bounded; keys are never
// attributes. The decision's context is passed on, so exemplars link to
// its trace.
//
// The lease instruments are those of the holders in this process, for
// each concurrency limit ([sluice.NewConcurrencyLimit]) observed. A lease
// is held from its grant until the store decides its release (a release
// that failed leaves it held: the store may hold it until its expiry),
// or until an extension finds it expired; a release or an
// extension that finds its lease expired is an expiry: a holder that
// outlived its time to live, whose slot may have gone to another. An
// Acquire granted its lease records how long it waited, on the limiter's
// clock, in boundaries from a millisecond to a minute by default
// ([WithWaitBuckets]): one granted at once falls in the first bucket, or
// records nothing if the clock did not move between its readings (a fake
// clock). A TryAcquire records no wait. Allow on a concurrency limit
// takes a lease nobody releases, and is not counted.
package sluiceotel

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/sluice-go/sluice"
	"github.com/sluice-go/sluice/internal/metrics"
)

// ScopeName is the name of the meter Metrics records with.
const ScopeName = "github.com/sluice-go/sluice/sluiceotel"

// DefaultBuckets are the boundaries, in seconds, of the decision
// duration histogram: 1µs to about 4s, each four times the last.
var DefaultBuckets = []float64{1e-6, 4e-6, 16e-6, 64e-6, 256e-6, 1.024e-3, 4.096e-3, 16.384e-3, 65.536e-3, 262.144e-3, 1.048576, 4.194304}

// DefaultWaitBuckets are the boundaries, in seconds, of the lease wait
// histogram: 1ms to about a minute (65.5s), each four times the last.
var DefaultWaitBuckets = []float64{1e-3, 4e-3, 16e-3, 64e-3, 0.256, 1.024, 4.096, 16.384, 65.536}

// Metrics records the decisions of the limiters it observes. It is safe
// for concurrent use. The zero value is not usable: call [New].
type Metrics struct {
	decisions   metric.Int64Counter
	duration    metric.Float64Histogram
	storeErrors metric.Int64Counter
	leasesHeld  metric.Int64UpDownCounter
	expiries    metric.Int64Counter
	leaseWait   metric.Float64Histogram
	series      *metrics.Table[series]
	errorLog    *metrics.ErrorLog
}

// series holds the attribute sets of one combination of labels, made
// once, as options ready to pass.
type series struct {
	decision   []metric.AddOption
	duration   []metric.RecordOption
	storeError []metric.AddOption    // nil unless the outcome is a store error
	lease      []metric.AddOption    // the limiter's; nil unless the decision is a lease's
	wait       []metric.RecordOption // the limiter's, with lease
}

// Option configures [Metrics].
type Option func(*config) error

type config struct {
	buckets     []float64
	waitBuckets []float64
	logger      *slog.Logger
}

// WithBuckets sets the decision duration histogram's boundaries, in
// seconds, increasing; the default is [DefaultBuckets].
func WithBuckets(buckets []float64) Option {
	return func(c *config) error {
		if err := metrics.CheckBuckets("sluiceotel", buckets); err != nil {
			return err
		}
		c.buckets = buckets
		return nil
	}
}

// WithWaitBuckets sets the lease wait histogram's boundaries, in
// seconds, increasing; the default is [DefaultWaitBuckets].
func WithWaitBuckets(buckets []float64) Option {
	return func(c *config) error {
		if err := metrics.CheckBuckets("sluiceotel", buckets); err != nil {
			return err
		}
		c.waitBuckets = buckets
		return nil
	}
}

// WithLogger logs store errors (timeouts and other failures of the store)
// to logger at level Error, at most one record per second for each
// limiter, algorithm, verb and outcome; each record says how many it
// stands for. By default nothing is logged.
func WithLogger(logger *slog.Logger) Option {
	return func(c *config) error {
		if logger == nil {
			return fmt.Errorf("%w: sluiceotel: nil logger", sluice.ErrInvalidConfig)
		}
		c.logger = logger
		return nil
	}
}

// New returns Metrics recording with a meter of provider, whose Observe
// method to give to limiters with [sluice.WithObserver].
func New(provider metric.MeterProvider, opts ...Option) (*Metrics, error) {
	if provider == nil {
		return nil, fmt.Errorf("%w: sluiceotel: nil meter provider", sluice.ErrInvalidConfig)
	}
	c := config{buckets: DefaultBuckets, waitBuckets: DefaultWaitBuckets}
	for _, o := range opts {
		if err := o(&c); err != nil {
			return nil, err
		}
	}
	meter := provider.Meter(ScopeName)
	decisions, err1 := meter.Int64Counter("sluice.decisions", metric.WithUnit("{decision}"),
		metric.WithDescription("Decisions made by sluice limiters, by limiter, algorithm, verb and outcome."))
	duration, err2 := meter.Float64Histogram("sluice.decision.duration", metric.WithUnit("s"),
		metric.WithDescription("Time sluice limiters took to decide, store round trip included."),
		metric.WithExplicitBucketBoundaries(c.buckets...))
	storeErrors, err3 := meter.Int64Counter("sluice.store.errors", metric.WithUnit("{error}"),
		metric.WithDescription("Decisions that failed because the store timed out or failed."))
	leasesHeld, err4 := meter.Int64UpDownCounter("sluice.leases.held", metric.WithUnit("{lease}"),
		metric.WithDescription("Leases of sluice concurrency limits held by this process's holders: granted, and neither released nor found expired."))
	expiries, err5 := meter.Int64Counter("sluice.lease.expiries", metric.WithUnit("{lease}"),
		metric.WithDescription("Releases and extensions of sluice leases that found the lease expired: holders that outlived their lease's time to live."))
	leaseWait, err6 := meter.Float64Histogram("sluice.lease.wait.duration", metric.WithUnit("s"),
		metric.WithDescription("Time Acquire waited for the sluice leases it was granted."),
		metric.WithExplicitBucketBoundaries(c.waitBuckets...))
	if err := errors.Join(err1, err2, err3, err4, err5, err6); err != nil {
		return nil, fmt.Errorf("sluiceotel: creating instruments: %w", err)
	}
	m := &Metrics{
		decisions:   decisions,
		duration:    duration,
		storeErrors: storeErrors,
		leasesHeld:  leasesHeld,
		expiries:    expiries,
		leaseWait:   leaseWait,
		series:      metrics.NewTable(resolve),
		errorLog:    metrics.NewErrorLog(c.logger, time.Second),
	}
	return m, nil
}

func resolve(k metrics.Key) series {
	limiter := attribute.String("sluice.limiter", k.Limiter)
	alg := attribute.String("sluice.algorithm", metrics.Algorithm(k.Kind))
	verb := attribute.String("sluice.verb", metrics.Verb(k.Verb, k.Lease))
	s := series{
		decision: []metric.AddOption{metric.WithAttributeSet(attribute.NewSet(limiter, alg, verb,
			attribute.String("sluice.outcome", k.Outcome.String())))},
		duration: []metric.RecordOption{metric.WithAttributeSet(attribute.NewSet(limiter, alg, verb))},
	}
	if k.Outcome.Failed() {
		s.storeError = []metric.AddOption{metric.WithAttributeSet(attribute.NewSet(limiter, alg,
			attribute.String("error.type", k.Outcome.String())))}
	}
	if k.Lease {
		set := metric.WithAttributeSet(attribute.NewSet(limiter))
		s.lease, s.wait = []metric.AddOption{set}, []metric.RecordOption{set}
	}
	return s
}

// Observe records one decision, and for a lease's, the leases held,
// expired and waited for. It is a [sluice.Observer]: give m.Observe to
// [sluice.WithObserver].
func (m *Metrics) Observe(ctx context.Context, e sluice.Event) { m.observe(ctx, &e) }

// observe is Observe. Observe, small enough to be inlined into the
// wrapper that m.Observe makes, passes the Event on by its address, so
// that it is not copied once more per decision.
func (m *Metrics) observe(ctx context.Context, e *sluice.Event) {
	s := m.series.Get(metrics.KeyOf(e, metrics.OutcomeOf(e)))
	m.decisions.Add(ctx, 1, s.decision...)
	m.duration.Record(ctx, e.Latency.Seconds(), s.duration...)
	if s.storeError != nil {
		m.storeErrors.Add(ctx, 1, s.storeError...)
		m.errorLog.Log(ctx, e)
	}
	if s.lease != nil {
		c := metrics.LeaseChangeOf(e)
		if c.Held != 0 {
			m.leasesHeld.Add(ctx, c.Held, s.lease...)
		}
		if c.Expired {
			m.expiries.Add(ctx, 1, s.lease...)
		}
		if c.Waited > 0 {
			m.leaseWait.Record(ctx, c.Waited.Seconds(), s.wait...)
		}
	}
}
