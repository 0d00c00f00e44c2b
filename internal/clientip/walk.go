package clientip

import (
	"net/netip"
	"strings"
)

// Header names the field trusted proxies append their peer's address to.
type Header uint8

const (
	// XForwardedFor is X-Forwarded-For: a comma-separated list of
	// addresses, nearest proxy's peer last.
	XForwardedFor Header = iota
	// Forwarded is RFC 7239's Forwarded: a list of elements whose for=
	// parameter is an address, nearest last.
	Forwarded
)

// Client returns the client of a request that reached the server from
// peer carrying the given field lines of header h, trusting the proxies in
// trusted (see [Check]).
//
// When peer is trusted, the client is found by walking the entries from
// the right (the one the nearest proxy appended) to the left, skipping
// trusted proxies: the first untrusted address is the client. Everything
// left of it was written by the client or by proxies it chose, and is
// never read. A malformed entry (not an IP address, optionally with a
// port; for Forwarded also an element without for=, "unknown" or an
// obfuscated identifier) ends the walk at the trusted proxy that passed it
// on. When every entry is trusted, the client is the leftmost one.
func Client(trusted []netip.Prefix, peer netip.Addr, h Header, lines []string) netip.Addr {
	if !Trusted(trusted, peer) {
		return peer
	}
	client := peer
	for i := len(lines) - 1; i >= 0; i-- {
		for rest := lines[i]; rest != ""; {
			var entry string
			if h == Forwarded {
				rest, entry = lastElement(rest)
			} else {
				rest, entry = lastItem(rest)
			}
			if strings.TrimSpace(entry) == "" {
				continue // empty list elements are allowed (RFC 9110, section 5.6.1)
			}
			if h == Forwarded {
				entry = forwardedFor(entry)
			}
			entry = strings.TrimSpace(entry)
			addr, ok := ParseAddr(entry)
			if !ok {
				return client
			}
			client = addr
			if !Trusted(trusted, addr) {
				return client
			}
		}
	}
	return client
}

// lastItem splits a comma-separated list before its last item.
func lastItem(s string) (rest, item string) {
	if j := strings.LastIndexByte(s, ','); j >= 0 {
		return s[:j], s[j+1:]
	}
	return "", s
}

// lastElement splits a Forwarded field line before its last element,
// honouring quoted strings, which may hold commas.
func lastElement(s string) (rest, element string) {
	split, inQuotes := -1, false
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '\\' && inQuotes:
			i++
		case c == '"':
			inQuotes = !inQuotes
		case c == ',' && !inQuotes:
			split = i
		}
	}
	if split < 0 {
		return "", s
	}
	return s[:split], s[split+1:]
}

// forwardedFor returns the node of a Forwarded element's for= parameter,
// unquoted, or "" if it has none.
func forwardedFor(element string) string {
	for element != "" {
		var pair string
		pair, element = nextPair(element)
		name, value, ok := strings.Cut(pair, "=")
		if ok && strings.EqualFold(strings.TrimSpace(name), "for") {
			return unquote(strings.TrimSpace(value))
		}
	}
	return ""
}

// nextPair splits a Forwarded element after its first name=value pair,
// honouring quoted strings, which may hold semicolons.
func nextPair(s string) (pair, rest string) {
	inQuotes := false
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '\\' && inQuotes:
			i++
		case c == '"':
			inQuotes = !inQuotes
		case c == ';' && !inQuotes:
			return s[:i], s[i+1:]
		}
	}
	return s, ""
}

// unquote returns the content of a quoted-string (RFC 9110, section
// 5.6.4), or s itself when it is a token.
func unquote(s string) string {
	if len(s) < 2 || s[0] != '"' || s[len(s)-1] != '"' {
		return s
	}
	s = s[1 : len(s)-1]
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+1 < len(s) {
			i++
		}
		b.WriteByte(s[i])
	}
	return b.String()
}
