// Package ratelimitheader serializes the RateLimit and RateLimit-Policy
// fields of draft-ietf-httpapi-ratelimit-headers-11 as RFC 9651 Structured
// Fields. The HTTP middleware sends them as header fields and the gRPC
// interceptors as response metadata, with the same syntax.
package ratelimitheader

import (
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/sluice-go/sluice"
)

// MaxInteger is the largest Integer a Structured Field can hold (RFC 9651,
// section 3.3.1: at most 15 digits).
const MaxInteger = 999_999_999_999_999

// tolerance mirrors the core's float slack: amounts within limit*2^-48 of
// a whole number are that number, so that rounding noise in a level never
// shows as one unit less.
const tolerance = 0x1p-48

// SFString serializes s as a Structured Field String (RFC 9651, section
// 4.1.6): quoted, with '"' and '\' escaped. Only printable ASCII fits; what
// names s in the error.
func SFString(what, s string) (string, error) {
	var b strings.Builder
	b.Grow(len(s) + 2)
	b.WriteByte('"')
	for i := range len(s) {
		c := s[i]
		if c < 0x20 || c > 0x7e {
			return "", fmt.Errorf("%w: %s %q: not printable ASCII", sluice.ErrInvalidConfig, what, s)
		}
		if c == '"' || c == '\\' {
			b.WriteByte('\\')
		}
		b.WriteByte(c)
	}
	b.WriteByte('"')
	return b.String(), nil
}

// WholeUnits returns the whole units in amount x of a limiter with the
// given limit, rounded down, as a non-negative Structured Field Integer.
func WholeUnits(x, limit float64) int64 {
	x = math.Floor(x + limit*tolerance)
	switch {
	case !(x > 0): // also NaN
		return 0
	case x >= MaxInteger:
		return MaxInteger
	}
	return int64(x)
}

// CeilSeconds returns d in whole seconds, rounded up; 0 for d <= 0.
func CeilSeconds(d time.Duration) int64 {
	if d <= 0 {
		return 0
	}
	s := int64(d / time.Second)
	if d%time.Second != 0 {
		s++
	}
	return s
}

// RoundSeconds returns d in whole seconds, rounded to the nearest, as a
// Structured Field Integer; 0 for d < time.Second/2.
func RoundSeconds(d time.Duration) int64 {
	if d <= 0 {
		return 0
	}
	s := int64(d / time.Second)
	if d%time.Second >= time.Second/2 {
		s++
	}
	return clampInteger(s)
}

// RetryAfter returns the Retry-After of a denial that may be retried after
// d: whole seconds, rounded up so that a client is never sent back too
// early, and at least 1.
func RetryAfter(d time.Duration) int64 { return max(CeilSeconds(d), 1) }

// clampInteger caps n at the largest Structured Field Integer.
func clampInteger(n int64) int64 { return min(n, MaxInteger) }
