package sluicehttp

import (
	"errors"
	"fmt"
	"net/http"
	"net/netip"
	"strings"

	"github.com/sluice-go/sluice"
	"github.com/sluice-go/sluice/internal/clientip"
	"github.com/sluice-go/sluice/internal/compositekey"
)

// KeyFunc returns the limiter key of a request: requests with the same key
// share one allowance. An error makes the middleware answer 400 Bad
// Request, or 500 Internal Server Error when it wraps
// [sluice.ErrInvalidConfig], the server's mistake (see [ErrorStatus] and
// [WithErrorHandler]).
//
// Limiters that share a store share its key space: a KeyFunc for such a
// limiter should prefix its keys ("login:" + user).
type KeyFunc func(r *http.Request) (string, error)

// ClientIP finds the IP address of the client that sent a request, and
// keys requests by it. The zero value keys by the connection's peer
// address, Request.RemoteAddr, grouping IPv6 addresses by /64:
// ClientIP{}.Key is the middleware's default KeyFunc.
//
// Behind reverse proxies or load balancers, list them in TrustedProxies.
// When the peer is a trusted proxy, the client is found by walking
// X-Forwarded-For (or Forwarded, see the field) from the right (the entry
// the nearest proxy appended) to the left, skipping trusted proxies: the
// first untrusted address is the client. Everything left of it was written
// by the client or by proxies it chose, and is never read, so a client
// cannot choose its key by sending the header. When no proxy is trusted
// the header is ignored altogether. A malformed entry (not an IP address,
// optionally with a port) ends the walk at the trusted proxy that passed
// it on: the client is then that proxy. When every entry is trusted, the
// client is the leftmost one.
//
// An IPv4-mapped IPv6 address (::ffff:192.0.2.1) is treated as the IPv4
// address it maps, and an IPv6 zone (%eth0) is dropped.
type ClientIP struct {
	// TrustedProxies are the address ranges of the proxies in front of the
	// server that append their peer's address to X-Forwarded-For (or
	// Forwarded). Empty means the peer is the client. A range in
	// IPv4-mapped form (::ffff:10.0.0.0/104) is the IPv4 range it maps
	// (10.0.0.0/8). An IPv6 range shorter than /96 that covers
	// IPv4-mapped addresses (::/0) is ambiguous, and makes Addr and Key
	// fail with an error wrapping sluice.ErrInvalidConfig, which the
	// middleware answers 500; [ClientIP.Validate] reports it at startup.
	TrustedProxies []netip.Prefix

	// Forwarded makes ClientIP read the for= parameters of the Forwarded
	// field (RFC 7239) instead of X-Forwarded-For. Read the field your
	// proxies append to, and only that one: a client can send the other.
	// An element without for=, or whose node is "unknown" or an
	// obfuscated identifier, is malformed.
	Forwarded bool

	// IPv6PrefixLen is how many leading bits of an IPv6 address make its
	// key. A value outside 1 to 128 means 64, the default: a host, or a
	// customer of an ISP, is usually given a whole /64 and can send from
	// any address in it, so keying by the whole address would give it
	// 2^64 allowances. 128 keys by the whole address. IPv4 addresses are
	// always keyed whole.
	IPv6PrefixLen int
}

// Validate reports a trusted proxy range that cannot be read safely, with
// an error wrapping sluice.ErrInvalidConfig: an invalid prefix, or an IPv6
// range shorter than /96 that covers IPv4-mapped addresses.
func (c ClientIP) Validate() error { return clientip.Check(c.TrustedProxies) }

// Addr returns the address of the client that sent r.
func (c ClientIP) Addr(r *http.Request) (netip.Addr, error) {
	if err := c.Validate(); err != nil {
		return netip.Addr{}, err
	}
	peer, ok := clientip.ParseAddr(r.RemoteAddr)
	if !ok {
		return netip.Addr{}, fmt.Errorf("remote address %q is not an IP address", r.RemoteAddr)
	}
	if len(c.TrustedProxies) == 0 {
		return peer, nil
	}
	header, name := clientip.XForwardedFor, "X-Forwarded-For"
	if c.Forwarded {
		header, name = clientip.Forwarded, "Forwarded"
	}
	return clientip.Client(c.TrustedProxies, peer, header, r.Header.Values(name)), nil
}

// Key returns the key of r's client: its IPv4 address ("192.0.2.1"), or
// its IPv6 address's prefix ("2001:db8:1:2::/64"), or the whole IPv6
// address when IPv6PrefixLen is 128 ("2001:db8::1").
func (c ClientIP) Key(r *http.Request) (string, error) {
	addr, err := c.Addr(r)
	if err != nil {
		return "", err
	}
	return clientip.Key(addr, c.IPv6PrefixLen), nil
}

// HeaderKey returns a KeyFunc that keys requests by the value of the
// header name, such as an API key: HeaderKey("X-API-Key"). A request
// without the header, or with an empty value, has no key.
//
// The value is the key as sent, so authenticate it before limiting by it:
// a client that can make up values can make up allowances. A store then
// holds the values, so hash secret ones in a KeyFunc of your own.
func HeaderKey(name string) KeyFunc {
	name = http.CanonicalHeaderKey(name)
	missing := errors.New("no " + name + " header")
	return func(r *http.Request) (string, error) {
		if v := r.Header.Get(name); v != "" {
			return v, nil
		}
		return "", missing
	}
}

// MethodKey keys a request by its method ("GET"): combined with others in
// [Keys], reads and writes get separate allowances.
func MethodKey(r *http.Request) (string, error) { return r.Method, nil }

// errNoPattern reports a request that no http.ServeMux pattern matched:
// the middleware wraps the mux instead of a route, a mistake of the
// server's configuration, so it is answered 500, not 400.
var errNoPattern = fmt.Errorf("%w: no ServeMux pattern matched the request: wrap the route's handler, not the mux", sluice.ErrInvalidConfig)

// errNoParts reports Keys called with no parts, which would give every
// request one key.
var errNoParts = fmt.Errorf("%w: Keys needs at least one part", sluice.ErrInvalidConfig)

// PatternKey keys a request by the http.ServeMux pattern that matched it
// ("GET /items/{id}"), so that each route has its own allowance however
// its path varies. The mux sets the pattern before it calls the route's
// handler, so the middleware must wrap that handler, not the mux:
// mux.Handle("GET /items/{id}", limit(items)). A request without a
// pattern has no key.
func PatternKey(r *http.Request) (string, error) {
	if r.Pattern == "" {
		return "", errNoPattern
	}
	return r.Pattern, nil
}

// Keys returns a KeyFunc that joins the keys of parts, in order, with
// "|": Keys(PatternKey, ClientIP{}.Key) gives each client its own
// allowance on each route ("GET /items/{id}|192.0.2.1"). A "|" or "\"
// within a part is escaped with "\", so different parts never join to the
// same key. A request fails to be keyed if any part fails. With no parts
// every request fails with an error wrapping [sluice.ErrInvalidConfig]
// (500), rather than all sharing one key.
func Keys(parts ...KeyFunc) KeyFunc {
	if len(parts) == 0 {
		return func(*http.Request) (string, error) { return "", errNoParts }
	}
	return func(r *http.Request) (string, error) {
		var b strings.Builder
		for i, part := range parts {
			k, err := part(r)
			if err != nil {
				return "", err
			}
			compositekey.Append(&b, k, i == 0)
		}
		return b.String(), nil
	}
}
