package vectors

import (
	"encoding/json"
	"math"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestNumbersReadBackBitForBit pins the file's floats: what Marshal
// writes parses back to the same bits, for the values JSON numbers
// cannot hold too.
func TestNumbersReadBackBitForBit(t *testing.T) {
	for _, tc := range []struct {
		f    float64
		json string
	}{
		{1, `1`},
		{2.5, `2.5`},
		{math.Nextafter(4, 5), `4.000000000000001`},
		{math.Copysign(0, -1), `-0`},
		{math.SmallestNonzeroFloat64, `5e-324`},
		{-math.MaxFloat64, `-1.7976931348623157e+308`},
		{math.Inf(1), `"+Inf"`},
		{math.Inf(-1), `"-Inf"`},
		{math.NaN(), `"NaN"`},
	} {
		t.Run(tc.json, func(t *testing.T) {
			got, err := json.Marshal(number(tc.f))
			require.NoError(t, err)
			require.Equal(t, tc.json, string(got))
			var back number
			require.NoError(t, json.Unmarshal(got, &back))
			require.Equal(t, math.Float64bits(tc.f), math.Float64bits(float64(back)))
		})
	}
	require.False(t, number(math.Copysign(0, -1)).IsZero(), "-0 is written, not left out as +0 is")
	require.True(t, number(0).IsZero())
}

// TestFileReadsBackAsWritten requires the file Marshal writes to read back
// as the cases written, a step's own Params included, and a step under
// the case's Params to be written without them.
func TestFileReadsBackAsWritten(t *testing.T) {
	cases := Generate()
	data, err := Marshal(cases)
	require.NoError(t, err)
	back, err := Unmarshal(data)
	require.NoError(t, err)
	again, err := Marshal(back)
	require.NoError(t, err)
	require.Equal(t, string(data), string(again))

	own := 0
	require.Len(t, back, len(cases))
	for i, c := range cases {
		require.Equal(t, c.Params, back[i].Params, c.Name)
		require.Len(t, back[i].Steps, len(c.Steps), c.Name)
		for j, s := range c.Steps {
			require.Equal(t, s.Params, back[i].Steps[j].Params, "%s, op %d", c.Name, j)
			if s.Params != nil {
				own++
				require.NotEqual(t, c.Params, *s.Params, "%s, op %d: the case's Params, written again", c.Name, j)
			}
		}
	}
	require.NotZero(t, own, "no step runs under Params of its own")
}
