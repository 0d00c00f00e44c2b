package redisstore_test

import (
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sluice-go/sluice"
	"github.com/sluice-go/sluice/internal/simclock"
	"github.com/sluice-go/sluice/internal/testserver"
	"github.com/sluice-go/sluice/redisstore"
	"github.com/sluice-go/sluice/sluicehttp"
)

// TestTransportsInTwoProcessesShareOnePaceThroughRedis is the job of
// sluicehttp's Transport, tried as a new user would: two processes, each
// with its own client of one Redis and three workers, call one API limited
// to 10 requests per second, and the API sees one request every 100 ms.
func TestTransportsInTwoProcessesShareOnePaceThroughRedis(t *testing.T) {
	addr := testserver.StartRedis(t).Addr
	start := time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)
	clock := simclock.New(start)
	const workers = 6
	arrivals := make(chan time.Duration, workers)
	api := roundTripper(func(*http.Request) (*http.Response, error) {
		arrivals <- clock.Now().Sub(start)
		return httptest.NewRecorder().Result(), nil
	})
	var wg sync.WaitGroup
	prefix := redisstore.WithPrefix("transport:" + t.Name() + ":") // the processes' one key space
	for range 2 {
		st := newStore(t, newClient(t, addr), prefix, redisstore.WithCallerClock(testSkew))
		lim, err := sluice.NewGCRA(sluice.PerSecond(10), 1, sluice.WithStore(st), sluice.WithClock(clock))
		require.NoError(t, err)
		tr, err := sluicehttp.NewTransport(api, lim)
		require.NoError(t, err)
		client := &http.Client{Transport: tr}
		for range workers / 2 {
			wg.Go(func() {
				resp, err := client.Get("https://api.example/v1/things")
				if err == nil {
					resp.Body.Close()
				}
				require.NoError(t, err)
			})
		}
	}
	// The first is sent at once; the others book their turns and sleep,
	// and each step of the clock wakes one, which is sent before the next.
	clock.WaitForSleepers(workers - 1)
	arrived := []time.Duration{<-arrivals}
	for range workers - 1 {
		clock.Add(100 * time.Millisecond)
		arrived = append(arrived, <-arrivals)
	}
	wg.Wait()
	want := make([]time.Duration, workers)
	for i := range want {
		want[i] = time.Duration(i) * 100 * time.Millisecond
	}
	require.Equal(t, want, arrived, "one request every 100 ms, from both processes")
}

// roundTripper is a function that is an http.RoundTripper: the API, served
// in process.
type roundTripper func(*http.Request) (*http.Response, error)

func (f roundTripper) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }
