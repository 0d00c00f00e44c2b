package evict_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/sluice-go/sluice/internal/evict"
)

// ends judges entries by their end against now 10, pinning negative ones.
func ends(end int64) (int64, bool, bool) { return end, end <= 10, end < 0 }

func TestSampleDeletesTheDueOrTheSoonestAndNeverThePinned(t *testing.T) {
	for name, tc := range map[string]struct {
		m    map[string]int64
		want []string // the keys left
	}{
		"the due go, the others stay": {map[string]int64{"a": 5, "b": 20, "c": 10}, []string{"b"}},
		"none due: the soonest goes":  {map[string]int64{"a": 30, "": 20, "c": 40}, []string{"a", "c"}},
		"pinned: never":               {map[string]int64{"a": -1, "b": 50}, []string{"a"}},
		"all pinned: nothing goes":    {map[string]int64{"a": -1, "b": -2}, []string{"a", "b"}},
	} {
		t.Run(name, func(t *testing.T) {
			evict.Sample(tc.m, len(tc.m), ends)
			var left []string
			for k := range tc.m {
				left = append(left, k)
			}
			require.ElementsMatch(t, tc.want, left)
		})
	}
}
