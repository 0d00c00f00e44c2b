package sluicegrpc_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/sluice-go/sluice"
	"github.com/sluice-go/sluice/sluicegrpc"
)

// refuseWithRetryInfo is a server interceptor that refuses every call
// with ResourceExhausted and a RetryInfo of a minute, and nothing else.
func refuseWithRetryInfo(context.Context, any, *grpc.UnaryServerInfo, grpc.UnaryHandler) (any, error) {
	st, err := status.New(codes.ResourceExhausted, "over quota").WithDetails(&errdetails.RetryInfo{RetryDelay: durationpb.New(time.Minute)})
	if err != nil {
		return nil, err
	}
	return nil, st.Err()
}

// TestALearningPacerHoldsEveryProcessBackAsTheServerSays is the gRPC
// pacer tried as a new user would: two processes' pacers on one store,
// configured for 10 calls a second, call a server that says to wait a
// minute, with a RetryInfo or with the RateLimit metadata of sluicegrpc's
// interceptor (1 call a minute, none left); from then on no process sends
// before the minute is over, and a call whose deadline comes first fails
// at once with DeadlineExceeded, unsent.
func TestALearningPacerHoldsEveryProcessBackAsTheServerSays(t *testing.T) {
	for _, tc := range []struct {
		name  string
		limit func(t *testing.T) grpc.UnaryServerInterceptor
		code  codes.Code // of the first call
	}{
		{"retry-info", func(*testing.T) grpc.UnaryServerInterceptor { return refuseWithRetryInfo }, codes.ResourceExhausted},
		{"ratelimit-metadata", func(t *testing.T) grpc.UnaryServerInterceptor {
			limit, err := sluicegrpc.NewInterceptor(fixedWindow(t, 1, time.Minute, newClock()),
				sluicegrpc.WithKey(func(context.Context, string) (string, error) { return "job", nil }))
			require.NoError(t, err)
			return limit.Unary
		}, codes.OK},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ts := newTestServer(t, grpc.ChainUnaryInterceptor(tc.limit(t)))
			st := sluice.NewMemStore(sluice.MemStoreConfig{})
			t.Cleanup(func() { st.Close() })
			clientClock := newClock()
			process := func() healthpb.HealthClient {
				lim, err := sluice.NewGCRA(sluice.PerSecond(10), 1, sluice.WithStore(st), sluice.WithClock(clientClock))
				require.NoError(t, err)
				pacer, err := sluicegrpc.NewPacer(lim, sluicegrpc.Learn(),
					sluicegrpc.WithPaceKey(func(context.Context, string) (string, error) { return "api", nil }))
				require.NoError(t, err)
				return ts.overBufconn(t, grpc.WithChainUnaryInterceptor(pacer.Unary))
			}
			first, second := process(), process()
			ctx := context.Background()

			_, err := first.Check(ctx, &healthpb.HealthCheckRequest{})
			requireCode(t, tc.code, err)
			served := ts.served.Load()

			clientClock.Add(50 * time.Second) // ten seconds short of the minute
			for _, client := range []healthpb.HealthClient{first, second} {
				soon, cancel := context.WithTimeout(ctx, 5*time.Second)
				_, err = client.Check(soon, &healthpb.HealthCheckRequest{})
				cancel()
				requireCode(t, codes.DeadlineExceeded, err, "held back in every process")
			}
			require.Equal(t, served, ts.served.Load(), "and nothing sent")

			clientClock.Add(11 * time.Second)
			soon, cancel := context.WithTimeout(ctx, 10*time.Second)
			defer cancel()
			_, err = second.Check(soon, &healthpb.HealthCheckRequest{})
			require.NotEqual(t, codes.DeadlineExceeded, status.Code(err), "sent once the minute is over: %v", err)
		})
	}
}

func TestLearnRefusesALimiterItCannotHoldBack(t *testing.T) {
	_, err := sluicegrpc.NewPacer(fixedWindow(t, 1, time.Second, newClock()), sluicegrpc.Learn())
	require.ErrorIs(t, err, sluice.ErrUnsupported)
}
