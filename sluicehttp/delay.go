package sluicehttp

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/sluice-go/sluice"
	"github.com/sluice-go/sluice/engine"
	"github.com/sluice-go/sluice/internal/arith"
)

// WithMaxDelay makes the middleware shape requests instead of only
// refusing them, as nginx's limit_req does with burst: a request that
// would be denied now but conforms within maxDelay is held until its turn
// and then served; only a request whose turn is further away is answered
// 429. Each held request books its turn with the limiter's Reserve when it
// arrives, so held requests on a key are served in the order they came, at
// the instants the algorithm allows, and sleep on the limiter's clock
// ([sluice.WithClock]).
//
// A held request whose context is cancelled gives the turn back
// ([sluice.Reservation.Cancel]: the turn is freed for the next request
// if nothing was booked after it) and is not served; the error hook sees
// [ErrRequestCanceled]. The server cancels it when it sees the client go:
// over HTTP/2 at once, over HTTP/1.x only once the request's body has been
// read to its end (at once for a request without a body, or after a cost
// function that reads the whole body with [ReadBody]). A client that
// leaves an HTTP/1.x request whose body is unread cannot be seen leaving:
// the request keeps its turn and is served at it, to nobody. A request
// whose cost cannot be computed is never held: it is decided at once, as
// without the option.
//
// The response to a held request carries the RateLimit fields of its
// reservation as they stand when it is served: t counts from then, and r
// is what its turn left, which is 0 (it took the last of the allowance at
// its instant). The decision hook sees the reservation's decision when it
// is booked, with its Delay. Under [WithDryRun] nothing is held: the turn
// is booked, as enforcement would book it, and the request served at once.
//
// With a concurrency limit ([sluice.NewConcurrencyLimit]) a request that
// finds every slot of its key taken waits for one with the limiter's
// Acquire, for at most maxDelay (a context with that timeout), in the
// order the waiting requests came; one still waiting then is answered 429
// with the fields of the key as it stands then. A request whose client
// goes away while it waits is neither served nor answered, as above. The
// decision hook sees the outcome once the wait is over: a lease granted,
// or the denial. The same holds for a [NewGroup] with a concurrency limit
// among its policies, whatever its other limits' algorithms: the group
// waits until every policy admits the request.
//
// Otherwise it needs a limiter that reserves: the GCRA, the leaky bucket or
// the token bucket. With a window algorithm [New] fails with an error
// wrapping [sluice.ErrInvalidConfig] and [sluice.ErrUnsupported]; under a
// per-key limiter ([sluice.NewPerKey]), a request whose key's limit is a
// window algorithm is answered 500 with that error. maxDelay
// must be between 0 and 2^60 ns (about 36 years); 0 holds nothing, as
// without the option. A server's WriteTimeout must leave room for the
// delay.
func WithMaxDelay(maxDelay time.Duration) Option {
	return optionFunc(func(c *config) error {
		if maxDelay < 0 || maxDelay > arith.MaxSpan {
			return fmt.Errorf("%w: %w: max delay %v is not between 0 and %v",
				sluice.ErrInvalidConfig, sluice.ErrInvalidDelay, maxDelay, time.Duration(arith.MaxSpan))
		}
		c.maxDelay = maxDelay
		return nil
	})
}

// checkDelay reports whether a limiter of p can hold requests for
// maxDelay: any can in a group that holds leases, which waits with
// Acquire.
func checkDelay(p *engine.Params, maxDelay time.Duration, groupLeases bool) error {
	if maxDelay == 0 || groupLeases {
		return nil
	}
	if !p.Reservable() && p.Kind != engine.KindConcurrency {
		return fmt.Errorf("%w: %w: WithMaxDelay needs a limiter that reserves (GCRA, leaky or token bucket) or a concurrency limit, not a %v",
			sluice.ErrInvalidConfig, sluice.ErrUnsupported, p.Kind)
	}
	return nil
}

// decide admits or denies a request of cost for key. A request admitted
// after a delay comes with its turn, to wait for before it is served.
func (m *middleware) decide(ctx context.Context, key string, cost float64, costErr error) (sluice.Decision, *sluice.Reservation, error) {
	if m.maxDelay == 0 || costErr != nil {
		d, err := m.lim.Allow(ctx, key, cost)
		return d, nil, err
	}
	turn, err := m.lim.Reserve(ctx, key, cost, m.maxDelay)
	switch {
	case err != nil:
		return sluice.Decision{}, nil, err
	case turn.Delay <= 0 || m.dryRun:
		return turn.Decision, nil, nil
	}
	return turn.Decision, turn, nil
}

// A turn is a held request's reservation: one limiter's or a group's.
type turn interface {
	comparable
	Wait(ctx context.Context) error
}

// hold sleeps until the instant of t, booked by decision d, and returns
// the decision the request is served on. A turn that went stale (the
// server was paused past it: [sluice.ErrStaleTurn]) is not acted on: the
// request is decided again, once, with again, and held for its new turn
// if it has one. A request whose client went away meanwhile has given its
// turn back; the error says so.
func hold[D any, T turn](ctx context.Context, d D, t T, again func() (D, T, error)) (D, error) {
	var none T
	for stale := false; ; stale = true {
		err := t.Wait(ctx)
		if !errors.Is(err, sluice.ErrStaleTurn) || stale {
			return d, err
		}
		if d, t, err = again(); err != nil || t == none {
			return d, err
		}
	}
}

// held finishes a request whose hold failed with err: a client that went
// away is reported to the error hook, anything else is the limiter's
// failure, answered as such, listing policies.
func (m *middleware) held(next http.Handler, w http.ResponseWriter, r *http.Request, err error, policies []*Fields) {
	if r.Context().Err() != nil {
		m.canceled(r, "held", err)
		return
	}
	m.limiterFailed(next, w, r, err, policies)
}

// servedAt returns d, the decision of a request held for d.Delay, as it
// stands when the request is served: the key is whole again d.Delay sooner.
func servedAt(d sluice.Decision) sluice.Decision {
	d.ResetAfter = max(d.ResetAfter-d.Delay, 0)
	return d
}
