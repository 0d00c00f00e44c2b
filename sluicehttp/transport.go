package sluicehttp

import (
	"fmt"
	"net/http"
	"time"

	"github.com/sluice-go/sluice"
	"github.com/sluice-go/sluice/internal/learn"
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
// not sent, with an error wrapping context.DeadlineExceeded ("sluice:
// wait would exceed context deadline"); one whose context ends while it
// waits fails with the context's error, its turn given back. A request whose key or
// cost cannot be computed, or that costs more than the limit, fails
// without being sent, and so does every request while the store fails.
// The body of a request that is not sent is closed, as the RoundTripper
// contract asks. A Transport is safe for concurrent use.
type Transport struct {
	base    http.RoundTripper
	lim     *sluice.Limiter // or nil for a group's
	g       *sluice.Group
	keys    func(r *http.Request) ([]string, error) // the group's
	key     KeyFunc
	cost    CostFunc
	group   bool           // the keys are the group's: no key options
	learner *learn.Learner // or nil when the transport does not learn
	maxHold time.Duration
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
	return (&Transport{base: base, lim: lim, key: hostKey}).configure(opts)
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
	return (&Transport{base: base, g: g, keys: keys, group: true}).configure(opts)
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
	switch {
	case t.maxHold > 0 && t.learner == nil:
		return nil, fmt.Errorf("%w: sluicehttp: a max hold is for a transport that learns (Learn)", sluice.ErrInvalidConfig)
	case t.maxHold > 0:
		t.learner.SetMaxHold(t.maxHold)
	}
	return t, nil
}

// RoundTrip waits for the request's turn and sends it with the base
// transport; a learning transport ([Learn]) then learns from the answer.
// It implements http.RoundTripper.
func (t *Transport) RoundTrip(r *http.Request) (*http.Response, error) {
	if t.group {
		if err := t.waitGroup(r); err != nil {
			return nil, notSent(r, err)
		}
		return t.base.RoundTrip(r)
	}
	key, cost, err := t.request(r)
	if err == nil {
		err = t.wait(r, key, cost)
	}
	if err != nil {
		return nil, notSent(r, err)
	}
	if t.learner == nil {
		return t.base.RoundTrip(r)
	}
	resp, err := t.base.RoundTrip(r)
	t.heed(r, key, cost, resp)
	return resp, err
}

// wait blocks until r, of key and cost, is admitted: by the limiter, or by
// a learning transport's pace after the last hold it learned of.
func (t *Transport) wait(r *http.Request, key string, cost float64) error {
	if t.learner == nil {
		return t.lim.Wait(r.Context(), key, cost)
	}
	return t.learner.Wait(r.Context(), key, cost)
}

// notSent closes the body of r, which is not sent, and returns err for it.
func notSent(r *http.Request, err error) error {
	if r.Body != nil {
		r.Body.Close()
	}
	return fmt.Errorf("sluicehttp: transport: %s %s not sent: %w", r.Method, r.URL.Redacted(), err)
}

// request returns the key and the cost of r.
func (t *Transport) request(r *http.Request) (key string, cost float64, err error) {
	if cost, err = t.costOf(r); err != nil {
		return "", 0, err
	}
	if key, err = t.key(r); err != nil {
		return "", 0, fmt.Errorf("no key: %w", err)
	}
	return key, cost, nil
}

// waitGroup blocks until r is admitted by every limit of the group.
func (t *Transport) waitGroup(r *http.Request) error {
	cost, err := t.costOf(r)
	if err != nil {
		return err
	}
	ks, err := t.keys(r)
	if err != nil {
		return fmt.Errorf("no keys: %w", err)
	}
	return t.g.Wait(r.Context(), ks, cost)
}

// costOf returns the cost of r: 1, or what the cost function says.
func (t *Transport) costOf(r *http.Request) (float64, error) {
	if t.cost == nil {
		return 1, nil
	}
	cost, err := t.cost(r)
	if err != nil {
		return 0, fmt.Errorf("no cost: %w", err)
	}
	return cost, nil
}
