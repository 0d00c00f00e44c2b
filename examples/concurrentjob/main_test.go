package main

import (
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"
)

// In a synctest bubble the system clock is simulated: time moves only when
// every goroutine waits, so the calls take no real time and the API sees
// the exact instants the limits chose.

func TestWorkersStayWithinBothLimitsOfThePlan(t *testing.T) {
	for _, workers := range []int{1, 2, 6, 16} {
		t.Run("", func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				var out strings.Builder
				require.NoError(t, run(t.Context(), 24, workers, &out))
				require.Contains(t, out.String(), "24 jobs in ")
				require.Contains(t, out.String(), "24 calls, 0 refused")
				require.Equal(t, 24, strings.Count(out.String(), " calls for job "))
			})
		})
	}
}

func TestConcurrencyBindsWhenCallsAreSlow(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		limits, err := newLimits()
		require.NoError(t, err)
		api := &thirdPartyAPI{concurrent: apiConcurrent, rate: apiRate, window: apiWindow, latency: apiLatency}
		start := time.Now()
		require.NoError(t, drain(t.Context(), limits, api, 12, 6, &strings.Builder{}, start))
		calls, refused, busiest, most := api.stats()
		require.Equal(t, 12, calls)
		require.Zero(t, refused)
		require.Equal(t, apiConcurrent, busiest, "two at once, never more")
		require.LessOrEqual(t, most, apiRate)
		// Two slots, 700 ms a call, the second of each pair 210 ms after
		// the first: six rounds of 700 ms, the last ending 210 ms late.
		require.Equal(t, 6*apiLatency+210*time.Millisecond, time.Since(start))
	})
}

func TestRateBindsWhenCallsAreFast(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		limits, err := newLimits()
		require.NoError(t, err)
		api := &thirdPartyAPI{concurrent: apiConcurrent, rate: apiRate, window: apiWindow, latency: time.Millisecond}
		start := time.Now()
		require.NoError(t, drain(t.Context(), limits, api, 20, 6, &strings.Builder{}, start))
		calls, refused, busiest, most := api.stats()
		require.Equal(t, 20, calls)
		require.Zero(t, refused)
		require.Equal(t, 1, busiest, "each call is over before the rate admits the next")
		require.Equal(t, apiRate, most, "paced just under the rate, never over it")
		require.Equal(t, 19*210*time.Millisecond+time.Millisecond, time.Since(start))
	})
}
