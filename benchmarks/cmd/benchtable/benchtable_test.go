package main

import (
	"math"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// input is benchstat -col /lib -format csv output in miniature.
const input = `goos: linux
goarch: amd64
pkg: github.com/sluice-go/sluice/benchmarks
cpu: AMD EPYC
,sluice,,xrate-single,,,,throttled,,,,redis_rate,,,
,sec/op,CI,sec/op,CI,vs base,P,sec/op,CI,vs base,P,sec/op,CI,vs base,P
Allow/path=admit/keys=1/mode=seq-2,2e-08,3%,1e-08,2%,-50.00%,p=0.002 n=6,6e-08,1%,+200.00%,p=0.002 n=6,,,,
Memory-2,0.5,1%,,,,,0.4,2%,-20.00%,p=0.002 n=6,,,,
Redis/path=admit/mode=seq-2,5e-05,1%,,,,,,,,,4e-05,2%,-20.00%,p=0.002 n=6
geomean,1e-06,,1e-06,,-1%,,1e-06,,+1%,,,,,

,sluice,,throttled,,,
,bytes/key,CI,bytes/key,CI,vs base,P
Memory-2,50,0%,64,0%,+28.00%,p=0.002 n=6
`

func TestParseReadsEachLibrarysMedian(t *testing.T) {
	tables, err := parse(strings.NewReader(input))
	require.NoError(t, err)
	require.Len(t, tables, 2)

	require.Equal(t, "sec/op", tables[0].unit)
	require.Equal(t, []string{"sluice", "xrate-single", "throttled", "redis_rate"}, tables[0].libs)
	require.Len(t, tables[0].rows, 3, "the geomean row is skipped")
	first := tables[0].rows[0]
	require.Equal(t, "Allow/path=admit/keys=1/mode=seq-2", first.name)
	require.Equal(t, []float64{2e-8, 1e-8, 6e-8}, first.values[:3])
	require.True(t, math.IsNaN(first.values[3]), "a library that did not run the benchmark has no value")

	require.Equal(t, "bytes/key", tables[1].unit)
	require.Equal(t, []float64{50, 64}, tables[1].rows[0].values)
}

func TestParseRejectsMalformedInput(t *testing.T) {
	for _, tc := range []struct {
		name, input string
	}{
		{"row before any table", "Allow/x-2,1e-08,1%\n"},
		{"value that is not a number", ",sluice,\n,sec/op,CI\nAllow/x-2,fast,1%\n"},
		{"units record shorter than its libraries", ",,sluice\n,sec/op\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := parse(strings.NewReader(tc.input))
			require.Error(t, err)
		})
	}
}

func TestRenderGivesEachPeersRatioToTheBase(t *testing.T) {
	var out strings.Builder
	require.NoError(t, run(strings.NewReader(input), &out, "sluice", []string{"xrate-single"}))
	md := out.String()

	// The floor gets a ratio but is not the best peer; a library that ran
	// none of a section's benchmarks gets no column.
	require.Contains(t, md, "| path / keys / mode | sluice | xrate-single | throttled | best peer ÷ sluice |\n")
	require.Contains(t, md, "| admit / 1 / seq | 20.0 ns | 10.0 ns (0.50×) | 60.0 ns (3.00×) | 3.00× |\n")
	require.Contains(t, md, "| path / mode | sluice | redis_rate | best peer ÷ sluice |\n")
	require.Contains(t, md, "| admit / seq | 50.0 µs | 40.0 µs (0.80×) | 0.80× |\n")
	require.Contains(t, md, "| all | 50 | 64 (1.28×) | 1.28× |\n")
	require.NotContains(t, md, "| all | 500 ms", "the Memory benchmark's time per 1,000,000 keys is not shown")
}

func TestRenderNamesWhatAReserveOpIs(t *testing.T) {
	const reserve = `,sluice,,xrate-map,,,,xrate-single,,,
,sec/op,CI,sec/op,CI,vs base,P,sec/op,CI,vs base,P
Reserve/keys=1/mode=seq-2,1e-07,2%,,,,,8e-08,3%,-20.00%,p=0.002 n=6
Reserve/keys=10000/mode=seq-2,1.2e-07,2%,1.8e-07,2%,+50.00%,p=0.002 n=6,,,,
`
	var out strings.Builder
	require.NoError(t, run(strings.NewReader(reserve), &out, "sluice", []string{"xrate-single"}))
	md := out.String()
	require.Contains(t, md, "### In memory: a turn booked ahead on an existing key, and given back\n")
	require.Contains(t, md, "Time per turn (sec/op)\n")
	require.Contains(t, md, "| 10000 / seq | 120 ns | 180 ns (1.50×) |  | 1.50× |\n")
}

func TestRunRejectsInputWithoutTables(t *testing.T) {
	require.Error(t, run(strings.NewReader("goos: linux\n"), &strings.Builder{}, "sluice", nil))
}

func TestFormatPicksReadableUnits(t *testing.T) {
	for _, tc := range []struct {
		v    float64
		unit string
		want string
	}{
		{25.04e-9, "sec/op", "25.0 ns"},
		{1234e-9, "sec/op", "1.23 µs"},
		{52e-3, "sec/op", "52.0 ms"},
		{1950, "ns/new-key", "1.95 µs"},
		{0, "B/op", "0"},
		{2, "allocs/op", "2"},
		{0.5, "errors/op", "0.5"},
		{134.06, "bytes/key", "134"},
		{math.NaN(), "B/op", ""},
	} {
		require.Equal(t, tc.want, format(tc.v, tc.unit), "%v %s", tc.v, tc.unit)
	}
}

func TestSplitListDropsEmptyItems(t *testing.T) {
	require.Equal(t, []string{"a", "b"}, splitList(" a,,b ,"))
	require.Empty(t, splitList(""))
}
