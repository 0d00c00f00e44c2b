package ratelimitheader

import (
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sluice-go/sluice"
)

func TestSFStringEscapesQuoteAndBackslash(t *testing.T) {
	tests := map[string]string{
		"default":       `"default"`,
		"":              `""`,
		`say "hi"`:      `"say \"hi\""`,
		`back\slash`:    `"back\\slash"`,
		" ~!#$%&'()*+,": `" ~!#$%&'()*+,"`,
	}
	for in, want := range tests {
		got, err := SFString("name", in)
		require.NoError(t, err, in)
		require.Equal(t, want, got, in)
	}
}

func TestSFStringRejectsWhatAStringCannotHold(t *testing.T) {
	for _, in := range []string{"tab\t", "new\nline", "del\x7f", "café"} {
		_, err := SFString("name", in)
		require.ErrorIs(t, err, sluice.ErrInvalidConfig, "%q", in)
	}
}

func TestWholeUnitsRoundsDownForgivingFloatNoise(t *testing.T) {
	tests := []struct {
		x, limit float64
		want     int64
	}{
		0: {x: 42, limit: 100, want: 42},
		1: {x: 42.9, limit: 100, want: 42},
		2: {x: 42 - 1e-13, limit: 100, want: 42}, // rounding noise, not a missing unit
		3: {x: 42 - 1e-9, limit: 100, want: 41},  // a real fraction short
		4: {x: 0.5, limit: 1, want: 0},
		5: {x: -0.1, limit: 1, want: 0},
		6: {x: math.NaN(), limit: 1, want: 0},
		7: {x: 1e300, limit: 1e300, want: MaxInteger},
		8: {x: MaxInteger + 1, limit: 1e16, want: MaxInteger},
	}
	for i, tt := range tests {
		require.Equal(t, tt.want, WholeUnits(tt.x, tt.limit), "row %d", i)
	}
}

func TestCeilSecondsRoundsUp(t *testing.T) {
	tests := []struct {
		d    time.Duration
		want int64
	}{
		0: {d: 0, want: 0},
		1: {d: -time.Second, want: 0},
		2: {d: 1, want: 1},
		3: {d: time.Second, want: 1},
		4: {d: time.Second + 1, want: 2},
		5: {d: 18*time.Second - time.Millisecond, want: 18},
		6: {d: math.MaxInt64, want: math.MaxInt64/int64(time.Second) + 1},
	}
	for i, tt := range tests {
		require.Equal(t, tt.want, CeilSeconds(tt.d), "row %d", i)
	}
}

func TestRoundSecondsRoundsToNearest(t *testing.T) {
	tests := []struct {
		d    time.Duration
		want int64
	}{
		0: {d: 0, want: 0},
		1: {d: -time.Minute, want: 0},
		2: {d: time.Second/2 - 1, want: 0},
		3: {d: time.Second / 2, want: 1},
		4: {d: 60 * time.Second, want: 60},
		5: {d: 60*time.Second + time.Second/2 - 1, want: 60},
		6: {d: math.MaxInt64, want: math.MaxInt64/int64(time.Second) + 1}, // .854775807 s
	}
	for i, tt := range tests {
		require.Equal(t, tt.want, RoundSeconds(tt.d), "row %d", i)
	}
}

func TestRetryAfterIsAtLeastOneSecond(t *testing.T) {
	require.Equal(t, int64(1), RetryAfter(0))
	require.Equal(t, int64(1), RetryAfter(time.Nanosecond))
	require.Equal(t, int64(2), RetryAfter(time.Second+1))
}

func TestWindowOfAFractionalBurstDividesToTheRate(t *testing.T) {
	lim, err := sluice.NewTokenBucket(sluice.Per(2, 3*time.Second), 5.5)
	require.NoError(t, err)
	defer lim.Close()
	p, err := New(lim, Config{})
	require.NoError(t, err)
	require.Equal(t, `"default";q=5;w=8`, p.Field(), "5 units refill in 7.5 s")
}
