package redisstore

import (
	"context"
	_ "embed"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluice-go/sluice"
)

// maxTime bounds the times of requests, as sluice does: 2^62 ns since the
// Unix epoch, in 2116.
const maxTime = 1 << 62

// maxSpan bounds the spans an algorithm computes with: the script's
// integers are exact below 2^53.
const maxSpan = 1 << 53

//go:embed apply.lua
var applySource string

// Store is a [sluice.Store] that keeps each key's state in a Redis hash and
// runs every decision as one Lua script call. It is safe for concurrent
// use, and recovers by itself when Redis comes back after a failure.
type Store struct {
	client      redis.UniversalClient
	script      *redis.Script
	prefix      string
	callerClock bool
	skewMillis  int64 // added to TTLs in caller-clock mode
}

var _ sluice.Store = (*Store)(nil)

// Option configures a [Store].
type Option interface {
	apply(*Store) error
}

type optionFunc func(*Store) error

func (f optionFunc) apply(s *Store) error { return f(s) }

// WithPrefix puts prefix before every key's name, to keep the store's keys
// apart from other data in the same Redis. It must not contain braces,
// which would take over the Cluster hash tag.
func WithPrefix(prefix string) Option {
	return optionFunc(func(s *Store) error {
		if strings.ContainsAny(prefix, "{}") {
			return fmt.Errorf("%w: redisstore: prefix %q contains a brace", sluice.ErrInvalidConfig, prefix)
		}
		s.prefix = prefix
		return nil
	})
}

// WithCallerClock makes decisions use the time the limiter passes in
// [sluice.Op].Now instead of the Redis server's clock, for processes
// whose clocks agree to within maxSkew.
//
// Keys still expire on the Redis server's clock, which the callers' clocks
// do not follow: each key's TTL is the time until its state is fresh plus
// maxSkew, so that a caller whose clock runs up to maxSkew behind the one
// that wrote the state still finds it. A second is a usual choice; tests
// whose simulated time runs slower than real time need more.
func WithCallerClock(maxSkew time.Duration) Option {
	return optionFunc(func(s *Store) error {
		if maxSkew < 0 {
			return fmt.Errorf("%w: redisstore: negative clock skew %v", sluice.ErrInvalidConfig, maxSkew)
		}
		s.callerClock = true
		s.skewMillis = int64((maxSkew + time.Millisecond - 1) / time.Millisecond)
		return nil
	})
}

// New returns a store on client, which may be a single node, Sentinel or
// Cluster client. It does not contact Redis.
func New(client redis.UniversalClient, opts ...Option) (*Store, error) {
	if client == nil {
		return nil, fmt.Errorf("%w: redisstore: nil client", sluice.ErrInvalidConfig)
	}
	s := &Store{client: client, script: redis.NewScript(applySource)}
	for _, o := range opts {
		if err := o.apply(s); err != nil {
			return nil, err
		}
	}
	return s, nil
}

// Key returns the name of the Redis hash that holds key's state.
func (s *Store) Key(key string) string {
	return s.prefix + "{" + key + "}"
}

// Apply runs op against key's state under p in one script call, atomically,
// and returns the decision. It implements [sluice.Store].
//
// Invalid Params and ops are reported without contacting Redis, as
// [sluice.Params.Step] reports them; Params whose longest span is 2^53 ns
// or more give an error wrapping [sluice.ErrUnsupported]; a key holding
// another algorithm's state, until that state is fresh, gives one wrapping
// [sluice.ErrKeyConflict]. In server-clock mode op.Now is ignored, and
// otherwise it must be in [0, 2^62] ns since the epoch, as for Step.
func (s *Store) Apply(ctx context.Context, key string, p *sluice.Params, op sluice.Op) (sluice.Decision, error) {
	if err := p.Validate(); err != nil {
		return sluice.Decision{}, err
	}
	d := sluice.Decision{Limit: p.Limit}
	if err := checkOp(p, op, s.callerClock); err != nil {
		return d, err
	}
	if span := longestSpan(p); span >= maxSpan {
		return d, fmt.Errorf("%w: redisstore: %v spans %v, at least 2^53 ns, beyond what the script computes exactly",
			sluice.ErrUnsupported, p, time.Duration(span))
	}
	reply, err := s.script.Run(ctx, s.client, []string{s.Key(key)}, s.args(p, op)...).Result()
	if err != nil {
		return d, fmt.Errorf("redisstore: %v on key %q: %w", op.Verb, key, err)
	}
	return decode(reply, key, p)
}

// Reset deletes key's state. It implements [sluice.Store].
func (s *Store) Reset(ctx context.Context, key string) error {
	if err := s.client.Del(ctx, s.Key(key)).Err(); err != nil {
		return fmt.Errorf("redisstore: reset key %q: %w", key, err)
	}
	return nil
}

// checkOp validates op against p as [sluice.Params.Step] does, and op.Now
// only if the decision uses it.
func checkOp(p *sluice.Params, op sluice.Op, usesNow bool) error {
	if !(op.Cost >= 0) || math.IsInf(op.Cost, 0) {
		return fmt.Errorf("%w: %v", sluice.ErrInvalidCost, op.Cost)
	}
	if usesNow && (op.Now < 0 || op.Now > maxTime) {
		return fmt.Errorf("%w: %v", sluice.ErrTimeOutOfRange, time.Unix(0, op.Now).UTC())
	}
	switch op.Verb {
	case sluice.VerbAllow, sluice.VerbCheck:
		if op.Cost > p.Limit {
			return fmt.Errorf("%w: cost %v > limit %v", sluice.ErrCostExceedsLimit, op.Cost, p.Limit)
		}
	case sluice.VerbFill:
		if p.Kind != sluice.KindLeakyBucket {
			return fmt.Errorf("%w: %v does not support fill-ups", sluice.ErrUnsupported, p.Kind)
		}
	default:
		return fmt.Errorf("%w: %v", sluice.ErrUnsupported, op.Verb)
	}
	return nil
}

// longestSpan returns the longest duration, in nanoseconds, that p's
// algorithm computes with: the window (twice it for the sliding counter,
// which remembers the previous window), GCRA's burst, or the time a full
// bucket takes to drain or refill, as [sluice.Params.Validate] bounds it.
func longestSpan(p *sluice.Params) float64 {
	span := float64(p.Interval)
	switch p.Kind {
	case sluice.KindGCRA:
		span = max(span, p.Limit*span)
	case sluice.KindLeakyBucket, sluice.KindTokenBucket:
		span = math.Ceil(p.Limit/p.Amount) * span
	case sluice.KindSlidingCounter:
		span *= 2
	}
	return span
}

// args returns the script's ARGV for p and op. Numbers go as they are:
// go-redis writes an int64 in decimal and a float64 in the shortest form
// that reads back exactly (strconv's 'f', -1), so Lua's tonumber gets the
// same double; and small integers and constants box without allocating.
func (s *Store) args(p *sluice.Params, op sluice.Op) []any {
	variant := 0
	if p.IntervalRefill || p.Anchored {
		variant = 1
	}
	var sec, nsec, margin any = "", "", 0
	if s.callerClock {
		q := floorDiv(op.Now, 1e9)
		sec, nsec, margin = q, op.Now-q*1e9, s.skewMillis
	}
	return []any{uint8(p.Kind), p.Limit, p.Interval, p.Amount, variant, p.MaxEntries, uint8(op.Verb), op.Cost, sec, nsec, margin}
}

// floorDiv returns a/b rounded toward negative infinity, for b > 0.
func floorDiv(a, b int64) int64 {
	q := a / b
	if a%b < 0 {
		q--
	}
	return q
}

// decode turns the script's reply into a decision. A reply of an
// unexpected shape is an error.
func decode(reply any, key string, p *sluice.Params) (sluice.Decision, error) {
	d := sluice.Decision{Limit: p.Limit}
	f, ok := stringFields(reply)
	switch {
	case ok && len(f) == 2 && f[0] == "conflict":
		kind, err := strconv.ParseUint(f[1], 10, 8)
		if err != nil {
			return d, fmt.Errorf("redisstore: key %q holds state of unknown kind %q", key, f[1])
		}
		return d, fmt.Errorf("%w: key %q holds %v state, not %v", sluice.ErrKeyConflict, key, sluice.Kind(kind), p.Kind)
	case !ok || len(f) != 6 || f[0] != "ok" || f[1] != "0" && f[1] != "1":
		return d, fmt.Errorf("redisstore: key %q: unexpected script reply %v", key, reply)
	}
	var errs [4]error
	d.Allowed = f[1] == "1"
	d.Used, errs[0] = strconv.ParseFloat(f[2], 64)
	d.Remaining, errs[1] = strconv.ParseFloat(f[3], 64)
	d.RetryAfter, errs[2] = parseNanos(f[4])
	d.ResetAfter, errs[3] = parseNanos(f[5])
	for _, err := range errs {
		if err != nil {
			return sluice.Decision{Limit: p.Limit}, fmt.Errorf("redisstore: key %q: unexpected script reply %v: %w", key, reply, err)
		}
	}
	return d, nil
}

func parseNanos(s string) (time.Duration, error) {
	ns, err := strconv.ParseInt(s, 10, 64)
	if err == nil && ns < 0 {
		err = fmt.Errorf("negative duration %d", ns)
	}
	return time.Duration(ns), err
}

// stringFields returns reply's elements if it is an array of strings.
func stringFields(reply any) ([]string, bool) {
	items, ok := reply.([]any)
	if !ok {
		return nil, false
	}
	f := make([]string, len(items))
	for i, item := range items {
		if f[i], ok = item.(string); !ok {
			return nil, false
		}
	}
	return f, true
}
