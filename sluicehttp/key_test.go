package sluicehttp_test

import (
	"net/http"
	"net/http/httptest"
	"net/netip"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sluice-go/sluice"
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

func TestTrustedProxyWrittenAsIPv4MappedIPv6Matches(t *testing.T) {
	c := sluicehttp.ClientIP{TrustedProxies: prefixes("::ffff:10.0.0.0/104")}
	got, err := c.Key(newRequest("10.0.0.1:1234", "203.0.113.9"))
	require.NoError(t, err)
	require.Equal(t, "203.0.113.9", got)
}

func TestTrustedProxyRangeWiderThanTheMappedBlockIsRejected(t *testing.T) {
	// ::ffff:0:0/80 mixes IPv6 space with all of IPv4: no reading of it
	// is safe.
	mw, err := sluicehttp.New(fixedWindow(t, 1, time.Minute, newClock()),
		sluicehttp.WithKey(sluicehttp.ClientIP{TrustedProxies: prefixes("::ffff:0:0/80")}.Key))
	require.NoError(t, err, "the key function is opaque to New")
	s := wrap(mw)
	require.Equal(t, http.StatusInternalServerError, s.do(newRequest("10.0.0.1:1234", "203.0.113.9")).Code)
}

func TestClientIPReadsForwardedFromTrustedProxies(t *testing.T) {
	c := sluicehttp.ClientIP{TrustedProxies: prefixes("10.0.0.0/8"), Forwarded: true}
	tests := []struct {
		name       string
		remoteAddr string
		forwarded  []string
		xff        string
		want       string
	}{
		{name: "client appended by the proxy", remoteAddr: "10.0.0.1:1",
			forwarded: []string{"for=203.0.113.9;proto=https"}, want: "203.0.113.9"},
		{name: "entries left of the client are ignored", remoteAddr: "10.0.0.1:1",
			forwarded: []string{`for=198.51.100.1, for=203.0.113.9;by=10.0.0.1, for=10.0.0.7`}, want: "203.0.113.9"},
		{name: "quoted IPv6 with port", remoteAddr: "10.0.0.1:1",
			forwarded: []string{`for="[2001:db8:cafe::17]:4711"`}, want: "2001:db8:cafe::/64"},
		{name: "quoted IPv6 without port", remoteAddr: "10.0.0.1:1",
			forwarded: []string{`For="[2001:db8:cafe::17]"`}, want: "2001:db8:cafe::/64"},
		{name: "quoted IPv4 with port", remoteAddr: "10.0.0.1:1",
			forwarded: []string{`for="203.0.113.9:47011"`}, want: "203.0.113.9"},
		{name: "a comma inside quotes does not split elements", remoteAddr: "10.0.0.1:1",
			forwarded: []string{`for=203.0.113.9;host="a,b"`}, want: "203.0.113.9"},
		{name: "field lines in order", remoteAddr: "10.0.0.1:1",
			forwarded: []string{"for=198.51.100.1", "for=203.0.113.9", "for=10.0.0.2"}, want: "203.0.113.9"},
		{name: "unknown stops at the proxy that passed it on", remoteAddr: "10.0.0.1:1",
			forwarded: []string{"for=203.0.113.9, for=unknown, for=10.0.0.2"}, want: "10.0.0.2"},
		{name: "obfuscated node stops the walk", remoteAddr: "10.0.0.1:1",
			forwarded: []string{"for=_hidden"}, want: "10.0.0.1"},
		{name: "element without for stops the walk", remoteAddr: "10.0.0.1:1",
			forwarded: []string{"for=203.0.113.9, proto=http"}, want: "10.0.0.1"},
		{name: "ignored from an untrusted peer", remoteAddr: "192.0.2.1:1",
			forwarded: []string{"for=203.0.113.9"}, want: "192.0.2.1"},
		{name: "X-Forwarded-For is not read", remoteAddr: "10.0.0.1:1",
			xff: "203.0.113.9", want: "10.0.0.1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := newRequest(tt.remoteAddr)
			for _, v := range tt.forwarded {
				r.Header.Add("Forwarded", v)
			}
			if tt.xff != "" {
				r.Header.Set("X-Forwarded-For", tt.xff)
			}
			got, err := c.Key(r)
			require.NoError(t, err)
			require.Equal(t, tt.want, got)
		})
	}
}

func TestClientIPValidateRejectsAmbiguousRanges(t *testing.T) {
	for _, p := range []string{"::/0", "::ffff:0:0/80", "::/64"} {
		err := sluicehttp.ClientIP{TrustedProxies: prefixes(p)}.Validate()
		require.ErrorIs(t, err, sluice.ErrInvalidConfig, p)
	}
	require.Error(t, sluicehttp.ClientIP{TrustedProxies: []netip.Prefix{{}}}.Validate(), "zero prefix")
	for _, p := range []string{"10.0.0.0/8", "::ffff:10.0.0.0/104", "::ffff:0:0/96", "2001:db8::/32", "::1/128"} {
		require.NoError(t, sluicehttp.ClientIP{TrustedProxies: prefixes(p)}.Validate(), p)
	}
}
