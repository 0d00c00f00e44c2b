package main

import (
	"context"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"
)

// In a synctest bubble the clock is simulated: a minute of workers takes
// no real time, and the API sees the instants the limiter chose.

func TestLearningWorkersGetTheWholeHiddenLimitWithoutRefusals(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		api := newAPI()
		ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
		defer cancel()
		var out strings.Builder
		require.NoError(t, run(ctx, &out, api, 8, true))
		served, refused := api.tally()
		require.LessOrEqual(t, refused, 1, out.String())
		require.GreaterOrEqual(t, served, 570, "95 %% of 600: %s", out.String())
		require.LessOrEqual(t, served, 600)
		require.Contains(t, out.String(), "second 60:")
	})
}

func TestTheGuessAloneIsRefusedEveryWindow(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		api := newAPI()
		ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
		defer cancel()
		var out strings.Builder
		require.NoError(t, run(ctx, &out, api, 8, false))
		_, refused := api.tally()
		require.Greater(t, refused, 500, out.String())
	})
}
