package redisstore

import (
	"encoding/binary"
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sluice-go/sluice"
)

// reply packs a decision's reply as the script does: a status byte and
// little-endian doubles.
func reply(status byte, x ...float64) string {
	b := []byte{status}
	for _, f := range x {
		b = binary.LittleEndian.AppendUint64(b, math.Float64bits(f))
	}
	return string(b)
}

func TestDecodeReadsDecision(t *testing.T) {
	p := &sluice.Params{Kind: sluice.KindGCRA, Limit: 5, Interval: int64(time.Second)}
	d, err := decode(reply(0, 4.5, 0.5, 0, 123, 9223372036, 854775807), "k", p, sluice.VerbAllow)
	require.NoError(t, err)
	require.Equal(t, sluice.Decision{Limit: 5, Used: 4.5, Remaining: 0.5, RetryAfter: 123, ResetAfter: 1<<63 - 1}, d)
}

func TestDecodeReportsConflict(t *testing.T) {
	p := &sluice.Params{Kind: sluice.KindGCRA, Limit: 5, Interval: int64(time.Second)}
	_, err := decode("\x02\x05", "k", p, sluice.VerbAllow)
	require.ErrorIs(t, err, sluice.ErrKeyConflict)
	require.ErrorContains(t, err, "sliding log")
}

// TestDecodeRejectsUnexpectedReplies requires an error, never a panic or
// a made-up decision, for replies of any other shape.
func TestDecodeRejectsUnexpectedReplies(t *testing.T) {
	p := &sluice.Params{Kind: sluice.KindGCRA, Limit: 5, Interval: int64(time.Second)}
	valid := reply(1, 0, 5, 0, 0, 0, 0)
	for name, r := range map[string]any{
		"Nil":                 nil,
		"Integer":             int64(1),
		"Array":               []any{valid},
		"Empty":               "",
		"Short":               valid[:len(valid)-1],
		"Long":                valid + "\x00",
		"UnknownStatus":       reply(3, 0, 5, 0, 0, 0, 0),
		"ConflictNoKind":      "\x02",
		"ConflictLong":        "\x02\x05\x05",
		"FractionalNanos":     reply(0, 5, 0, 0, 1.5, 0, 0),
		"FractionalSeconds":   reply(0, 5, 0, 0.5, 0, 0, 0),
		"NegativeSeconds":     reply(0, 5, 0, -1, 0, 0, 0),
		"NanosOverASecond":    reply(0, 5, 0, 0, 1e9, 0, 0),
		"NaNNanos":            reply(0, 5, 0, 0, math.NaN(), 0, 0),
		"OverflowingDuration": reply(1, 0, 5, 0, 0, 9223372036, 854775808),
		"HugeSeconds":         reply(1, 0, 5, 0, 0, 1e19, 0),
	} {
		t.Run(name, func(t *testing.T) {
			d, err := decode(r, "k", p, sluice.VerbAllow)
			require.Error(t, err)
			require.NotErrorIs(t, err, sluice.ErrKeyConflict)
			require.Equal(t, sluice.Decision{Limit: 5}, d)
		})
	}
}

// TestScriptsHaveTheirSections requires every section a script is built
// from to exist in apply.lua, since a missing one would only show as a
// Lua error at run time.
func TestScriptsHaveTheirSections(t *testing.T) {
	for _, names := range scriptSections {
		for _, name := range append([]string{"main"}, names...) {
			require.Contains(t, applySource, "\n-- @section "+name+"\n")
		}
	}
}
