package sluicegrpc_test

import (
	"context"
	"net/netip"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"

	"github.com/sluice-go/sluice"
	"github.com/sluice-go/sluice/sluicegrpc"
)

// overTCPLimitedBy returns a client over loopback TCP of a health server
// limited by lim, keyed by key.
func overTCPLimitedBy(t *testing.T, lim *sluice.Limiter, key sluicegrpc.KeyFunc) healthpb.HealthClient {
	t.Helper()
	limit, err := sluicegrpc.NewInterceptor(lim, sluicegrpc.WithKey(key))
	require.NoError(t, err)
	ts := newTestServer(t, grpc.ChainUnaryInterceptor(limit.Unary), grpc.ChainStreamInterceptor(limit.Stream))
	return ts.overTCP(t)
}

func TestPeerAddressKeysCallsOverTCP(t *testing.T) {
	var keys []string
	record := func(ctx context.Context, method string) (string, error) {
		k, err := sluicegrpc.ClientIP{}.Key(ctx, method)
		keys = append(keys, k)
		return k, err
	}
	client := overTCPLimitedBy(t, fixedWindow(t, 1, time.Minute, newClock()), record)
	_, err := check(client, context.Background())
	require.NoError(t, err)
	// x-forwarded-for from an untrusted peer is ignored.
	spoofed := metadata.AppendToOutgoingContext(context.Background(), "x-forwarded-for", "203.0.113.9")
	_, err = check(client, spoofed)
	requireCode(t, codes.ResourceExhausted, err)
	require.Equal(t, []string{"127.0.0.1", "127.0.0.1"}, keys)
}

func TestForwardedClientsBehindATrustedProxyHaveTheirOwnAllowance(t *testing.T) {
	loopback := []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}
	for _, tt := range []struct {
		name   string
		key    sluicegrpc.ClientIP
		header string
		a, b   string
	}{
		{name: "x-forwarded-for", key: sluicegrpc.ClientIP{TrustedProxies: loopback},
			header: "x-forwarded-for", a: "198.51.100.1, 203.0.113.9", b: "203.0.113.10"},
		{name: "forwarded", key: sluicegrpc.ClientIP{TrustedProxies: loopback, Forwarded: true},
			header: "forwarded", a: `for=203.0.113.9;proto=https`, b: `for="[2001:db8::1]:443"`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			client := overTCPLimitedBy(t, fixedWindow(t, 1, time.Minute, newClock()), tt.key.Key)
			from := func(v string) context.Context {
				return metadata.AppendToOutgoingContext(context.Background(), tt.header, v)
			}
			_, err := check(client, from(tt.a))
			require.NoError(t, err)
			_, err = check(client, from(tt.a))
			requireCode(t, codes.ResourceExhausted, err, "same client")
			_, err = check(client, from(tt.b))
			require.NoError(t, err, "another client")
		})
	}
}

func TestAmbiguousTrustedProxyRangeIsRejected(t *testing.T) {
	c := sluicegrpc.ClientIP{TrustedProxies: []netip.Prefix{netip.MustParsePrefix("::/0")}}
	require.ErrorIs(t, c.Validate(), sluice.ErrInvalidConfig)
	client := overTCPLimitedBy(t, fixedWindow(t, 1, time.Minute, newClock()), c.Key)
	_, err := check(client, context.Background())
	requireCode(t, codes.Internal, err, "the server's configuration is at fault, not the call")
}

func TestMetadataAndMethodKeys(t *testing.T) {
	key := sluicegrpc.Keys(sluicegrpc.MethodKey, sluicegrpc.MetadataKey("X-Tenant"))
	ctx := metadata.NewIncomingContext(context.Background(), metadata.Pairs("x-tenant", "acme|eu"))
	got, err := key(ctx, checkMethod)
	require.NoError(t, err)
	require.Equal(t, `/grpc.health.v1.Health/Check|acme\|eu`, got)
	_, err = key(context.Background(), checkMethod)
	require.EqualError(t, err, "no x-tenant metadata")
}
