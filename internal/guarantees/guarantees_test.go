package guarantees_test

import (
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sluice-go/sluice/engine"
	"github.com/sluice-go/sluice/internal/guarantees"
)

func TestMaxInWindowCountsEveryHalfOpenInterval(t *testing.T) {
	a := func(at int64, cost float64) guarantees.Admission { return guarantees.Admission{Time: at, Cost: cost} }
	tests := map[string]struct {
		admitted []guarantees.Admission
		d        int64
		want     float64
	}{
		"nothing admitted":                   {nil, 10, 0},
		"one instant":                        {[]guarantees.Admission{a(5, 1), a(5, 2)}, 1, 3},
		"the end is excluded":                {[]guarantees.Admission{a(0, 1), a(10, 1)}, 10, 1},
		"one nanosecond more includes it":    {[]guarantees.Admission{a(0, 1), a(10, 1)}, 11, 2},
		"the best interval starts later":     {[]guarantees.Admission{a(0, 1), a(7, 2), a(12, 2), a(16, 1)}, 10, 5},
		"unsorted input":                     {[]guarantees.Admission{a(16, 1), a(0, 1), a(12, 2), a(7, 2)}, 10, 5},
		"across a boundary":                  {[]guarantees.Admission{a(999, 5), a(1000, 5), a(1999, 5)}, 1000, 10},
		"fractional costs add up":            {[]guarantees.Admission{a(1, 0.25), a(2, 0.5), a(3, 0.125)}, 3, 0.875},
		"a long gap separates two intervals": {[]guarantees.Admission{a(0, 3), a(1, 3), a(1e18, 4)}, 1e9, 6},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			require.Equal(t, tt.want, guarantees.MaxInWindow(tt.admitted, tt.d))
		})
	}
}

func TestReplaceRewritesOnlyBetweenTheMarkers(t *testing.T) {
	readme := "# Title\n\nintro\n\n" + guarantees.BeginMarker + "\nold table\n" + guarantees.EndMarker + "\n\n## After\n"
	got := string(guarantees.Replace([]byte(readme), "new table\n"))
	require.Equal(t, "# Title\n\nintro\n\n"+guarantees.BeginMarker+"\nnew table\n"+guarantees.EndMarker+"\n\n## After\n", got)
	section, err := guarantees.Section([]byte(got))
	require.NoError(t, err)
	require.Equal(t, "new table\n", section)
}

func TestReplaceAddsMissingMarkersAtTheEnd(t *testing.T) {
	got := guarantees.Replace([]byte("# Title\n"), "table\n")
	require.Equal(t, "# Title\n\n"+guarantees.BeginMarker+"\ntable\n"+guarantees.EndMarker+"\n", string(got))
	_, err := guarantees.Section([]byte("# Title\n"))
	require.ErrorIs(t, err, guarantees.ErrNoMarkers)
}

// TestREADMEShowsTheMeasuredGuarantees requires the README's table to be
// the one the algorithms give today.
func TestREADMEShowsTheMeasuredGuarantees(t *testing.T) {
	const fix = "run `go run ./internal/guarantees/cmd/table -update` from the repository root"
	rows, err := guarantees.Table()
	require.NoError(t, err)
	readme, err := os.ReadFile("../../README.md")
	require.NoError(t, err)
	section, err := guarantees.Section(readme)
	require.NoError(t, err, "README.md needs the lines %s and %s around the table of guarantees: %s to add them",
		guarantees.BeginMarker, guarantees.EndMarker, fix)
	require.Equal(t, guarantees.Markdown(rows), section, "README.md's table of guarantees is out of date: %s", fix)
}

// TestKeyCountsEachAdmissionWhenItsCallerActs follows a GCRA of 10/s with
// bursts of 5 (T = 100ms, tau = 500ms) by hand: admissions count at now,
// reservations at their booked instant, partial grants for what they
// granted, and a cancel that gives a reservation back removes it (and
// frees its instant a nanosecond late).
func TestKeyCountsEachAdmissionWhenItsCallerActs(t *testing.T) {
	const ms = int64(time.Millisecond)
	t0 := time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC).UnixNano()
	p := engine.Params{Kind: engine.KindGCRA, Limit: 5, Interval: 100 * ms}
	k := guarantees.NewKey(p)
	for range 5 {
		d, err := k.Apply(engine.VerbAllow, t0, 1)
		require.NoError(t, err)
		require.True(t, d.Allowed)
	}
	_, first, err := k.Reserve(t0, 1, int64(time.Second))
	require.NoError(t, err)
	_, second, err := k.Reserve(t0, 1, int64(time.Second))
	require.NoError(t, err)
	require.Equal(t, []int64{t0 + 100*ms, t0 + 200*ms}, []int64{k.Bookings()[first].Acts, k.Bookings()[second].Acts})
	_, none, err := k.Reserve(t0, 1, 250*ms) // would act at 300ms
	require.NoError(t, err)
	require.Equal(t, -1, none)
	d, err := k.Cancel(t0, second)
	require.NoError(t, err)
	require.True(t, d.Allowed, "the latest booking is given back")
	_, third, err := k.Reserve(t0, 1, int64(time.Second))
	require.NoError(t, err)
	// Given back a nanosecond late, the instant is booked again then.
	require.Equal(t, t0+200*ms+1, k.Bookings()[third].Acts, "the instant given back is booked again")
	d, err = k.AllowAtMost(t0+300*ms+1, 3) // a backlog of 4 units: one more fits
	require.NoError(t, err)
	require.Equal(t, 1.0, d.Granted)
	_, err = k.Cancel(t0, 0)
	require.Error(t, err, "an admission that did not wait has no instant to cancel")

	a := func(at int64, cost float64) guarantees.Admission { return guarantees.Admission{Time: at, Cost: cost} }
	require.Equal(t, []guarantees.Admission{
		a(t0, 1), a(t0, 1), a(t0, 1), a(t0, 1), a(t0, 1),
		a(t0+100*ms, 1), a(t0+200*ms+1, 1), a(t0+300*ms+1, 1),
	}, k.Admitted())
	require.True(t, k.Bookings()[second].GivenBack)
	require.Zero(t, k.Regiven())
	require.Equal(t, 6.0, guarantees.MaxInWindow(k.Admitted(), 100*ms+1), "5 at once and one 100ms later")
}
