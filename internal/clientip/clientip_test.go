package clientip

import (
	"net/netip"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestParseAddr(t *testing.T) {
	tests := map[string]string{
		"192.0.2.1":             "192.0.2.1",
		"192.0.2.1:80":          "192.0.2.1",
		"[2001:db8::1]:443":     "2001:db8::1",
		"[2001:db8::1]":         "2001:db8::1",
		"::ffff:192.0.2.1":      "192.0.2.1",
		"[fe80::1%eth0]:1":      "fe80::1",
		"[::ffff:192.0.2.1]:80": "192.0.2.1",
	}
	for in, want := range tests {
		got, ok := ParseAddr(in)
		require.True(t, ok, in)
		require.Equal(t, want, got.String(), in)
	}
	for _, in := range []string{"", "unknown", "[]", "[192.0.2.1", "_hidden", "192.0.2.300"} {
		_, ok := ParseAddr(in)
		require.False(t, ok, in)
	}
}

func TestTrustedReadsMappedRangesAsIPv4(t *testing.T) {
	trusted := []netip.Prefix{netip.MustParsePrefix("::ffff:10.0.0.0/104")}
	require.True(t, Trusted(trusted, netip.MustParseAddr("10.9.9.9")))
	require.False(t, Trusted(trusted, netip.MustParseAddr("11.0.0.1")))
}

func TestLastElementHonoursQuotes(t *testing.T) {
	rest, el := lastElement(`for=a, for="x,\",y";by=b`)
	require.Equal(t, `for=a`, rest)
	require.Equal(t, ` for="x,\",y";by=b`, el)
	require.Equal(t, `x,",y`, forwardedFor(el))
}
