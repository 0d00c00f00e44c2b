package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/benbjohnson/clock"
	"github.com/stretchr/testify/require"

	"github.com/sluice-go/sluice"
	"github.com/sluice-go/sluice/sluicehttp"
)

// testServer runs the API on a loopback listener with the default limits
// (a burst of 5, 1 unit per second), trusting X-Forwarded-For from
// loopback so that the test can act as several clients.
func testServer(t *testing.T) (*httptest.Server, *clock.Mock) {
	t.Helper()
	clock := clock.NewMock()
	clock.Set(time.Date(2026, 6, 1, 12, 0, 0, 0, time.UTC))
	h, err := newHandler(config{
		rate:           sluice.PerSecond(1),
		burst:          5,
		trustedProxies: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8"), netip.MustParsePrefix("::1/128")},
		clock:          clock,
		concurrent:     2,
		reportTime:     2 * time.Second,
	})
	require.NoError(t, err)
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv, clock
}

// result is what the test checks of a response.
type result struct {
	status     int
	rateLimit  string
	retryAfter string
}

// send makes a request as the client at address client and returns what
// came back, checking the fields every response must carry.
func send(t *testing.T, srv *httptest.Server, method, path, client, body string) result {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), method, srv.URL+path, strings.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("X-Forwarded-For", client)
	resp, err := srv.Client().Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, "application/json", resp.Header.Get("Content-Type"))
	require.Equal(t, `"per-ip";q=5;w=5`, resp.Header.Get("RateLimit-Policy"))
	var payload map[string]any
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&payload))
	return result{status: resp.StatusCode, rateLimit: resp.Header.Get("RateLimit"), retryAfter: resp.Header.Get("Retry-After")}
}

func TestRequestsTurnFrom200To429PerClient(t *testing.T) {
	srv, clock := testServer(t)
	const alice, bob = "203.0.113.1", "203.0.113.2"
	steps := []struct {
		advance time.Duration
		client  string
		want    result
	}{
		0: {client: alice, want: result{status: 200, rateLimit: `"per-ip";r=4;t=1`}},
		1: {client: alice, want: result{status: 200, rateLimit: `"per-ip";r=3;t=2`}},
		2: {client: alice, want: result{status: 200, rateLimit: `"per-ip";r=2;t=3`}},
		3: {client: alice, want: result{status: 200, rateLimit: `"per-ip";r=1;t=4`}},
		4: {client: alice, want: result{status: 200, rateLimit: `"per-ip";r=0;t=5`}},
		5: {client: alice, want: result{status: 429, rateLimit: `"per-ip";r=0;t=5`, retryAfter: "1"}},
		6: {client: bob, want: result{status: 200, rateLimit: `"per-ip";r=4;t=1`}},
		7: {advance: 400 * time.Millisecond, client: alice, want: result{status: 429, rateLimit: `"per-ip";r=0;t=5`, retryAfter: "1"}},
		8: {advance: 600 * time.Millisecond, client: alice, want: result{status: 200, rateLimit: `"per-ip";r=0;t=5`}},
		9: {client: alice, want: result{status: 429, rateLimit: `"per-ip";r=0;t=5`, retryAfter: "1"}},
	}
	for i, step := range steps {
		clock.Add(step.advance)
		require.Equal(t, step.want, send(t, srv, http.MethodGet, "/items", step.client, ""), "step %d", i)
	}
}

func TestBatchCostsOneUnitPerItem(t *testing.T) {
	srv, _ := testServer(t)
	const client = "198.51.100.7"
	steps := []struct {
		body string
		want result
	}{
		0: {body: `{"items":[1,2,3]}`, want: result{status: 200, rateLimit: `"per-ip";r=2;t=3`}},
		1: {body: `{"items":[1,2,3]}`, want: result{status: 429, rateLimit: `"per-ip";r=2;t=3`, retryAfter: "1"}},
		2: {body: `{"items":[1,2]}`, want: result{status: 200, rateLimit: `"per-ip";r=0;t=5`}},
		3: {body: `{"items":[1,2,3,4,5,6]}`, want: result{status: 413}},
		// A malformed batch is charged the minimum cost, 1 unit, so that a
		// flood of them is limited too: none is left, so it is refused.
		4: {body: `{"items":`, want: result{status: 429, rateLimit: `"per-ip";r=0;t=5`, retryAfter: "1"}},
	}
	for i, step := range steps {
		require.Equal(t, step.want, send(t, srv, http.MethodPost, "/batch", client, step.body), "step %d", i)
	}
	// A batch spends the same allowance as GET /items.
	require.Equal(t, result{status: 429, rateLimit: `"per-ip";r=0;t=5`, retryAfter: "1"},
		send(t, srv, http.MethodGet, "/items", client, ""))
}

func TestServeLogsTheAddressTheSystemChose(t *testing.T) {
	h, err := newHandler(config{rate: sluice.PerSecond(1), burst: 5, concurrent: 2, reportTime: time.Second})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(t.Context())
	logged := make(chan string, 1)
	served := make(chan error, 1)
	go func() {
		served <- serve(ctx, "127.0.0.1:0", h, func(format string, args ...any) { logged <- fmt.Sprintf(format, args...) })
	}()
	var line string
	select {
	case line = <-logged:
	case err := <-served:
		t.Fatalf("serve returned before listening: %v", err)
	}
	require.Regexp(t, `^listening on http://127\.0\.0\.1:[1-9][0-9]*$`, line)

	resp, err := http.Get(strings.TrimPrefix(line, "listening on ") + "/items")
	require.NoError(t, err)
	require.NoError(t, resp.Body.Close())
	require.Equal(t, http.StatusOK, resp.StatusCode)

	cancel()
	require.NoError(t, <-served, "the server shuts down when its context ends")
}

func TestFlagsParseTrustedProxiesAndLimits(t *testing.T) {
	var stderr strings.Builder
	addr, cfg, err := parseFlags([]string{"-addr", ":9000", "-rate", "10", "-burst", "20",
		"-trust", "10.0.0.0/8", "-trust", "::ffff:192.0.2.0/120", "-trust", "2001:db8::/32"}, &stderr)
	require.NoError(t, err)
	require.Empty(t, stderr.String())
	require.Equal(t, ":9000", addr)
	require.Equal(t, config{
		rate:       sluice.PerSecond(10),
		burst:      20,
		concurrent: 2,
		reportTime: 2 * time.Second,
		trustedProxies: []netip.Prefix{
			netip.MustParsePrefix("10.0.0.0/8"),
			netip.MustParsePrefix("::ffff:192.0.2.0/120"),
			netip.MustParsePrefix("2001:db8::/32"),
		},
	}, cfg)
}

// TestUnreadableTrustedProxyRangeStopsTheCommandAtStart pins that a
// -trust range ClientIP cannot read safely is a bad command line, exit
// status 2 with a message naming the value, before the server listens:
// never a server that answers every request 500 or "unavailable".
func TestUnreadableTrustedProxyRangeStopsTheCommandAtStart(t *testing.T) {
	tests := []struct {
		value string
		why   string
	}{
		{"::/0", "covers IPv4-mapped addresses"},
		{"::ffff:0:0/80", "covers IPv4-mapped addresses"},
		{"::/64", "covers IPv4-mapped addresses"},
		{"10.0.0.0", "no '/'"},
	}
	for _, tt := range tests {
		t.Run(tt.value, func(t *testing.T) {
			// Ended already: were the range let through, the server would
			// shut down at once and run would return 0.
			ctx, cancel := context.WithCancel(t.Context())
			cancel()
			var stderr strings.Builder
			code := run(ctx, []string{"-addr", "127.0.0.1:0", "-trust", tt.value}, &stderr)
			require.Equal(t, 2, code, stderr.String())
			first, _, _ := strings.Cut(stderr.String(), "\n")
			require.Contains(t, first, fmt.Sprintf("invalid value %q for flag -trust: ", tt.value))
			require.Contains(t, first, tt.why)
			require.Contains(t, stderr.String(), "Usage of httpserver:")
			require.NotContains(t, stderr.String(), "listening on")
		})
	}
}

func TestNewHandlerRefusesAnUnreadableTrustedProxyRange(t *testing.T) {
	_, err := newHandler(config{rate: sluice.PerSecond(1), burst: 5, trustedProxies: []netip.Prefix{netip.MustParsePrefix("::/0")}})
	require.ErrorIs(t, err, sluice.ErrInvalidConfig)
}

// TestErrorAnswersNeverCallAConfigurationErrorUnavailable pins the body of
// each error answer: a server misconfigured says so, and only a limiter
// that failed is "unavailable".
func TestErrorAnswersNeverCallAConfigurationErrorUnavailable(t *testing.T) {
	tests := []struct {
		name   string
		err    error
		status int
		body   string
	}{
		{
			"a key function misconfigured",
			fmt.Errorf("%w: %w", sluicehttp.ErrKey, fmt.Errorf("%w: trusted proxy range ::/0", sluice.ErrInvalidConfig)),
			http.StatusInternalServerError,
			"server misconfigured: see the server's log",
		},
		{"the store down", errors.New("connection refused"), http.StatusServiceUnavailable, "limiter unavailable"},
		{"no key", fmt.Errorf("%w: bad peer", sluicehttp.ErrKey), http.StatusBadRequest, "sluicehttp: no key for request: bad peer"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec := httptest.NewRecorder()
			failed(rec, httptest.NewRequest(http.MethodGet, "/items", nil), tt.err)
			require.Equal(t, tt.status, rec.Code)
			var payload map[string]string
			require.NoError(t, json.NewDecoder(rec.Body).Decode(&payload))
			require.Equal(t, map[string]string{"error": tt.body}, payload)
		})
	}
}

func TestRunServesUntilItsContextEnds(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	cancel() // shuts the server down as soon as it listens
	var stderr strings.Builder
	require.Equal(t, 0, run(ctx, []string{"-addr", "127.0.0.1:0", "-trust", "10.0.0.0/8"}, &stderr), stderr.String())
	require.Regexp(t, `listening on http://127\.0\.0\.1:[1-9][0-9]*\n$`, stderr.String())
}

// TestReportsAreLimitedToTwoAtOncePerClient sends three reports at once
// from one client and one from another, as a new user would with curl in
// a loop: the third of the first client is refused at once with 429 and
// the concurrent-requests fields, the others are built, and once they
// are done the first client may ask again.
func TestReportsAreLimitedToTwoAtOncePerClient(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h, err := newHandler(config{rate: sluice.PerSecond(1), burst: 5, concurrent: 2, reportTime: 2 * time.Second})
		require.NoError(t, err)
		get := func(client string) *httptest.ResponseRecorder {
			r := httptest.NewRequest(http.MethodGet, "/report", nil)
			r.RemoteAddr = client + ":40000"
			w := httptest.NewRecorder()
			h.ServeHTTP(w, r)
			return w
		}
		answers := make(chan *httptest.ResponseRecorder, 3)
		for range 2 {
			go func() { answers <- get("192.0.2.1") }()
		}
		synctest.Wait() // both building
		third := get("192.0.2.1")
		require.Equal(t, http.StatusTooManyRequests, third.Code)
		require.Equal(t, `"reports-per-ip";q=2;qu="concurrent-requests"`, third.Header().Get("RateLimit-Policy"))
		require.Equal(t, `"reports-per-ip";r=0`, third.Header().Get("RateLimit"))
		go func() { answers <- get("198.51.100.7") }()
		start := time.Now()
		for range 3 {
			require.Equal(t, http.StatusOK, (<-answers).Code)
		}
		require.Equal(t, 2*time.Second, time.Since(start), "the other client's report was built beside them")
		require.Equal(t, http.StatusOK, get("192.0.2.1").Code, "two slots free again")
	})
}
