package redisstore_test

import (
	"context"
	"net/http"
	"strconv"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sluice-go/sluice"
	"github.com/sluice-go/sluice/engine"
	"github.com/sluice-go/sluice/internal/standin"
	"github.com/sluice-go/sluice/internal/testserver"
	"github.com/sluice-go/sluice/redisstore"
	"github.com/sluice-go/sluice/sluicehttp"
)

// TestLearningTransportsInThreeProcessesFollowHiddenLimitsThroughRedis is
// the job of sluicehttp's learning Transport, tried as a new user would:
// three processes, each with its own client of one Redis and 17 workers
// (50 in all), call an API 50 ms away whose limit they are not told, 600
// requests a minute (and for the LLM API 30,000 tokens a minute), from
// limiters configured for twice that; in the sixth minute the API halves
// its limits. After a minute of learning, and another after the change,
// every minute serves at least 90 % of the limit, never more, with at most
// the stated refusals. Time is the test's bubble's, so that ten minutes
// take seconds; every decision is a real round trip to Redis.
func TestLearningTransportsInThreeProcessesFollowHiddenLimitsThroughRedis(t *testing.T) {
	addr := testserver.StartRedis(t).Addr
	const limit, tokenLimit = 600, 30_000
	for _, tc := range []struct {
		name     string
		style    standin.Style
		refusals int // at most, in any minute
		tokens   bool
	}{
		{"x-ratelimit", standin.XRateLimit, 1, false},
		{"retry-after", standin.RetryAfter, 9, false}, // at most three a process: see sluicehttp's test
		{"llm", standin.LLM, 1, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				api := standin.New(tc.style, limit, tokenLimit, time.Minute, 50*time.Millisecond)
				prefix := redisstore.WithPrefix("learn:" + t.Name() + ":") // the processes' one key space
				clients := make([]*http.Client, 3)
				for i := range clients {
					st := newStore(t, newClient(t, addr), prefix, redisstore.WithCallerClock(testSkew))
					clients[i] = &http.Client{Transport: learningTransport(t, st, api, tc.tokens)}
				}
				var tokens func(n int) float64
				if tc.tokens {
					tokens = func(n int) float64 { return float64(50 + n*37%51) }
				}
				time.AfterFunc(5*time.Minute, func() { api.SetLimit(limit/2, tokenLimit/2) })
				ctx, cancel := context.WithTimeout(t.Context(), 10*time.Minute)
				defer cancel()
				require.NoError(t, standin.Drive(ctx, clients, 17, tokens))

				ts := api.Windows(10)
				t.Logf("per minute: %+v", ts)
				for i, m := range ts {
					served, whole := float64(m.Served), float64(limit)
					if tc.tokens {
						served, whole = m.Tokens, tokenLimit
					}
					if i >= 5 {
						whole /= 2
					}
					require.LessOrEqual(t, m.Refused, tc.refusals, "minute %d: %+v", i, m)
					require.LessOrEqual(t, served, whole, "minute %d: %+v", i, m)
					if i != 0 && i != 5 {
						require.GreaterOrEqual(t, served, 0.9*whole, "minute %d: %+v", i, m)
					}
				}
			})
		})
	}
}

// learningTransport is one process's transport: 20 requests a second
// (and 2,000 tokens a second for an LLM API) on st, learning from api.
func learningTransport(t *testing.T, st engine.Store, api http.RoundTripper, tokens bool) http.RoundTripper {
	if tokens {
		lim, err := sluice.NewTokenBucket(sluice.PerSecond(2000), 2000, sluice.WithStore(st))
		require.NoError(t, err)
		api, err = sluicehttp.NewTransport(api, lim, sluicehttp.LearnTokens(),
			sluicehttp.WithPaceKey(func(*http.Request) (string, error) { return "tokens", nil }),
			sluicehttp.WithPaceCost(func(r *http.Request) (float64, error) {
				return strconv.ParseFloat(r.Header.Get(standin.TokensHeader), 64)
			}))
		require.NoError(t, err)
	}
	lim, err := sluice.NewGCRA(sluice.PerSecond(20), 5, sluice.WithStore(st))
	require.NoError(t, err)
	tr, err := sluicehttp.NewTransport(api, lim, sluicehttp.Learn())
	require.NoError(t, err)
	return tr
}
