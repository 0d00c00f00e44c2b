// Package clientip finds the client behind trusted reverse proxies from
// the peer address and the X-Forwarded-For or Forwarded (RFC 7239) field
// lines, for the HTTP middleware and the gRPC interceptors alike.
package clientip

import (
	"fmt"
	"net/netip"

	"github.com/sluice-go/sluice"
)

// mappedBlock holds the IPv4-mapped IPv6 addresses, ::ffff:0.0.0.0/96.
var mappedBlock = netip.PrefixFrom(netip.AddrFrom16([16]byte{10: 0xff, 11: 0xff}), 96)

// Check reports a trusted proxy range that cannot be read safely: an
// invalid prefix, or an IPv6 range wider than /96 that covers part or all
// of the IPv4-mapped block (::/0, ::ffff:0:0/80), where whether IPv4
// clients were meant to be trusted cannot be told. A range written in
// IPv4-mapped form, ::ffff:10.0.0.0/104, is fine: it is the IPv4 range it
// maps, 10.0.0.0/8.
func Check(trusted []netip.Prefix) error {
	for _, p := range trusted {
		switch {
		case !p.IsValid():
			return fmt.Errorf("%w: invalid trusted proxy range %v", sluice.ErrInvalidConfig, p)
		case p.Addr().Is6() && p.Bits() < 96 && p.Overlaps(mappedBlock):
			return fmt.Errorf("%w: trusted proxy range %v covers IPv4-mapped addresses (%v) in part: write IPv4 ranges in IPv4 form",
				sluice.ErrInvalidConfig, p, mappedBlock)
		}
	}
	return nil
}

// unmap rewrites a range of IPv4-mapped addresses (/96 or longer, as Check
// ensures) as the IPv4 range it maps.
func unmap(p netip.Prefix) netip.Prefix {
	if p.Addr().Is4In6() && p.Bits() >= 96 {
		return netip.PrefixFrom(p.Addr().Unmap(), p.Bits()-96).Masked()
	}
	return p
}

// Trusted reports whether addr (unmapped, as [ParseAddr] returns it) is in
// one of the ranges, reading ranges in IPv4-mapped form as IPv4 ones.
func Trusted(trusted []netip.Prefix, addr netip.Addr) bool {
	for _, p := range trusted {
		if unmap(p).Contains(addr) {
			return true
		}
	}
	return false
}

// ParseAddr parses an IP address with or without a port ("192.0.2.1",
// "192.0.2.1:80", "[2001:db8::1]:80", "[2001:db8::1]"), unmapping
// IPv4-mapped IPv6 and dropping any zone.
func ParseAddr(s string) (netip.Addr, bool) {
	addr, err := netip.ParseAddr(s)
	if err != nil {
		ap, err := netip.ParseAddrPort(s)
		if err == nil {
			addr = ap.Addr()
		} else if n := len(s); n > 2 && s[0] == '[' && s[n-1] == ']' {
			if addr, err = netip.ParseAddr(s[1 : n-1]); err != nil {
				return netip.Addr{}, false
			}
		} else {
			return netip.Addr{}, false
		}
	}
	return addr.Unmap().WithZone(""), true
}

// Key returns the key of a client address: an IPv4 address whole
// ("192.0.2.1"), an IPv6 address's prefix of ipv6Bits ("2001:db8:1:2::/64"),
// or the whole IPv6 address when ipv6Bits is 128. ipv6Bits outside 1 to
// 128 means 64.
func Key(addr netip.Addr, ipv6Bits int) string {
	if ipv6Bits < 1 || ipv6Bits > 128 {
		ipv6Bits = 64
	}
	if addr.Is4() || ipv6Bits == 128 {
		return addr.String()
	}
	return netip.PrefixFrom(addr, ipv6Bits).Masked().String()
}
