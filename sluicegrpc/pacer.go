package sluicegrpc

import (
	"context"
	"errors"
	"fmt"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/sluice-go/sluice"
	"github.com/sluice-go/sluice/internal/answers"
	"github.com/sluice-go/sluice/internal/learn"
)

// Pacer paces a client's outgoing calls with a limiter: before each call
// it Waits until the limiter admits it, so that a job calling a
// rate-limited API stays under the API's limit instead of being refused.
// Its Unary and Stream methods are the client interceptors; it is safe for
// concurrent use, and several connections or processes share a pace when
// their limiters share a store.
type Pacer struct {
	lim     *sluice.Limiter
	key     func(ctx context.Context, cc *grpc.ClientConn, fullMethod string) (string, error)
	cost    CostFunc
	learner *learn.Learner // or nil when the pacer does not learn
}

// PacerOption configures a [Pacer].
type PacerOption func(*Pacer) error

// PaceByMethod gives each method its own pace: the key is the
// connection's target and the method. By default all calls on one
// connection target share one pace.
func PaceByMethod() PacerOption {
	return func(p *Pacer) error {
		p.key = func(_ context.Context, cc *grpc.ClientConn, method string) (string, error) {
			return cc.Target() + method, nil
		}
		return nil
	}
}

// WithPaceKey makes the pacer key calls with f, for a pace per tenant or
// per account; nil restores the default, the connection's target.
func WithPaceKey(f KeyFunc) PacerOption {
	return func(p *Pacer) error {
		if f == nil {
			p.key = targetKey
			return nil
		}
		p.key = func(ctx context.Context, _ *grpc.ClientConn, method string) (string, error) {
			return f(ctx, method)
		}
		return nil
	}
}

// WithPaceCost makes the pacer charge each call the cost f returns
// (req is nil for a stream), instead of 1.
func WithPaceCost(f CostFunc) PacerOption {
	return func(p *Pacer) error {
		p.cost = f
		return nil
	}
}

// Learn makes the pacer follow what the server answers a unary call, for
// every worker and every process whose limiters share a store: a status
// with a RetryInfo detail (as sluicegrpc's interceptors send with
// ResourceExhausted) holds every call on the key back for its retry
// delay, with [sluice.Limiter.Exhaust]; the remaining counts and resets
// of the response's header or trailer metadata (the IETF ratelimit
// fields, as sluicegrpc's interceptors send them, or x-ratelimit-*)
// pace the key so that what is left lasts until the reset; and a
// ResourceExhausted that says nothing backs off and cuts the pace, as
// sluicehttp's Learn does, whose documentation states the rules. Calls
// that waited for a turn booked before a hold wait again, after it. An
// answer only ever slows calls down, and holds them back at most an hour.
// Streams are paced, not learned from. The limiter must be a GCRA, a
// leaky bucket or a token bucket ([sluice.ErrUnsupported] otherwise).
func Learn() PacerOption {
	return func(p *Pacer) error {
		lr, err := learn.New("sluicegrpc: a pacer", p.lim, answers.Requests)
		p.learner = lr
		return err
	}
}

func targetKey(_ context.Context, cc *grpc.ClientConn, _ string) (string, error) {
	return cc.Target(), nil
}

// NewPacer returns client interceptors that pace calls with lim, or an
// error wrapping [sluice.ErrInvalidConfig] if lim is nil.
func NewPacer(lim *sluice.Limiter, opts ...PacerOption) (*Pacer, error) {
	if lim == nil {
		return nil, fmt.Errorf("%w: nil limiter", sluice.ErrInvalidConfig)
	}
	p := &Pacer{lim: lim, key: targetKey}
	for _, o := range opts {
		if err := o(p); err != nil {
			return nil, err
		}
	}
	return p, nil
}

// Unary is a grpc.UnaryClientInterceptor that waits for the limiter
// before each call.
func (p *Pacer) Unary(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	key, cost, err := p.wait(ctx, cc, method, req)
	switch {
	case err != nil:
		return err
	case p.learner == nil:
		return invoker(ctx, method, req, reply, cc, opts...)
	}
	var header, trailer metadata.MD
	err = invoker(ctx, method, req, reply, cc, append(opts, grpc.Header(&header), grpc.Trailer(&trailer))...)
	p.heed(ctx, key, cost, err, header, trailer)
	return err
}

// heed learns from the answer to a call of cost on key: its error, and
// its header and trailer metadata.
func (p *Pacer) heed(ctx context.Context, key string, cost float64, err error, header, trailer metadata.MD) {
	now := time.Now()
	a := answers.Read(func(name string) []string {
		return append(header.Get(name), trailer.Get(name)...)
	}, now)
	st, _ := status.FromError(err)
	for _, d := range st.Details() {
		if info, ok := d.(*errdetails.RetryInfo); ok && info.GetRetryDelay().IsValid() {
			a.RetryAfter = min(max(info.GetRetryDelay().AsDuration(), 0), answers.MaxWait)
			a.HasRetryAfter = true
		}
	}
	refused := st.Code() == codes.ResourceExhausted || st.Code() == codes.Unavailable && a.HasRetryAfter
	answered := st.Code() != codes.Unavailable && st.Code() != codes.Canceled && st.Code() != codes.DeadlineExceeded
	p.learner.Heed(ctx, key, cost, a, now, refused, answered)
}

// Stream is a grpc.StreamClientInterceptor that waits for the limiter
// before opening each stream.
func (p *Pacer) Stream(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
	if _, _, err := p.wait(ctx, cc, method, nil); err != nil {
		return nil, err
	}
	return streamer(ctx, desc, cc, method, opts...)
}

// wait blocks until the call is admitted, and returns its key and cost.
// It returns, as a status error,
// codes.DeadlineExceeded at once when the call's deadline comes before the
// earliest admission, the context's code if it ends while waiting,
// codes.InvalidArgument for a call that can never be admitted, and
// codes.Unavailable when the limiter fails. The call is not made then.
func (p *Pacer) wait(ctx context.Context, cc *grpc.ClientConn, method string, req any) (key string, cost float64, err error) {
	key, err = p.key(ctx, cc, method)
	if err != nil {
		return "", 0, status.Errorf(codes.InvalidArgument, "sluicegrpc: pacer: no key for call: %v", err)
	}
	cost = 1.0
	if p.cost != nil {
		if cost, err = p.cost(ctx, method, req); err != nil {
			return "", 0, status.Errorf(codes.InvalidArgument, "sluicegrpc: pacer: no cost for call: %v", err)
		}
	}
	if p.learner != nil {
		err = p.learner.Wait(ctx, key, cost)
	} else {
		err = p.lim.Wait(ctx, key, cost)
	}
	switch {
	case err == nil:
		return key, cost, nil
	case errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, sluice.ErrTimeout):
		// The call's deadline comes before its turn (or has passed), not
		// the store's.
		return "", 0, status.Error(codes.DeadlineExceeded, err.Error())
	case ctx.Err() != nil:
		return "", 0, status.FromContextError(ctx.Err()).Err()
	case errors.Is(err, sluice.ErrCostExceedsLimit), errors.Is(err, sluice.ErrInvalidCost):
		return "", 0, status.Error(codes.InvalidArgument, err.Error())
	}
	return "", 0, status.Errorf(codes.Unavailable, "sluicegrpc: pacer: limiter failed: %v", err)
}
