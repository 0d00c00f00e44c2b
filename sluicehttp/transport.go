package sluicehttp

import (
	"fmt"
	"net/http"

	"github.com/sluice-go/sluice"
)

// Transport is an http.RoundTripper that paces a client's outgoing
// requests with a limiter, or a group of limiters: before each request it
// waits until the limit admits it ([sluice.Limiter.Wait]), so that jobs
// calling a rate-limited API stay under its limit instead of being refused
// with 429s. Requests are keyed by their host by default ([PaceByRoute],
// [WithPaceKey]) and cost 1 ([WithPaceCost]). Workers and processes share
// one pace when their limiters share a store, and waiters on a key are
// served in the order they booked their turns.
//
// A request whose context would end before its turn fails at once, and is
// not sent, with an error wrapping [sluice.ErrWouldExceedDeadline] and
// context.DeadlineExceeded; one whose context ends while it waits fails
// with the context's error, its turn given back. A request whose key or
// cost cannot be computed, or that costs more than the limit, fails
// without being sent, and so does every request while the store fails.
// The body of a request that is not sent is closed, as the RoundTripper
// contract asks. A Transport is safe for concurrent use.
type Transport struct {
	base  http.RoundTripper
	pace  func(r *http.Request, cost float64) error
	key   KeyFunc
	cost  CostFunc
	group bool // the keys are the group's: no key options
}

// TransportOption configures a [Transport].
type TransportOption func(*Transport) error

// PaceByRoute gives each route its own pace: the key is the request's
// host, method and path (not its query). By default all requests to a
// host share one pace.
func PaceByRoute() TransportOption {
	return WithPaceKey(func(r *http.Request) (string, error) {
		return r.URL.Host + " " + r.Method + " " + r.URL.Path, nil
	})
}

// WithPaceKey makes the transport key requests with f, for a pace per
// account or per API token; nil restores the default, the request's host.
func WithPaceKey(f KeyFunc) TransportOption {
	return func(t *Transport) error {
		if t.group {
			return fmt.Errorf("%w: sluicehttp: a group transport's keys are those its keys function returns", sluice.ErrInvalidConfig)
		}
		if f == nil {
			f = hostKey
		}
		t.key = f
		return nil
	}
}

// WithPaceCost makes the transport charge each request the cost f
// returns, instead of 1: a request's tokens, say, under a limit of tokens
// per minute.
func WithPaceCost(f CostFunc) TransportOption {
	return func(t *Transport) error {
		t.cost = f
		return nil
	}
}

func hostKey(r *http.Request) (string, error) { return r.URL.Host, nil }

// NewTransport returns a Transport that paces requests with lim and sends
// them with base (http.DefaultTransport if nil), or an error wrapping
// [sluice.ErrInvalidConfig].
func NewTransport(base http.RoundTripper, lim *sluice.Limiter, opts ...TransportOption) (*Transport, error) {
	if lim == nil {
		return nil, fmt.Errorf("%w: sluicehttp: transport: nil limiter", sluice.ErrInvalidConfig)
	}
	t := &Transport{base: base, key: hostKey}
	t.pace = func(r *http.Request, cost float64) error {
		key, err := t.key(r)
		if err != nil {
			return fmt.Errorf("sluicehttp: transport: no key for %s %s: %w", r.Method, r.URL.Redacted(), err)
		}
		return lim.Wait(r.Context(), key, cost)
	}
	return t.configure(opts)
}

// NewGroupTransport returns a Transport that paces requests with every
// limit of g as one ("10 requests per second and 1,000 per day"), each
// limit on its key: keys returns a request's key for each, in order. It
// returns an error wrapping [sluice.ErrInvalidConfig] for a nil group or
// keys function.
func NewGroupTransport(base http.RoundTripper, g *sluice.Group, keys func(r *http.Request) ([]string, error), opts ...TransportOption) (*Transport, error) {
	if g == nil || keys == nil {
		return nil, fmt.Errorf("%w: sluicehttp: transport: nil group or keys", sluice.ErrInvalidConfig)
	}
	t := &Transport{base: base, group: true}
	t.pace = func(r *http.Request, cost float64) error {
		ks, err := keys(r)
		if err != nil {
			return fmt.Errorf("sluicehttp: transport: no keys for %s %s: %w", r.Method, r.URL.Redacted(), err)
		}
		return g.Wait(r.Context(), ks, cost)
	}
	return t.configure(opts)
}

// configure applies opts to t.
func (t *Transport) configure(opts []TransportOption) (*Transport, error) {
	if t.base == nil {
		t.base = http.DefaultTransport
	}
	for _, o := range opts {
		if err := o(t); err != nil {
			return nil, err
		}
	}
	return t, nil
}

// RoundTrip waits for the request's turn and sends it with the base
// transport. It implements http.RoundTripper.
func (t *Transport) RoundTrip(r *http.Request) (*http.Response, error) {
	if err := t.wait(r); err != nil {
		if r.Body != nil {
			r.Body.Close()
		}
		return nil, err
	}
	return t.base.RoundTrip(r)
}

// wait blocks until r is admitted.
func (t *Transport) wait(r *http.Request) error {
	cost := 1.0
	if t.cost != nil {
		var err error
		if cost, err = t.cost(r); err != nil {
			return fmt.Errorf("sluicehttp: transport: no cost for %s %s: %w", r.Method, r.URL.Redacted(), err)
		}
	}
	if err := t.pace(r, cost); err != nil {
		return fmt.Errorf("sluicehttp: transport: %s %s not sent: %w", r.Method, r.URL.Redacted(), err)
	}
	return nil
}
