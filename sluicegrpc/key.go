package sluicegrpc

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strings"

	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"

	"github.com/sluice-go/sluice/internal/clientip"
	"github.com/sluice-go/sluice/internal/compositekey"
)

// ClientIP finds the IP address of the client that made a call, and keys
// calls by it, with the rules of the HTTP middleware's ClientIP. The zero
// value keys by the peer address of the connection, grouping IPv6
// addresses by /64: ClientIP{}.Key is the interceptor's default KeyFunc.
//
// Behind reverse proxies (an L7 load balancer, Envoy), list them in
// TrustedProxies: when the peer is one, the client is found by walking the
// x-forwarded-for metadata (or forwarded, RFC 7239) from the right,
// skipping trusted proxies; the first untrusted address is the client, and
// entries left of it, which the client could have written, are never
// read. When no proxy is trusted the metadata is ignored altogether.
type ClientIP struct {
	// TrustedProxies are the address ranges of the proxies in front of the
	// server. A range in IPv4-mapped form is the IPv4 range it maps; an
	// IPv6 range shorter than /96 that covers IPv4-mapped addresses is an
	// error (see [ClientIP.Validate]).
	TrustedProxies []netip.Prefix
	// Forwarded makes ClientIP read the for= parameters of the forwarded
	// metadata instead of x-forwarded-for.
	Forwarded bool
	// IPv6PrefixLen is how many leading bits of an IPv6 address make its
	// key; outside 1 to 128 it means 64, the default.
	IPv6PrefixLen int
}

// Validate reports a trusted proxy range that cannot be read safely, with
// an error wrapping sluice.ErrInvalidConfig.
func (c ClientIP) Validate() error { return clientip.Check(c.TrustedProxies) }

// Addr returns the address of the client that made the call of ctx.
func (c ClientIP) Addr(ctx context.Context) (netip.Addr, error) {
	if err := c.Validate(); err != nil {
		return netip.Addr{}, err
	}
	p, ok := peer.FromContext(ctx)
	if !ok || p.Addr == nil {
		return netip.Addr{}, errors.New("no peer address")
	}
	peerAddr, ok := addrOf(p.Addr)
	if !ok {
		return netip.Addr{}, fmt.Errorf("peer address %q is not an IP address", p.Addr)
	}
	if len(c.TrustedProxies) == 0 {
		return peerAddr, nil
	}
	md, _ := metadata.FromIncomingContext(ctx)
	header, name := clientip.XForwardedFor, "x-forwarded-for"
	if c.Forwarded {
		header, name = clientip.Forwarded, "forwarded"
	}
	return clientip.Client(c.TrustedProxies, peerAddr, header, md.Get(name)), nil
}

// Key returns the key of the call's client: its IPv4 address, or its IPv6
// address's prefix ("2001:db8:1:2::/64"), or the whole IPv6 address when
// IPv6PrefixLen is 128. fullMethod is not used.
func (c ClientIP) Key(ctx context.Context, _ string) (string, error) {
	addr, err := c.Addr(ctx)
	if err != nil {
		return "", err
	}
	return clientip.Key(addr, c.IPv6PrefixLen), nil
}

// addrOf returns the IP address of a peer, without allocating for TCP.
func addrOf(a net.Addr) (netip.Addr, bool) {
	if tcp, ok := a.(*net.TCPAddr); ok {
		addr, ok := netip.AddrFromSlice(tcp.IP)
		return addr.Unmap(), ok
	}
	return clientip.ParseAddr(a.String())
}

// MetadataKey returns a KeyFunc that keys calls by the first value of the
// request metadata key name, such as an API key: MetadataKey("x-api-key").
// A call without it, or with an empty value, has no key. Authenticate the
// value before limiting by it: a client that can make up values can make
// up allowances.
func MetadataKey(name string) KeyFunc {
	name = strings.ToLower(name)
	missing := errors.New("no " + name + " metadata")
	return func(ctx context.Context, _ string) (string, error) {
		md, _ := metadata.FromIncomingContext(ctx)
		if v := md.Get(name); len(v) > 0 && v[0] != "" {
			return v[0], nil
		}
		return "", missing
	}
}

// MethodKey keys a call by its full method name
// ("/grpc.health.v1.Health/Check"): alone, every method has one allowance
// shared by all clients; in [Keys], each client has one per method.
func MethodKey(_ context.Context, fullMethod string) (string, error) { return fullMethod, nil }

// Keys returns a KeyFunc that joins the keys of parts, in order, with "|":
// Keys(MethodKey, ClientIP{}.Key) gives each client its own allowance for
// each method ("/pkg.Service/Method|192.0.2.1"). A "|" or "\" within a
// part is escaped with "\", so different parts never join to the same key.
// A call fails to be keyed if any part fails.
func Keys(parts ...KeyFunc) KeyFunc {
	return func(ctx context.Context, fullMethod string) (string, error) {
		var b strings.Builder
		for i, part := range parts {
			k, err := part(ctx, fullMethod)
			if err != nil {
				return "", err
			}
			compositekey.Append(&b, k, i == 0)
		}
		return b.String(), nil
	}
}
