package sluice_test

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
	"github.com/sluice-go/sluice/internal/reference"
	"github.com/sluice-go/sluice/internal/simclock"
)

// calendarTraces are where the calendar windows' proof starts its traces:
// daylight-saving changes of an hour, of half an hour and at midnight both
// ways, a skipped day, odd offsets, month ends, a leap day, a year's end,
// the epoch and the end of time.
var calendarTraces = []struct {
	zone   string
	period sluice.Period
	at     string
}{
	{"Europe/Paris", sluice.Day, "2026-03-28T20:00:00Z"},
	{"Europe/Paris", sluice.Day, "2026-10-24T20:00:00Z"},
	{"Europe/Paris", sluice.Month, "2026-03-20T00:00:00Z"},
	{"America/Santiago", sluice.Day, "2026-09-05T20:00:00Z"},
	{"America/Santiago", sluice.Day, "2026-04-04T20:00:00Z"},
	{"Australia/Lord_Howe", sluice.Day, "2026-10-03T10:00:00Z"},
	{"Pacific/Apia", sluice.Day, "2011-12-28T12:00:00Z"},
	{"Pacific/Chatham", sluice.Week, "2026-09-20T00:00:00Z"},
	{"America/St_Johns", sluice.Month, "2026-10-25T00:00:00Z"},
	{"America/New_York", sluice.Week, "2026-10-28T00:00:00Z"},
	{"Asia/Tokyo", sluice.Month, "2028-02-20T00:00:00Z"},
	{"Pacific/Auckland", sluice.Year, "2026-12-29T00:00:00Z"},
	{"UTC", sluice.Day, "1970-01-01T00:00:00Z"},
	{"Asia/Kolkata", sluice.Month, "2116-01-15T00:00:00Z"},
}

// TestCalendarWindowsMatchTheExactModel replays random traces of calendar
// windows, through a limiter on a fake clock whose limit changes at random
// instants, against the exact model, which finds its windows from local
// dates: every decision the model's, every window the model's, and never
// more admitted in a window than the largest limit in force in it.
func TestCalendarWindowsMatchTheExactModel(t *testing.T) {
	ctx := context.Background()
	for ti, tc := range calendarTraces {
		t.Run(fmt.Sprintf("%s_%v_%s", tc.zone, tc.period, tc.at[:10]), func(t *testing.T) {
			loc := zone(t, tc.zone)
			start, err := time.Parse(time.RFC3339, tc.at)
			require.NoError(t, err)
			rng := rand.New(rand.NewPCG(uint64(ti), 0xca1e))
			mock := simclock.New(start)
			limits := map[float64]*sluice.Limiter{}
			limit := 5.0
			lim, err := sluice.NewPerKey(func(context.Context, string) (*sluice.Limiter, error) {
				if limits[limit] == nil {
					l, err := sluice.NewCalendarWindow(limit, tc.period, loc)
					require.NoError(t, err)
					limits[limit] = l
				}
				return limits[limit], nil
			}, sluice.WithClock(mock))
			require.NoError(t, err)
			model := reference.NewCalendar(limit, calendar.Period(tc.period), loc)
			// What each window admitted, by its end, and the largest limit in
			// force in it; but for windows where the clock stepped back past
			// the end of one the key had used, which a store may forget.
			admitted, largest, loose := map[int64]float64{}, map[int64]float64{}, map[int64]bool{}
			var latest int64
			for step := range 2000 {
				now := mock.Now().UnixNano()
				if engine.CheckTime(now) != nil {
					_, err := lim.Allow(ctx, "k", 1)
					require.ErrorIs(t, err, sluice.ErrTimeOutOfRange, "past the end of time")
					break
				}
				p, err := lim.ParamsFor(ctx, "k")
				require.NoError(t, err)
				ws, we := model.Window(now)
				require.Equal(t, [2]int64{ws, we}, [2]int64{p.Windows[1], p.Windows[2]}, "step %d: the window of %v", step, mock.Now().In(loc))
				largest[we] = max(largest[we], limit)

				var op engine.Op
				var d sluice.Decision
				switch cost := []float64{1, 1, 2, 0.5, 0, limit}[rng.IntN(6)]; rng.IntN(6) {
				case 0:
					op = engine.Op{Verb: engine.VerbCheck, Cost: cost, Now: now}
					d, err = lim.CanAccept(ctx, "k", cost)
				case 1:
					op = engine.Op{Verb: engine.VerbAtMost, Cost: 3, Now: now}
					d, err = lim.AllowAtMost(ctx, "k", 3)
				default:
					op = engine.Op{Verb: engine.VerbAllow, Cost: cost, Now: now}
					d, err = lim.Allow(ctx, "k", cost)
				}
				require.NoError(t, err)
				want := model.Apply(op)
				where := fmt.Sprintf("step %d %+v at %v", step, op, mock.Now().In(loc))
				_, err = reference.Compare(p, op, engine.Decision(d), want)
				require.NoError(t, err, where)
				// Costs of halves and whole units sum exactly: even an exact
				// fit, which Compare leaves, is decided as the model does.
				used, _ := want.Used.Float64()
				require.Equal(t, [5]any{want.Allowed, min(max(used, 0), p.Limit), want.Granted, want.RetryAfter, want.ResetAfter},
					[5]any{d.Allowed, d.Used, d.Granted, int64(d.RetryAfter), int64(d.ResetAfter)}, where)
				if op.Verb != engine.VerbCheck && d.Allowed && d.ResetAfter > 0 {
					end := now + int64(d.ResetAfter)
					admitted[end] += max(d.Granted, op.Cost*float64(boolInt(op.Verb == engine.VerbAllow)))
					largest[end] = max(largest[end], limit)
					loose[end] = loose[end] || now < latest
				}
				latest = max(latest, now)

				switch r := rng.IntN(100); {
				case r < 8:
					limit = []float64{2, 5, 9}[rng.IntN(3)]
					model.SetLimit(limit)
				case r < 12:
					mock.Add(-time.Duration(rng.Int64N(int64(3 * time.Hour)))) // the clock steps back
				case r < 60:
					mock.Add(time.Duration(rng.Int64N(int64(time.Hour))))
				case r < 95:
					mock.Add(time.Duration(rng.Int64N(int64(p.Interval))))
				default:
					mock.Add(time.Duration(rng.Int64N(3 * p.Interval)))
				}
			}
			checked := 0
			for end, n := range admitted {
				if !loose[end] {
					require.LessOrEqual(t, n, largest[end], "admitted in the window to %v", time.Unix(0, end).In(loc))
					checked++
				}
			}
			require.Positive(t, checked, "windows whose bound holds")
		})
	}
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}
