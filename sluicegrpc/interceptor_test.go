package sluicegrpc_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"

	"github.com/sluice-go/sluice"
	"github.com/sluice-go/sluice/engine"
	"github.com/sluice-go/sluice/sluicegrpc"
)

const checkMethod = "/grpc.health.v1.Health/Check"

// limited returns a client of a health server limited by lim with opts,
// and the server. Calls are keyed by their x-api-key metadata, since a
// bufconn peer has no IP address.
func limited(t *testing.T, lim *sluice.Limiter, opts ...sluicegrpc.Option) (healthpb.HealthClient, *testServer) {
	t.Helper()
	limit, err := sluicegrpc.NewInterceptor(lim, append([]sluicegrpc.Option{sluicegrpc.WithKey(sluicegrpc.MetadataKey("x-api-key"))}, opts...)...)
	require.NoError(t, err)
	ts := newTestServer(t, grpc.ChainUnaryInterceptor(limit.Unary), grpc.ChainStreamInterceptor(limit.Stream))
	return ts.overBufconn(t), ts
}

func withKey(key string) context.Context {
	return metadata.AppendToOutgoingContext(context.Background(), "x-api-key", key)
}

func check(client healthpb.HealthClient, ctx context.Context) (metadata.MD, error) {
	var header metadata.MD
	_, err := client.Check(ctx, &healthpb.HealthCheckRequest{}, grpc.Header(&header))
	return header, err
}

func TestUnaryCallsAreAdmittedUpToTheLimitThenExhausted(t *testing.T) {
	clock := newClock()
	client, ts := limited(t, fixedWindow(t, 2, time.Minute, clock))
	clock.Add(12 * time.Second) // 48 s left in the window

	for i, want := range []string{`"default";r=1;t=48`, `"default";r=0;t=48`} {
		header, err := check(client, withKey("k"))
		require.NoError(t, err, "call %d", i)
		require.Equal(t, []string{`"default";q=2;w=60`}, header.Get("ratelimit-policy"))
		require.Equal(t, []string{want}, header.Get("ratelimit"))
	}

	header, err := check(client, withKey("k"))
	requireCode(t, codes.ResourceExhausted, err)
	require.Equal(t, []string{`"default";q=2;w=60`}, header.Get("ratelimit-policy"), "a denied call's header metadata")
	require.Equal(t, []string{`"default";r=0;t=48`}, header.Get("ratelimit"))
	retry, quota := details(t, err)
	require.NotNil(t, retry)
	require.Equal(t, 48*time.Second, retry.GetRetryDelay().AsDuration())
	require.NotNil(t, quota)
	require.Len(t, quota.GetViolations(), 1)
	v := quota.GetViolations()[0]
	require.Equal(t, "k", v.GetSubject())
	require.Equal(t, "default", v.GetQuotaId())
	require.Equal(t, int64(2), v.GetQuotaValue())
	require.Equal(t, int32(2), ts.served.Load(), "a denied call does not reach the service")

	_, err = check(client, withKey("other"))
	require.NoError(t, err, "keys have separate allowances")

	clock.Add(48 * time.Second)
	_, err = check(client, withKey("k"))
	require.NoError(t, err, "admitted once RetryInfo's delay has passed")
}

func TestRetryDelayIsExact(t *testing.T) {
	clock := newClock()
	lim, err := sluice.NewGCRA(sluice.Per(1, 2500*time.Millisecond), 1, sluice.WithClock(clock))
	require.NoError(t, err)
	client, _ := limited(t, lim)
	_, err = check(client, withKey("k"))
	require.NoError(t, err)
	clock.Add(time.Second)
	_, err = check(client, withKey("k"))
	requireCode(t, codes.ResourceExhausted, err)
	retry, _ := details(t, err)
	require.Equal(t, 1500*time.Millisecond, retry.GetRetryDelay().AsDuration(), "not rounded to seconds")
}

func TestStreamsAreDecidedWhenTheyOpen(t *testing.T) {
	clock := newClock()
	client, ts := limited(t, fixedWindow(t, 1, time.Minute, clock))

	stream, err := client.Watch(withKey("k"), &healthpb.HealthCheckRequest{})
	require.NoError(t, err)
	resp, err := stream.Recv()
	require.NoError(t, err)
	require.Equal(t, healthpb.HealthCheckResponse_SERVING, resp.GetStatus())
	header, err := stream.Header()
	require.NoError(t, err)
	require.Equal(t, []string{`"default";r=0;t=60`}, header.Get("ratelimit"))

	denied, err := client.Watch(withKey("k"), &healthpb.HealthCheckRequest{})
	require.NoError(t, err, "a stream's status comes with its first message")
	_, err = denied.Recv()
	requireCode(t, codes.ResourceExhausted, err)
	retry, quota := details(t, err)
	require.Equal(t, time.Minute, retry.GetRetryDelay().AsDuration())
	require.Equal(t, "k", quota.GetViolations()[0].GetSubject())
	header, err = denied.Header()
	require.NoError(t, err)
	require.Equal(t, []string{`"default";r=0;t=60`}, header.Get("ratelimit"))
	require.Equal(t, int32(1), ts.served.Load())
}

// failingStore is a store that is down.
type failingStore struct{}

var errStoreDown = errors.New("store down at 10.0.0.5:6379")

func (failingStore) Apply(context.Context, string, *engine.Params, engine.Op) (engine.Decision, error) {
	return engine.Decision{}, errStoreDown
}

func (failingStore) Reset(context.Context, string) error { return errStoreDown }

// keyRefusingStore refuses every key, as pgstore refuses a key that is not
// valid UTF-8.
type keyRefusingStore struct{}

func (keyRefusingStore) Apply(context.Context, string, *engine.Params, engine.Op) (engine.Decision, error) {
	return engine.Decision{}, fmt.Errorf("%w: not UTF-8", sluice.ErrInvalidKey)
}

func (keyRefusingStore) Reset(context.Context, string) error { return sluice.ErrInvalidKey }

func TestErrorsMapToCodesAClientCanActOn(t *testing.T) {
	clock := newClock()
	down := fixedWindow(t, 5, time.Minute, clock, sluice.WithStore(failingStore{}))
	cost := func(c float64, err error) sluicegrpc.Option {
		return sluicegrpc.WithCost(func(context.Context, string, any) (float64, error) { return c, err })
	}
	tests := []struct {
		name    string
		lim     *sluice.Limiter
		opts    []sluicegrpc.Option
		ctx     context.Context
		code    codes.Code
		retry   time.Duration // of RetryInfo, 0 for none
		served  bool
		wantErr error
	}{
		{name: "no key is an invalid argument", lim: fixedWindow(t, 5, time.Minute, clock), ctx: context.Background(),
			code: codes.InvalidArgument, wantErr: sluicegrpc.ErrKey},
		{name: "a cost error is an invalid argument", lim: fixedWindow(t, 5, time.Minute, clock), opts: []sluicegrpc.Option{cost(0, errors.New("bad batch"))},
			ctx: withKey("k"), code: codes.InvalidArgument, wantErr: sluicegrpc.ErrCost},
		{name: "a cost above the limit is an invalid argument, not exhaustion", lim: fixedWindow(t, 5, time.Minute, clock), opts: []sluicegrpc.Option{cost(6, nil)},
			ctx: withKey("k"), code: codes.InvalidArgument, wantErr: sluice.ErrCostExceedsLimit},
		{name: "a key the store cannot hold is an invalid argument, not an outage",
			lim: fixedWindow(t, 5, time.Minute, clock, sluice.WithStore(keyRefusingStore{})), ctx: withKey("k"),
			code: codes.InvalidArgument, wantErr: sluice.ErrInvalidKey},
		{name: "store down fails closed as unavailable", lim: down, ctx: withKey("k"),
			code: codes.Unavailable, retry: time.Second, wantErr: errStoreDown},
		{name: "retry delay of unavailable is configurable", lim: down, opts: []sluicegrpc.Option{sluicegrpc.WithUnavailableRetryAfter(5 * time.Second)},
			ctx: withKey("k"), code: codes.Unavailable, retry: 5 * time.Second, wantErr: errStoreDown},
		{name: "store down fails open on request", lim: down, opts: []sluicegrpc.Option{sluicegrpc.WithFailOpen()}, ctx: withKey("k"),
			code: codes.OK, served: true, wantErr: errStoreDown},
		{name: "dry run serves despite a cost error", lim: fixedWindow(t, 5, time.Minute, clock), opts: []sluicegrpc.Option{cost(-1, nil), sluicegrpc.WithDryRun()},
			ctx: withKey("k"), code: codes.OK, served: true, wantErr: sluice.ErrInvalidCost},
		{name: "dry run serves a call without a key", lim: fixedWindow(t, 5, time.Minute, clock), opts: []sluicegrpc.Option{sluicegrpc.WithDryRun()},
			ctx: context.Background(), code: codes.OK, served: true, wantErr: sluicegrpc.ErrKey},
		{name: "dry run serves a call costing more than the limit", lim: fixedWindow(t, 5, time.Minute, clock), opts: []sluicegrpc.Option{cost(6, nil), sluicegrpc.WithDryRun()},
			ctx: withKey("k"), code: codes.OK, served: true, wantErr: sluice.ErrCostExceedsLimit},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var hooked []error
			hook := sluicegrpc.WithErrorHook(func(_ context.Context, method string, err error) {
				require.Equal(t, checkMethod, method)
				hooked = append(hooked, err)
			})
			client, ts := limited(t, tt.lim, append(tt.opts, hook)...)
			_, err := check(client, tt.ctx)
			requireCode(t, tt.code, err)
			require.Equal(t, tt.served, ts.served.Load() == 1)
			require.Len(t, hooked, 1)
			require.ErrorIs(t, hooked[0], tt.wantErr)
			if err != nil {
				require.NotContains(t, err.Error(), "10.0.0.5", "store details stay on the server")
				retry, _ := details(t, err)
				require.Equal(t, tt.retry, retry.GetRetryDelay().AsDuration())
			}
		})
	}
}

func TestFreeAndUnpricedCallsAreChargedTheMinimumCost(t *testing.T) {
	for _, tt := range []struct {
		name string
		cost sluicegrpc.CostFunc
		code codes.Code // of the admitted calls
	}{
		{name: "free", cost: func(context.Context, string, any) (float64, error) { return 0, nil }, code: codes.OK},
		{name: "unpriced", cost: func(context.Context, string, any) (float64, error) { return 0, errors.New("bad") }, code: codes.InvalidArgument},
	} {
		t.Run(tt.name, func(t *testing.T) {
			client, _ := limited(t, fixedWindow(t, 2, time.Minute, newClock()), sluicegrpc.WithCost(tt.cost))
			for range 2 {
				_, err := check(client, withKey("k"))
				requireCode(t, tt.code, err)
			}
			_, err := check(client, withKey("k"))
			requireCode(t, codes.ResourceExhausted, err, "a flood is limited")
		})
	}
}

func TestCostFunctionSeesTheRequest(t *testing.T) {
	byService := sluicegrpc.WithCost(func(_ context.Context, method string, req any) (float64, error) {
		require.Equal(t, checkMethod, method)
		return float64(len(req.(*healthpb.HealthCheckRequest).GetService())), nil
	})
	client, _ := limited(t, fixedWindow(t, 10, time.Minute, newClock()), byService)
	var header metadata.MD
	_, err := client.Check(withKey("k"), &healthpb.HealthCheckRequest{Service: "abcd"}, grpc.Header(&header))
	requireCode(t, codes.NotFound, err, "the health server knows no service abcd: the call was served")
	require.Equal(t, []string{`"default";r=6;t=60`}, header.Get("ratelimit"))
}

// stalledStore is a store whose every call blocks until its context ends,
// as a remote store does when its server hangs. entered receives a value
// when a call starts.
type stalledStore struct{ entered chan struct{} }

func (s stalledStore) Apply(ctx context.Context, _ string, _ *engine.Params, _ engine.Op) (engine.Decision, error) {
	s.entered <- struct{}{}
	<-ctx.Done()
	return engine.Decision{}, ctx.Err()
}

func (s stalledStore) Reset(ctx context.Context, _ string) error {
	<-ctx.Done()
	return ctx.Err()
}

func TestCallCanceledWhileDecidingIsNotAStoreError(t *testing.T) {
	store := stalledStore{entered: make(chan struct{}, 1)}
	lim := fixedWindow(t, 5, time.Minute, newClock(), sluice.WithStore(store))
	hooked := make(chan error, 1)
	client, ts := limited(t, lim, sluicegrpc.WithFailOpen(),
		sluicegrpc.WithErrorHook(func(_ context.Context, _ string, err error) { hooked <- err }))

	ctx, cancel := context.WithCancel(withKey("k"))
	done := make(chan error, 1)
	go func() {
		_, err := check(client, ctx)
		done <- err
	}()
	<-store.entered
	cancel()
	requireCode(t, codes.Canceled, <-done)
	err := <-hooked
	require.ErrorIs(t, err, sluicegrpc.ErrCallCanceled)
	require.ErrorIs(t, err, context.Canceled)
	ts.srv.Stop()
	require.Zero(t, ts.served.Load(), "not served, even failing open")
}

func TestSkippedCallsAreNotLimited(t *testing.T) {
	skipChecks := sluicegrpc.WithSkip(func(_ context.Context, method string) bool { return method == checkMethod })
	client, _ := limited(t, fixedWindow(t, 1, time.Minute, newClock()), skipChecks)
	for range 3 {
		header, err := check(client, context.Background()) // no key needed either
		require.NoError(t, err)
		require.Empty(t, header.Get("ratelimit"))
	}
}

func TestNewInterceptorRejectsInvalidConfiguration(t *testing.T) {
	lim := fixedWindow(t, 1, time.Minute, newClock())
	gcra, err := sluice.NewGCRA(sluice.PerSecond(1), 0.5)
	require.NoError(t, err)
	defer gcra.Close()
	for name, tc := range map[string]struct {
		lim  *sluice.Limiter
		opts []sluicegrpc.Option
	}{
		"nil limiter":               {},
		"burst below one unit":      {lim: gcra},
		"minimum cost above limit":  {lim: lim, opts: []sluicegrpc.Option{sluicegrpc.WithMinCost(2)}},
		"negative minimum cost":     {lim: lim, opts: []sluicegrpc.Option{sluicegrpc.WithMinCost(-1)}},
		"policy name not printable": {lim: lim, opts: []sluicegrpc.Option{sluicegrpc.WithPolicyName("día")}},
		"negative window":           {lim: lim, opts: []sluicegrpc.Option{sluicegrpc.WithWindow(-time.Second)}},
		"negative unavailable":      {lim: lim, opts: []sluicegrpc.Option{sluicegrpc.WithUnavailableRetryAfter(-1)}},
	} {
		_, err := sluicegrpc.NewInterceptor(tc.lim, tc.opts...)
		require.ErrorIs(t, err, sluice.ErrInvalidConfig, name)
	}
}

func TestDeadlinePassingWhileDecidingEndsTheCall(t *testing.T) {
	store := stalledStore{entered: make(chan struct{}, 1)}
	lim := fixedWindow(t, 5, time.Minute, newClock(), sluice.WithStore(store))
	hooked := make(chan error, 1)
	skipList := sluicegrpc.WithSkip(func(_ context.Context, method string) bool { return method == "/grpc.health.v1.Health/List" })
	client, ts := limited(t, lim, skipList, sluicegrpc.WithErrorHook(func(_ context.Context, _ string, err error) { hooked <- err }))
	// An undecided call first connects the client, so that the deadline
	// below is spent at the server, not on dialing: a deadline passing
	// before the call is sent would leave the store waiting forever.
	_, err := client.List(context.Background(), &healthpb.HealthListRequest{})
	require.NoError(t, err)

	// The deadline travels with the call; the stalled store gives up when
	// it passes on the server, whatever the clocks say. The test waits it
	// out: two seconds, so that no pause of a loaded machine lets it pass
	// before the call reaches the store, which would then never be
	// entered.
	ctx, cancel := context.WithTimeout(withKey("k"), 2*time.Second)
	defer cancel()
	_, err = check(client, ctx)
	requireCode(t, codes.DeadlineExceeded, err)
	<-store.entered
	err = <-hooked
	require.ErrorIs(t, err, sluicegrpc.ErrCallCanceled)
	// The server learns that the deadline passed from its own timer or
	// from the client's reset of the stream, whichever comes first.
	require.True(t, errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled), "%v", err)
	ts.srv.Stop()
	require.Equal(t, int32(1), ts.served.Load(), "only the undecided List was served, not the Check")
}

func TestAnEmptyPolicyNameIsDefaultInTheMetadataAndTheQuotaFailureAlike(t *testing.T) {
	client, _ := limited(t, fixedWindow(t, 1, time.Minute, newClock()), sluicegrpc.WithPolicyName(""))
	_, err := check(client, withKey("k"))
	require.NoError(t, err)
	header, err := check(client, withKey("k"))
	requireCode(t, codes.ResourceExhausted, err)
	require.Equal(t, []string{`"default";q=1;w=60`}, header.Get("ratelimit-policy"))
	_, quota := details(t, err)
	require.NotNil(t, quota)
	require.Equal(t, "default", quota.GetViolations()[0].GetQuotaId())
}
