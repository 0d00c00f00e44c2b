package sluicegrpc_test

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/sluice-go/sluice"
	"github.com/sluice-go/sluice/sluicegrpc"
)

func slots(t *testing.T, limit float64, ttl time.Duration, opts ...sluice.Option) *sluice.Limiter {
	t.Helper()
	lim, err := sluice.NewConcurrencyLimit(limit, ttl, opts...)
	require.NoError(t, err)
	t.Cleanup(func() { lim.Close() })
	return lim
}

// inUse returns the slots held on key.
func inUse(t *testing.T, lim *sluice.Limiter, key string) float64 {
	t.Helper()
	d, err := lim.CanAccept(context.Background(), key, 0)
	require.NoError(t, err)
	return d.Used
}

// gated is a health server limited by an interceptor under test, between
// two of the test's own. Outside it, a recovery interceptor turns a panic
// into codes.Internal, and ended receives a value once a call or stream
// has left the interceptor under test, its release made. Inside it, calls
// pass a gate as their x-do metadata says: "hold" waits for proceed,
// "until-gone" for the call's context to end, "panic" panics. inFlight
// and most count the calls past the limiter, as the gate sees them.
type gated struct {
	client          healthpb.HealthClient
	entered         chan struct{}
	proceed         chan struct{}
	ended           chan struct{}
	inFlight, most  atomic.Int64
	recoveredPanics atomic.Int32
}

func newGated(t *testing.T, limit *sluicegrpc.Interceptor) *gated {
	t.Helper()
	g := &gated{entered: make(chan struct{}, 64), proceed: make(chan struct{}), ended: make(chan struct{}, 64)}
	ended := func(ctx context.Context, req any, _ *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
		defer func() { g.ended <- struct{}{} }()
		return h(ctx, req)
	}
	endedStream := func(srv any, ss grpc.ServerStream, _ *grpc.StreamServerInfo, h grpc.StreamHandler) error {
		defer func() { g.ended <- struct{}{} }()
		return h(srv, ss)
	}
	recovering := func(ctx context.Context, req any, _ *grpc.UnaryServerInfo, h grpc.UnaryHandler) (resp any, err error) {
		defer func() {
			if p := recover(); p != nil {
				g.recoveredPanics.Add(1)
				err = status.Errorf(codes.Internal, "panic: %v", p)
			}
		}()
		return h(ctx, req)
	}
	gate := func(ctx context.Context) error {
		n := g.inFlight.Add(1)
		defer g.inFlight.Add(-1)
		for m := g.most.Load(); n > m && !g.most.CompareAndSwap(m, n); m = g.most.Load() {
		}
		md, _ := metadata.FromIncomingContext(ctx)
		var do string
		if v := md.Get("x-do"); len(v) > 0 {
			do = v[0]
		}
		if do != "" {
			g.entered <- struct{}{}
		}
		switch do {
		case "hold":
			<-g.proceed
		case "until-gone":
			<-ctx.Done()
			return ctx.Err()
		case "panic":
			panic("boom")
		}
		return nil
	}
	gateUnary := func(ctx context.Context, req any, _ *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
		if err := gate(ctx); err != nil {
			return nil, err
		}
		return h(ctx, req)
	}
	gateStream := func(srv any, ss grpc.ServerStream, _ *grpc.StreamServerInfo, h grpc.StreamHandler) error {
		g.entered <- struct{}{}
		return h(srv, ss)
	}
	ts := newTestServer(t,
		grpc.ChainUnaryInterceptor(ended, recovering, limit.Unary, gateUnary),
		grpc.ChainStreamInterceptor(endedStream, limit.Stream, gateStream))
	g.client = ts.overBufconn(t)
	return g
}

// doing returns the context of a call keyed k whose gate does do.
func doing(k, do string) context.Context {
	return metadata.AppendToOutgoingContext(context.Background(), "x-api-key", k, "x-do", do)
}

func concurrencyInterceptor(t *testing.T, lim *sluice.Limiter, opts ...sluicegrpc.Option) *sluicegrpc.Interceptor {
	t.Helper()
	limit, err := sluicegrpc.NewInterceptor(lim, append([]sluicegrpc.Option{sluicegrpc.WithKey(sluicegrpc.MetadataKey("x-api-key"))}, opts...)...)
	require.NoError(t, err)
	return limit
}

// TestConcurrencyLimitNeverRunsMoreThanItsSlotsAtOnce makes 64 unary calls
// at once on one key, each held in its handler until the test lets it go:
// as many run as there are slots, never more, and the others end
// ResourceExhausted.
func TestConcurrencyLimitNeverRunsMoreThanItsSlotsAtOnce(t *testing.T) {
	const calls = 64
	for _, limit := range []int{1, 2, 5} {
		t.Run(fmt.Sprint(limit), func(t *testing.T) {
			lim := slots(t, float64(limit), time.Minute)
			g := newGated(t, concurrencyInterceptor(t, lim))
			codesOf := make(chan codes.Code, calls)
			for range calls {
				go func() {
					_, err := check(g.client, doing("k", "hold"))
					codesOf <- status.Code(err)
				}()
			}
			for range limit {
				<-g.entered
			}
			for range calls - limit {
				require.Equal(t, codes.ResourceExhausted.String(), (<-codesOf).String())
			}
			close(g.proceed)
			for range limit {
				require.Equal(t, codes.OK.String(), (<-codesOf).String())
			}
			require.Equal(t, int64(limit), g.most.Load(), "as many at once as the limit, never more")
			for range calls {
				<-g.ended
			}
			require.Zero(t, inUse(t, lim, "k"), "every slot given back")
		})
	}
}

// TestFullConcurrencyLimitEndsCallsResourceExhausted pins what a call
// gets, admitted or denied, with leases held on its key by calls in
// flight: 30 s leases taken 10 s apart on a fake clock, so that the
// earliest expires in 20 s.
func TestFullConcurrencyLimitEndsCallsResourceExhausted(t *testing.T) {
	const policy = `"default";q=2;qu="concurrent-requests"`
	busy := sluicegrpc.WithConcurrencyRetryAfter
	tests := []struct {
		name      string
		held      int
		opts      []sluicegrpc.Option
		code      codes.Code
		rateLimit string
		retry     time.Duration // of RetryInfo, 0 for none
	}{
		0: {name: "a free key", held: 0, code: codes.OK, rateLimit: `"default";r=1`},
		1: {name: "the last slot", held: 1, code: codes.OK, rateLimit: `"default";r=0`},
		2: {name: "full: the hint of a second", held: 2, code: codes.ResourceExhausted, rateLimit: `"default";r=0`, retry: time.Second},
		3: {name: "a hint past the earliest expiry is capped there", held: 2, opts: []sluicegrpc.Option{busy(time.Hour)},
			code: codes.ResourceExhausted, rateLimit: `"default";r=0`, retry: 20 * time.Second},
		4: {name: "no hint, no RetryInfo", held: 2, opts: []sluicegrpc.Option{busy(0)}, code: codes.ResourceExhausted, rateLimit: `"default";r=0`},
		5: {name: "dry run serves a call the limit would deny", held: 2, opts: []sluicegrpc.Option{sluicegrpc.WithDryRun()},
			code: codes.OK, rateLimit: `"default";r=0`},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clock := newClock()
			lim := slots(t, 2, 30*time.Second, sluice.WithClock(clock))
			for j := range tt.held {
				if j > 0 {
					clock.Add(10 * time.Second)
				}
				lease, err := lim.TryAcquire(context.Background(), "k", 1)
				require.NoError(t, err)
				require.True(t, lease.Allowed)
			}
			client, ts := limited(t, lim, tt.opts...)
			header, err := check(client, withKey("k"))
			requireCode(t, tt.code, err, "row %d", i)
			require.Equal(t, []string{policy}, header.Get("ratelimit-policy"), "row %d", i)
			require.Equal(t, []string{tt.rateLimit}, header.Get("ratelimit"), "row %d", i)
			require.Equal(t, tt.code == codes.OK, ts.served.Load() == 1, "row %d", i)
			require.Equal(t, float64(tt.held), inUse(t, lim, "k"), "row %d: the call's own lease given back", i)
			if err == nil {
				return
			}
			require.Contains(t, err.Error(), "too many concurrent calls", "row %d", i)
			retry, quota := details(t, err)
			require.Equal(t, tt.retry, retry.GetRetryDelay().AsDuration(), "row %d", i)
			require.Equal(t, tt.retry != 0, retry != nil, "row %d", i)
			require.NotNil(t, quota, "row %d", i)
			v := quota.GetViolations()[0]
			require.Equal(t, "k", v.GetSubject())
			require.Equal(t, "default", v.GetQuotaId())
			require.Equal(t, int64(2), v.GetQuotaValue())
			require.Equal(t, "0 of 2 concurrent calls free; a slot comes back when a call in flight ends", v.GetDescription())
		})
	}
}

// TestPanickingHandlerGivesItsSlotBack requires that a handler that
// panics gives its slot back as the panic leaves the interceptor, and that
// the panic goes on as without it: to a recovery interceptor chained
// outside, or to the caller of Unary and Stream.
func TestPanickingHandlerGivesItsSlotBack(t *testing.T) {
	lim := slots(t, 1, time.Hour)
	limit := concurrencyInterceptor(t, lim)
	g := newGated(t, limit)
	_, err := check(g.client, doing("k", "panic"))
	requireCode(t, codes.Internal, err, "recovered outside the interceptor")
	require.Equal(t, int32(1), g.recoveredPanics.Load())
	<-g.entered
	require.Zero(t, inUse(t, lim, "k"))
	_, err = check(g.client, withKey("k"))
	require.NoError(t, err, "the next call gets the slot")

	ctx := metadata.NewIncomingContext(context.Background(), metadata.Pairs("x-api-key", "direct"))
	unary := &grpc.UnaryServerInfo{FullMethod: checkMethod}
	require.PanicsWithValue(t, "boom", func() {
		_, _ = limit.Unary(ctx, nil, unary, func(context.Context, any) (any, error) { panic("boom") })
	})
	require.Zero(t, inUse(t, lim, "direct"))
	stream := &grpc.StreamServerInfo{FullMethod: "/grpc.health.v1.Health/Watch", IsServerStream: true}
	require.PanicsWithValue(t, "boom", func() {
		_ = limit.Stream(nil, fakeStream{ctx: ctx}, stream, func(any, grpc.ServerStream) error { panic("boom") })
	})
	require.Zero(t, inUse(t, lim, "direct"))
}

// fakeStream is a server stream for calling Stream directly: it has a
// context and takes header metadata, and nothing else.
type fakeStream struct {
	grpc.ServerStream
	ctx context.Context
}

func (s fakeStream) Context() context.Context    { return s.ctx }
func (s fakeStream) SetHeader(metadata.MD) error { return nil }

// TestClientGoneMidCallGivesItsSlotBack cancels a unary call while its
// handler runs: the server cancels the call's context, the handler
// returns, and the lease is released though that context has ended.
func TestClientGoneMidCallGivesItsSlotBack(t *testing.T) {
	lim := slots(t, 1, time.Hour)
	var hooked []error
	g := newGated(t, concurrencyInterceptor(t, lim, sluicegrpc.WithErrorHook(func(_ context.Context, _ string, err error) {
		hooked = append(hooked, err)
	})))
	ctx, hangUp := context.WithCancel(doing("k", "until-gone"))
	left := make(chan error, 1)
	go func() {
		_, err := check(g.client, ctx)
		left <- err
	}()
	<-g.entered
	_, err := check(g.client, withKey("k"))
	requireCode(t, codes.ResourceExhausted, err, "the slot is held meanwhile")
	<-g.ended
	hangUp()
	requireCode(t, codes.Canceled, <-left)
	<-g.ended // the gone call has left the interceptor
	require.Zero(t, inUse(t, lim, "k"), "released after its context ended")
	_, err = check(g.client, withKey("k"))
	require.NoError(t, err, "the next call gets the slot")
	<-g.ended
	require.Empty(t, hooked, "a release made after the client left is no error")
}

// TestStreamHoldsItsSlotWhileOpen holds a health Watch stream open: a
// second stream, or a unary call, of its key is refused until the first
// stream ends.
func TestStreamHoldsItsSlotWhileOpen(t *testing.T) {
	lim := slots(t, 1, time.Hour)
	g := newGated(t, concurrencyInterceptor(t, lim))
	ctx, closeStream := context.WithCancel(withKey("k"))
	defer closeStream()
	open, err := g.client.Watch(ctx, &healthpb.HealthCheckRequest{})
	require.NoError(t, err)
	_, err = open.Recv()
	require.NoError(t, err)
	header, err := open.Header()
	require.NoError(t, err)
	require.Equal(t, []string{`"default";q=1;qu="concurrent-requests"`}, header.Get("ratelimit-policy"))
	require.Equal(t, []string{`"default";r=0`}, header.Get("ratelimit"))
	<-g.entered
	require.Equal(t, 1.0, inUse(t, lim, "k"), "held while the stream is open")

	refused, err := g.client.Watch(withKey("k"), &healthpb.HealthCheckRequest{})
	require.NoError(t, err, "a stream's status comes with its first message")
	_, err = refused.Recv()
	requireCode(t, codes.ResourceExhausted, err)
	retry, quota := details(t, err)
	require.Equal(t, time.Second, retry.GetRetryDelay().AsDuration())
	require.Equal(t, "k", quota.GetViolations()[0].GetSubject())
	<-g.ended
	_, err = check(g.client, withKey("k"))
	requireCode(t, codes.ResourceExhausted, err, "a unary call of the key too")
	<-g.ended

	closeStream()
	<-g.ended // the stream's handler has returned
	require.Zero(t, inUse(t, lim, "k"))
	again, err := g.client.Watch(withKey("k"), &healthpb.HealthCheckRequest{})
	require.NoError(t, err)
	_, err = again.Recv()
	require.NoError(t, err, "a new stream gets the slot")
}

// TestCallOutlivingItsLeaseReportsErrRelease runs a call past the lease's
// time to live: the release finds the lease expired and says so to the
// error hook.
func TestCallOutlivingItsLeaseReportsErrRelease(t *testing.T) {
	clock := newClock()
	lim := slots(t, 1, 10*time.Second, sluice.WithClock(clock))
	var hooked []error
	limit := concurrencyInterceptor(t, lim, sluicegrpc.WithErrorHook(func(_ context.Context, method string, err error) {
		require.Equal(t, checkMethod, method)
		hooked = append(hooked, err)
	}))
	ctx := metadata.NewIncomingContext(context.Background(), metadata.Pairs("x-api-key", "k"))
	_, err := limit.Unary(ctx, nil, &grpc.UnaryServerInfo{FullMethod: checkMethod}, func(context.Context, any) (any, error) {
		clock.Add(11 * time.Second)
		return nil, nil
	})
	require.NoError(t, err)
	require.Len(t, hooked, 1)
	require.ErrorIs(t, hooked[0], sluicegrpc.ErrRelease)
	require.ErrorIs(t, hooked[0], sluice.ErrNotHeld)
}

// TestConcurrencyLimitErrorsMapToCodesAsARateLimitsDo pins the codes of a
// lease that cannot be taken, or of a call refused once it holds one,
// whose slot is then given back at once.
func TestConcurrencyLimitErrorsMapToCodesAsARateLimitsDo(t *testing.T) {
	cost := func(c float64, err error) sluicegrpc.Option {
		return sluicegrpc.WithCost(func(context.Context, string, any) (float64, error) { return c, err })
	}
	down := slots(t, 2, time.Minute, sluice.WithStore(failingStore{}))
	tests := []struct {
		name    string
		lim     *sluice.Limiter
		opts    []sluicegrpc.Option
		code    codes.Code
		wantErr error
	}{
		0: {name: "store down fails closed", lim: down, code: codes.Unavailable, wantErr: errStoreDown},
		1: {name: "store down fails open on request", lim: down, opts: []sluicegrpc.Option{sluicegrpc.WithFailOpen()}, code: codes.OK, wantErr: errStoreDown},
		2: {name: "more than every slot is an invalid argument", lim: slots(t, 2, time.Minute), opts: []sluicegrpc.Option{cost(3, nil)},
			code: codes.InvalidArgument, wantErr: sluice.ErrCostExceedsLimit},
		3: {name: "a cost error is an invalid argument, its slot given back", lim: slots(t, 2, time.Minute), opts: []sluicegrpc.Option{cost(0, errors.New("bad"))},
			code: codes.InvalidArgument, wantErr: sluicegrpc.ErrCost},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var hooked []error
			client, _ := limited(t, tt.lim, append(tt.opts, sluicegrpc.WithErrorHook(func(_ context.Context, _ string, err error) {
				hooked = append(hooked, err)
			}))...)
			_, err := check(client, withKey("k"))
			requireCode(t, tt.code, err, "row %d", i)
			require.Len(t, hooked, 1, "row %d", i)
			require.ErrorIs(t, hooked[0], tt.wantErr, "row %d", i)
			if tt.lim != down {
				require.Zero(t, inUse(t, tt.lim, "k"), "row %d", i)
			}
		})
	}
	_, err := sluicegrpc.NewInterceptor(slots(t, 2, time.Minute), sluicegrpc.WithConcurrencyRetryAfter(-time.Second))
	require.ErrorIs(t, err, sluice.ErrInvalidConfig)
}
