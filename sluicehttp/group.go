package sluicehttp

import (
	"context"
	"fmt"
	"net/http"

	"github.com/sluice-go/sluice"
	"github.com/sluice-go/sluice/engine"
	"github.com/sluice-go/sluice/internal/ratelimitheader"
)

// A Policy is one of the limits [NewGroup] decides each request against.
type Policy struct {
	// Limiter is the policy's limiter. The limiters of one group share
	// one store ([sluice.NewGroup]).
	Limiter *sluice.Limiter
	// Name names the policy in the RateLimit fields; each policy of a
	// group has its own.
	Name string
	// Key keys requests for this policy; nil uses the middleware's key
	// ([WithKey], by default the client's IP). A global cap keys every
	// request alike: func(*http.Request) (string, error) { return "all", nil }.
	// The store sees the key as a hash tag followed by the policy's name
	// ("{203.0.113.7}:day"), so that policies keyed alike keep apart, and
	// a client's keys share one slot of a Redis Cluster (a global cap's key
	// is in a slot of its own: see docs/redis.md).
	Key KeyFunc
}

// NewGroup returns middleware that decides each request against every
// policy as one decision ([sluice.Group]): a request is served only if
// every policy admits it, and it is then recorded in all of them; a
// request one policy denies is recorded in none, where two stacked
// middlewares would have charged the outer policy for it. RateLimit-Policy
// lists every policy, in order, one field line each, on every response but
// a skipped request's ([WithSkip]), the 400, 413 and 503 answers included;
// a decided response's RateLimit lists each policy's remaining allowance
// the same way. A denial's Retry-After is when every policy would admit
// the request.
//
// With a concurrency limit ([sluice.NewConcurrencyLimit]) among the
// policies, a request that every policy admits holds a lease on each
// concurrency limit for as long as it is served, and gives them back when
// the handler returns, panics, or its client goes away, as [New] does for
// one (see the package's Concurrency section); what the rate limits
// admitted stays spent. A denial's Retry-After is then the latest of
// those the policies that denied it would send alone: exact for a rate
// limit, a hint for a concurrency limit ([WithConcurrencyRetryAfter]).
//
// The options apply to the whole middleware, except those that name a
// policy ([WithPolicyName]: the policies' Names do). [WithMaxDelay] holds a
// request until its turn on every policy, which then must all reserve; or,
// with a concurrency limit among them, until every policy admits it, with
// the group's Acquire, whatever their algorithms.
//
// A policy's limiter may be per key ([sluice.NewPerKey]), for rate
// limits: its fields, and whether it can hold requests under
// [WithMaxDelay], are its key's limit's, decided per request as [New]
// decides them (see the package's Limits per key section), and its lookup
// is given the key the store sees: "{203.0.113.7}:burst". Its
// RateLimit-Policy is listed once its lookup has answered: not on the 400
// of a request without a key, nor on the 503 of a lookup that failed. A
// group's leases are taken on fixed limits only: a request whose per-key
// policy looks up a concurrency limit is refused with
// [sluice.ErrUnsupported] (500).
//
// NewGroup returns an error wrapping [sluice.ErrInvalidConfig] for no
// policies, a nil limiter, names missing or alike, or limiters that do not
// share a store, and [sluice.ErrUnsupported] for a store that cannot
// decide several limits atomically.
func NewGroup(policies []Policy, opts ...Option) (func(http.Handler) http.Handler, error) {
	if len(policies) == 0 {
		return nil, fmt.Errorf("%w: a group middleware needs at least one policy", sluice.ErrInvalidConfig)
	}
	lims := make([]*sluice.Limiter, len(policies))
	leases := false
	for i, p := range policies {
		lims[i] = p.Limiter
		if p.Limiter == nil {
			return nil, fmt.Errorf("%w: policy %q has no limiter", sluice.ErrInvalidConfig, p.Name)
		}
		params, _ := p.Limiter.Params()
		leases = leases || params.Kind == engine.KindConcurrency
	}
	opts = append(opts, WithPolicyName(policies[0].Name), optionFunc(func(c *config) error {
		c.groupLeases = leases
		return nil
	}))
	m, err := newMiddleware(policies[0].Limiter, opts)
	if err != nil {
		return nil, err
	}
	m.leases, m.perKey = false, nil // the group's, not its first policy's
	g := &groupMiddleware{middleware: m, policies: make([]groupPolicy, len(policies)), leases: leases}
	m.policies = make([]*Fields, 0, len(policies))
	for i, p := range policies {
		if p.Name == "" {
			return nil, fmt.Errorf("%w: policy %d has no name", sluice.ErrInvalidConfig, i)
		}
		for _, q := range policies[:i] {
			if q.Name == p.Name {
				return nil, fmt.Errorf("%w: two policies are named %q", sluice.ErrInvalidConfig, p.Name)
			}
		}
		c := m.config
		c.name = p.Name
		key := p.Key
		if key == nil {
			key = m.key
		}
		g.policies[i] = groupPolicy{name: p.Name, key: key}
		params, fixed := p.Limiter.Params()
		if !fixed {
			pk, err := newPerKeyFields(p.Limiter, &c)
			if err != nil {
				return nil, err
			}
			g.policies[i].perKey, g.perKey = pk, true
			continue
		}
		fields, err := newFields(p.Limiter, &c)
		if err != nil {
			return nil, err
		}
		if err := checkDelay(&params, c.maxDelay, c.groupLeases); err != nil {
			return nil, err
		}
		g.policies[i].fields = fields
		m.policies = append(m.policies, fields)
	}
	if g.group, err = sluice.NewGroup(lims...); err != nil {
		return nil, err
	}
	return g.wrap, nil
}

// groupMiddleware is a configured group of policies for requests.
type groupMiddleware struct {
	*middleware
	group    *sluice.Group
	policies []groupPolicy
	// leases says that a concurrency limit is among the policies: a
	// request holds the group's leases while it is served.
	leases bool
	// perKey says that a per-key limiter is among the policies: the
	// middleware's policies are then the others', and each request's
	// are looked up for its keys.
	perKey bool
}

type groupPolicy struct {
	name string
	key  KeyFunc
	// fields are the policy's, or, for a per-key limiter, nil: perKey
	// gives each request's.
	fields *Fields
	perKey *perKeyFields
}

// fieldsFor returns the fields of each policy for a request of keys: the
// middleware's policies, or, with per-key limiters among them, theirs as
// looked up for keys, with a lookup's error.
func (g *groupMiddleware) fieldsFor(ctx context.Context, keys []string) ([]*Fields, error) {
	if !g.perKey {
		return g.middleware.policies, nil
	}
	fields := make([]*Fields, len(g.policies))
	for i, p := range g.policies {
		if p.perKey == nil {
			fields[i] = p.fields
			continue
		}
		var err error
		if fields[i], err = p.perKey.forKey(ctx, keys[i]); err != nil {
			return nil, err
		}
	}
	return fields, nil
}

func (g *groupMiddleware) wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		g.serve(next, w, r)
	})
}

func (g *groupMiddleware) serve(next http.Handler, w http.ResponseWriter, r *http.Request) {
	if g.skip != nil && g.skip(r) {
		next.ServeHTTP(w, r)
		return
	}
	keys := make([]string, len(g.policies))
	for i, p := range g.policies {
		key, err := p.key(r)
		if err != nil {
			g.fail(next, w, r, fmt.Errorf("%w: %w", ErrKey, err), false, g.middleware.policies)
			return
		}
		keys[i] = "{" + key + "}:" + p.name
	}
	cost, costErr := g.costOf(r)
	fields, err := g.fieldsFor(r.Context(), keys)
	if err != nil {
		g.perKeyFailed(next, w, r, err, g.middleware.policies)
		return
	}
	if g.leases {
		g.serveLeased(next, w, r, fields, keys, cost, costErr)
		return
	}
	d, turn, err := g.decide(r.Context(), keys, cost, costErr)
	if err != nil {
		g.limiterFailed(next, w, r, err, fields)
		return
	}
	if g.decisionHook != nil {
		g.decisionHook(r, d.Decision)
	}
	if turn != nil {
		d, err = hold(r.Context(), d, turn, func() (sluice.GroupDecision, *sluice.GroupReservation, error) {
			return g.decide(r.Context(), keys, cost, costErr)
		})
		if err != nil {
			g.held(next, w, r, err, fields)
			return
		}
	}
	for i, f := range fields {
		each := d.Limits()[i]
		if turn != nil {
			each = servedAt(each)
		}
		f.write(w.Header(), each)
	}
	switch {
	case !d.Allowed && !g.dryRun:
		setRetryAfter(w.Header(), ratelimitheader.RetryAfter(d.RetryAfter))
		g.deny(w, r, d.Decision)
	case costErr != nil:
		g.fail(next, w, r, costErr, false, nil)
	default:
		next.ServeHTTP(w, r)
	}
}

// decide admits or denies a request of cost for keys as one decision. A
// request admitted after a delay comes with its turn, to wait for before
// it is served.
func (g *groupMiddleware) decide(ctx context.Context, keys []string, cost float64, costErr error) (sluice.GroupDecision, *sluice.GroupReservation, error) {
	if g.maxDelay == 0 || costErr != nil {
		d, err := g.group.Allow(ctx, keys, cost)
		return d, nil, err
	}
	turn, err := g.group.Reserve(ctx, keys, cost, g.maxDelay)
	if err != nil || turn.Delay <= 0 || g.dryRun {
		return turn.GroupDecision, nil, err
	}
	return turn.GroupDecision, turn, nil
}
