package storetest

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sluice-go/sluice"
	"github.com/sluice-go/sluice/engine"
	"github.com/sluice-go/sluice/internal/calendar"
)

// calendarOrigins are where RunCalendars' traces start: days across
// daylight-saving changes (of an hour, of half an hour, at midnight), a
// week across one, months across one and across a leap day, a year's
// end, the epoch and the last months before the end of time.
var calendarOrigins = []struct {
	zone   string
	period calendar.Period
	at     string // RFC 3339, a day or two before the rule the trace crosses
}{
	{"Europe/Paris", calendar.Day, "2026-03-28T12:00:00Z"},        // 23 hours
	{"Europe/Paris", calendar.Month, "2026-10-20T00:00:00Z"},      // 31 days and an hour
	{"America/Santiago", calendar.Day, "2026-09-05T12:00:00Z"},    // midnight does not exist
	{"America/Santiago", calendar.Day, "2026-04-04T12:00:00Z"},    // midnight comes twice
	{"Australia/Lord_Howe", calendar.Day, "2026-10-03T00:00:00Z"}, // 23 and a half hours
	{"America/New_York", calendar.Week, "2026-10-30T00:00:00Z"},
	{"Asia/Tokyo", calendar.Month, "2028-02-27T00:00:00Z"}, // 29 days
	{"Pacific/Auckland", calendar.Year, "2026-12-30T00:00:00Z"},
	{"UTC", calendar.Day, "1970-01-01T00:00:00Z"},
	{"Asia/Kolkata", calendar.Month, "2116-01-20T00:00:00Z"}, // its last months: 2^62 ns is in February 2116
}

// calendarParams returns the Params of a calendar window of limit per
// period in loc, as a caller computes them at now.
func calendarParams(limit float64, period calendar.Period, loc *time.Location, now int64) engine.Params {
	return calendar.Around(engine.Params{Kind: engine.KindFixedWindow, Limit: limit}, period, loc, now)
}

// RunCalendars replays random traces of calendar windows (see
// [engine.Params.Windows]) against st and against the specification:
// days, weeks, months and years in several time zones, across
// daylight-saving changes, month ends, a leap day, a year's end, from the
// epoch and up to the end of time. Each op runs under the windows a caller
// computes at its time; the limit changes at random instants, and so,
// now and then, does the period.
func RunCalendars(t *testing.T, st engine.Store, opts ...Option) {
	c := configure(opts)
	ctx := context.Background()
	prefix := uniquePrefix()
	for oi, o := range calendarOrigins {
		loc, err := time.LoadLocation(o.zone)
		require.NoError(t, err)
		start, err := time.Parse(time.RFC3339, o.at)
		require.NoError(t, err)
		t.Run(fmt.Sprintf("%s_%v_from_%s", o.zone, o.period, o.at[:10]), func(t *testing.T) {
			now := start.UnixNano()
			for trace := range max(c.traces/5, 2) {
				seed := uint64(oi)<<32 | uint64(trace)
				rng := rand.New(rand.NewPCG(seed, 0xca1e))
				spec := specStore{states: map[string]engine.State{}, expires: map[string]int64{}, exact: c.exact}
				key := fmt.Sprintf("%scal.%d.%d", prefix, oi, trace)
				limit, period := []float64{1, 3, 10.5, 1000}[rng.IntN(4)], o.period
				for step := range 60 {
					now = max(now+calendarGap(rng, calendarParams(limit, period, loc, now).Interval), 0)
					switch r := rng.IntN(20); {
					case r < 3:
						limit = max(limit/2, 0.5)
					case r < 6:
						limit *= 2
					case r < 7:
						period = []calendar.Period{o.period, calendar.Month}[rng.IntN(2)]
					}
					p := calendarParams(limit, period, loc, now)
					op := engine.Op{Verb: engine.VerbAllow, Cost: randomCost(rng, p), Now: now}
					switch r := rng.IntN(10); {
					case r < 2:
						op.Verb = engine.VerbCheck
					case r < 3:
						op.Verb = engine.VerbAtMost
					}
					got, err := st.Apply(ctx, key, &p, op)
					spec.apply(t, p, key, op, got, err, fmt.Sprintf("seed %d step %d op %+v of %v", seed, step, op, p))
				}
				now += 3 * int64(24*time.Hour) // the next trace, on a key of its own, days later
			}
		})
	}
}

// calendarGap draws the time to the next request of a calendar window of
// length w: requests close together, across the window, across a few
// windows, and a clock that steps back.
func calendarGap(rng *rand.Rand, w int64) int64 {
	switch r := rng.IntN(100); {
	case r < 20:
		return 0
	case r < 30:
		return rng.Int64N(1000)
	case r < 70:
		return rng.Int64N(w / 8)
	case r < 90:
		return rng.Int64N(w)
	case r < 95:
		return rng.Int64N(3 * w)
	default:
		return -rng.Int64N(w / 4) // the clock steps back
	}
}

// RunServerClockCalendar requires that st, a store that decides by its
// own clock, finds its time among the calendar windows a caller computed
// by the system's clock (which the store's clock must be within minutes
// of), counts in the window that holds it, and refuses windows that do
// not hold it with [sluice.ErrTimeOutOfRange], recording nothing, for a
// single key and, if st is an [engine.GroupStore], a group.
func RunServerClockCalendar(t *testing.T, st engine.Store) {
	ctx := context.Background()
	key := uniquePrefix() + "calendar"
	day := int64(24 * time.Hour)
	around := func(offsets ...int64) engine.Params {
		now := time.Now().UnixNano()
		var w [4]int64
		for i, o := range offsets {
			w[i] = now + o
		}
		return engine.Params{Kind: engine.KindFixedWindow, Limit: 3, Interval: w[2] - w[1], Windows: w}
	}
	allow := func(p engine.Params, cost float64) (engine.Decision, error) {
		return st.Apply(ctx, key, &p, engine.Op{Verb: engine.VerbAllow, Cost: cost, Now: time.Now().UnixNano()})
	}

	middle := around(-2*day, -day, day, 2*day)
	for range 3 {
		d, err := allow(middle, 1)
		require.NoError(t, err)
		require.True(t, d.Allowed)
	}
	d, err := allow(middle, 1)
	require.NoError(t, err)
	require.False(t, d.Allowed)
	require.InDelta(t, float64(day), float64(d.RetryAfter), float64(time.Minute), "retry when the middle window ends")

	past := engine.Params{Kind: engine.KindFixedWindow, Limit: 3}
	past.Windows = [4]int64{978307200e9, 978393600e9, 978480000e9, 978566400e9} // days of 2001
	past.Interval = past.Windows[2] - past.Windows[1]
	for _, verb := range []engine.Verb{engine.VerbAllow, engine.VerbCheck, engine.VerbAtMost} {
		_, err := st.Apply(ctx, key, &past, engine.Op{Verb: verb, Cost: 1, Now: time.Now().UnixNano()})
		require.ErrorIs(t, err, sluice.ErrTimeOutOfRange, "the store's time is not in windows of 2001: %v", verb)
	}
	d, err = st.Apply(ctx, key, &middle, engine.Op{Verb: engine.VerbCheck, Now: time.Now().UnixNano()})
	require.NoError(t, err)
	require.Equal(t, 3.0, d.Used, "the refused ops recorded nothing")

	// The store's time in the third of the windows, on a key of its own:
	// it counts there, until that window's end.
	key += ".third"
	third := around(-3*day, -2*day, -time.Hour.Nanoseconds(), time.Hour.Nanoseconds())
	d, err = allow(third, 2)
	require.NoError(t, err)
	require.True(t, d.Allowed)
	require.Equal(t, 2.0, d.Used)
	require.InDelta(t, float64(time.Hour), float64(d.ResetAfter), float64(time.Minute), "until the third window's end")

	if gs, ok := st.(engine.GroupStore); ok {
		keys := []string{key + ".a", key + ".b"}
		op := engine.Op{Verb: engine.VerbAllow, Cost: 1, Now: time.Now().UnixNano()}
		ops := []engine.GroupOp{{Key: keys[0], Params: &middle, Op: op}, {Key: keys[1], Params: &past, Op: op}}
		_, err := gs.ApplyGroup(ctx, ops, make([]engine.Decision, 2))
		require.ErrorIs(t, err, sluice.ErrTimeOutOfRange, "a group with windows that do not hold the store's time")
		d, err := st.Apply(ctx, keys[0], &middle, engine.Op{Verb: engine.VerbCheck, Now: time.Now().UnixNano()})
		require.NoError(t, err)
		require.Zero(t, d.Used, "the refused group recorded nothing")
	}
}
