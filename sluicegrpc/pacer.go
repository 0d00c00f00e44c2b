package sluicegrpc

import (
	"context"
	"errors"
	"fmt"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/sluice-go/sluice"
)

// Pacer paces a client's outgoing calls with a limiter: before each call
// it Waits until the limiter admits it, so that a job calling a
// rate-limited API stays under the API's limit instead of being refused.
// Its Unary and Stream methods are the client interceptors; it is safe for
// concurrent use, and several connections or processes share a pace when
// their limiters share a store.
type Pacer struct {
	lim  *sluice.Limiter
	key  func(ctx context.Context, cc *grpc.ClientConn, fullMethod string) (string, error)
	cost CostFunc
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
	if err := p.wait(ctx, cc, method, req); err != nil {
		return err
	}
	return invoker(ctx, method, req, reply, cc, opts...)
}

// Stream is a grpc.StreamClientInterceptor that waits for the limiter
// before opening each stream.
func (p *Pacer) Stream(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
	if err := p.wait(ctx, cc, method, nil); err != nil {
		return nil, err
	}
	return streamer(ctx, desc, cc, method, opts...)
}

// wait blocks until the call is admitted. It returns, as a status error,
// codes.DeadlineExceeded at once when the call's deadline comes before the
// earliest admission, the context's code if it ends while waiting,
// codes.InvalidArgument for a call that can never be admitted, and
// codes.Unavailable when the limiter fails. The call is not made then.
func (p *Pacer) wait(ctx context.Context, cc *grpc.ClientConn, method string, req any) error {
	key, err := p.key(ctx, cc, method)
	if err != nil {
		return status.Errorf(codes.InvalidArgument, "sluicegrpc: pacer: no key for call: %v", err)
	}
	cost := 1.0
	if p.cost != nil {
		if cost, err = p.cost(ctx, method, req); err != nil {
			return status.Errorf(codes.InvalidArgument, "sluicegrpc: pacer: no cost for call: %v", err)
		}
	}
	err = p.lim.Wait(ctx, key, cost)
	switch {
	case err == nil:
		return nil
	case errors.Is(err, sluice.ErrWouldExceedDeadline):
		return status.Error(codes.DeadlineExceeded, err.Error())
	case ctx.Err() != nil:
		return status.FromContextError(ctx.Err()).Err()
	case errors.Is(err, sluice.ErrCostExceedsLimit), errors.Is(err, sluice.ErrInvalidCost):
		return status.Error(codes.InvalidArgument, err.Error())
	}
	return status.Errorf(codes.Unavailable, "sluicegrpc: pacer: limiter failed: %v", err)
}
