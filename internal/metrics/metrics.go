// Package metrics is what sluice's metrics adapters (sluiceprom,
// sluiceotel) share: label values, a lock-free table of the series already
// resolved, and a rate-limited log of store errors.
package metrics

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluice-go/sluice"
	"github.com/sluice-go/sluice/engine"
)

var algorithms = [...]string{
	engine.KindLeakyBucket:    "leaky_bucket",
	engine.KindGCRA:           "gcra",
	engine.KindTokenBucket:    "token_bucket",
	engine.KindFixedWindow:    "fixed_window",
	engine.KindSlidingLog:     "sliding_log",
	engine.KindSlidingCounter: "sliding_counter",
}

// Algorithm returns k's name as a label value: lower case, words joined by
// underscores ("gcra", "token_bucket"), or "unknown".
func Algorithm(k engine.Kind) string {
	if int(k) < len(algorithms) && algorithms[k] != "" {
		return algorithms[k]
	}
	return "unknown"
}

// Key is what selects a series: every label of a decision. Its values are
// bounded: the limiters' names, and a few algorithms, verbs and outcomes.
type Key struct {
	Limiter string
	Kind    engine.Kind
	Verb    engine.Verb
	Outcome sluice.Outcome
}

// KeyOf returns e's key.
func KeyOf(e *sluice.Event) Key {
	return Key{Limiter: e.Limiter, Kind: e.Kind, Verb: e.Verb, Outcome: e.Outcome}
}

// Table maps keys to the series an adapter resolved for them. Reads take
// no lock and allocate nothing; a new key copies the table, which happens
// once per key, and there are few.
type Table[T any] struct {
	m       atomic.Pointer[map[Key]T]
	mu      sync.Mutex // serializes writers
	resolve func(Key) T
}

// NewTable returns a table that resolves a new key with resolve.
func NewTable[T any](resolve func(Key) T) *Table[T] {
	t := &Table[T]{resolve: resolve}
	t.m.Store(&map[Key]T{})
	return t
}

// Get returns k's series, resolving it on first use.
func (t *Table[T]) Get(k Key) T {
	if v, ok := (*t.m.Load())[k]; ok {
		return v
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	old := *t.m.Load()
	if v, ok := old[k]; ok {
		return v
	}
	v := t.resolve(k)
	m := make(map[Key]T, len(old)+1)
	for k, v := range old {
		m[k] = v
	}
	m[k] = v
	t.m.Store(&m)
	return v
}

// ErrorLog logs store errors to a slog.Logger, at most one record per
// interval for each series; the next record says how many were left out.
// A store that is down fails every decision, and a log line per decision
// would bury everything else.
type ErrorLog struct {
	logger   *slog.Logger
	interval time.Duration
	last     sync.Map // Key -> *logState
}

type logState struct {
	mu      sync.Mutex
	at      time.Time
	skipped int
}

// NewErrorLog returns a log of store errors to logger, at most one record
// per interval per series. A nil logger logs nothing.
func NewErrorLog(logger *slog.Logger, interval time.Duration) *ErrorLog {
	return &ErrorLog{logger: logger, interval: interval}
}

// Log records e if it is a store error (a timeout or another failure of
// the store) and its series has not been logged within the interval.
func (l *ErrorLog) Log(ctx context.Context, e *sluice.Event) {
	if l == nil || l.logger == nil || !e.Outcome.Failed() {
		return
	}
	k := KeyOf(e)
	v, ok := l.last.Load(k)
	if !ok {
		v, _ = l.last.LoadOrStore(k, &logState{})
	}
	st := v.(*logState)
	now := time.Now()
	st.mu.Lock()
	if !st.at.IsZero() && now.Sub(st.at) < l.interval {
		st.skipped++
		st.mu.Unlock()
		return
	}
	skipped := st.skipped
	st.at, st.skipped = now, 0
	st.mu.Unlock()
	l.logger.LogAttrs(ctx, slog.LevelError, "sluice: store error",
		slog.String("limiter", e.Limiter),
		slog.String("algorithm", Algorithm(e.Kind)),
		slog.String("verb", e.Verb.String()),
		slog.String("outcome", e.Outcome.String()),
		slog.Duration("latency", e.Latency),
		slog.Int("suppressed", skipped),
		slog.Any("error", e.Err))
}
