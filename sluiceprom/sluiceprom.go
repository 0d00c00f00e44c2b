// Package sluiceprom exports the decisions of sluice limiters as
// Prometheus metrics.
//
// A [Metrics] is a [sluice.Observer] and a [prometheus.Collector]: register
// it, and give it to each limiter with a name of its own:
//
//	m, err := sluiceprom.New(sluiceprom.WithLogger(slog.Default()))
//	if err != nil {
//		return err
//	}
//	prometheus.MustRegister(m)
//	lim, err := sluice.NewGCRA(sluice.PerSecond(10), 20,
//		sluice.WithName("api"), sluice.WithObserver(m))
//
// It exports
//
//	sluice_decisions_total{limiter, algorithm, verb, outcome}   counter
//	sluice_decision_duration_seconds{limiter, algorithm, verb}  histogram
//	sluice_store_errors_total{limiter, algorithm, reason}       counter
//
// where limiter is the name given with [sluice.WithName] ("" if none;
// bytes that are not UTF-8, which a label cannot hold, become U+FFFD),
// algorithm one of leaky_bucket, gcra, token_bucket, fixed_window,
// sliding_log, sliding_counter, verb one of allow, check, fill, and
// outcome one of allowed, denied, invalid, canceled, timeout, store_error
// ([sluice.Outcome]). A store error's reason is timeout or store_error:
// invalid requests and callers that went away are not the store's
// failures. Every label value is bounded; keys are never labels.
//
// Decision durations are on the limiter's clock, from a microsecond to
// seconds by default ([WithBuckets]): an in-memory decision falls in the
// first bucket, a Redis or PostgreSQL round trip in the tens to hundreds
// of microseconds, a timeout at the limiter's timeout.
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

// Metrics counts the decisions of the limiters it observes. It is safe for
// concurrent use. The zero value is not usable: call [New].
type Metrics struct {
	decisions   *prometheus.CounterVec
	duration    *prometheus.HistogramVec
	storeErrors *prometheus.CounterVec
	series      *metrics.Table[series]
	errorLog    *metrics.ErrorLog
}

// series are the metrics of one combination of labels, resolved once.
type series struct {
	decisions  prometheus.Counter
	duration   prometheus.Observer
	storeError prometheus.Counter // nil unless the outcome is a store error
}

var (
	_ sluice.Observer      = (*Metrics)(nil)
	_ prometheus.Collector = (*Metrics)(nil)
)

// Option configures [Metrics].
type Option func(*config) error

type config struct {
	buckets     []float64
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

// New returns Metrics, to register with a Prometheus registry and give
// to limiters with [sluice.WithObserver].
func New(opts ...Option) (*Metrics, error) {
	c := config{buckets: DefaultBuckets, logInterval: time.Second}
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
		errorLog: metrics.NewErrorLog(c.logger, c.logInterval),
	}
	m.series = metrics.NewTable(m.resolve)
	return m, nil
}

func (m *Metrics) resolve(k metrics.Key) series {
	// A label value must be UTF-8, or WithLabelValues panics; a limiter's
	// name is whatever its owner chose, so invalid bytes become U+FFFD.
	limiter := strings.ToValidUTF8(k.Limiter, "\uFFFD")
	alg, verb := metrics.Algorithm(k.Kind), k.Verb.String()
	s := series{
		decisions: m.decisions.WithLabelValues(limiter, alg, verb, k.Outcome.String()),
		duration:  m.duration.WithLabelValues(limiter, alg, verb),
	}
	if k.Outcome.Failed() {
		s.storeError = m.storeErrors.WithLabelValues(limiter, alg, k.Outcome.String())
	}
	return s
}

// Observe counts one decision. It implements [sluice.Observer].
func (m *Metrics) Observe(ctx context.Context, e sluice.Event) {
	s := m.series.Get(metrics.KeyOf(&e))
	s.decisions.Inc()
	s.duration.Observe(e.Latency.Seconds())
	if s.storeError != nil {
		s.storeError.Inc()
		m.errorLog.Log(ctx, &e)
	}
}

// Describe implements [prometheus.Collector].
func (m *Metrics) Describe(ch chan<- *prometheus.Desc) {
	m.decisions.Describe(ch)
	m.duration.Describe(ch)
	m.storeErrors.Describe(ch)
}

// Collect implements [prometheus.Collector].
func (m *Metrics) Collect(ch chan<- prometheus.Metric) {
	m.decisions.Collect(ch)
	m.duration.Collect(ch)
	m.storeErrors.Collect(ch)
}
