package sluicegrpc_test

import (
	"context"
	"net"
	"testing"

	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"

	"github.com/sluice-go/sluice"
	"github.com/sluice-go/sluice/internal/plantest"
	"github.com/sluice-go/sluice/sluicegrpc"
)

// BenchmarkUnary measures the interceptor's own cost on an admitted call:
// keying by peer address, deciding on the in-memory store, and building
// the RateLimit metadata. It calls the interceptor directly, with a
// transport stream that keeps the header metadata and sends nothing, so
// that the figure is the interceptor's and not the network's.
func BenchmarkUnary(b *testing.B) {
	lim, err := sluice.NewGCRA(sluice.PerSecond(1e9), 1e9)
	require.NoError(b, err)
	defer lim.Close()
	limit, err := sluicegrpc.NewInterceptor(lim)
	require.NoError(b, err)
	ctx := peer.NewContext(context.Background(), &peer.Peer{Addr: &net.TCPAddr{IP: net.IPv4(192, 0, 2, 1), Port: 1234}})
	ctx = grpc.NewContextWithServerTransportStream(ctx, &headerStream{})
	info := &grpc.UnaryServerInfo{FullMethod: checkMethod}
	handler := func(context.Context, any) (any, error) { return nil, nil }
	b.ReportAllocs()
	for b.Loop() {
		if _, err := limit.Unary(ctx, nil, info, handler); err != nil {
			b.Fatal(err)
		}
	}
	require.Len(b, grpc.ServerTransportStreamFromContext(ctx).(*headerStream).header.Get("ratelimit"), 1)
}

// BenchmarkUnaryLimit measures an admitted call as BenchmarkUnary does,
// under a limiter with a fixed limit and under a per-key limiter of the
// same limit ([sluice.NewPerKey]), whose lookup is a map of tiers.
// Compare with benchstat -col /limit.
func BenchmarkUnaryLimit(b *testing.B) {
	for _, limit := range []string{"fixed", "per-key"} {
		b.Run("limit="+limit, func(b *testing.B) {
			lim := plantest.BenchLimiter(b, limit == "per-key")
			icpt, err := sluicegrpc.NewInterceptor(lim)
			require.NoError(b, err)
			ctx := peer.NewContext(context.Background(), &peer.Peer{Addr: &net.TCPAddr{IP: net.IPv4(192, 0, 2, 1), Port: 1234}})
			ctx = grpc.NewContextWithServerTransportStream(ctx, &headerStream{})
			info := &grpc.UnaryServerInfo{FullMethod: checkMethod}
			handler := func(context.Context, any) (any, error) { return nil, nil }
			b.ReportAllocs()
			for b.Loop() {
				if _, err := icpt.Unary(ctx, nil, info, handler); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// headerStream is a grpc.ServerTransportStream that keeps the last header
// metadata set and sends nothing.
type headerStream struct{ header metadata.MD }

func (*headerStream) Method() string                   { return checkMethod }
func (s *headerStream) SetHeader(md metadata.MD) error { s.header = md; return nil }
func (*headerStream) SendHeader(metadata.MD) error     { return nil }
func (*headerStream) SetTrailer(metadata.MD) error     { return nil }
