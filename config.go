package sluice

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"
	"sync/atomic"
)

// A Config is a set of named limits read from a JSON document, which a
// running process may reload: the policies of an API ("api", "uploads",
// "spend"), each an algorithm with its numbers, and the tiers of each (a
// plan's own numbers, the rest taken from its policy). A limiter built
// from it ([Config.Limiter]) looks each key's limit up in the
// configuration in force at each request, so a reload takes effect at the
// next request of every key, which keeps what it has used (see
// [NewPerKey]). A Config is safe for concurrent use.
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
// ([NewGCRA], [NewTokenBucket], with "interval_refill": true for
// [WithIntervalRefill]); capacity and rate ([NewLeakyBucket]); limit and
// window ([NewFixedWindow] with "anchored", [NewSlidingLog] with
// "max_entries", [NewSlidingCounter]); limit, period ("day", "week",
// "month" or "year") and zone (an IANA name, "Europe/Paris")
// ([NewCalendarWindow]); limit and ttl
// ([NewConcurrencyLimit], with "max_entries"). Every rate limit may also
// take "penalty" (a duration, [WithPenalty]) and "count_denied"
// ([WithCountDenied]). A tier sets any of these but the algorithm. A
// document with an unknown field, a field its algorithm does not take, a
// number missing, or a value its constructor refuses is rejected whole,
// with the line and the reason ([ConfigError]).
type Config struct {
	current atomic.Pointer[configSet]

	mu    sync.Mutex
	inUse map[string]bool // policies a limiter was built for
}

// configSet is one document's policies, each tier a limiter that serves
// as a limit.
type configSet struct {
	policies map[string]*configPolicy
}

type configPolicy struct {
	limit *Limiter            // the policy's own numbers
	tiers map[string]*Limiter // each tier's
}

// ParseConfig reads a configuration from a JSON document, or returns an
// error wrapping [ErrInvalidConfig] (a [*ConfigError] for a document that
// says something wrong, with its line).
func ParseConfig(doc []byte) (*Config, error) {
	set, err := parseConfig(doc)
	if err != nil {
		return nil, err
	}
	c := &Config{inUse: map[string]bool{}}
	c.current.Store(set)
	return c, nil
}

// Reload replaces the configuration with doc, whole, or leaves the one in
// force as it is and returns why not: doc is invalid (a [*ConfigError],
// with its line), or it drops a policy that a limiter was built for
// ([ErrInvalidConfig]). The next request of every limiter built from c
// follows doc.
func (c *Config) Reload(doc []byte) error {
	set, err := parseConfig(doc)
	if err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	var dropped []string
	for name := range c.inUse {
		if set.policies[name] == nil {
			dropped = append(dropped, name)
		}
	}
	if len(dropped) > 0 {
		sort.Strings(dropped)
		return fmt.Errorf("%w: the configuration drops policies that limiters use: %q", ErrInvalidConfig, dropped)
	}
	c.current.Store(set)
	return nil
}

// Policies returns the names of the configuration's policies, sorted.
func (c *Config) Policies() []string {
	set := c.current.Load()
	names := make([]string, 0, len(set.policies))
	for name := range set.policies {
		names = append(names, name)
	}
	sort.Strings(names)
	return names
}

// ErrUnknownTier reports a key whose tier, as the limiter's tier function
// named it, is not one of its policy's in the configuration in force.
var ErrUnknownTier = errors.New("sluice: unknown tier")

// Limiter returns a per-key limiter ([NewPerKey]) for the named policy:
// each request's key is held to the tier that tier names for it, or, when
// tier is nil or names "", to the policy's own numbers; a tier that the
// policy does not have fails the request with [ErrUnknownTier], and a
// failing tier function with its error. opts set the limiter's store,
// clock, observer, name and timeout; the numbers come from the
// configuration, as it is at each request.
func (c *Config) Limiter(policy string, tier func(ctx context.Context, key string) (string, error), opts ...Option) (*Limiter, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.current.Load().policies[policy] == nil {
		return nil, fmt.Errorf("%w: no policy %q in the configuration", ErrInvalidConfig, policy)
	}
	l, err := NewPerKey(func(ctx context.Context, key string) (*Limiter, error) {
		p := c.current.Load().policies[policy] // never dropped: see Reload
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
	c.inUse[policy] = true
	return l, nil
}
