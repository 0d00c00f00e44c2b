package sluicehttp_test

import (
	"net/http"
	"net/http/httptest"
	"net/netip"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/sluice-go/sluice/sluicehttp"
)

// newRequest returns a GET request from remoteAddr carrying the given
// X-Forwarded-For field lines.
func newRequest(remoteAddr string, xff ...string) *http.Request {
	r := httptest.NewRequest(http.MethodGet, "/", nil)
	r.RemoteAddr = remoteAddr
	for _, v := range xff {
		r.Header.Add("X-Forwarded-For", v)
	}
	return r
}

func prefixes(s ...string) []netip.Prefix {
	ps := make([]netip.Prefix, len(s))
	for i, p := range s {
		ps[i] = netip.MustParsePrefix(p)
	}
	return ps
}

func TestClientIPKey(t *testing.T) {
	proxies := prefixes("10.0.0.0/8", "2001:db8:ffff::/48")
	tests := []struct {
		name       string
		key        sluicehttp.ClientIP
		remoteAddr string
		xff        []string
		want       string
	}{
		{name: "peer IPv4", remoteAddr: "192.0.2.1:1234", want: "192.0.2.1"},
		{name: "peer without port", remoteAddr: "192.0.2.1", want: "192.0.2.1"},
		{name: "spoofed header ignored when no proxy is trusted",
			remoteAddr: "192.0.2.1:1234", xff: []string{"203.0.113.9"}, want: "192.0.2.1"},
		{name: "spoofed header ignored from an untrusted peer", key: sluicehttp.ClientIP{TrustedProxies: proxies},
			remoteAddr: "192.0.2.1:1234", xff: []string{"203.0.113.9"}, want: "192.0.2.1"},
		{name: "client appended by a trusted proxy", key: sluicehttp.ClientIP{TrustedProxies: proxies},
			remoteAddr: "10.0.0.1:1234", xff: []string{"203.0.113.9"}, want: "203.0.113.9"},
		{name: "client-sent entries left of the client are ignored", key: sluicehttp.ClientIP{TrustedProxies: proxies},
			remoteAddr: "10.0.0.1:1234", xff: []string{"198.51.100.1, 10.0.0.7, 203.0.113.9"}, want: "203.0.113.9"},
		{name: "trusted hops are skipped", key: sluicehttp.ClientIP{TrustedProxies: proxies},
			remoteAddr: "10.0.0.1:1234", xff: []string{"203.0.113.9, 10.0.0.3,10.0.0.2"}, want: "203.0.113.9"},
		{name: "walk continues across field lines", key: sluicehttp.ClientIP{TrustedProxies: proxies},
			remoteAddr: "10.0.0.1:1234", xff: []string{"198.51.100.1, 203.0.113.9", "10.0.0.2"}, want: "203.0.113.9"},
		{name: "last field line is nearest", key: sluicehttp.ClientIP{TrustedProxies: proxies},
			remoteAddr: "10.0.0.1:1234", xff: []string{"198.51.100.1", "203.0.113.9"}, want: "203.0.113.9"},
		{name: "empty list elements are skipped", key: sluicehttp.ClientIP{TrustedProxies: proxies},
			remoteAddr: "10.0.0.1:1234", xff: []string{"203.0.113.9,, ,"}, want: "203.0.113.9"},
		{name: "malformed entry stops at the proxy that passed it on", key: sluicehttp.ClientIP{TrustedProxies: proxies},
			remoteAddr: "10.0.0.1:1234", xff: []string{"203.0.113.9, unknown, 10.0.0.2"}, want: "10.0.0.2"},
		{name: "malformed nearest entry stops at the peer", key: sluicehttp.ClientIP{TrustedProxies: proxies},
			remoteAddr: "10.0.0.1:1234", xff: []string{"203.0.113.9, 203.0.113.300"}, want: "10.0.0.1"},
		{name: "all entries trusted gives the leftmost", key: sluicehttp.ClientIP{TrustedProxies: proxies},
			remoteAddr: "10.0.0.1:1234", xff: []string{"10.0.0.3, 10.0.0.2"}, want: "10.0.0.3"},
		{name: "trusted peer without header is the client", key: sluicehttp.ClientIP{TrustedProxies: proxies},
			remoteAddr: "10.0.0.1:1234", want: "10.0.0.1"},
		{name: "entry with port", key: sluicehttp.ClientIP{TrustedProxies: proxies},
			remoteAddr: "10.0.0.1:1234", xff: []string{"203.0.113.9:4711"}, want: "203.0.113.9"},
		{name: "IPv6 entry with port", key: sluicehttp.ClientIP{TrustedProxies: proxies},
			remoteAddr: "10.0.0.1:1234", xff: []string{"[2001:db8:1:2::1]:443"}, want: "2001:db8:1:2::/64"},
		{name: "IPv6 trusted proxy", key: sluicehttp.ClientIP{TrustedProxies: proxies},
			remoteAddr: "[2001:db8:ffff::5]:1234", xff: []string{"192.0.2.44"}, want: "192.0.2.44"},
		{name: "IPv4-mapped peer is trusted as IPv4", key: sluicehttp.ClientIP{TrustedProxies: proxies},
			remoteAddr: "[::ffff:10.0.0.1]:1234", xff: []string{"203.0.113.9"}, want: "203.0.113.9"},
		{name: "IPv4-mapped entry is keyed as IPv4", key: sluicehttp.ClientIP{TrustedProxies: proxies},
			remoteAddr: "10.0.0.1:1234", xff: []string{"::ffff:203.0.113.9"}, want: "203.0.113.9"},
		{name: "IPv4-mapped peer is keyed as IPv4, not as a /64",
			remoteAddr: "[::ffff:192.0.2.1]:1234", want: "192.0.2.1"},
		{name: "IPv6 grouped by /64 by default",
			remoteAddr: "[2001:db8:1:2:3:4:5:6]:1234", want: "2001:db8:1:2::/64"},
		{name: "IPv6 prefix length out of range means 64", key: sluicehttp.ClientIP{IPv6PrefixLen: 129},
			remoteAddr: "[2001:db8:1:2:3:4:5:6]:1234", want: "2001:db8:1:2::/64"},
		{name: "negative IPv6 prefix length means 64", key: sluicehttp.ClientIP{IPv6PrefixLen: -1},
			remoteAddr: "[2001:db8:1:2:3:4:5:6]:1234", want: "2001:db8:1:2::/64"},
		{name: "IPv6 grouped by /48", key: sluicehttp.ClientIP{IPv6PrefixLen: 48},
			remoteAddr: "[2001:db8:1:2:3:4:5:6]:1234", want: "2001:db8:1::/48"},
		{name: "IPv6 whole address", key: sluicehttp.ClientIP{IPv6PrefixLen: 128},
			remoteAddr: "[2001:db8:1:2:3:4:5:6]:1234", want: "2001:db8:1:2:3:4:5:6"},
		{name: "IPv6 zone dropped", key: sluicehttp.ClientIP{IPv6PrefixLen: 128},
			remoteAddr: "[fe80::1%eth0]:1234", want: "fe80::1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := tt.key.Key(newRequest(tt.remoteAddr, tt.xff...))
			require.NoError(t, err)
			require.Equal(t, tt.want, got)
		})
	}
}

func TestClientIPKeyFailsWithoutAPeerAddress(t *testing.T) {
	for _, remoteAddr := range []string{"", "@", "example.com:80", "[::1"} {
		_, err := sluicehttp.ClientIP{}.Key(newRequest(remoteAddr))
		require.Error(t, err, "%q", remoteAddr)
	}
}

func TestClientIPAddrReturnsTheClient(t *testing.T) {
	c := sluicehttp.ClientIP{TrustedProxies: prefixes("10.0.0.0/8")}
	got, err := c.Addr(newRequest("10.0.0.1:1234", "2001:db8:1:2::99"))
	require.NoError(t, err)
	require.Equal(t, netip.MustParseAddr("2001:db8:1:2::99"), got)
}

func TestHeaderKeyReturnsTheValue(t *testing.T) {
	r := newRequest("192.0.2.1:1234")
	r.Header.Set("X-Api-Key", "k-123")
	got, err := sluicehttp.HeaderKey("x-api-key")(r)
	require.NoError(t, err)
	require.Equal(t, "k-123", got)
}

func TestHeaderKeyFailsWithoutAValue(t *testing.T) {
	absent := newRequest("192.0.2.1:1234")
	empty := newRequest("192.0.2.1:1234")
	empty.Header.Set("X-Api-Key", "")
	for _, r := range []*http.Request{absent, empty} {
		_, err := sluicehttp.HeaderKey("x-api-key")(r)
		require.EqualError(t, err, "no X-Api-Key header")
	}
}
