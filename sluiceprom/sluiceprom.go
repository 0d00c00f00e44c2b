// Package sluiceprom exports the decisions of sluice limiters as
// Prometheus metrics.
//
// A [Metrics] is a [prometheus.Collector] whose Observe method is a
// [sluice.Observer]: register it, and give its Observe method to each
// limiter with a name of its own:
//
//	m, err := sluiceprom.New(sluiceprom.WithLogger(slog.Default()))
//	if err != nil {
//		return err
//	}
//	prometheus.MustRegister(m)
//	lim, err := sluice.NewGCRA(sluice.PerSecond(10), 20,
//		sluice.WithName("api"), sluice.WithObserver(m.Observe))
//
// It exports
//
//	sluice_decisions_total{limiter, algorithm, verb, outcome}   counter
//	sluice_decision_duration_seconds{limiter, algorithm, verb}  histogram
//	sluice_store_errors_total{limiter, algorithm, reason}       counter
//	sluice_leases_held{limiter}                                 gauge
//	sluice_lease_expiries_total{limiter}                        counter
//	sluice_lease_wait_seconds{limiter}                          histogram
//
// where limiter is the name given with [sluice.WithName] ("" if none;
// bytes that are not UTF-8, which a label cannot hold, become U+FFFD),
// algorithm one of leaky_bucket, gcra, token_bucket, fixed_window,
// sliding_log, sliding_counter, concurrency, verb one of allow, check,
// fill, reserve, cancel, "at most", and for a lease of a concurrency limit
// acquire (TryAcquire, Acquire), release or extend, and outcome one of
// allowed, denied, invalid, canceled, timeout, store_error
// ([sluice.Event.Outcome]). A store error's reason is timeout or store_error:
// invalid requests and callers that went away are not the store's
// failures. Every label value is bounded; keys are never labels.
//
// Decision durations are on the limiter's clock, from a microsecond to
// seconds by default ([WithBuckets]): an in-memory decision falls in the
// first bucket, a Redis or PostgreSQL round trip in the tens to hundreds
// of microseconds, a timeout at the limiter's timeout.
//
// The lease metrics are those of the holders in this process, for each
// concurrency limit ([sluice.NewConcurrencyLimit]) observed. A lease is
// held from its grant until the store decides its release (a release
// that failed leaves it held: the store may hold it until its expiry),
// or until an extension finds it expired; a release or an
// extension that finds its lease expired is an expiry: a holder that
// outlived its time to live, whose slot may have gone to another. An
// Acquire granted its lease records how long it waited, on the limiter's
// clock, from a millisecond to a minute by default ([WithWaitBuckets]):
// one granted at once falls in the first bucket, or records nothing if
// the clock did not move between its readings (a fake clock). A
// TryAcquire records no wait. Allow on a concurrency limit takes a lease
// nobody releases, and is not counted.
package sluiceprom

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluice-go/sluice"
	"github.com/sluice-go/sluice/internal/metrics"
)

// DefaultBuckets are the upper bounds, in seconds, of the decision
// duration histogram: 1µs to about 4s, each four times the last.
var DefaultBuckets = prometheus.ExponentialBuckets(1e-6, 4, 12)

// DefaultWaitBuckets are the upper bounds, in seconds, of the lease wait
// histogram: 1ms to about a minute (65.5s), each four times the last.
var DefaultWaitBuckets = prometheus.ExponentialBuckets(1e-3, 4, 9)

// Metrics counts the decisions of the limiters it observes. It is safe for
// concurrent use. The zero value is not usable: call [New].
type Metrics struct {
	decisions   *prometheus.CounterVec
	duration    *prometheus.HistogramVec
	storeErrors *prometheus.CounterVec
	leasesHeld  *prometheus.GaugeVec
	expiries    *prometheus.CounterVec
	leaseWait   *prometheus.HistogramVec
	series      *metrics.Table[series]
	errorLog    *metrics.ErrorLog
}

// series are the metrics of one combination of labels, resolved once.
type series struct {
	decisions  prometheus.Counter
	duration   prometheus.Observer
	storeError prometheus.Counter // nil unless the outcome is a store error

	// The limiter's lease metrics: nil unless the decision is a lease's.
	held     prometheus.Gauge
	expiries prometheus.Counter
	wait     prometheus.Observer
}

var _ prometheus.Collector = (*Metrics)(nil)

// Option configures [Metrics].
type Option func(*config) error

type config struct {
	buckets     []float64
	waitBuckets []float64
	logger      *slog.Logger
	logInterval time.Duration
	constLabels prometheus.Labels
}

// WithBuckets sets the decision duration histogram's upper bounds, in
// seconds, increasing; the default is [DefaultBuckets].
func WithBuckets(buckets []float64) Option {
	return func(c *config) error {
		if err := metrics.CheckBuckets("sluiceprom", buckets); err != nil {
			return err
		}
		c.buckets = buckets
		return nil
	}
}

// WithWaitBuckets sets the lease wait histogram's upper bounds, in
// seconds, increasing; the default is [DefaultWaitBuckets].
func WithWaitBuckets(buckets []float64) Option {
	return func(c *config) error {
		if err := metrics.CheckBuckets("sluiceprom", buckets); err != nil {
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
			return fmt.Errorf("%w: sluiceprom: nil logger", sluice.ErrInvalidConfig)
		}
		c.logger = logger
		return nil
	}
}

// WithConstLabels adds labels with fixed values to every metric, for
// example the name of the service.
func WithConstLabels(labels prometheus.Labels) Option {
	return func(c *config) error {
		c.constLabels = labels
		return nil
	}
}

// New returns Metrics, to register with a Prometheus registry, and whose
// Observe method to give to limiters with [sluice.WithObserver].
func New(opts ...Option) (*Metrics, error) {
	c := config{buckets: DefaultBuckets, waitBuckets: DefaultWaitBuckets, logInterval: time.Second}
	for _, o := range opts {
		if err := o(&c); err != nil {
			return nil, err
		}
	}
	m := &Metrics{
		decisions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name:        "sluice_decisions_total",
			Help:        "Decisions made by sluice limiters, by limiter, algorithm, verb and outcome.",
			ConstLabels: c.constLabels,
		}, []string{"limiter", "algorithm", "verb", "outcome"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:        "sluice_decision_duration_seconds",
			Help:        "Time sluice limiters took to decide, store round trip included.",
			Buckets:     c.buckets,
			ConstLabels: c.constLabels,
		}, []string{"limiter", "algorithm", "verb"}),
		storeErrors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name:        "sluice_store_errors_total",
			Help:        "Decisions that failed because the store timed out or failed.",
			ConstLabels: c.constLabels,
		}, []string{"limiter", "algorithm", "reason"}),
		leasesHeld: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name:        "sluice_leases_held",
			Help:        "Leases of sluice concurrency limits held by this process's holders: granted, and neither released nor found expired.",
			ConstLabels: c.constLabels,
		}, []string{"limiter"}),
		expiries: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name:        "sluice_lease_expiries_total",
			Help:        "Releases and extensions of sluice leases that found the lease expired: holders that outlived their lease's time to live.",
			ConstLabels: c.constLabels,
		}, []string{"limiter"}),
		leaseWait: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:        "sluice_lease_wait_seconds",
			Help:        "Time Acquire waited for the sluice leases it was granted.",
			Buckets:     c.waitBuckets,
			ConstLabels: c.constLabels,
		}, []string{"limiter"}),
		errorLog: metrics.NewErrorLog(c.logger, c.logInterval),
	}
	m.series = metrics.NewTable(m.resolve)
	return m, nil
}

func (m *Metrics) resolve(k metrics.Key) series {
	// A label value must be UTF-8, or WithLabelValues panics; a limiter's
	// name is whatever its owner chose, so invalid bytes become U+FFFD.
	limiter := strings.ToValidUTF8(k.Limiter, "\uFFFD")
	alg, verb := metrics.Algorithm(k.Kind), metrics.Verb(k.Verb, k.Lease)
	s := series{
		decisions: m.decisions.WithLabelValues(limiter, alg, verb, k.Outcome.String()),
		duration:  m.duration.WithLabelValues(limiter, alg, verb),
	}
	if k.Outcome.Failed() {
		s.storeError = m.storeErrors.WithLabelValues(limiter, alg, k.Outcome.String())
	}
	if k.Lease {
		// All three, from the limiter's first lease on: an expiry counter
		// that exists at zero shows its first increase.
		s.held = m.leasesHeld.WithLabelValues(limiter)
		s.expiries = m.expiries.WithLabelValues(limiter)
		s.wait = m.leaseWait.WithLabelValues(limiter)
	}
	return s
}

// Observe counts one decision, and for a lease's, the leases held,
// expired and waited for. It is a [sluice.Observer]: give m.Observe to
// [sluice.WithObserver].
func (m *Metrics) Observe(ctx context.Context, e sluice.Event) { m.observe(ctx, &e) }

// observe is Observe. Observe, small enough to be inlined into the
// wrapper that m.Observe makes, passes the Event on by its address, so
// that it is not copied once more per decision.
func (m *Metrics) observe(ctx context.Context, e *sluice.Event) {
	s := m.series.Get(metrics.KeyOf(e, metrics.OutcomeOf(e)))
	s.decisions.Inc()
	s.duration.Observe(e.Latency.Seconds())
	if s.storeError != nil {
		s.storeError.Inc()
		m.errorLog.Log(ctx, e)
	}
	if s.held != nil {
		c := metrics.LeaseChangeOf(e)
		if c.Held != 0 {
			s.held.Add(float64(c.Held))
		}
		if c.Expired {
			s.expiries.Inc()
		}
		if c.Waited > 0 {
			s.wait.Observe(c.Waited.Seconds())
		}
	}
}

// Describe implements [prometheus.Collector].
func (m *Metrics) Describe(ch chan<- *prometheus.Desc) {
	m.decisions.Describe(ch)
	m.duration.Describe(ch)
	m.storeErrors.Describe(ch)
	m.leasesHeld.Describe(ch)
	m.expiries.Describe(ch)
	m.leaseWait.Describe(ch)
}

// Collect implements [prometheus.Collector].
func (m *Metrics) Collect(ch chan<- prometheus.Metric) {
	m.decisions.Collect(ch)
	m.duration.Collect(ch)
	m.storeErrors.Collect(ch)
	m.leasesHeld.Collect(ch)
	m.expiries.Collect(ch)
	m.leaseWait.Collect(ch)
}
