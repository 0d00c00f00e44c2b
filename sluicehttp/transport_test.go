package sluicehttp_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sluice-go/sluice"
	"github.com/sluice-go/sluice/sluicehttp"
)

// api is a stand-in for a third party's API, served in process: it records
// when each request arrived, by path.
type api struct {
	mu      sync.Mutex
	arrived map[string][]time.Time
}

func newAPI() *api { return &api{arrived: map[string][]time.Time{}} }

// RoundTrip serves r as the API's server would: it implements
// http.RoundTripper, the transport the paced one sends with.
func (a *api) RoundTrip(r *http.Request) (*http.Response, error) {
	a.mu.Lock()
	a.arrived[r.URL.Path] = append(a.arrived[r.URL.Path], time.Now())
	a.mu.Unlock()
	rec := httptest.NewRecorder()
	rec.WriteString("ok")
	return rec.Result(), nil
}

// times returns the arrivals on path, in order, from start.
func (a *api) times(path string, start time.Time) []time.Duration {
	a.mu.Lock()
	defer a.mu.Unlock()
	var ds []time.Duration
	for _, t := range a.arrived[path] {
		ds = append(ds, t.Sub(start))
	}
	slices.Sort(ds)
	return ds
}

// send sends a GET of path through c, and reads the response.
func send(ctx context.Context, c *http.Client, path string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "https://api.example"+path, nil)
	if err != nil {
		return err
	}
	resp, err := c.Do(req)
	if err != nil {
		return err
	}
	_, err = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return err
}

// every returns n instants from the start, step apart.
func every(n int, step time.Duration) []time.Duration {
	ds := make([]time.Duration, n)
	for i := range ds {
		ds[i] = time.Duration(i) * step
	}
	return ds
}

func TestTransportsSharingAStorePaceEveryWorkerToOneRate(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		server := newAPI()
		st := sluice.NewMemStore(sluice.MemStoreConfig{})
		defer st.Close()
		start := time.Now()
		// Three processes, each with its limiter on the shared store, and
		// four workers in each.
		var workers sync.WaitGroup
		for range 3 {
			lim, err := sluice.NewGCRA(sluice.PerSecond(10), 1, sluice.WithStore(st))
			require.NoError(t, err)
			tr, err := sluicehttp.NewTransport(server, lim)
			require.NoError(t, err)
			client := &http.Client{Transport: tr}
			for range 4 {
				workers.Go(func() {
					for range 2 {
						require.NoError(t, send(t.Context(), client, "/v1/things"))
					}
				})
			}
		}
		workers.Wait()
		require.Equal(t, every(24, 100*time.Millisecond), server.times("/v1/things", start), "one request every 100 ms, never two at once")
	})
}

func TestTransportFailsARequestThatCannotBeSentBeforeItsDeadlineWithoutSendingIt(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		server := newAPI()
		lim, err := sluice.NewGCRA(sluice.PerSecond(1), 1)
		require.NoError(t, err)
		tr, err := sluicehttp.NewTransport(server, lim)
		require.NoError(t, err)
		client := &http.Client{Transport: tr}
		require.NoError(t, send(t.Context(), client, "/v1/things"))

		ctx, cancel := context.WithTimeout(t.Context(), 500*time.Millisecond) // the next turn is a second away
		defer cancel()
		body := &closeCounter{Reader: strings.NewReader("payload")}
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, "https://api.example/v1/things", body)
		require.NoError(t, err)
		began := time.Now()
		_, err = client.Do(req)
		require.ErrorIs(t, err, context.DeadlineExceeded)
		require.ErrorContains(t, err, "sluice: wait would exceed context deadline", "not the deadline itself, which has not passed")
		require.Zero(t, time.Since(began), "failed at once")
		require.Len(t, server.times("/v1/things", began), 1, "not sent")
		require.Equal(t, int32(1), body.closed.Load(), "its body closed")

		// A request whose context ends while it waits gives its turn back.
		ctx, cancel = context.WithCancel(t.Context())
		done := make(chan error)
		go func() { done <- send(ctx, client, "/v1/things") }()
		synctest.Wait() // booked for a second from the start, asleep
		cancel()
		require.ErrorIs(t, <-done, context.Canceled)
		require.NoError(t, send(t.Context(), client, "/v1/things"))
		// A cancel leaves the key on the line it would have followed, a
		// nanosecond later (see "Clocks that step back" in package engine).
		require.Equal(t, []time.Duration{0, time.Second + 1}, server.times("/v1/things", began), "the turn given back was taken")
	})
}

// closeCounter is a request body that counts its closes.
type closeCounter struct {
	io.Reader
	closed atomic.Int32
}

func (c *closeCounter) Close() error {
	c.closed.Add(1)
	return nil
}

func TestTransportPacesEachRouteOnItsOwnWithPaceByRoute(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		server := newAPI()
		lim, err := sluice.NewGCRA(sluice.PerSecond(2), 1)
		require.NoError(t, err)
		tr, err := sluicehttp.NewTransport(server, lim, sluicehttp.PaceByRoute())
		require.NoError(t, err)
		client := &http.Client{Transport: tr}
		start := time.Now()
		var workers sync.WaitGroup
		for _, path := range []string{"/a", "/b"} {
			workers.Go(func() {
				for range 3 {
					require.NoError(t, send(t.Context(), client, path))
				}
			})
		}
		workers.Wait()
		for _, path := range []string{"/a", "/b"} {
			require.Equal(t, every(3, 500*time.Millisecond), server.times(path, start), path)
		}
	})
}

func TestGroupTransportKeepsEveryLimitOfTheGroup(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		server := newAPI()
		st := sluice.NewMemStore(sluice.MemStoreConfig{})
		defer st.Close()
		perSecond, err := sluice.NewGCRA(sluice.PerSecond(10), 1, sluice.WithStore(st))
		require.NoError(t, err)
		perMinute, err := sluice.NewGCRA(sluice.PerMinute(30), 3, sluice.WithStore(st))
		require.NoError(t, err)
		g, err := sluice.NewGroup(perSecond, perMinute)
		require.NoError(t, err)
		tr, err := sluicehttp.NewGroupTransport(server, g, func(r *http.Request) ([]string, error) {
			return []string{"s:" + r.URL.Host, "m:" + r.URL.Host}, nil
		}, sluicehttp.WithPaceCost(func(*http.Request) (float64, error) { return 1, nil }))
		require.NoError(t, err)
		client := &http.Client{Transport: tr}
		start := time.Now()
		for range 6 {
			require.NoError(t, send(t.Context(), client, "/v1/things"))
		}
		// Ten per second for the minute's burst of three, then one every
		// two seconds, the minute's rate.
		require.Equal(t, []time.Duration{0, 100 * time.Millisecond, 200 * time.Millisecond, 2 * time.Second, 4 * time.Second, 6 * time.Second},
			server.times("/v1/things", start))
	})
}

func TestTransportRefusesWhatItCannotPace(t *testing.T) {
	lim, err := sluice.NewGCRA(sluice.PerSecond(1), 2)
	require.NoError(t, err)
	g, err := sluice.NewGroup(lim)
	require.NoError(t, err)
	keys := func(r *http.Request) ([]string, error) { return []string{r.URL.Host}, nil }
	for name, build := range map[string]func() (*sluicehttp.Transport, error){
		"nil limiter": func() (*sluicehttp.Transport, error) { return sluicehttp.NewTransport(nil, nil) },
		"nil group":   func() (*sluicehttp.Transport, error) { return sluicehttp.NewGroupTransport(nil, nil, keys) },
		"nil keys":    func() (*sluicehttp.Transport, error) { return sluicehttp.NewGroupTransport(nil, g, nil) },
		"a key for a group's keys": func() (*sluicehttp.Transport, error) {
			return sluicehttp.NewGroupTransport(nil, g, keys, sluicehttp.PaceByRoute())
		},
	} {
		_, err := build()
		require.ErrorIs(t, err, sluice.ErrInvalidConfig, name)
	}

	server := newAPI()
	failing := errors.New("no account for this request")
	for name, tc := range map[string]struct {
		opts []sluicehttp.TransportOption
		want error
	}{
		"a cost above the limit": {[]sluicehttp.TransportOption{sluicehttp.WithPaceCost(func(*http.Request) (float64, error) { return 3, nil })}, sluice.ErrCostExceedsLimit},
		"a cost that fails":      {[]sluicehttp.TransportOption{sluicehttp.WithPaceCost(func(*http.Request) (float64, error) { return 0, failing })}, failing},
		"a key that fails":       {[]sluicehttp.TransportOption{sluicehttp.WithPaceKey(func(*http.Request) (string, error) { return "", failing })}, failing},
	} {
		tr, err := sluicehttp.NewTransport(server, lim, tc.opts...)
		require.NoError(t, err, name)
		err = send(t.Context(), &http.Client{Transport: tr}, "/refused")
		require.ErrorIs(t, err, tc.want, name)
	}
	require.Empty(t, server.times("/refused", time.Now()), "none sent")
}
