package redisstore

import (
	"encoding/binary"
	"math"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/sluice-go/sluice"
	"github.com/sluice-go/sluice/engine"
	"github.com/sluice-go/sluice/internal/testserver"
)

// calendarAround returns a calendar window of limit 3 whose middle window
// is [w1, w2), after one of a day and before one of two.
func calendarAround(w1, w2 int64) *engine.Params {
	const day = int64(24 * time.Hour)
	return &engine.Params{Kind: engine.KindFixedWindow, Limit: 3, Interval: w2 - w1,
		Windows: [4]int64{w1 - day, w1, w2, w2 + 2*day}}
}

// floats reads the little-endian doubles of b.
func floats(b string) []float64 {
	xs := make([]float64, len(b)/8)
	for i := range xs {
		xs[i] = math.Float64frombits(binary.LittleEndian.Uint64([]byte(b[8*i:])))
	}
	return xs
}

// TestCalendarWindowsArePackedAfterTheLimits holds the input's format: a
// call without calendar windows is what it was, a limit record per key;
// one with a calendar window has variant 2, the same limit records
// otherwise, and after them one record of windows per limit, zeros for
// the limits that are no calendar window.
func TestCalendarWindowsArePackedAfterTheLimits(t *testing.T) {
	st := &Store{callerClock: true}
	const now = int64(1_780_000_000_123_456_789)
	aligned := &engine.Params{Kind: engine.KindFixedWindow, Limit: 3, Interval: 1<<54 + 1}
	cal := calendarAround(-1_500_000_001, 1<<54-1_500_000_000)
	cal.Interval = aligned.Interval
	require.NoError(t, cal.Validate())
	op := engine.Op{Verb: engine.VerbAllow, Cost: 1, Now: now}

	plain := st.args(aligned, op)
	require.Len(t, plain, opSize+limitSize)
	require.Zero(t, plain[opSize+1], "no variant")
	in := st.args(cal, op)
	require.Len(t, in, opSize+limitSize+windowsSize)
	require.EqualValues(t, calendarVariant, in[opSize+1])
	require.Equal(t, plain[:opSize+1], in[:opSize+1])
	require.Equal(t, plain[opSize+2:], in[opSize+2:opSize+limitSize], "the limit record is the aligned window's but for its variant")
	w := floats(in[opSize+limitSize:])
	require.Equal(t, []float64{-86402, 499999999}, w[:2], "a time before the epoch, seconds rounded down")
	for i, want := range cal.Windows {
		require.Equal(t, want, int64(w[2*i])*1e9+int64(w[2*i+1]), "window boundary %d", i)
		require.GreaterOrEqual(t, w[2*i+1], 0.0)
		require.Less(t, w[2*i+1], 1e9)
	}

	gcra := &engine.Params{Kind: engine.KindGCRA, Limit: 3, Interval: int64(time.Second)}
	two := []engine.GroupOp{{Key: "a", Params: gcra, Op: op}, {Key: "b", Params: aligned, Op: op}}
	require.Len(t, st.groupArgs(two), opSize+2*limitSize)
	two[1].Params = cal
	g := st.groupArgs(two)
	require.Len(t, g, opSize+2*limitSize+2*windowsSize)
	require.Equal(t, st.args(gcra, op)[opSize:], g[opSize:opSize+limitSize], "the first limit's record")
	require.Equal(t, in[opSize:opSize+limitSize], g[opSize+limitSize:opSize+2*limitSize], "the second limit's record")
	require.Equal(t, make([]float64, 8), floats(g[opSize+2*limitSize:opSize+2*limitSize+windowsSize]), "no windows for the GCRA")
	require.Equal(t, in[opSize+limitSize:], g[opSize+2*limitSize+windowsSize:], "the calendar window's")
}

// TestLibraryChecksCalendarWindowsItself sends the library, past the Go
// side's checks, times at and beside a calendar window's first and last
// boundaries on the caller's clock: a time outside them is refused with
// an error wrapping sluice.ErrTimeOutOfRange that names it and the
// windows, recording nothing; one inside is decided as Step decides it.
func TestLibraryChecksCalendarWindowsItself(t *testing.T) {
	c := redis.NewClient(&redis.Options{Addr: testserver.StartRedis(t).Addr})
	t.Cleanup(func() { c.Close() })
	st := &Store{client: c, callerClock: true, skewMillis: 3600e3}
	ctx := t.Context()
	w1 := time.Date(2001, 1, 2, 0, 0, 0, 0, time.UTC).UnixNano()
	p := calendarAround(w1, w1+int64(24*time.Hour)+5)
	first, last := p.Windows[0], p.Windows[3]-1
	for _, tt := range []struct {
		name string
		now  int64
		in   bool
	}{
		{"BeforeTheFirst", first - 1, false},
		{"First", first, true},
		{"Last", last, true},
		{"AfterTheLast", last + 1, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			key := "cal:" + tt.name
			op := engine.Op{Verb: engine.VerbAllow, Cost: 1, Now: tt.now}
			reply, err := st.call(ctx, lib.apply, []string{key}, st.args(p, op))
			got, err := outcome(key, p, op.Verb, reply, err)
			if !tt.in {
				require.ErrorIs(t, err, sluice.ErrTimeOutOfRange)
				require.Contains(t, err.Error(), "the caller's time "+time.Unix(0, tt.now).UTC().String())
				require.Contains(t, err.Error(), "from 2001-01-01 00:00:00 +0000 UTC to 2001-01-05 00:00:00.000000005 +0000 UTC")
				require.Contains(t, err.Error(), "limit 1")
				require.Zero(t, c.Exists(ctx, key).Val(), "nothing recorded")
				return
			}
			require.NoError(t, err)
			_, want, err := p.Step(engine.State{}, op)
			require.NoError(t, err)
			require.Equal(t, want, got)
		})
	}

	t.Run("Group", func(t *testing.T) {
		gcra := &engine.Params{Kind: engine.KindGCRA, Limit: 3, Interval: int64(time.Second)}
		op := engine.Op{Verb: engine.VerbAllow, Cost: 1, Now: last + 1}
		ops := []engine.GroupOp{{Key: "g1", Params: gcra, Op: op}, {Key: "g2", Params: p, Op: op}}
		_, err := st.call(ctx, lib.group, []string{"g1", "g2"}, st.groupArgs(ops))
		err = scriptError(op.Verb, groupName(ops), err)
		require.ErrorIs(t, err, sluice.ErrTimeOutOfRange)
		require.Contains(t, err.Error(), "limit 2")
		require.Zero(t, c.Exists(ctx, "g1", "g2").Val(), "nothing recorded, not even the first limit's")
	})
}

// TestLibraryRefusesCalendarInputItCannotRead: a calendar window's
// variant without the windows after the limits, or on another algorithm
// than the fixed window, is refused with ErrUnsupported, and an input of
// any other length than with or without windows is an error; nothing is
// recorded.
func TestLibraryRefusesCalendarInputItCannotRead(t *testing.T) {
	c := redis.NewClient(&redis.Options{Addr: testserver.StartRedis(t).Addr})
	t.Cleanup(func() { c.Close() })
	st := &Store{client: c, callerClock: true}
	ctx := t.Context()
	const now = int64(1e18)
	p := calendarAround(now-1, now+int64(time.Hour))
	op := engine.Op{Verb: engine.VerbAllow, Cost: 1, Now: now}
	in := st.args(p, op)

	_, err := st.call(ctx, lib.apply, []string{"nowindows"}, in[:opSize+limitSize])
	require.ErrorIs(t, scriptError(op.Verb, "nowindows", err), sluice.ErrUnsupported)
	gcra := []byte(in)
	gcra[opSize] = byte(engine.KindGCRA)
	_, err = st.call(ctx, lib.apply, []string{"gcra"}, string(gcra))
	require.ErrorIs(t, scriptError(op.Verb, "gcra", err), sluice.ErrUnsupported)
	_, err = st.call(ctx, lib.apply, []string{"long"}, in+"12345678")
	require.ErrorContains(t, err, "bytes of input for 1 keys")
	require.Zero(t, c.Exists(ctx, "nowindows", "gcra", "long").Val(), "nothing recorded")
}
