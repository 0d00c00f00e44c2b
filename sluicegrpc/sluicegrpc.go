// Package sluicegrpc limits the rate of gRPC calls with a sluice limiter:
// server interceptors that refuse calls over a limit, and client
// interceptors that pace outgoing calls to stay under one.
//
// # Servers
//
// An [Interceptor] keys each call ([ClientIP] by default: the peer
// address, or the client behind trusted proxies' x-forwarded-for or
// forwarded metadata; [MetadataKey], [MethodKey] and [Keys] are the
// others), computes its cost (1 by default, see [WithCost] and
// [WithMinCost]) and asks the limiter to Allow it. A stream is decided
// once, when it opens.
//
//	limit, err := sluicegrpc.NewInterceptor(lim)
//	srv := grpc.NewServer(
//		grpc.ChainUnaryInterceptor(limit.Unary),
//		grpc.ChainStreamInterceptor(limit.Stream),
//	)
//
// Every decided call's response header metadata carries the RateLimit
// fields of draft-ietf-httpapi-ratelimit-headers-11, with the syntax the
// HTTP middleware uses (ratelimit-policy: "default";q=100;w=60 and
// ratelimit: "default";r=42;t=18). A denied call ends with
// codes.ResourceExhausted and two error details a gRPC client decodes:
// google.rpc.RetryInfo, whose retry delay is the exact time until the same
// call would be admitted, and google.rpc.QuotaFailure, whose violation
// names the key (subject) and the policy (quota id, and q as quota value).
//
// Errors map to codes as a client can act on them: a call without a key,
// or whose cost could not be computed (once its minimum cost is admitted),
// or that costs more than the whole limit, is codes.InvalidArgument,
// since retrying it cannot help; a key function that is misconfigured (a
// ClientIP with an ambiguous trusted range) gives codes.Internal. A failing limiter (a store that is down)
// fails closed by default with codes.Unavailable and a RetryInfo of one
// second; [WithFailOpen] serves the call instead. A call whose context
// ends while its decision is pending gets its context's code
// (codes.Canceled, codes.DeadlineExceeded) and is neither served nor
// reported as a store error.
//
// # Concurrency
//
// With a concurrency limit ([sluice.NewConcurrencyLimit]) the interceptors
// limit how many calls of a key run at once rather than how many arrive
// in a while: a unary call holds a lease of its cost
// ([sluice.Limiter.TryAcquire]) while its handler runs, and a stream for
// as long as it is open, from its opening to its handler's return. The
// lease is released with defer, when the handler returns or panics (the
// panic goes on as before, to a recovery interceptor chained outside, or
// to the process), and when the client goes away (the release is made
// though the call's context has ended). A lease that cannot be released
// (the store is down, or the call outlived the limit's time to live and
// its lease expired) is reported to the error hook as [ErrRelease]; its
// slot comes back when the lease expires. Choose the time to live longer
// than the longest call, or stream.
//
// A call that finds the limit full ends with codes.ResourceExhausted, as a
// call over a rate limit does: the client used up its share, which
// retrying later may find free, and the server is not unavailable (which
// codes.Unavailable would say, and which clients retry at once, perhaps
// on another server sharing the same full limit). The header metadata
// follows the draft's quota unit for concurrency:
//
//	ratelimit-policy: "default";q=2;qu="concurrent-requests"
//	ratelimit: "default";r=0
//
// without w, since the limit has no window, r being how many more calls
// may start now, and without t: slots come back as calls end, at instants
// no server can know. The QuotaFailure violation names the key and the
// policy as for a rate limit, and the RetryInfo carries a hint,
// [WithConcurrencyRetryAfter] (1 second by default), capped at when the
// earliest lease expires, rather than the exact delay a rate limit sends.
//
// # Limits per key
//
// With a per-key limiter ([sluice.NewPerKey]) each call is held to its
// key's limit, the one the limiter's lookup returns for the key (a plan,
// by API key): the metadata, the QuotaFailure's quota value, and whether
// the call holds a lease follow the limit the lookup returns at that call
// ([sluice.Limiter.ParamsFor]), so that a plan that changes applies at
// the key's next call. Each distinct limit's policy is built once and
// kept (up to 64 limits), so that a call on a known limit allocates no
// more than under a fixed limit. A lookup that fails is answered as a
// failing store is (codes.Unavailable, or served under [WithFailOpen]); a
// key's limit that [NewInterceptor] would refuse of a fixed limiter (less
// than one whole unit, or below the minimum cost) ends its calls with
// codes.Internal, as a misconfigured key does.
//
// # Clients
//
// A [Pacer] waits on a limiter before each outgoing call, so that a job
// calling a rate-limited API stays under its limit instead of being
// refused: the call starts when the limiter admits it, or fails at once
// with codes.DeadlineExceeded if its deadline comes first.
package sluicegrpc

import (
	"context"
	"errors"
	"fmt"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/sluice-go/sluice"
	"github.com/sluice-go/sluice/engine"
	"github.com/sluice-go/sluice/internal/ratelimitheader"
	"github.com/sluice-go/sluice/internal/requestcost"
)

// Errors reported to the error hook. The error of a key or cost function
// is wrapped, so errors.Is finds both.
var (
	// ErrKey reports that the key function failed: the call has no key to
	// be limited by.
	ErrKey = errors.New("sluicegrpc: no key for call")
	// ErrCost reports that the cost function failed or returned a
	// negative, NaN or infinite cost.
	ErrCost = errors.New("sluicegrpc: no cost for call")
	// ErrCallCanceled reports that the call's context ended (its client
	// went away, or its deadline passed) while the limiter was deciding:
	// the limiter's error is then the call's end, not a failure of the
	// store. The context's error is wrapped too.
	ErrCallCanceled = errors.New("sluicegrpc: call ended before its decision")
	// ErrRelease reports that the lease a call held on a concurrency limit
	// could not be given back once the call ended: the store failed, or
	// the lease had expired already ([sluice.ErrNotHeld]), because the
	// call outlived the limit's time to live and its slot may have gone to
	// another call meanwhile. The slot comes back when the lease expires.
	// The store's error is wrapped too.
	ErrRelease = errors.New("sluicegrpc: lease not released")
)

// Metadata keys of the RateLimit fields in response header metadata.
const (
	PolicyMetadataKey    = "ratelimit-policy"
	RateLimitMetadataKey = "ratelimit"
)

// KeyFunc returns the limiter key of a call to fullMethod
// ("/package.Service/Method"): calls with the same key share one
// allowance. An error makes the interceptor answer codes.InvalidArgument.
type KeyFunc func(ctx context.Context, fullMethod string) (string, error)

// CostFunc returns the cost of a call, in the limiter's units: for example
// the number of records in a batch request. req is the unary request, and
// nil for a stream, which is charged when it opens. An error, or a
// negative, NaN or infinite cost, makes the interceptor charge the
// minimum cost ([WithMinCost]) and, if that is admitted, answer
// codes.InvalidArgument.
type CostFunc func(ctx context.Context, fullMethod string, req any) (float64, error)

// Interceptor limits the calls a gRPC server accepts. Its Unary and Stream
// methods are the server interceptors; it is safe for concurrent use.
type Interceptor struct {
	config
	lim    *sluice.Limiter
	policy *ratelimitheader.Policy // nil for a per-key limiter
	// leases says that lim is a concurrency limit: a call holds a lease
	// while it runs.
	leases bool
	// perKey, for a per-key limiter ([sluice.NewPerKey]), holds the
	// policy of each limit its lookup returns: a call's is its key's,
	// which also says whether the call holds a lease.
	perKey *ratelimitheader.Cache[*ratelimitheader.Policy]
}

// NewInterceptor returns server interceptors that limit calls with lim,
// configured by opts, or an error wrapping [sluice.ErrInvalidConfig] if
// lim is nil, an option is invalid, or the limiter's limit cannot be
// reported (less than one whole unit, or below the minimum cost). For a
// per-key limiter ([sluice.NewPerKey]) the limit is known per call, and
// checked then: see the package's Limits per key section.
func NewInterceptor(lim *sluice.Limiter, opts ...Option) (*Interceptor, error) {
	if lim == nil {
		return nil, fmt.Errorf("%w: nil limiter", sluice.ErrInvalidConfig)
	}
	i := &Interceptor{lim: lim, config: defaults()}
	var errs []error
	for _, o := range opts {
		errs = append(errs, o.apply(&i.config))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	if i.key == nil {
		i.key = ClientIP{}.Key
	}
	c := ratelimitheader.Config{
		Name:      i.name,
		Unit:      i.unit,
		Window:    i.window,
		WindowSet: i.windowSet,
		MinCost:   i.minCost,
	}
	params, fixed := lim.Params()
	if !fixed {
		// The limit, and what depends on it, is known per call: see
		// admit.
		cache, err := ratelimitheader.NewCache(c, func(p *ratelimitheader.Policy) *ratelimitheader.Policy { return p })
		if err != nil {
			return nil, err
		}
		i.perKey = cache
		return i, nil
	}
	p, err := ratelimitheader.New(lim, c)
	if err != nil {
		return nil, err
	}
	i.policy = p
	i.leases = params.Kind == engine.KindConcurrency
	return i, nil
}

// Unary is a grpc.UnaryServerInterceptor that limits unary calls. Under a
// concurrency limit a call holds its slot until handler returns or
// panics.
func (i *Interceptor) Unary(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	if i.skip != nil && i.skip(ctx, info.FullMethod) {
		return handler(ctx, req)
	}
	lease, err := i.admit(ctx, info.FullMethod, req, func(md metadata.MD) error { return grpc.SetHeader(ctx, md) })
	if err != nil {
		return nil, err
	}
	if lease != nil {
		defer i.release(ctx, info.FullMethod, lease)
	}
	return handler(ctx, req)
}

// Stream is a grpc.StreamServerInterceptor that limits streams: each is
// decided, and charged, once when it opens. Under a concurrency limit a
// stream holds its slot until handler returns or panics: for as long as
// the stream is open.
func (i *Interceptor) Stream(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
	ctx := ss.Context()
	if i.skip != nil && i.skip(ctx, info.FullMethod) {
		return handler(srv, ss)
	}
	lease, err := i.admit(ctx, info.FullMethod, nil, ss.SetHeader)
	if err != nil {
		return err
	}
	if lease != nil {
		defer i.release(ctx, info.FullMethod, lease)
	}
	return handler(srv, ss)
}

// admit decides a call, sends its RateLimit fields with setHeader, and
// returns nil if the call is to be served, or its status error. A call
// served under a concurrency limit comes with the lease it holds, for the
// caller to release when the call ends; a call that is not served has
// none.
func (i *Interceptor) admit(ctx context.Context, method string, req any, setHeader func(metadata.MD) error) (*sluice.Lease, error) {
	key, err := i.key(ctx, method)
	if err != nil {
		err = fmt.Errorf("%w: %w", ErrKey, err)
		i.report(ctx, method, err)
		switch {
		case i.dryRun:
			return nil, nil
		case errors.Is(err, sluice.ErrInvalidConfig): // the server's fault, not the call's
			return nil, status.Error(codes.Internal, "sluicegrpc: misconfigured key")
		}
		return nil, status.Error(codes.InvalidArgument, err.Error())
	}
	cost, costErr := i.costOf(ctx, method, req)
	policy, leases := i.policy, i.leases
	if i.perKey != nil {
		params, err := i.lim.ParamsFor(ctx, key)
		if err != nil { // a lookup that fails, as a store that fails
			return nil, i.limiterFailed(ctx, method, err)
		}
		if policy, err = i.perKey.Get(params); err != nil {
			return nil, i.misfit(ctx, method, err)
		}
		leases = policy.Concurrent()
	}
	if !leases {
		d, err := i.lim.Allow(ctx, key, cost)
		if err != nil {
			return nil, i.limiterFailed(ctx, method, err)
		}
		return nil, i.answer(ctx, method, key, policy, d, costErr, setHeader)
	}
	lease, err := i.lim.TryAcquire(ctx, key, cost)
	if err != nil {
		return nil, i.limiterFailed(ctx, method, err)
	}
	if !lease.Allowed {
		return nil, i.answer(ctx, method, key, policy, lease.Decision, costErr, setHeader)
	}
	served := false
	defer func() {
		if !served { // refused after all, or a hook panicked
			i.release(ctx, method, &lease)
		}
	}()
	if err := i.answer(ctx, method, key, policy, lease.Decision, costErr, setHeader); err != nil {
		return nil, err
	}
	served = true
	return &lease, nil
}

// answer sends the RateLimit fields of d, the decision under policy on a
// call of key, with setHeader, and returns nil if the call is to be
// served, or its status error: a denial, or the error of its cost.
func (i *Interceptor) answer(ctx context.Context, method, key string, policy *ratelimitheader.Policy, d sluice.Decision, costErr error, setHeader func(metadata.MD) error) error {
	fields := policy.Fields(d)
	// A header that cannot be sent (the stream's header is already out)
	// must not change the decision.
	_ = setHeader(metadata.MD{PolicyMetadataKey: {fields.Policy}, RateLimitMetadataKey: {fields.RateLimit}})
	if i.decisionHook != nil {
		i.decisionHook(ctx, method, d)
	}
	switch {
	case !d.Allowed && !i.dryRun:
		return denied(key, policy, fields, d, i.busy)
	case costErr != nil:
		i.report(ctx, method, costErr)
		if !i.dryRun {
			return status.Error(codes.InvalidArgument, costErr.Error())
		}
	}
	return nil
}

// release gives back the lease of a call once it has ended, even if its
// context has ended or its handler panicked, and reports a lease that
// could not be given back to the error hook.
func (i *Interceptor) release(ctx context.Context, method string, lease *sluice.Lease) {
	if err := lease.Release(ctx); err != nil {
		i.report(ctx, method, fmt.Errorf("%w: %w", ErrRelease, err))
	}
}

// costOf returns what a call is charged: its cost, at least the minimum
// cost. When its cost cannot be computed, it is charged the minimum cost
// and err says why.
func (i *Interceptor) costOf(ctx context.Context, method string, req any) (cost float64, err error) {
	cost = 1
	if i.cost != nil {
		cost, err = i.cost(ctx, method, req)
	}
	if cost, err = requestcost.Of(cost, err, i.minCost); err != nil {
		return cost, fmt.Errorf("%w: %w", ErrCost, err)
	}
	return cost, nil
}

// limiterFailed returns the status of a call whose decision failed with
// err, or nil to serve it anyway.
func (i *Interceptor) limiterFailed(ctx context.Context, method string, err error) error {
	switch {
	case errors.Is(err, sluice.ErrCostExceedsLimit):
		i.report(ctx, method, err)
		if i.dryRun {
			return nil
		}
		return status.Error(codes.InvalidArgument, "sluicegrpc: the call costs more than the whole limit")
	case errors.Is(err, sluice.ErrInvalidKey):
		i.report(ctx, method, err)
		if i.dryRun {
			return nil
		}
		return status.Error(codes.InvalidArgument, "sluicegrpc: the call's key cannot be stored")
	case ctx.Err() != nil:
		// Most likely the store gave up because the call's context
		// ended: that is the call's end, not an outage, and nobody
		// waits for it to be served.
		i.report(ctx, method, fmt.Errorf("%w: %w (limiter: %w)", ErrCallCanceled, context.Cause(ctx), err))
		return status.FromContextError(ctx.Err()).Err()
	}
	i.report(ctx, method, err)
	if i.failOpen || i.dryRun {
		return nil
	}
	return unavailable(i.unavailable)
}

// misfit returns the status of a call whose key's limit, as a per-key
// limiter looked it up, cannot be served with the interceptor's
// configuration because of err (its policy cannot be stated: less than
// one whole unit, or below the minimum cost), or nil to serve it anyway
// under dry run. It is the server's misconfiguration, which
// [NewInterceptor] refuses for a fixed limit: codes.Internal, as for a
// misconfigured key, whether or not the interceptor fails open.
func (i *Interceptor) misfit(ctx context.Context, method string, err error) error {
	i.report(ctx, method, fmt.Errorf("sluicegrpc: the limit looked up for the call's key does not fit the interceptor: %w", err))
	if i.dryRun {
		return nil
	}
	return status.Error(codes.Internal, "sluicegrpc: misconfigured limit")
}

func (i *Interceptor) report(ctx context.Context, method string, err error) {
	if i.errorHook != nil {
		i.errorHook(ctx, method, err)
	}
}
