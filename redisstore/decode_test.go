package redisstore

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sluice-go/sluice"
)

func TestDecodeReadsDecision(t *testing.T) {
	p := &sluice.Params{Kind: sluice.KindGCRA, Limit: 5, Interval: int64(time.Second)}
	d, err := decode([]any{"ok", "0", "4.5", "0.5", "123", "9223372036854775807"}, "k", p)
	require.NoError(t, err)
	require.Equal(t, sluice.Decision{Limit: 5, Used: 4.5, Remaining: 0.5, RetryAfter: 123, ResetAfter: 1<<63 - 1}, d)
}

func TestDecodeReportsConflict(t *testing.T) {
	p := &sluice.Params{Kind: sluice.KindGCRA, Limit: 5, Interval: int64(time.Second)}
	_, err := decode([]any{"conflict", "5"}, "k", p)
	require.ErrorIs(t, err, sluice.ErrKeyConflict)
	require.ErrorContains(t, err, "sliding log")
}

// TestDecodeRejectsUnexpectedReplies requires an error, never a panic or
// a made-up decision, for replies of any other shape.
func TestDecodeRejectsUnexpectedReplies(t *testing.T) {
	p := &sluice.Params{Kind: sluice.KindGCRA, Limit: 5, Interval: int64(time.Second)}
	for name, reply := range map[string]any{
		"Nil":              nil,
		"String":           "ok",
		"Integer":          int64(1),
		"Empty":            []any{},
		"Short":            []any{"ok", "1", "0", "5", "0"},
		"Long":             []any{"ok", "1", "0", "5", "0", "0", "0"},
		"UnknownStatus":    []any{"maybe", "1", "0", "5", "0", "0"},
		"IntegerField":     []any{"ok", int64(1), "0", "5", "0", "0"},
		"NilField":         []any{"ok", "1", nil, "5", "0", "0"},
		"AllowedNotBool":   []any{"ok", "2", "0", "5", "0", "0"},
		"UsedNotFloat":     []any{"ok", "1", "x", "5", "0", "0"},
		"RemainingEmpty":   []any{"ok", "1", "0", "", "0", "0"},
		"FractionalNanos":  []any{"ok", "0", "5", "0", "1.5", "0"},
		"NegativeNanos":    []any{"ok", "0", "5", "0", "-1", "0"},
		"OverflowingNanos": []any{"ok", "1", "0", "5", "0", "9223372036854775808"},
		"ConflictNoKind":   []any{"conflict"},
		"ConflictBadKind":  []any{"conflict", "gcra"},
	} {
		t.Run(name, func(t *testing.T) {
			d, err := decode(reply, "k", p)
			require.Error(t, err)
			require.NotErrorIs(t, err, sluice.ErrKeyConflict)
			require.Equal(t, sluice.Decision{Limit: 5}, d)
		})
	}
}
