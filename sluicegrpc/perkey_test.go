package sluicegrpc_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/sluice-go/sluice"
	"github.com/sluice-go/sluice/internal/plantest"
	"github.com/sluice-go/sluice/sluicegrpc"
)

// called is what a call ended with: its code, its header metadata, and
// the RetryInfo delay and QuotaFailure quota value of an error.
type called struct {
	code      codes.Code
	policy    string
	rateLimit string
	retry     time.Duration
	quota     int64
}

// callAs makes a call of key, unary or a stream, and returns how it ended.
func callAs(t *testing.T, client healthpb.HealthClient, key string, stream bool) called {
	t.Helper()
	var header metadata.MD
	var err error
	if stream {
		var watch healthpb.Health_WatchClient
		if watch, err = client.Watch(withKey(key), &healthpb.HealthCheckRequest{}); err == nil {
			_, err = watch.Recv()
			header, _ = watch.Header()
		}
	} else {
		header, err = check(client, withKey(key))
	}
	c := called{code: codes.OK}
	if v := header.Get("ratelimit-policy"); len(v) > 0 {
		c.policy = v[0]
	}
	if v := header.Get("ratelimit"); len(v) > 0 {
		c.rateLimit = v[0]
	}
	if err != nil {
		retry, quota := details(t, err)
		c.code, c.retry = status.Code(err), retry.GetRetryDelay().AsDuration()
		if quota != nil {
			c.quota = quota.GetViolations()[0].GetQuotaValue()
		}
	}
	return c
}

func TestPerKeyTiersEachSendTheirOwnMetadataAndAreExhaustedAtTheirOwnLimits(t *testing.T) {
	for _, stream := range []bool{false, true} {
		t.Run(map[bool]string{false: "unary", true: "stream"}[stream], func(t *testing.T) {
			clock := newClock()
			p := plantest.New(t, map[string]*sluice.Limiter{
				"free":    plantest.Must(sluice.NewFixedWindow(1, time.Minute)),
				"pro":     plantest.Must(sluice.NewFixedWindow(3, time.Minute)),
				"metered": plantest.Must(sluice.NewFixedWindow(2, 20*time.Second)),
			})
			p.Set("k-pro", "pro")
			p.Set("k-metered", "metered")
			client, ts := limited(t, p.Limiter(t, clock))
			clock.Add(12 * time.Second)
			const free, pro, metered = `"default";q=1;w=60`, `"default";q=3;w=60`, `"default";q=2;w=20`
			tests := []struct {
				key      string
				admitted []called // each admitted call, in turn
				denied   called   // then
			}{
				0: {key: "k-free",
					admitted: []called{{policy: free, rateLimit: `"default";r=0;t=48`}},
					denied:   called{code: codes.ResourceExhausted, policy: free, rateLimit: `"default";r=0;t=48`, retry: 48 * time.Second, quota: 1}},
				1: {key: "k-pro",
					admitted: []called{{policy: pro, rateLimit: `"default";r=2;t=48`}, {policy: pro, rateLimit: `"default";r=1;t=48`}, {policy: pro, rateLimit: `"default";r=0;t=48`}},
					denied:   called{code: codes.ResourceExhausted, policy: pro, rateLimit: `"default";r=0;t=48`, retry: 48 * time.Second, quota: 3}},
				2: {key: "k-metered",
					admitted: []called{{policy: metered, rateLimit: `"default";r=1;t=8`}, {policy: metered, rateLimit: `"default";r=0;t=8`}},
					denied:   called{code: codes.ResourceExhausted, policy: metered, rateLimit: `"default";r=0;t=8`, retry: 8 * time.Second, quota: 2}},
			}
			for turn := 0; turn <= 3; turn++ {
				for i, tt := range tests {
					if turn > len(tt.admitted) {
						continue
					}
					want := tt.denied
					if turn < len(tt.admitted) {
						want = tt.admitted[turn]
					}
					require.Equal(t, want, callAs(t, client, tt.key, stream), "row %d (%s), turn %d", i, tt.key, turn)
				}
			}
			require.Equal(t, int32(1+3+2), ts.served.Load())
		})
	}
}

func TestPerKeyTierChangeTakesEffectAtTheNextCall(t *testing.T) {
	clock := newClock()
	p := plantest.New(t, map[string]*sluice.Limiter{
		"free": plantest.Must(sluice.NewFixedWindow(1, time.Minute)),
		"pro":  plantest.Must(sluice.NewFixedWindow(3, time.Minute)),
	})
	client, ts := limited(t, p.Limiter(t, clock))
	const free, pro = `"default";q=1;w=60`, `"default";q=3;w=60`
	exhausted := func(policy string, quota int64) called {
		return called{code: codes.ResourceExhausted, policy: policy, rateLimit: `"default";r=0;t=60`, retry: time.Minute, quota: quota}
	}
	steps := []struct {
		plan   string
		stream bool
		want   called
	}{
		0: {plan: "free", want: called{policy: free, rateLimit: `"default";r=0;t=60`}},
		1: {plan: "free", stream: true, want: exhausted(free, 1)},
		// Upgraded: the call used counts against the new limit.
		2: {plan: "pro", stream: true, want: called{policy: pro, rateLimit: `"default";r=1;t=60`}},
		3: {plan: "pro", want: called{policy: pro, rateLimit: `"default";r=0;t=60`}},
		4: {plan: "pro", want: exhausted(pro, 3)},
		5: {plan: "free", stream: true, want: exhausted(free, 1)},
	}
	for i, step := range steps {
		p.Set("acme", step.plan)
		require.Equal(t, step.want, callAs(t, client, "acme", step.stream), "step %d", i)
	}
	require.Equal(t, int32(3), ts.served.Load())
}

// TestPerKeyLookupThatFailsIsAnsweredAsAStoreThatFails makes the same
// call, unary and stream, to a per-key limiter whose lookup fails and to
// a limiter whose store is down, under each configuration, and requires
// the same end of both; only the metadata differs: no limit is known for
// the key.
func TestPerKeyLookupThatFailsIsAnsweredAsAStoreThatFails(t *testing.T) {
	errNoPlan := errors.New("plans database down at 10.0.0.6:5432")
	tests := []struct {
		name   string
		opts   []sluicegrpc.Option
		code   codes.Code
		retry  time.Duration
		served bool
	}{
		0: {name: "fails closed as unavailable", code: codes.Unavailable, retry: time.Second},
		1: {name: "its retry delay as configured", opts: []sluicegrpc.Option{sluicegrpc.WithUnavailableRetryAfter(5 * time.Second)},
			code: codes.Unavailable, retry: 5 * time.Second},
		2: {name: "fails open on request", opts: []sluicegrpc.Option{sluicegrpc.WithFailOpen()}, code: codes.OK, served: true},
		3: {name: "served under dry run", opts: []sluicegrpc.Option{sluicegrpc.WithDryRun()}, code: codes.OK, served: true},
	}
	for _, tt := range tests {
		for _, stream := range []bool{false, true} {
			t.Run(tt.name+map[bool]string{false: ", unary", true: ", stream"}[stream], func(t *testing.T) {
				p := plantest.New(t, map[string]*sluice.Limiter{"free": plantest.Must(sluice.NewFixedWindow(5, time.Minute))})
				p.Fail(errNoPlan)
				down := fixedWindow(t, 5, time.Minute, newClock(), sluice.WithStore(failingStore{}))
				end := func(lim *sluice.Limiter) (called, []error, bool) {
					var hooked []error
					client, ts := limited(t, lim, append(tt.opts, sluicegrpc.WithErrorHook(func(_ context.Context, _ string, err error) {
						hooked = append(hooked, err)
					}))...)
					c := callAs(t, client, "k", stream)
					return c, hooked, ts.served.Load() == 1
				}
				storeEnd, storeHooked, storeServed := end(down)
				got, hooked, served := end(p.Limiter(t, newClock()))

				require.Equal(t, called{code: tt.code, retry: tt.retry}, got)
				require.Equal(t, storeEnd, got, "as the store's")
				require.Equal(t, tt.served, served)
				require.Equal(t, storeServed, served, "as the store's")
				require.Len(t, storeHooked, 1)
				require.Len(t, hooked, 1)
				require.ErrorIs(t, hooked[0], errNoPlan)
			})
		}
	}

	t.Run("a call ended while its limit is looked up is not a failure", func(t *testing.T) {
		p := plantest.New(t, map[string]*sluice.Limiter{"free": plantest.Must(sluice.NewFixedWindow(5, time.Minute))})
		var hooked []error
		limit, err := sluicegrpc.NewInterceptor(p.Limiter(t, newClock()), sluicegrpc.WithKey(sluicegrpc.MetadataKey("x-api-key")),
			sluicegrpc.WithFailOpen(), sluicegrpc.WithErrorHook(func(_ context.Context, _ string, err error) { hooked = append(hooked, err) }))
		require.NoError(t, err)
		ctx, cancel := context.WithCancel(metadata.NewIncomingContext(context.Background(), metadata.Pairs("x-api-key", "k")))
		cancel()
		served := false
		_, err = limit.Unary(ctx, nil, &grpc.UnaryServerInfo{FullMethod: checkMethod}, func(context.Context, any) (any, error) {
			served = true
			return nil, nil
		})
		requireCode(t, codes.Canceled, err)
		require.False(t, served, "not even failing open")
		require.Len(t, hooked, 1)
		require.ErrorIs(t, hooked[0], sluicegrpc.ErrCallCanceled)
	})
}

// TestPerKeyLimitThatDoesNotFitTheInterceptorIsInternal pins that what
// NewInterceptor refuses of a fixed limit is refused, per key, on the
// calls of the keys whose limit it is: the server's misconfiguration,
// codes.Internal, whether or not the interceptor fails open, served only
// under dry run.
func TestPerKeyLimitThatDoesNotFitTheInterceptorIsInternal(t *testing.T) {
	p := plantest.New(t, map[string]*sluice.Limiter{
		"free":       plantest.Must(sluice.NewFixedWindow(2, time.Minute)),
		"fractional": plantest.Must(sluice.NewFixedWindow(0.5, time.Minute)),
	})
	p.Set("k-fractional", "fractional")
	tests := []struct {
		name   string
		key    string
		opts   []sluicegrpc.Option
		code   codes.Code
		served bool
		says   string
	}{
		0: {name: "a limit below one whole unit", key: "k-fractional", code: codes.Internal, says: "less than one whole unit"},
		1: {name: "failing open", key: "k-fractional", opts: []sluicegrpc.Option{sluicegrpc.WithFailOpen()}, code: codes.Internal, says: "less than one whole unit"},
		2: {name: "a limit below the minimum cost", key: "k-free", opts: []sluicegrpc.Option{sluicegrpc.WithMinCost(3)}, code: codes.Internal,
			says: "minimum cost 3 exceeds the limit 2"},
		3: {name: "served under dry run", key: "k-fractional", opts: []sluicegrpc.Option{sluicegrpc.WithDryRun()}, code: codes.OK, served: true,
			says: "less than one whole unit"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var hooked []error
			client, ts := limited(t, p.Limiter(t, newClock()), append(tt.opts, sluicegrpc.WithErrorHook(func(_ context.Context, _ string, err error) {
				hooked = append(hooked, err)
			}))...)
			_, err := check(client, withKey(tt.key))
			requireCode(t, tt.code, err)
			require.Equal(t, tt.served, ts.served.Load() == 1)
			require.Len(t, hooked, 1)
			require.ErrorIs(t, hooked[0], sluice.ErrInvalidConfig)
			require.ErrorContains(t, hooked[0], "the limit looked up for the call's key")
			require.ErrorContains(t, hooked[0], tt.says)
			if err != nil {
				require.NotContains(t, err.Error(), "limit 0.5", "details stay on the server")
			}
		})
	}
	_, err := sluicegrpc.NewInterceptor(p.Limiter(t, newClock()), sluicegrpc.WithPolicyName("caf\u00e9"))
	require.ErrorIs(t, err, sluice.ErrInvalidConfig, "what holds whatever the limit is checked when the interceptor is made")
}

// TestPerKeyConcurrencyTiersHoldALeasePerCallAndStream holds streams open
// on keys of two concurrency tiers: each key is refused past its own
// tier's slots, and every slot comes back as its stream ends.
func TestPerKeyConcurrencyTiersHoldALeasePerCallAndStream(t *testing.T) {
	p := plantest.New(t, map[string]*sluice.Limiter{
		"free": plantest.Must(sluice.NewConcurrencyLimit(1, time.Hour)),
		"pro":  plantest.Must(sluice.NewConcurrencyLimit(2, time.Hour)),
	})
	p.Set("k-pro", "pro")
	lim := p.Limiter(t, newClock())
	g := newGated(t, concurrencyInterceptor(t, lim))
	const freeSlots, proSlots = `"default";q=1;qu="concurrent-requests"`, `"default";q=2;qu="concurrent-requests"`
	var closers []context.CancelFunc
	defer func() {
		for _, c := range closers {
			c()
		}
	}()
	// open opens a stream of key and returns its header metadata once
	// its handler runs.
	open := func(key string) metadata.MD {
		ctx, closeStream := context.WithCancel(withKey(key))
		closers = append(closers, closeStream)
		watch, err := g.client.Watch(ctx, &healthpb.HealthCheckRequest{})
		require.NoError(t, err)
		_, err = watch.Recv()
		require.NoError(t, err)
		header, err := watch.Header()
		require.NoError(t, err)
		<-g.entered
		return header
	}
	steps := []struct {
		key       string
		stream    bool // opened and held; else a unary call
		code      codes.Code
		policy    string
		rateLimit string
		free, pro float64 // slots in use after it
	}{
		0: {key: "k-free", stream: true, policy: freeSlots, rateLimit: `"default";r=0`, free: 1},
		1: {key: "k-free", code: codes.ResourceExhausted, policy: freeSlots, rateLimit: `"default";r=0`, free: 1},
		2: {key: "k-pro", stream: true, policy: proSlots, rateLimit: `"default";r=1`, free: 1, pro: 1},
		3: {key: "k-pro", code: codes.OK, policy: proSlots, rateLimit: `"default";r=0`, free: 1, pro: 1},
		4: {key: "k-pro", stream: true, policy: proSlots, rateLimit: `"default";r=0`, free: 1, pro: 2},
		5: {key: "k-pro", code: codes.ResourceExhausted, policy: proSlots, rateLimit: `"default";r=0`, free: 1, pro: 2},
	}
	for i, step := range steps {
		var header metadata.MD
		var err error
		if step.stream {
			header = open(step.key)
		} else {
			header, err = check(g.client, withKey(step.key))
			<-g.ended
		}
		requireCode(t, step.code, err, "step %d", i)
		require.Equal(t, []string{step.policy}, header.Get("ratelimit-policy"), "step %d", i)
		require.Equal(t, []string{step.rateLimit}, header.Get("ratelimit"), "step %d", i)
		require.Equal(t, step.free, inUse(t, lim, "k-free"), "step %d", i)
		require.Equal(t, step.pro, inUse(t, lim, "k-pro"), "step %d", i)
	}
	for _, closeStream := range closers {
		closeStream()
		<-g.ended
	}
	require.Zero(t, inUse(t, lim, "k-free"), "every slot back")
	require.Zero(t, inUse(t, lim, "k-pro"))
}
