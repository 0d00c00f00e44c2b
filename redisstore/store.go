package redisstore

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluice-go/sluice"
	"github.com/sluice-go/sluice/engine"
	"github.com/sluice-go/sluice/internal/arith"
)

// maxSpan bounds the spans an algorithm computes with: the Lua library's
// integers are exact below 2^53.
const maxSpan = 1 << 53

// Store is an [engine.Store] that keeps each key's state in one Redis string
// and runs every decision as one call (FCALL) of a function of its Lua
// library, which it loads wherever a server lacks it. It needs Redis 7.0
// or Valkey 7.2 or later. It is safe for concurrent use, and recovers by
// itself when Redis comes back after a failure.
//
// It tells waiters of the releases of leases ([Store.WatchReleases]) by
// Redis's sharded pub/sub; [Store.Close] ends that, and leaves the client,
// which stays the caller's, open.
type Store struct {
	client      redis.UniversalClient
	reload      *reloader // for a Cluster client, else nil
	acks        acks
	prefix      string
	callerClock bool
	skewMillis  int64    // added to TTLs in caller-clock mode
	releases    releases // WatchReleases's subscriptions
}

var _ engine.GroupStore = (*Store)(nil)

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
// [engine.Op].Now instead of the Redis server's clock, for processes
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

// Key returns the name of the Redis key that holds key's state: the
// prefix, then key in braces. The braces make key the Cluster hash tag of
// the name, unless key holds a tag of its own, as keys that a group
// decides together do: Redis hashes what lies between the first "{" and
// the first "}" after it, so "{api:7}:second" and "{api:7}:day" are
// stored as prefix + "{{api:7}:second}" and prefix + "{{api:7}:day}",
// whose common tag "{api:7" puts them in one slot.
func (s *Store) Key(key string) string {
	return s.prefix + "{" + key + "}"
}

// Apply runs op against key's state under p in one function call,
// atomically, and returns the decision. It implements [engine.Store].
//
// Every verb is one call: a reservation (VerbReserve), the cancel
// that gives it back, a partial grant (VerbAtMost), an exhaust
// (VerbExhaust), a charge (VerbCharge) and a refund (VerbRefund) as much
// as an allow, and so are a concurrency limit's lease (VerbAllow), its release
// (VerbCancel), its extension (VerbExtend), a wait in its line (a denied
// VerbAllow with a patience, Op.MaxDelay, whose Decision.At is the
// waiter's ticket) and a waiter's leaving (VerbLeave). In server-clock
// mode a reservation's or a lease's Decision.At is an instant on the Redis
// server's clock, and the op.At of a cancel, a release or an extension is
// compared on that clock as it is; a ticket is a number, on no clock.
//
// Invalid Params and ops are reported without contacting Redis, as
// [engine.Params.Step] reports them; Params whose longest span is 2^53 ns
// or more give an error wrapping [sluice.ErrUnsupported], except calendar
// windows (a year is longer), which compute only with exact (seconds,
// nanoseconds) pairs; a key holding another algorithm's state, until that
// state is fresh, gives one wrapping [sluice.ErrKeyConflict]. In
// server-clock mode op.Now is ignored, and otherwise it must be in [0,
// 2^62] ns since the epoch, as for Step.
//
// A calendar window counts in the window that holds the time of the
// decision. Its windows are the caller's, computed around its own clock:
// on the server's clock, a server's time outside them is refused with an
// error wrapping [sluice.ErrTimeOutOfRange] that names it, recording
// nothing (never decided by the caller's clock instead), as the caller's
// time outside them is refused before Redis is contacted.
func (s *Store) Apply(ctx context.Context, key string, p *engine.Params, op engine.Op) (engine.Decision, error) {
	d, refused := s.check(p, op)
	if refused != nil && !p.Overflows(op, refused) {
		return d, refused
	}
	var err error
	if s.acks.records(op.Verb) {
		d, err = s.applyAcked(ctx, key, p, op)
	} else {
		var reply any
		reply, err = s.call(ctx, lib.apply, []string{s.Key(key)}, s.args(p, op))
		d, err = outcome(key, p, op.Verb, reply, err)
	}
	if err == nil {
		err = refused
	}
	return d, err
}

// outcome turns a script call's reply, or the error of the call, into the
// decision on key.
func outcome(key string, p *engine.Params, verb engine.Verb, reply any, err error) (engine.Decision, error) {
	if err != nil {
		return engine.Decision{Limit: p.Limit}, scriptError(verb, keyName(key), err)
	}
	return decode(reply, key, p, verb)
}

// check returns the error Apply gives without contacting Redis, and the
// decision that goes with it: for invalid Params (with a zero decision) or
// op, as [engine.Params.Step] gives them, and for spans the script cannot
// compute exactly. An op that [engine.Params.Overflows] is still decided,
// and its error comes with the decision.
func (s *Store) check(p *engine.Params, op engine.Op) (engine.Decision, error) {
	if p == nil {
		return engine.Decision{}, fmt.Errorf("%w: redisstore: no Params", sluice.ErrInvalidConfig)
	}
	if err := p.Validate(); err != nil {
		return engine.Decision{}, err
	}
	d := engine.Decision{Limit: p.Limit}
	if err := checkSpan(p); err != nil {
		return d, err
	}
	return d, checkOp(p, op, s.callerClock)
}

// checkSpan returns an error wrapping sluice.ErrUnsupported for Params
// whose spans the script cannot compute exactly.
func checkSpan(p *engine.Params) error {
	if span := longestSpan(p); span >= maxSpan && !p.Calendar() {
		return fmt.Errorf("%w: redisstore: %v spans %v, at least 2^53 ns, beyond what the script computes exactly",
			sluice.ErrUnsupported, p, time.Duration(span))
	}
	return nil
}

// Reset deletes key's state. It implements [engine.Store]. It publishes
// the reset to the key's waiters ([Store.WatchReleases]), as a release,
// in the same transaction (MULTI), since the leases it forgets free their
// slots.
func (s *Store) Reset(ctx context.Context, key string) error {
	name := s.Key(key)
	_, err := s.client.TxPipelined(ctx, func(pipe redis.Pipeliner) error {
		pipe.Del(ctx, name)
		pipe.SPublish(ctx, name, "")
		return nil
	})
	if err != nil {
		return fmt.Errorf("redisstore: reset key %q: %w", key, err)
	}
	return nil
}

// checkOp validates op against p as [engine.Params.Step] does (verb, cost,
// MaxDelay and At), and op.Now only if the decision uses it: in range,
// and within the windows of a calendar window. (On the server's clock the
// library checks its own time against the windows.)
func checkOp(p *engine.Params, op engine.Op, usesNow bool) error {
	if usesNow {
		if err := engine.CheckTime(op.Now); err != nil {
			return err
		}
		if err := p.CheckWindows(op.Now); err != nil {
			return err
		}
	}
	return p.CheckOp(op)
}

// longestSpan returns the longest duration, in nanoseconds, that p's
// algorithm computes with: the window (twice it for the sliding counter,
// which remembers the previous window), a lease's time to live, GCRA's
// burst, or the time a full bucket takes to drain or refill, as
// [engine.Params.Validate] bounds it. A calendar window computes with
// (seconds, nanoseconds) pairs only, exact at any length, so checkSpan
// does not hold its span, up to 2^60 ns, against it.
func longestSpan(p *engine.Params) float64 {
	span := float64(p.Interval)
	switch p.Kind {
	case engine.KindGCRA:
		span = max(span, arith.GCRASpan(p.Limit, p.Interval))
	case engine.KindLeakyBucket, engine.KindTokenBucket:
		span = arith.BucketSpan(p.Limit, p.Amount, p.Interval)
	case engine.KindSlidingCounter:
		span *= 2
	case engine.KindFixedWindow, engine.KindSlidingLog, engine.KindConcurrency:
		// The window, or the time to live: Interval.
	}
	return span
}
