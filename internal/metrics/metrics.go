// Package metrics is what sluice's metrics adapters (sluiceprom,
// sluiceotel) share: label values, a lock-free table of the series already
// resolved, what a lease's decision changes in the leases counted, and a
// rate-limited log of store errors.
package metrics

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluice-go/sluice"
	"github.com/sluice-go/sluice/engine"
	"github.com/sluice-go/sluice/internal/outcome"
)

var algorithms = [...]string{
	engine.KindLeakyBucket:    "leaky_bucket",
	engine.KindGCRA:           "gcra",
	engine.KindTokenBucket:    "token_bucket",
	engine.KindFixedWindow:    "fixed_window",
	engine.KindSlidingLog:     "sliding_log",
	engine.KindSlidingCounter: "sliding_counter",
	engine.KindConcurrency:    "concurrency",
}

// Algorithm returns k's name as a label value: lower case, words joined by
// underscores ("gcra", "token_bucket", "concurrency"), or "unknown".
func Algorithm(k engine.Kind) string {
	if int(k) < len(algorithms) && algorithms[k] != "" {
		return algorithms[k]
	}
	return "unknown"
}

// Verb returns a decision's verb as a label value: for a lease's decision
// (lease, [sluice.Event].Lease), "acquire" for VerbAllow (TryAcquire and
// Acquire), "release" for VerbCancel and "extend" for VerbExtend; for any
// other, v's own name ("allow", "check", "fill", "reserve", "cancel",
// "at most", "extend", "exhaust", "charge", "refund"). An Allow on a
// concurrency limit is not a lease's decision: it stays "allow".
func Verb(v engine.Verb, lease bool) string {
	if lease {
		switch v {
		case engine.VerbAllow:
			return "acquire"
		case engine.VerbCancel:
			return "release"
		case engine.VerbExtend:
			return "extend"
		}
	}
	return v.String()
}

// Key is what selects a series: every label of a decision. Its values are
// bounded: the limiters' names, and a few algorithms, verbs and outcomes.
type Key struct {
	Limiter string
	Kind    engine.Kind
	Verb    engine.Verb
	Outcome outcome.Class // [sluice.Event.Outcome], a byte: a string would cost a hash per decision
	// Lease reports a lease's decision, whose verb is named apart
	// ([Verb]) and which counts in the leases' series ([LeaseChangeOf]).
	Lease bool
}

// KeyOf returns the key of e, whose outcome is o (OutcomeOf(e)). It takes
// o apart so that it is inlined where a key is looked up, per decision:
// a Key returned from a call is copied once more before the lookup.
func KeyOf(e *sluice.Event, o outcome.Class) Key {
	return Key{Limiter: e.Limiter, Kind: e.Kind, Verb: e.Verb, Outcome: o, Lease: e.Lease}
}

// OutcomeOf returns e's outcome ([sluice.Event.Outcome]) as a Class. A
// decision without an error, nearly every one, is "allowed" or "denied"
// by its Decision alone, as Event.Outcome documents: that costs one
// comparison, where the name costs a chain of loads.
func OutcomeOf(e *sluice.Event) outcome.Class {
	switch {
	case e.Err != nil:
		return outcome.Of(e.Outcome())
	case e.Decision.Allowed:
		return outcome.Allowed
	}
	return outcome.Denied
}

// LeaseChange is what one decision changes in the leases that the holders
// of a process are counted to hold, as both adapters count them.
type LeaseChange struct {
	// Held is the change in leases held: +1, -1, or 0.
	Held int64
	// Expired reports a release or an extension that found its lease
	// expired: a holder that outlived its time to live.
	Expired bool
	// Waited is how long an Acquire waited for the lease it was granted,
	// on the limiter's clock: a few nanoseconds for one granted at once,
	// zero if the clock did not move (a fake clock). Zero for any other
	// decision, a TryAcquire's included: no wait to record.
	Waited time.Duration
}

// LeaseChangeOf returns what e changes in the leases held, so that a
// lease is counted held from its grant until its holder lets go of it:
//
//   - a granted acquisition (TryAcquire or Acquire: Lease, VerbAllow,
//     allowed) that took a lease adds one, and an Acquire's (Waited > 0)
//     is a wait of that length. One that took none, with no lease to
//     release (Decision.At zero: a cost of zero, which holds nothing, or
//     a group's acquisition that another of its limits denied), changes
//     nothing;
//   - a release (VerbCancel) that the store decided removes one: granted,
//     or found expired (denied), which is an expiry. One that failed (a
//     store error or timeout) changes nothing: the store may hold the
//     lease until its expiry, and its holder may release it again;
//   - an extension (VerbExtend) that found its lease expired (denied)
//     removes one, and is an expiry: the [sluice.Lease] forgets it, and
//     its later Release is not decided. An extension granted, or that
//     failed, changes nothing: its holder still holds the lease, as far
//     as it knows;
//   - any other decision, a lease's denied or failed acquisition
//     included, changes nothing.
//
// It allocates nothing.
func LeaseChangeOf(e *sluice.Event) LeaseChange {
	if !e.Lease {
		return LeaseChange{}
	}
	o := OutcomeOf(e)
	switch e.Verb {
	case engine.VerbAllow:
		if o == outcome.Allowed && e.Decision.At != 0 {
			return LeaseChange{Held: 1, Waited: max(e.Waited, 0)}
		}
	case engine.VerbCancel:
		if o == outcome.Allowed || o == outcome.Denied {
			return LeaseChange{Held: -1, Expired: o == outcome.Denied}
		}
	case engine.VerbExtend:
		if o == outcome.Denied {
			return LeaseChange{Held: -1, Expired: true}
		}
	}
	return LeaseChange{}
}

// Table maps keys to the series an adapter resolved for them. Reads take
// no lock and allocate nothing. A key looked up recently is found in a
// small direct-mapped cache, placed by its small fields and its name's
// length and outer bytes, and compared whole: no hash of its name per
// decision. Any other is found in a map, copied on write once per new
// key, of which there are few.
type Table[T any] struct {
	recent  [recentSlots]atomic.Pointer[entry[T]]
	m       atomic.Pointer[map[Key]*entry[T]]
	mu      sync.Mutex // serializes writers of m
	resolve func(Key) T
}

// An entry is a key and its series, made once and never written again.
type entry[T any] struct {
	key Key
	v   T
}

// A Table's cache has recentSlots slots, 512 bytes of pointers, for the
// few keys a process's limiters decide under.
const (
	recentBits  = 6
	recentSlots = 1 << recentBits
)

// NewTable returns a table that resolves a new key with resolve.
func NewTable[T any](resolve func(Key) T) *Table[T] {
	t := &Table[T]{resolve: resolve}
	t.m.Store(&map[Key]*entry[T]{})
	return t
}

// Get returns k's series, resolving it on first use. The series is
// shared, never copied: read it, do not write it.
func (t *Table[T]) Get(k Key) *T {
	r := &t.recent[spot(&k)]
	if e := r.Load(); e != nil && e.key == k {
		return &e.v
	}
	e := t.lookup(k)
	r.Store(e) // two keys that share a slot each cost a map lookup in turn
	return &e.v
}

// spot returns k's slot in a Table's cache.
func spot(k *Key) int {
	h := uint64(len(k.Limiter)) | uint64(k.Kind)<<16 | uint64(k.Verb)<<24 | uint64(k.Outcome)<<32
	if k.Lease {
		h |= 1 << 40
	}
	if n := len(k.Limiter); n > 0 {
		h |= uint64(k.Limiter[0])<<48 | uint64(k.Limiter[n-1])<<56
	}
	return int(h * 0x9e3779b97f4a7c15 >> (64 - recentBits)) // Fibonacci hashing
}

// lookup returns k's entry from the map, adding it on first use.
func (t *Table[T]) lookup(k Key) *entry[T] {
	if e, ok := (*t.m.Load())[k]; ok {
		return e
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	old := *t.m.Load()
	if e, ok := old[k]; ok {
		return e
	}
	e := &entry[T]{key: k, v: t.resolve(k)}
	m := make(map[Key]*entry[T], len(old)+1)
	for k, e := range old {
		m[k] = e
	}
	m[k] = e
	t.m.Store(&m)
	return e
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
	if l == nil || l.logger == nil {
		return
	}
	o := OutcomeOf(e)
	if !o.Failed() {
		return
	}
	k := KeyOf(e, o)
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
		slog.String("verb", Verb(e.Verb, e.Lease)),
		slog.String("outcome", o.String()),
		slog.Duration("latency", e.Latency),
		slog.Int("suppressed", skipped),
		slog.Any("error", e.Err))
}
