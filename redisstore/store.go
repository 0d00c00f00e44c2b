package redisstore

import (
	"context"
	_ "embed"
	"encoding/binary"
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluice-go/sluice"
	"github.com/sluice-go/sluice/internal/arith"
)

// maxSpan bounds the spans an algorithm computes with: the script's
// integers are exact below 2^53.
const maxSpan = 1 << 53

//go:embed apply.lua
var applySource string

// The scripts, one per algorithm, and the sections of apply.lua each is
// made of between the prelude and the main section.
const (
	meterScript = iota
	gcraScript
	intervalRefillScript
	fixedWindowScript
	slidingLogScript
	slidingCounterScript
	numScripts
)

var scriptSections = [numScripts][]string{
	meterScript:          {"ceilNanos", "floorNanos", "drain", "meter"},
	gcraScript:           {"gcra"},
	intervalRefillScript: {"refills", "idiv", "mod", "intervalRefill"},
	fixedWindowScript:    {"mod", "window", "fixedWindow"},
	slidingLogScript:     {"slidingLog"},
	slidingCounterScript: {"ceilNanos", "mod", "window", "slidingCounter"},
}

// scripts holds the scripts built from apply.lua, each defining only the
// functions its algorithm runs, since Redis creates a script's functions
// anew on every call.
var scripts = buildScripts(applySource)

// buildScripts assembles the scripts from source's sections, which start
// with a line "-- @section name"; the text before the first is the prelude.
func buildScripts(source string) [numScripts]*redis.Script {
	parts := strings.Split(source, "\n-- @section ")
	sections := make(map[string]string, len(parts))
	for _, part := range parts[1:] {
		name, body, _ := strings.Cut(part, "\n")
		sections[name] = body
	}
	var built [numScripts]*redis.Script
	for i, names := range scriptSections {
		var b strings.Builder
		b.WriteString(parts[0])
		for _, name := range names {
			b.WriteString(sections[name])
		}
		b.WriteString(sections["main"])
		built[i] = redis.NewScript(b.String())
	}
	return built
}

// scriptOf returns the script that runs p's algorithm.
func scriptOf(p *sluice.Params) *redis.Script {
	switch p.Kind {
	case sluice.KindLeakyBucket:
		return scripts[meterScript]
	case sluice.KindGCRA:
		return scripts[gcraScript]
	case sluice.KindTokenBucket:
		if p.IntervalRefill {
			return scripts[intervalRefillScript]
		}
		return scripts[meterScript]
	case sluice.KindFixedWindow:
		return scripts[fixedWindowScript]
	case sluice.KindSlidingLog:
		return scripts[slidingLogScript]
	}
	return scripts[slidingCounterScript]
}

// Store is a [sluice.Store] that keeps each key's state in one Redis string
// and runs every decision as one Lua script call. It is safe for concurrent
// use, and recovers by itself when Redis comes back after a failure.
type Store struct {
	client      redis.UniversalClient
	reload      *reloader // for a Cluster client, else nil
	acks        acks
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
//
// On a Cluster client, a decision that cannot reach its node has the
// client reload the cluster's slot layout (at most ten times a second),
// so that decisions follow a failover as soon as the replica takes over.
func New(client redis.UniversalClient, opts ...Option) (*Store, error) {
	if client == nil {
		return nil, fmt.Errorf("%w: redisstore: nil client", sluice.ErrInvalidConfig)
	}
	s := &Store{client: client, reload: newReloader(client)}
	for _, o := range opts {
		if err := o.apply(s); err != nil {
			return nil, err
		}
	}
	if err := s.acks.check(client); err != nil {
		return nil, err
	}
	return s, nil
}

// Key returns the name of the Redis key that holds key's state.
func (s *Store) Key(key string) string {
	return s.prefix + "{" + key + "}"
}

// Apply runs op against key's state under p in one script call, atomically,
// and returns the decision. It implements [sluice.Store].
//
// Every verb is one script call: a reservation (VerbReserve), the cancel
// that gives it back and a partial grant (VerbAtMost) as much as an
// allow. In server-clock mode a reservation's Decision.At is an instant on
// the Redis server's clock, and a cancel's op.At is compared on that
// clock as it is.
//
// Invalid Params and ops are reported without contacting Redis, as
// [sluice.Params.Step] reports them; Params whose longest span is 2^53 ns
// or more give an error wrapping [sluice.ErrUnsupported]; a key holding
// another algorithm's state, until that state is fresh, gives one wrapping
// [sluice.ErrKeyConflict]. In server-clock mode op.Now is ignored, and
// otherwise it must be in [0, 2^62] ns since the epoch, as for Step.
func (s *Store) Apply(ctx context.Context, key string, p *sluice.Params, op sluice.Op) (sluice.Decision, error) {
	if d, err := s.check(p, op); err != nil {
		return d, err
	}
	if s.acks.records(op.Verb) {
		return s.applyAcked(ctx, key, p, op)
	}
	reply, err := scriptOf(p).Run(ctx, s.client, []string{s.Key(key)}, s.args(p, op)).Result()
	s.reload.failed(err)
	return outcome(key, p, op.Verb, reply, err)
}

// outcome turns a script call's reply, or the error of the call, into the
// decision on key.
func outcome(key string, p *sluice.Params, verb sluice.Verb, reply any, err error) (sluice.Decision, error) {
	if err != nil {
		return sluice.Decision{Limit: p.Limit}, fmt.Errorf("redisstore: %v on key %q: %w", verb, key, err)
	}
	return decode(reply, key, p, verb)
}

// check returns the error Apply gives without contacting Redis, and the
// decision that goes with it: for invalid Params (with a zero decision) or
// op, as [sluice.Params.Step] gives them, and for spans the script cannot
// compute exactly.
func (s *Store) check(p *sluice.Params, op sluice.Op) (sluice.Decision, error) {
	if p == nil {
		return sluice.Decision{}, fmt.Errorf("%w: redisstore: no Params", sluice.ErrInvalidConfig)
	}
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
	return d, nil
}

// Reset deletes key's state. It implements [sluice.Store].
func (s *Store) Reset(ctx context.Context, key string) error {
	if err := s.client.Del(ctx, s.Key(key)).Err(); err != nil {
		return fmt.Errorf("redisstore: reset key %q: %w", key, err)
	}
	return nil
}

// checkOp validates op against p as [sluice.Params.Step] does (verb, cost,
// MaxDelay and At), and op.Now only if the decision uses it.
func checkOp(p *sluice.Params, op sluice.Op, usesNow bool) error {
	if usesNow {
		if err := sluice.CheckTime(op.Now); err != nil {
			return err
		}
	}
	return p.CheckOp(op)
}

// longestSpan returns the longest duration, in nanoseconds, that p's
// algorithm computes with: the window (twice it for the sliding counter,
// which remembers the previous window), GCRA's burst, or the time a full
// bucket takes to drain or refill, as [sluice.Params.Validate] bounds it.
func longestSpan(p *sluice.Params) float64 {
	span := float64(p.Interval)
	switch p.Kind {
	case sluice.KindGCRA:
		span = max(span, arith.GCRASpan(p.Limit, p.Interval))
	case sluice.KindLeakyBucket, sluice.KindTokenBucket:
		span = arith.BucketSpan(p.Limit, p.Amount, p.Interval)
	case sluice.KindSlidingCounter:
		span *= 2
	}
	return span
}

// args returns the script's ARGV[1]: the decision's inputs packed as the
// script unpacks them, a byte for each small number and a little-endian
// double for the others, which Lua reads back exactly and without parsing
// text. One string is one allocation, where boxed numbers would be several.
// Times (the caller's now, a reservation's MaxDelay, a cancel's At) go as
// seconds and nanoseconds, since a double is exact only up to 2^53.
func (s *Store) args(p *sluice.Params, op sluice.Op) string {
	var b [4 + 10*8]byte
	b[0], b[2] = byte(p.Kind), byte(op.Verb)
	if p.IntervalRefill || p.Anchored {
		b[1] = 1
	}
	var now int64
	if s.callerClock {
		b[3] = 1
		now = op.Now
	}
	// Only one verb has a time of its own: CheckOp has put it in range.
	var own int64
	switch op.Verb {
	case sluice.VerbReserve:
		own = op.MaxDelay
	case sluice.VerbCancel:
		own = op.At
	}
	sec, nsec := split(now)
	ownSec, ownNsec := split(own)
	for i, x := range [...]float64{p.Limit, float64(p.Interval), p.Amount, float64(p.MaxEntries),
		op.Cost, sec, nsec, float64(s.skewMillis), ownSec, ownNsec} {
		binary.LittleEndian.PutUint64(b[4+8*i:], math.Float64bits(x))
	}
	return string(b[:])
}

// split returns ns nanoseconds as whole seconds and the nanoseconds left,
// in [0, 1e9), each exact as a double.
func split(ns int64) (sec, nsec float64) {
	s := arith.FloorDiv(ns, 1e9)
	return float64(s), float64(ns - s*1e9)
}

// The script's replies: a status byte (0 denied, 1 allowed), then little-
// endian doubles: used, remaining, and the seconds and nanoseconds of
// retry after and reset after; for a partial grant (always), the cost
// granted; for a reservation that waits (only then), the seconds and
// nanoseconds of its delay and of its instant. A conflict is the status 2
// and the stored kind's byte.
const (
	replySize        = 1 + 6*8
	grantReplySize   = replySize + 8
	waitingReplySize = replySize + 4*8
)

// decode turns the script's reply to verb into a decision. A reply of an
// unexpected shape is an error.
func decode(reply any, key string, p *sluice.Params, verb sluice.Verb) (sluice.Decision, error) {
	d := sluice.Decision{Limit: p.Limit}
	b, _ := reply.(string)
	if len(b) == 2 && b[0] == 2 {
		return d, fmt.Errorf("%w: key %q holds %v state, not %v", sluice.ErrKeyConflict, key, sluice.Kind(b[1]), p.Kind)
	}
	unexpected := func(why string) (sluice.Decision, error) {
		return sluice.Decision{Limit: p.Limit}, fmt.Errorf("redisstore: key %q: unexpected script reply %q%s", key, reply, why)
	}
	var shaped bool
	switch {
	case len(b) == 0 || b[0] > 1:
	case verb == sluice.VerbAtMost:
		shaped = len(b) == grantReplySize
	case verb == sluice.VerbReserve:
		shaped = len(b) == replySize || len(b) == waitingReplySize && b[0] == 1
	default:
		shaped = len(b) == replySize
	}
	if !shaped {
		return unexpected("")
	}
	var x [10]float64
	n := (len(b) - 1) / 8
	for i := range n {
		x[i] = math.Float64frombits(binary.LittleEndian.Uint64([]byte(b[1+8*i : 9+8*i])))
	}
	retry, ok1 := duration(x[2], x[3])
	reset, ok2 := duration(x[4], x[5])
	if !ok1 || !ok2 {
		return unexpected(": durations out of range")
	}
	d.Allowed = b[0] == 1
	d.Used, d.Remaining, d.RetryAfter, d.ResetAfter = x[0], x[1], retry, reset
	switch n {
	case 7:
		if !(x[6] >= 0) || math.IsInf(x[6], 0) {
			return unexpected(": grant out of range")
		}
		d.Granted = x[6]
	case 10:
		delay, ok1 := duration(x[6], x[7])
		at, ok2 := duration(x[8], x[9])
		if !ok1 || !ok2 || delay <= 0 {
			return unexpected(": reservation out of range")
		}
		d.Delay, d.At = delay, int64(at)
	}
	return d, nil
}

// duration returns sec seconds and nsec nanoseconds as a Duration, if
// they are whole, non-negative, nsec is under a second, and the sum fits.
func duration(sec, nsec float64) (time.Duration, bool) {
	const maxSec = math.MaxInt64 / 1e9
	if !(sec >= 0 && sec <= maxSec && nsec >= 0 && nsec < 1e9) || sec != math.Trunc(sec) || nsec != math.Trunc(nsec) {
		return 0, false
	}
	ns := int64(sec)*1e9 + int64(nsec)
	if ns < 0 {
		return 0, false
	}
	return time.Duration(ns), true
}
