package sluicehttp

import (
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/sluice-go/sluice"
)

// maxInteger is the largest Integer a Structured Field can hold (RFC 9651,
// section 3.3.1: at most 15 digits).
const maxInteger = 999_999_999_999_999

// tolerance mirrors the core's float slack: amounts within limit*2^-48 of
// a whole number are that number, so that rounding noise in a level never
// shows as one unit less.
const tolerance = 0x1p-48

// sfString serializes s as a Structured Field String (RFC 9651, section
// 4.1.6): quoted, with '"' and '\' escaped. Only printable ASCII fits.
func sfString(s string) (string, error) {
	var b strings.Builder
	b.Grow(len(s) + 2)
	b.WriteByte('"')
	for i := range len(s) {
		c := s[i]
		if c < 0x20 || c > 0x7e {
			return "", fmt.Errorf("%w: policy name %q: not printable ASCII", sluice.ErrInvalidConfig, s)
		}
		if c == '"' || c == '\\' {
			b.WriteByte('\\')
		}
		b.WriteByte(c)
	}
	b.WriteByte('"')
	return b.String(), nil
}

// wholeUnits returns the whole units in amount x of a limiter with the
// given limit, rounded down, as a non-negative Structured Field Integer.
func wholeUnits(x, limit float64) int64 {
	x = math.Floor(x + limit*tolerance)
	switch {
	case !(x > 0): // also NaN
		return 0
	case x >= maxInteger:
		return maxInteger
	}
	return int64(x)
}

// ceilSeconds returns d in whole seconds, rounded up; 0 for d <= 0.
func ceilSeconds(d time.Duration) int64 {
	if d <= 0 {
		return 0
	}
	s := int64(d / time.Second)
	if d%time.Second != 0 {
		s++
	}
	return s
}

// roundSeconds returns d in whole seconds, rounded to the nearest, as a
// Structured Field Integer; 0 for d < time.Second/2.
func roundSeconds(d time.Duration) int64 {
	if d <= 0 {
		return 0
	}
	s := int64(d / time.Second)
	if d%time.Second >= time.Second/2 {
		s++
	}
	return clampInteger(s)
}

// clampInteger caps n at the largest Structured Field Integer.
func clampInteger(n int64) int64 { return min(n, maxInteger) }
