package sluicegrpc_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/benbjohnson/clock"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/sluice-go/sluice"
	"github.com/sluice-go/sluice/sluicegrpc"
)

// sleepClock is a fake clock that reports each sleep: sleeping receives
// the duration of each After before the sleeper blocks on it, so that a
// test advances the clock only once the pacer waits.
type sleepClock struct {
	*clock.Mock
	sleeping chan time.Duration
}

func (c sleepClock) After(d time.Duration) <-chan time.Time {
	ch := c.Mock.After(d)
	c.sleeping <- d
	return ch
}

// pace is the time between two paced calls: an hour, so that a call's
// deadline, which is real time, can be a minute, far shorter than a turn
// and far longer than any pause of the machine running the tests.
const pace = time.Hour

// paced returns a client of a health server whose calls are paced by a
// GCRA limiter of one call per pace (burst 1) on a fake clock.
func paced(t *testing.T, opts ...sluicegrpc.PacerOption) (healthpb.HealthClient, sleepClock, *testServer) {
	t.Helper()
	c := sleepClock{Mock: newClock(), sleeping: make(chan time.Duration)}
	lim, err := sluice.NewGCRA(sluice.Per(1, pace), 1, sluice.WithClock(c))
	require.NoError(t, err)
	pacer, err := sluicegrpc.NewPacer(lim, opts...)
	require.NoError(t, err)
	ts := newTestServer(t)
	client := ts.overBufconn(t, grpc.WithChainUnaryInterceptor(pacer.Unary), grpc.WithChainStreamInterceptor(pacer.Stream))
	return client, c, ts
}

func TestPacerWaitsForTheLimiterBeforeEachCall(t *testing.T) {
	client, c, ts := paced(t)
	_, err := client.Check(context.Background(), &healthpb.HealthCheckRequest{})
	require.NoError(t, err, "the first call goes at once")

	done := make(chan error, 1)
	go func() {
		_, err := client.Check(context.Background(), &healthpb.HealthCheckRequest{})
		done <- err
	}()
	require.Equal(t, pace, <-c.sleeping, "the second waits a whole emission interval")
	require.Equal(t, int32(1), ts.served.Load(), "and is not sent meanwhile")
	c.Add(pace)
	require.NoError(t, <-done)
	require.Equal(t, int32(2), ts.served.Load())
}

func TestPacerPacesStreams(t *testing.T) {
	client, c, ts := paced(t)
	watch := func() error {
		s, err := client.Watch(context.Background(), &healthpb.HealthCheckRequest{})
		if err != nil {
			return err
		}
		_, err = s.Recv()
		return err
	}
	require.NoError(t, watch())
	done := make(chan error, 1)
	go func() { done <- watch() }()
	require.Equal(t, pace, <-c.sleeping)
	c.Add(pace)
	require.NoError(t, <-done)
	require.Equal(t, int32(2), ts.served.Load())
}

func TestPacerFailsAtOnceWhenTheDeadlineComesFirst(t *testing.T) {
	client, _, ts := paced(t)
	_, err := client.Check(context.Background(), &healthpb.HealthCheckRequest{})
	require.NoError(t, err)

	// The next call would be admitted in an hour, after its deadline a
	// minute away: the pacer fails it at once instead of sleeping.
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_, err = client.Check(ctx, &healthpb.HealthCheckRequest{})
	requireCode(t, codes.DeadlineExceeded, err)
	require.ErrorContains(t, err, "would exceed context deadline")
	require.Equal(t, int32(1), ts.served.Load(), "the call was never sent")
}

func TestPacerReturnsCanceledWhenTheCallerGivesUp(t *testing.T) {
	client, c, ts := paced(t)
	_, err := client.Check(context.Background(), &healthpb.HealthCheckRequest{})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := client.Check(ctx, &healthpb.HealthCheckRequest{})
		done <- err
	}()
	<-c.sleeping
	cancel()
	requireCode(t, codes.Canceled, <-done)
	require.Equal(t, int32(1), ts.served.Load())
}

func TestPacerKeysAndCosts(t *testing.T) {
	// Each method has its own pace: a List right after a Check is not
	// held back, which a deadline shorter than the pace would show. The
	// deadline, a minute, leaves the List all the real time it could need.
	client, _, _ := paced(t, sluicegrpc.PaceByMethod())
	_, err := client.Check(context.Background(), &healthpb.HealthCheckRequest{})
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_, err = client.List(ctx, &healthpb.HealthListRequest{})
	require.NoError(t, err, "another method, another pace")
	_, err = client.Check(ctx, &healthpb.HealthCheckRequest{})
	requireCode(t, codes.DeadlineExceeded, err, "the same method, the same pace")

	tooBig := sluicegrpc.WithPaceCost(func(context.Context, string, any) (float64, error) { return 2, nil })
	client, _, ts := paced(t, tooBig)
	_, err = client.Check(context.Background(), &healthpb.HealthCheckRequest{})
	requireCode(t, codes.InvalidArgument, err, "a cost above the burst can never be paced")
	require.Zero(t, ts.served.Load())

	failing := sluicegrpc.WithPaceKey(func(context.Context, string) (string, error) { return "", errors.New("no tenant") })
	client, _, _ = paced(t, failing)
	_, err = client.Check(context.Background(), &healthpb.HealthCheckRequest{})
	requireCode(t, codes.InvalidArgument, err)
}

func TestPacerReportsAFailingLimiterAsUnavailable(t *testing.T) {
	lim := fixedWindow(t, 1, time.Minute, newClock(), sluice.WithStore(failingStore{}))
	pacer, err := sluicegrpc.NewPacer(lim)
	require.NoError(t, err)
	ts := newTestServer(t)
	client := ts.overBufconn(t, grpc.WithChainUnaryInterceptor(pacer.Unary))
	_, err = client.Check(context.Background(), &healthpb.HealthCheckRequest{})
	requireCode(t, codes.Unavailable, err)
	require.Zero(t, ts.served.Load())

	_, err = sluicegrpc.NewPacer(nil)
	require.ErrorIs(t, err, sluice.ErrInvalidConfig)
}

func TestPacerReportsAStoreThatTimesOutAsUnavailable(t *testing.T) {
	// The limiter's timeout wraps context.DeadlineExceeded too, but it is
	// the store's failure, not the call's deadline.
	lim, err := sluice.NewGCRA(sluice.Per(1, pace), 1, sluice.WithStore(stalledStore{make(chan struct{}, 1)}), sluice.WithTimeout(10*time.Millisecond))
	require.NoError(t, err)
	pacer, err := sluicegrpc.NewPacer(lim)
	require.NoError(t, err)
	ts := newTestServer(t)
	client := ts.overBufconn(t, grpc.WithChainUnaryInterceptor(pacer.Unary))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_, err = client.Check(ctx, &healthpb.HealthCheckRequest{})
	requireCode(t, codes.Unavailable, err)
	require.Zero(t, ts.served.Load())
}
