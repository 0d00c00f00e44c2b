// Package sluicehttp limits the rate of HTTP requests with a sluice
// limiter.
//
// [Middleware] wraps an http.Handler. It works with net/http and with any
// router that takes func(http.Handler) http.Handler middleware: chi
// directly, echo through echo.WrapMiddleware, gin through an adapter for
// net/http middleware.
//
// For each request the middleware computes a key ([ClientIP] by default;
// [Keys] combines route, method and client) and a cost (1 by default, see
// [WithCost] and [WithMinCost]) and asks the limiter to Allow it. An
// admitted request goes on to the wrapped handler; a denied one is
// answered 429 Too Many Requests with Retry-After. [WithSkip] lets chosen
// requests through undecided. A concurrency limit is not asked to Allow a
// request but to lend it a slot for as long as it is served (see
// Concurrency).
//
// # Delayed admission
//
// [WithMaxDelay] shapes traffic as nginx's limit_req with burst does: a
// request that conforms within the maximum delay is held until its turn,
// booked with the limiter's Reserve, and then served; held requests on a
// key are served in the order they came, and only those whose turn is
// further away get a 429. A client that leaves while held gives its turn
// back once the server sees it leave: over HTTP/1.x, only after the
// request's body has been read to its end (see [WithMaxDelay]).
//
// # Headers
//
// Every decided response, admitted or denied, carries the two fields of
// draft-ietf-httpapi-ratelimit-headers-11 (RateLimit header fields for
// HTTP, May 2026), serialized as RFC 9651 Structured Fields:
//
//	RateLimit-Policy: "default";q=100;w=60
//	RateLimit: "default";r=42;t=18
//
// The policy name is set by [WithPolicyName], and the quota unit (qu) by
// [WithQuotaUnit]. q is the limiter's limit in whole units (a limit below
// one unit is a configuration error), w its window in seconds (for GCRA
// and the buckets, the time q units take to drain, so that q/w is the
// rate; see [WithWindow]), r the units left after this request (rounded
// down) and t the seconds until the key's allowance is whole again
// (rounded up; for a denied request never before Retry-After). Retry-After is in whole seconds, rounded up and at least
// 1, so a client that waits that long is admitted unless it (or another
// client with its key) spends the allowance meanwhile. [WithLegacyHeaders]
// adds the X-RateLimit-* fields for older clients. A handler that decides
// for itself writes the same fields with [Fields]. A concurrency limit's
// fields differ (no w, no t, and a Retry-After that is a hint): see
// Concurrency.
//
// # Concurrency
//
// With a concurrency limit ([sluice.NewConcurrencyLimit]) the middleware
// limits how many requests of a key are served at once, as nginx's
// limit_conn does, rather than how many arrive in a while: it takes a
// lease of the request's cost before calling the wrapped handler
// ([sluice.Limiter.TryAcquire]) and releases it when the handler returns,
// with defer, so that the slot comes back whether the handler returned,
// panicked (the panic goes on to the server as before) or saw its client
// go away (the release is made even though the request's context has
// ended). A lease that cannot be released (the store is down, or the
// handler outlived the limit's time to live and the lease expired) is
// reported to the error hook as [ErrRelease]; its slot comes back when the
// lease expires. Choose the time to live longer than the longest request:
// the server's WriteTimeout, or the handler's own deadline. The slot is
// held until the handler returns, however long the response streams, and
// no longer: a handler that hands a hijacked connection (a WebSocket) to
// another goroutine and returns gives it back then. [WithMaxDelay]
// makes a request that finds every slot taken wait for one, in arrival
// order, for at most the delay. [NewGroup] holds a lease the same way when
// a concurrency limit is among its policies, beside rate limits whose
// cost stays spent.
//
// A request that finds the limit full is answered 429 Too Many Requests,
// like a request over a rate limit, and not 503 Service Unavailable as
// nginx's limit_conn answers by default (as its limit_req does, where this
// package answers 429 too). A limit per key is the client's own share: it
// went over it by sending more requests at once than its quota, which is
// what 429 tells, with the RateLimit fields to read it from; the server is
// not unavailable, and answers the client's other requests and other
// clients. A 503 would also be taken for an outage by what stands between:
// proxies that retry 5xx answers on another backend (with a shared store,
// to the same full limit), load balancers that eject a backend after 5xx
// answers, and error budgets. For a limit that guards the server's own
// capacity (a key shared by every request), answer 503 with
// [WithDenyHandler]. The default body reads "too many concurrent
// requests".
//
// The fields follow the draft's quota unit for concurrency:
//
//	RateLimit-Policy: "default";q=2;qu="concurrent-requests"
//	RateLimit: "default";r=1
//
// q is the limit, qu is "concurrent-requests" (unless [WithQuotaUnit] names
// another), and w is left out: the limit has no window. r is how many
// more may start now, after this request. The RateLimit field carries no
// t, which the draft makes optional: t is a time within which no more than
// r may be used, and the slots come back as requests end, which no server
// can know beforehand. The only time the store knows is when leases
// expire, a bound for holders that died, as far off as the time to live.
// For the same reason a denial's Retry-After is a hint,
// [WithConcurrencyRetryAfter] (1 second by default), capped at when the
// earliest lease expires (by which a slot comes back even if no request
// ends), rather than a time at which the request is sure to be admitted.
// [WithLegacyHeaders] sends no X-RateLimit-Reset for it either.
//
// # Limits per key
//
// With a per-key limiter ([sluice.NewPerKey]) each request is held to
// its key's limit: the one the limiter's lookup returns for the key (a
// customer's plan, by API key). What depends on the limit is decided per
// request, from the limit the lookup returns then
// ([sluice.Limiter.ParamsFor]): the RateLimit fields, the 429s, and
// whether the request holds a lease (a key on a concurrency limit holds
// one while it is served). A plan that changes applies at the key's next
// request. The middleware builds the policy of each distinct limit once
// and keeps it (up to 64 limits; past that, each new one replaces one in
// turn), so that a request on a known limit allocates no more than under
// a fixed limit; it calls the lookup twice per request, for the fields
// and for the decision, so the lookup should be fast.
//
// A lookup that fails is answered as a failing store is (see Errors),
// with no RateLimit-Policy: no limit is known for the key. What [New]
// checks of a fixed limit when it is made, it checks of a key's limit on
// the key's requests: a limit below one whole unit or below the minimum
// cost, or one that cannot hold requests as [WithMaxDelay] asks, is
// answered 500 with an error wrapping [sluice.ErrInvalidConfig], as a
// misconfigured [Middleware] answers, even under [WithFailOpen]. In
// [NewGroup] a policy's limiter may be per key, for rate limits; its
// lookup is given the key the store sees ("{key}:name").
//
// # Errors
//
// A request without a key is answered 400 Bad Request, or 500 Internal
// Server Error when the key function's error wraps
// [sluice.ErrInvalidConfig]: a misconfigured [ClientIP], say, is the
// server's mistake, neither the client's nor an outage. A request whose
// cost cannot be computed is charged the minimum cost and, if that is
// admitted, answered 400 (413 Content Too Large when its body is larger
// than the cost function would read, see [ReadBody]), so that a flood of
// malformed requests is limited too. A request that costs more than the
// limit is answered 413: retrying it can never help, so it is not a 429.
// When the limiter itself fails (its store is down, say), the middleware
// fails closed by default: it answers 503 Service Unavailable with a
// Retry-After ([WithUnavailableRetryAfter]). That is the safe default for
// login and payment endpoints, where an outage of the store must not lift
// the limit on password guessing or card testing. [WithFailOpen] serves
// the request instead, for endpoints where availability matters more.
// Either way [WithErrorHook] sees the error, for logs and metrics. A
// request whose client goes away while its decision is pending, or while
// it is held, is neither a store error nor served: the hook sees
// [ErrRequestCanceled].
//
// # Dry run
//
// [WithDryRun] decides and reports every request (headers and
// [WithDecisionHook]) but never blocks one, so that a limit can be tried
// on production traffic before it is enforced.
package sluicehttp

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"github.com/sluice-go/sluice"
	"github.com/sluice-go/sluice/engine"
	"github.com/sluice-go/sluice/internal/ratelimitheader"
	"github.com/sluice-go/sluice/internal/requestcost"
)

// Errors reported to the error handler and hook. The error of a key or
// cost function is wrapped, so errors.Is finds both.
var (
	// ErrKey reports that the key function failed: the request has no
	// key to be limited by.
	ErrKey = errors.New("sluicehttp: no key for request")
	// ErrCost reports that the cost function failed or returned a
	// negative, NaN or infinite cost.
	ErrCost = errors.New("sluicehttp: no cost for request")
	// ErrRequestCanceled reports that the request's context ended (its
	// client went away, or the server gave up on it) while the limiter was
	// deciding, or while the request was held for its turn
	// ([WithMaxDelay]): the limiter's error is then the request's end, not
	// a failure of the store. Nothing is written and the request is not
	// served. The context's error is wrapped too.
	ErrRequestCanceled = errors.New("sluicehttp: request ended before it was served")
	// ErrRelease reports that the lease a request held on a concurrency
	// limit could not be given back once its handler returned: the store
	// failed, or the lease had expired already ([sluice.ErrNotHeld]),
	// because the request outlived the limit's time to live and its slot
	// may have gone to another request meanwhile. The slot comes back when
	// the lease expires. The store's error is wrapped too.
	ErrRelease = errors.New("sluicehttp: lease not released")
)

// CostFunc returns the cost of a request, in the limiter's units: for
// example the number of records in a batch. A CostFunc that reads the
// body must leave an equivalent body in r.Body for the handler;
// [ReadBody] and [PeekBody] do. An error, or a negative, NaN or infinite
// cost, makes the middleware charge the minimum cost ([WithMinCost]) and,
// if that is admitted, answer with the status [ErrorStatus] gives.
type CostFunc func(r *http.Request) (float64, error)

// ErrorStatus returns the status code the middleware answers err with by
// default: 500 Internal Server Error for [sluice.ErrInvalidConfig] and
// [sluice.ErrUnsupported] (a limiter or store asked for what it cannot
// do, which no retry mends), 413
// Content Too Large for [sluice.ErrCostExceedsLimit] and for a body larger
// than allowed (*[http.MaxBytesError]), 400 Bad Request for [ErrKey],
// [ErrCost] and a key the store cannot hold ([sluice.ErrInvalidKey]), and
// 503 Service Unavailable for any other (limiter or store) error.
func ErrorStatus(err error) int {
	var tooLarge *http.MaxBytesError
	switch {
	case errors.Is(err, sluice.ErrInvalidConfig), errors.Is(err, sluice.ErrUnsupported):
		return http.StatusInternalServerError
	case errors.Is(err, sluice.ErrCostExceedsLimit), errors.As(err, &tooLarge):
		return http.StatusRequestEntityTooLarge
	case errors.Is(err, ErrKey), errors.Is(err, ErrCost), errors.Is(err, sluice.ErrInvalidKey):
		return http.StatusBadRequest
	}
	return http.StatusServiceUnavailable
}

// New returns middleware that limits requests with lim, configured by
// opts, or an error wrapping [sluice.ErrInvalidConfig] if lim is nil, an
// option is invalid, or the limiter's limit cannot be reported (less than
// one whole unit, or below the minimum cost). For a per-key limiter
// ([sluice.NewPerKey]) the limit is known per request, and checked then:
// see the package's Limits per key section.
func New(lim *sluice.Limiter, opts ...Option) (func(http.Handler) http.Handler, error) {
	m, err := newMiddleware(lim, opts)
	if err != nil {
		return nil, err
	}
	return m.wrap, nil
}

// Middleware returns middleware that limits requests with lim, configured
// by opts. It is [New] for configurations known to be valid: if New would
// fail, the middleware refuses every request, passing the error (which
// wraps [sluice.ErrInvalidConfig]) to the error hook and handler, so the
// default answer is 500 Internal Server Error. Under [WithDryRun] it
// serves them instead.
func Middleware(lim *sluice.Limiter, opts ...Option) func(http.Handler) http.Handler {
	m, err := newMiddleware(lim, opts)
	if err == nil {
		return m.wrap
	}
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			m.fail(next, w, r, err, false, m.policies)
		})
	}
}

// middleware is a configured limiter for requests.
type middleware struct {
	config
	lim    *sluice.Limiter
	fields *Fields // nil when misconfigured, or for a per-key limiter
	// policies holds every policy's fields, so that an answer without a
	// decision lists them all too; nil when misconfigured. A per-key
	// limiter's are the key's: none are known without a request.
	policies []*Fields
	// perKey, for a per-key limiter ([sluice.NewPerKey]), gives each
	// request the fields of its key's limit, which also says whether the
	// request holds a lease.
	perKey *perKeyFields
	// retryAfter is the Retry-After of a 503, in seconds; 0 leaves it out.
	retryAfter int64
	// leases says that lim is a concurrency limit: a request holds a
	// lease while it is served.
	leases bool
	// full answers a request that a full concurrency limit denied.
	full func(http.ResponseWriter, *http.Request, sluice.Decision)
}

// newMiddleware applies every option, even after one fails, so that a
// misconfigured [Middleware] still reports to the configured hooks.
func newMiddleware(lim *sluice.Limiter, opts []Option) (*middleware, error) {
	m := &middleware{lim: lim, config: defaults()}
	var errs []error
	for _, o := range opts {
		errs = append(errs, o.apply(&m.config))
	}
	if m.key == nil {
		m.key = ClientIP{}.Key
	}
	m.full = m.deny
	if m.deny == nil {
		m.deny, m.full = deny, denyFull
	}
	if m.onError == nil {
		m.onError = writeError
	}
	if err := errors.Join(errs...); err != nil {
		return m, err
	}
	m.retryAfter = ratelimitheader.CeilSeconds(m.unavailable)
	if lim != nil && !isFixed(lim) {
		// What depends on the limit is known per request: see forKey.
		pk, err := newPerKeyFields(lim, &m.config)
		m.perKey = pk
		return m, err
	}
	fields, err := newFields(lim, &m.config)
	if err != nil {
		return m, err
	}
	p, _ := lim.Params()
	if err := checkDelay(&p, m.maxDelay, m.groupLeases); err != nil {
		return m, err
	}
	m.fields = fields
	m.policies = []*Fields{fields}
	m.leases = p.Kind == engine.KindConcurrency
	return m, nil
}

func (m *middleware) wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		m.serve(next, w, r)
	})
}

func (m *middleware) serve(next http.Handler, w http.ResponseWriter, r *http.Request) {
	if m.skip != nil && m.skip(r) {
		next.ServeHTTP(w, r)
		return
	}
	key, err := m.key(r)
	if err != nil {
		m.fail(next, w, r, fmt.Errorf("%w: %w", ErrKey, err), false, m.policies)
		return
	}
	cost, costErr := m.costOf(r)
	f, leases := m.fields, m.leases
	if m.perKey != nil {
		if f, err = m.perKey.forKey(r.Context(), key); err != nil {
			m.perKeyFailed(next, w, r, err, nil)
			return
		}
		leases = f.policy.Concurrent()
	}
	if leases {
		m.serveLeased(next, w, r, f, key, cost, costErr)
		return
	}
	d, turn, err := m.decide(r.Context(), key, cost, costErr)
	if err != nil {
		m.limiterFailed(next, w, r, err, m.listed(f))
		return
	}
	if m.decisionHook != nil {
		m.decisionHook(r, d)
	}
	if turn != nil {
		d, err = hold(r.Context(), d, turn, func() (sluice.Decision, *sluice.Reservation, error) {
			return m.decide(r.Context(), key, cost, costErr)
		})
		if err != nil {
			m.held(next, w, r, err, m.listed(f))
			return
		}
		d = servedAt(d)
	}
	f.write(w.Header(), d)
	switch {
	case !d.Allowed && !m.dryRun:
		setRetryAfter(w.Header(), ratelimitheader.RetryAfter(d.RetryAfter))
		m.deny(w, r, d)
	case costErr != nil:
		m.fail(next, w, r, costErr, false, nil)
	default:
		next.ServeHTTP(w, r)
	}
}

// listed returns the policies an answer without a decision lists, for a
// request whose fields are f: the middleware's, or, per key, f alone.
func (m *middleware) listed(f *Fields) []*Fields {
	if f == m.fields {
		return m.policies
	}
	return []*Fields{f}
}

// costOf returns what r is charged: its cost, at least the minimum cost.
// When its cost cannot be computed, r is charged the minimum cost and err
// says why.
func (m *middleware) costOf(r *http.Request) (cost float64, err error) {
	cost = 1
	if m.cost != nil {
		cost, err = m.cost(r)
	}
	if cost, err = requestcost.Of(cost, err, m.minCost); err != nil {
		return cost, fmt.Errorf("%w: %w", ErrCost, err)
	}
	return cost, nil
}

// limiterFailed answers a request whose decision failed with err, listing
// policies in RateLimit-Policy. A per-key limiter's lookup that failed
// is answered here too, as its store's failure would be.
func (m *middleware) limiterFailed(next http.Handler, w http.ResponseWriter, r *http.Request, err error, policies []*Fields) {
	switch {
	case errors.Is(err, sluice.ErrCostExceedsLimit), errors.Is(err, sluice.ErrInvalidKey), errors.Is(err, sluice.ErrUnsupported):
		// The request's own fault, or the configuration's, not an
		// outage: never served under fail-open.
		m.fail(next, w, r, err, false, policies)
	case r.Context().Err() != nil:
		// The store's error is most likely the request's end (a client
		// that hung up cancels its context), and nobody waits for an
		// answer: neither serve nor report a store failure.
		m.canceled(r, "limiter", err)
	default:
		m.fail(next, w, r, err, true, policies)
	}
}

// canceled reports r, whose context ended before it was served, with the
// error err of the step it was in.
func (m *middleware) canceled(r *http.Request, step string, err error) {
	if m.errorHook != nil {
		m.errorHook(r, fmt.Errorf("%w: %w (%s: %w)", ErrRequestCanceled, context.Cause(r.Context()), step, err))
	}
}

// fail reports err and serves the request if the configuration says so,
// or answers it with the error handler. limiterErr reports whether err
// came from the limiter or its store, rather than from the request.
// policies are those whose RateLimit-Policy the answer lists: none when
// the request's fields were written already, with its decision.
func (m *middleware) fail(next http.Handler, w http.ResponseWriter, r *http.Request, err error, limiterErr bool, policies []*Fields) {
	if m.errorHook != nil {
		m.errorHook(r, err)
	}
	for _, f := range policies {
		f.writePolicy(w.Header())
	}
	if m.dryRun || m.failOpen && limiterErr {
		next.ServeHTTP(w, r)
		return
	}
	if limiterErr && m.retryAfter > 0 {
		setRetryAfter(w.Header(), m.retryAfter)
	}
	m.onError(w, r, err)
}

func deny(w http.ResponseWriter, _ *http.Request, _ sluice.Decision) {
	http.Error(w, "rate limit exceeded", http.StatusTooManyRequests)
}

func denyFull(w http.ResponseWriter, _ *http.Request, _ sluice.Decision) {
	http.Error(w, "too many concurrent requests", http.StatusTooManyRequests)
}

func writeError(w http.ResponseWriter, _ *http.Request, err error) {
	code := ErrorStatus(err)
	http.Error(w, http.StatusText(code), code)
}
