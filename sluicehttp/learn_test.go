package sluicehttp_test

import (
	"context"
	"net/http"
	"strconv"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sluice-go/sluice"
	"github.com/sluice-go/sluice/engine"
	"github.com/sluice-go/sluice/internal/standin"
	"github.com/sluice-go/sluice/sluicehttp"
)

// fleet is workers in processes calling one API: each process a
// transport of its own, with limiters of its own on one shared store.
type fleet struct {
	processes, workers int
	// transport returns a process's transport on st.
	transport func(t *testing.T, st engine.Store, api http.RoundTripper) http.RoundTripper
	// tokens returns the tokens of a worker's n-th request, for an LLM
	// API; nil for none.
	tokens func(n int) float64
}

// run sends requests to api from every worker until d has passed.
func (f fleet) run(t *testing.T, api *standin.API, d time.Duration) {
	st := sluice.NewMemStore(sluice.MemStoreConfig{})
	defer st.Close()
	ctx, cancel := context.WithTimeout(t.Context(), d)
	defer cancel()
	clients := make([]*http.Client, f.processes)
	for i := range clients {
		clients[i] = &http.Client{Transport: f.transport(t, st, api)}
	}
	require.NoError(t, standin.Drive(ctx, clients, f.workers, f.tokens))
}

// learning returns a process's transport: a GCRA of rate with a burst
// of 5, learning from the API's answers.
func learning(rate sluice.Rate) func(t *testing.T, st engine.Store, api http.RoundTripper) http.RoundTripper {
	return func(t *testing.T, st engine.Store, api http.RoundTripper) http.RoundTripper {
		lim, err := sluice.NewGCRA(rate, 5, sluice.WithStore(st))
		require.NoError(t, err)
		tr, err := sluicehttp.NewTransport(api, lim, sluicehttp.Learn())
		require.NoError(t, err)
		return tr
	}
}

// requireLearned checks every minute of ts: at most refusals 429s in each,
// and in each but the learning ones (the first, and the first after the
// limit changed, in which the workers' booked turns are re-timed to the
// new pace) at least 90 % of the limit served; never more than the limit.
func requireLearned(t *testing.T, ts []standin.Tally, limit func(minute int) float64, served func(standin.Tally) float64, refusals int) {
	t.Helper()
	for i, m := range ts {
		require.LessOrEqual(t, m.Refused, refusals, "minute %d: %+v", i, m)
		require.LessOrEqual(t, served(m), limit(i), "minute %d: %+v", i, m)
		if i != 0 && i != halvedAt {
			require.GreaterOrEqual(t, served(m), 0.9*limit(i), "minute %d: %+v", i, m)
		}
	}
}

// The stand-in APIs hide a limit of 600 requests a minute (10 a second)
// from clients configured for 20 a second, and halve it in the sixth
// minute. 50 workers in 3 processes call them, 50 ms away.
const (
	hiddenLimit = 600
	halvedAt    = 5
	latency     = 50 * time.Millisecond
)

var threeProcesses = fleet{processes: 3, workers: 17}

// halved returns the limit in a minute: whole, then halved.
func halved(whole float64) func(minute int) float64 {
	return func(minute int) float64 {
		if minute >= halvedAt {
			return whole / 2
		}
		return whole
	}
}

func requests(m standin.Tally) float64 { return float64(m.Served) }

// runHalved runs f against api for ten minutes, halving its limits in
// the sixth, and returns the tally of each minute.
func runHalved(t *testing.T, f fleet, api *standin.API, limit, tokens float64) []standin.Tally {
	time.AfterFunc(halvedAt*time.Minute, func() { api.SetLimit(limit/2, tokens/2) })
	f.run(t, api, 10*time.Minute)
	ts := api.Windows(10)
	t.Logf("per minute: %+v", ts)
	return ts
}

func TestLearningTransportFollowsTheAnswersOfAHiddenLimit(t *testing.T) {
	for _, tc := range []struct {
		name     string
		style    standin.Style
		refusals int // at most, in any minute
	}{
		{"x-ratelimit-fields", standin.XRateLimit, 1},
		// The first refusal holds every process back at once; a process's
		// turns booked before it still go, until one is refused: 3 to 6
		// refusals a minute measured, at most three a process asserted.
		{"retry-after-alone", standin.RetryAfter, 3 * threeProcesses.processes},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				api := standin.New(tc.style, hiddenLimit, 0, time.Minute, latency)
				f := threeProcesses
				f.transport = learning(sluice.PerSecond(20))
				ts := runHalved(t, f, api, hiddenLimit, 0)
				requireLearned(t, ts, halved(hiddenLimit), requests, tc.refusals)
			})
		})
	}
}

func TestLearningTransportsFollowAnLLMAPIsRequestsAndTokens(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		// 600 requests and 30,000 tokens a minute: prompts of 50 to 100
		// tokens make the tokens bind first.
		const tokenLimit = 30_000
		api := standin.New(standin.LLM, hiddenLimit, tokenLimit, time.Minute, latency)
		f := threeProcesses
		f.tokens = func(n int) float64 { return float64(50 + n*37%51) }
		f.transport = func(t *testing.T, st engine.Store, api http.RoundTripper) http.RoundTripper {
			tokens, err := sluice.NewTokenBucket(sluice.PerSecond(2000), 2000, sluice.WithStore(st))
			require.NoError(t, err)
			inner, err := sluicehttp.NewTransport(api, tokens, sluicehttp.LearnTokens(),
				sluicehttp.WithPaceKey(func(*http.Request) (string, error) { return "tokens", nil }),
				sluicehttp.WithPaceCost(func(r *http.Request) (float64, error) {
					return strconv.ParseFloat(r.Header.Get(standin.TokensHeader), 64)
				}))
			require.NoError(t, err)
			return learning(sluice.PerSecond(20))(t, st, inner)
		}
		ts := runHalved(t, f, api, hiddenLimit, tokenLimit)
		requireLearned(t, ts, halved(tokenLimit), func(m standin.Tally) float64 { return m.Tokens }, 1)
	})
}

func TestLearningTransportBacksOffAndProbesASilentAPI(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		api := standin.New(standin.Silent, hiddenLimit, 0, time.Minute, latency)
		f := threeProcesses
		f.transport = learning(sluice.PerSecond(20))
		ts := runHalved(t, f, api, hiddenLimit, 0)
		// A silent API's window, once spent, refuses every request until
		// it ends: each process probes it after holds of 1, 2, 4, 8... s,
		// halving its pace each time, and regains 1/64 of the configured
		// rate a second: at most 15 refusals a process a minute (measured:
		// 8 to 33 in all, 43 in the first minute, under -race).
		for i, m := range ts {
			require.LessOrEqual(t, m.Refused, 15*threeProcesses.processes, "minute %d: %+v", i, m)
			if i > 0 {
				require.GreaterOrEqual(t, requests(m), 0.9*halved(hiddenLimit)(i), "minute %d: %+v", i, m)
			}
		}
	})
}

// hostile is an API that never refuses and answers with fields that lie:
// remaining counts and resets of every shape, out of range or malformed.
type hostile struct {
	mu      sync.Mutex
	n       int
	arrived []time.Time
}

var lies = [][2]string{
	{"X-RateLimit-Remaining", "1e308"}, {"X-RateLimit-Reset", "-5"},
	{"X-RateLimit-Remaining", "NaN"}, {"X-RateLimit-Reset", "Inf"},
	{"RateLimit", `"a";r=99999999999999999;t=0`}, {"RateLimit", `"a";r=-1;t=-1`},
	{"x-ratelimit-remaining-requests", "1e400"}, {"x-ratelimit-reset-requests", "-6m0s"},
	{"Retry-After", "-1"}, {"RateLimit", "limit=1, remaining=1e9, reset=0"},
	{"X-RateLimit-Remaining", "0x7fffffff"}, {"X-RateLimit-Reset-After", "1e-300"},
}

func (h *hostile) RoundTrip(r *http.Request) (*http.Response, error) {
	h.mu.Lock()
	h.arrived = append(h.arrived, time.Now())
	lie := lies[h.n%len(lies)]
	h.n++
	h.mu.Unlock()
	resp := &http.Response{StatusCode: http.StatusOK, Header: http.Header{}, Body: http.NoBody, Request: r}
	resp.Header.Set(lie[0], lie[1])
	return resp, nil
}

func TestHostileAnswersNeverRaiseThePaceAboveTheLimiters(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		api := &hostile{}
		lim, err := sluice.NewGCRA(sluice.PerSecond(10), 1)
		require.NoError(t, err)
		tr, err := sluicehttp.NewTransport(api, lim, sluicehttp.Learn())
		require.NoError(t, err)
		client := &http.Client{Transport: tr}
		start := time.Now()
		ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
		defer cancel()
		var workers sync.WaitGroup
		for range 8 {
			workers.Go(func() {
				for send(ctx, client, "/v1/things") == nil {
				}
			})
		}
		workers.Wait()
		for i, at := range api.arrived {
			require.GreaterOrEqual(t, at.Sub(start), time.Duration(i)*100*time.Millisecond, "request %d sent before its turn", i)
		}
		require.Greater(t, len(api.arrived), 590, "and none held back")
	})
}

// refusing answers every request with 429 and a Retry-After of ten years.
func refusing(r *http.Request) (*http.Response, error) {
	resp := &http.Response{StatusCode: http.StatusTooManyRequests, Header: http.Header{}, Body: http.NoBody, Request: r}
	resp.Header.Set("Retry-After", "315360000")
	return resp, nil
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

func TestARetryAfterHoldsBackNoLongerThanTheMaxHold(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		lim, err := sluice.NewGCRA(sluice.PerSecond(10), 1)
		require.NoError(t, err)
		tr, err := sluicehttp.NewTransport(roundTripFunc(refusing), lim, sluicehttp.Learn(), sluicehttp.WithMaxHold(time.Minute))
		require.NoError(t, err)
		client := &http.Client{Transport: tr}
		start := time.Now()
		require.NoError(t, send(t.Context(), client, "/"))
		require.NoError(t, send(t.Context(), client, "/"))
		waited := time.Since(start)
		require.GreaterOrEqual(t, waited, time.Minute, "held back")
		require.Less(t, waited, time.Minute+time.Second, "for the max hold only")

		require.NoError(t, send(t.Context(), client, "/"), "held back again, once")
		asked := time.Now()
		ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
		defer cancel()
		err = send(ctx, client, "/")
		require.ErrorIs(t, err, context.DeadlineExceeded, "a request that cannot be sent before its deadline fails at once")
		require.ErrorContains(t, err, "sluice: wait would exceed context deadline")
		require.Zero(t, time.Since(asked), "without waiting")
	})
}

func TestLearnRefusesWhatItCannotFollow(t *testing.T) {
	gcra, err := sluice.NewGCRA(sluice.PerSecond(10), 1)
	require.NoError(t, err)
	window, err := sluice.NewFixedWindow(10, time.Second)
	require.NoError(t, err)
	g, err := sluice.NewGroup(gcra)
	require.NoError(t, err)
	keys := func(*http.Request) ([]string, error) { return []string{"k"}, nil }
	for _, tc := range []struct {
		name  string
		build func() (*sluicehttp.Transport, error)
		want  error
	}{
		{"a window", func() (*sluicehttp.Transport, error) {
			return sluicehttp.NewTransport(nil, window, sluicehttp.Learn())
		}, sluice.ErrUnsupported},
		{"a group", func() (*sluicehttp.Transport, error) {
			return sluicehttp.NewGroupTransport(nil, g, keys, sluicehttp.Learn())
		}, sluice.ErrInvalidConfig},
		{"a max hold without learning", func() (*sluicehttp.Transport, error) {
			return sluicehttp.NewTransport(nil, gcra, sluicehttp.WithMaxHold(time.Hour))
		}, sluice.ErrInvalidConfig},
		{"a max hold of zero", func() (*sluicehttp.Transport, error) {
			return sluicehttp.NewTransport(nil, gcra, sluicehttp.Learn(), sluicehttp.WithMaxHold(0))
		}, sluice.ErrInvalidConfig},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := tc.build()
			require.ErrorIs(t, err, tc.want)
		})
	}
}
