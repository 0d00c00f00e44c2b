package clientip

import (
	"net/netip"
	"strings"
	"testing"
)

// FuzzClient checks that whatever a proxy chain carries, the client is the
// peer or an address written in the lines, and that an untrusted peer is
// always its own client.
func FuzzClient(f *testing.F) {
	f.Add("10.0.0.1", "203.0.113.9, 10.0.0.2", false)
	f.Add("10.0.0.1", `for="[2001:db8::1]:80";proto=https, for=unknown`, true)
	f.Add("192.0.2.1", "for=203.0.113.9", true)
	f.Add("10.0.0.1", `for="\"", for=10.0.0.3`, true)
	trusted := []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("::ffff:172.16.0.0/108")}
	f.Fuzz(func(t *testing.T, peerText, line string, forwarded bool) {
		peer, ok := ParseAddr(peerText)
		if !ok {
			return
		}
		h := XForwardedFor
		if forwarded {
			h = Forwarded
		}
		got := Client(trusted, peer, h, []string{line})
		if !Trusted(trusted, peer) {
			if got != peer {
				t.Fatalf("untrusted peer %v: client %v", peer, got)
			}
			return
		}
		if got != peer && !strings.Contains(line, got.String()) && !containsAddr(line, got) {
			t.Fatalf("client %v is neither the peer nor in %q", got, line)
		}
	})
}

// containsAddr reports whether some token of line parses as addr, for
// addresses written differently from their canonical form.
func containsAddr(line string, addr netip.Addr) bool {
	for _, tok := range strings.FieldsFunc(line, func(r rune) bool { return strings.ContainsRune(",; \t\"=", r) }) {
		if a, ok := ParseAddr(tok); ok && a == addr {
			return true
		}
	}
	return false
}
