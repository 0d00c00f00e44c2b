package sluicegrpc_test

import (
	"context"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/benbjohnson/clock"
	"github.com/stretchr/testify/require"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"
	"google.golang.org/grpc/test/bufconn"

	"github.com/sluice-go/sluice"
)

// start is where every test clock starts: a whole minute, so that fixed
// windows of a minute or less begin there.
var start = time.Date(2026, 6, 1, 12, 0, 0, 0, time.UTC)

func newClock() *clock.Mock {
	c := clock.NewMock()
	c.Set(start)
	return c
}

func fixedWindow(t *testing.T, limit float64, window time.Duration, c sluice.Clock, opts ...sluice.Option) *sluice.Limiter {
	t.Helper()
	lim, err := sluice.NewFixedWindow(limit, window, append([]sluice.Option{sluice.WithClock(c)}, opts...)...)
	require.NoError(t, err)
	t.Cleanup(func() { lim.Close() })
	return lim
}

// testServer is a real gRPC server running the standard health service
// behind the interceptors under test. served counts the calls and streams
// that reached the service.
type testServer struct {
	served atomic.Int32
	health *health.Server
	srv    *grpc.Server
}

func newTestServer(t *testing.T, opts ...grpc.ServerOption) *testServer {
	t.Helper()
	ts := &testServer{health: health.NewServer()}
	count := []grpc.ServerOption{
		grpc.ChainUnaryInterceptor(func(ctx context.Context, req any, _ *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
			ts.served.Add(1)
			return h(ctx, req)
		}),
		grpc.ChainStreamInterceptor(func(srv any, ss grpc.ServerStream, _ *grpc.StreamServerInfo, h grpc.StreamHandler) error {
			ts.served.Add(1)
			return h(srv, ss)
		}),
	}
	// The interceptors under test run first, then the counters.
	ts.srv = grpc.NewServer(append(opts, count...)...)
	healthpb.RegisterHealthServer(ts.srv, ts.health)
	return ts
}

// overBufconn serves ts on an in-memory listener and returns a client of
// it, with the client options given.
func (ts *testServer) overBufconn(t *testing.T, opts ...grpc.DialOption) healthpb.HealthClient {
	t.Helper()
	lis := bufconn.Listen(1 << 20)
	go func() { _ = ts.srv.Serve(lis) }()
	t.Cleanup(ts.srv.Stop)
	dial := func(ctx context.Context, _ string) (net.Conn, error) { return lis.DialContext(ctx) }
	conn, err := grpc.NewClient("passthrough:///bufnet", append([]grpc.DialOption{
		grpc.WithContextDialer(dial),
		grpc.WithTransportCredentials(insecure.NewCredentials()),
	}, opts...)...)
	require.NoError(t, err)
	t.Cleanup(func() { conn.Close() })
	return healthpb.NewHealthClient(conn)
}

// overTCP serves ts on 127.0.0.1 and returns a client of it.
func (ts *testServer) overTCP(t *testing.T) healthpb.HealthClient {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	go func() { _ = ts.srv.Serve(lis) }()
	t.Cleanup(ts.srv.Stop)
	conn, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	require.NoError(t, err)
	t.Cleanup(func() { conn.Close() })
	return healthpb.NewHealthClient(conn)
}

// details returns the RetryInfo and QuotaFailure of a status error, as a
// client decodes them.
func details(t *testing.T, err error) (*errdetails.RetryInfo, *errdetails.QuotaFailure) {
	t.Helper()
	st, ok := status.FromError(err)
	require.True(t, ok, "%v is a status", err)
	var retry *errdetails.RetryInfo
	var quota *errdetails.QuotaFailure
	for _, d := range st.Details() {
		switch d := d.(type) {
		case *errdetails.RetryInfo:
			retry = d
		case *errdetails.QuotaFailure:
			quota = d
		default:
			t.Fatalf("unexpected detail %T: %v", d, d)
		}
	}
	return retry, quota
}

func requireCode(t *testing.T, want codes.Code, err error, msgAndArgs ...any) {
	t.Helper()
	require.Equal(t, want.String(), status.Code(err).String(), append(msgAndArgs, err)...)
}
