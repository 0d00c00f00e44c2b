package sluicehttp

import (
	"errors"
	"fmt"
	"net/http"
	"net/netip"
	"strings"
)

// KeyFunc returns the limiter key of a request: requests with the same key
// share one allowance. An error makes the middleware answer 400 Bad
// Request (see [WithErrorHandler]).
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
// X-Forwarded-For from the right (the entry the nearest proxy appended)
// to the left, skipping trusted proxies: the first untrusted address is
// the client. Everything left of it was written by the client or by
// proxies it chose, and is never read, so a client cannot choose its key
// by sending X-Forwarded-For. When no proxy is trusted the header is
// ignored altogether. A malformed entry (not an IP address, optionally
// with a port) ends the walk at the trusted proxy that passed it on: the
// client is then that proxy. When every entry is trusted, the client is
// the leftmost one.
//
// An IPv4-mapped IPv6 address (::ffff:192.0.2.1) is treated as the IPv4
// address it maps, and an IPv6 zone (%eth0) is dropped.
type ClientIP struct {
	// TrustedProxies are the address ranges of the proxies in front of the
	// server that append their peer's address to X-Forwarded-For. Write
	// IPv4 ranges in IPv4 form (10.0.0.0/8). Empty means the peer is the
	// client.
	TrustedProxies []netip.Prefix

	// IPv6PrefixLen is how many leading bits of an IPv6 address make its
	// key. A value outside 1 to 128 means 64, the default: a host, or a
	// customer of an ISP, is usually given a whole /64 and can send from
	// any address in it, so keying by the whole address would give it
	// 2^64 allowances. 128 keys by the whole address. IPv4 addresses are
	// always keyed whole.
	IPv6PrefixLen int
}

// Addr returns the address of the client that sent r.
func (c ClientIP) Addr(r *http.Request) (netip.Addr, error) {
	peer, ok := parseAddr(r.RemoteAddr)
	if !ok {
		return netip.Addr{}, fmt.Errorf("remote address %q is not an IP address", r.RemoteAddr)
	}
	if !c.trusted(peer) {
		return peer, nil
	}
	client := peer
	lines := r.Header.Values("X-Forwarded-For")
	for i := len(lines) - 1; i >= 0; i-- {
		for rest := lines[i]; rest != ""; {
			var entry string
			if j := strings.LastIndexByte(rest, ','); j >= 0 {
				rest, entry = rest[:j], rest[j+1:]
			} else {
				rest, entry = "", rest
			}
			entry = strings.TrimSpace(entry)
			if entry == "" {
				continue // empty list elements are allowed (RFC 9110, section 5.6.1)
			}
			addr, ok := parseAddr(entry)
			if !ok {
				return client, nil
			}
			client = addr
			if !c.trusted(addr) {
				return client, nil
			}
		}
	}
	return client, nil
}

// Key returns the key of r's client: its IPv4 address ("192.0.2.1"), or
// its IPv6 address's prefix ("2001:db8:1:2::/64"), or the whole IPv6
// address when IPv6PrefixLen is 128 ("2001:db8::1").
func (c ClientIP) Key(r *http.Request) (string, error) {
	addr, err := c.Addr(r)
	if err != nil {
		return "", err
	}
	bits := c.IPv6PrefixLen
	if bits < 1 || bits > 128 {
		bits = 64
	}
	if addr.Is4() || bits == 128 {
		return addr.String(), nil
	}
	return netip.PrefixFrom(addr, bits).Masked().String(), nil
}

func (c ClientIP) trusted(addr netip.Addr) bool {
	for _, p := range c.TrustedProxies {
		if p.Contains(addr) {
			return true
		}
	}
	return false
}

// parseAddr parses an IP address with or without a port, unmapping
// IPv4-mapped IPv6 and dropping any zone.
func parseAddr(s string) (netip.Addr, bool) {
	addr, err := netip.ParseAddr(s)
	if err != nil {
		ap, err := netip.ParseAddrPort(s)
		if err != nil {
			return netip.Addr{}, false
		}
		addr = ap.Addr()
	}
	return addr.Unmap().WithZone(""), true
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
