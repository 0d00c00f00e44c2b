// Package policy builds limiters from a JSON document of named policies,
// which a running process may reload: the policies of an API ("api",
// "uploads", "spend"), each an algorithm with its numbers, and the tiers
// of each (a plan's own numbers, the rest taken from its policy).
//
//	policies, err := policy.Parse(doc)
//	...
//	api, err := policies.Limiter("api", planOf) // planOf(ctx, key) names a key's tier
//	d, err := api.Allow(ctx, key, 1)
//
// The format, in full (durations in Go's syntax, "1.5s", "720h"; a rate
// is an amount per period, "10/s", "100/1m", "1000/720h"; a number may be
// fractional; the comments are this page's, JSON has none):
//
//	{
//	  "policies": {
//	    "api": {
//	      "algorithm": "gcra",        // or token-bucket, leaky-bucket, fixed-window,
//	                                  // sliding-log, sliding-counter, calendar-window,
//	                                  // concurrency
//	      "rate": "10/s", "burst": 20, // GCRA and the token bucket
//	      "tiers": {
//	        "free": {"rate": "1/s", "burst": 5},
//	        "pro":  {"rate": "100/s", "burst": 200}
//	      }
//	    },
//	    "spend":   {"algorithm": "leaky-bucket", "capacity": 1000, "rate": "1000/720h"},
//	    "uploads": {"algorithm": "concurrency", "limit": 3, "ttl": "5m"},
//	    "search":  {"algorithm": "fixed-window", "limit": 100, "window": "1m", "anchored": true},
//	    "monthly": {"algorithm": "calendar-window", "limit": 1000, "period": "month", "zone": "Europe/Paris"}
//	  }
//	}
//
// Each algorithm takes the numbers its constructor does: rate and burst
// ([sluice.NewGCRA], [sluice.NewTokenBucket], with "interval_refill": true
// for [sluice.WithIntervalRefill]); capacity and rate
// ([sluice.NewLeakyBucket]); limit and window ([sluice.NewFixedWindow] with
// "anchored", [sluice.NewSlidingLog] with "max_entries",
// [sluice.NewSlidingCounter]); limit, period ("day", "week", "month" or
// "year") and zone (an IANA name, "Europe/Paris")
// ([sluice.NewCalendarWindow]); limit and ttl ([sluice.NewConcurrencyLimit],
// with "max_entries"). Every rate limit may also take "penalty" (a
// duration, [sluice.WithPenalty]) and "count_denied"
// ([sluice.WithCountDenied]). A tier sets any of these but the algorithm.
// A document with an unknown field, a field its algorithm does not take,
// a number missing, or a value its constructor refuses is rejected whole,
// with the line and the reason ([Error]).
package policy

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"
	"sync/atomic"

	"github.com/sluice-go/sluice"
)

// A Set is the policies of one document, replaced whole by [Set.Reload].
// A limiter built from it ([Set.Limiter]) looks each key's limit up in the
// policies in force at each request, so a reload takes effect at the next
// request of every key, which keeps what it has used (see
// [sluice.NewPerKey]). A Set is safe for concurrent use.
type Set struct {
	current atomic.Pointer[document]

	mu    sync.Mutex
	inUse map[string]bool // policies a limiter was built for
}

// document is one document's policies, each tier a limiter that serves
// as a limit.
type document struct {
	policies map[string]*limits
}

type limits struct {
	limit *sluice.Limiter            // the policy's own numbers
	tiers map[string]*sluice.Limiter // each tier's
}

// Parse reads the policies of a JSON document, or returns an error
// wrapping [sluice.ErrInvalidConfig] (an [*Error] for a document that says
// something wrong, with its line).
func Parse(doc []byte) (*Set, error) {
	d, err := parse(doc)
	if err != nil {
		return nil, err
	}
	s := &Set{inUse: map[string]bool{}}
	s.current.Store(d)
	return s, nil
}

// Reload replaces the policies with doc's, whole, or leaves those in
// force as they are and returns why not: doc is invalid (an [*Error],
// with its line), or it drops a policy that a limiter was built for
// ([sluice.ErrInvalidConfig]). The next request of every limiter built from s
// follows doc.
func (s *Set) Reload(doc []byte) error {
	set, err := parse(doc)
	if err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	var dropped []string
	for name := range s.inUse {
		if set.policies[name] == nil {
			dropped = append(dropped, name)
		}
	}
	if len(dropped) > 0 {
		sort.Strings(dropped)
		return fmt.Errorf("%w: the configuration drops policies that limiters use: %q", sluice.ErrInvalidConfig, dropped)
	}
	s.current.Store(set)
	return nil
}

// Names returns the names of the policies in force, sorted.
func (s *Set) Names() []string {
	set := s.current.Load()
	names := make([]string, 0, len(set.policies))
	for name := range set.policies {
		names = append(names, name)
	}
	sort.Strings(names)
	return names
}

// ErrUnknownTier reports a key whose tier, as the limiter's tier function
// named it, is not one of its policy's in the document in force.
var ErrUnknownTier = errors.New("sluice: unknown tier")

// Limiter returns a per-key limiter ([sluice.NewPerKey]) for the named
// policy: each request's key is held to the tier that tier names for it,
// or, when tier is nil or names "", to the policy's own numbers; a tier
// that the policy does not have fails the request with [ErrUnknownTier],
// and a failing tier function with its error. opts set the limiter's
// store, clock, observer, name and timeout; the numbers come from the
// policies in force at each request.
func (s *Set) Limiter(policy string, tier func(ctx context.Context, key string) (string, error), opts ...sluice.Option) (*sluice.Limiter, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.current.Load().policies[policy] == nil {
		return nil, fmt.Errorf("%w: no policy %q in the configuration", sluice.ErrInvalidConfig, policy)
	}
	l, err := sluice.NewPerKey(func(ctx context.Context, key string) (*sluice.Limiter, error) {
		p := s.current.Load().policies[policy] // never dropped: see Reload
		name := ""
		if tier != nil {
			var err error
			if name, err = tier(ctx, key); err != nil {
				return nil, err
			}
		}
		switch t := p.tiers[name]; {
		case name == "" && p.limit != nil:
			return p.limit, nil
		case name == "":
			return nil, fmt.Errorf("%w: policy %q has no limit of its own: name one of its tiers", ErrUnknownTier, policy)
		case t != nil:
			return t, nil
		}
		return nil, fmt.Errorf("%w: %q of policy %q", ErrUnknownTier, name, policy)
	}, opts...)
	if err != nil {
		return nil, err
	}
	s.inUse[policy] = true
	return l, nil
}
