package sluicehttp_test

import (
	"context"
	"errors"
	"math"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sluice-go/sluice"
	"github.com/sluice-go/sluice/engine"
	"github.com/sluice-go/sluice/sluicehttp"
)

// server is a limited handler under test. It counts the requests that
// reach the wrapped handler.
type server struct {
	handler http.Handler
	served  int
}

func newServer(t *testing.T, lim *sluice.Limiter, opts ...sluicehttp.Option) *server {
	t.Helper()
	mw, err := sluicehttp.New(lim, opts...)
	require.NoError(t, err)
	return wrap(mw)
}

func wrap(mw func(http.Handler) http.Handler) *server {
	s := &server{}
	s.handler = mw(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		s.served++
		_, _ = w.Write([]byte("ok"))
	}))
	return s
}

func (s *server) do(r *http.Request) *httptest.ResponseRecorder {
	w := httptest.NewRecorder()
	s.handler.ServeHTTP(w, r)
	return w
}

// get sends a GET from the default test client address, 192.0.2.1.
func (s *server) get() *httptest.ResponseRecorder {
	return s.do(httptest.NewRequest(http.MethodGet, "/", nil))
}

func fixedWindow(t *testing.T, limit float64, window time.Duration, clock sluice.Clock) *sluice.Limiter {
	t.Helper()
	lim, err := sluice.NewFixedWindow(limit, window, sluice.WithClock(clock))
	require.NoError(t, err)
	return lim
}

// response is what a test expects of one response.
type response struct {
	status     int
	rateLimit  string
	retryAfter string
}

func requireResponse(t *testing.T, want response, got *httptest.ResponseRecorder, msgAndArgs ...any) {
	t.Helper()
	require.Equal(t, want.status, got.Code, msgAndArgs...)
	require.Equal(t, want.rateLimit, got.Header().Get("RateLimit"), msgAndArgs...)
	require.Equal(t, want.retryAfter, got.Header().Get("Retry-After"), msgAndArgs...)
}

func TestMiddlewareAdmitsUpToTheLimitThenDenies(t *testing.T) {
	clock := newClock()
	s := newServer(t, fixedWindow(t, 3, time.Minute, clock))
	clock.Add(12 * time.Second) // 48 s left in the window
	steps := []struct {
		advance time.Duration
		want    response
	}{
		0: {want: response{status: 200, rateLimit: `"default";r=2;t=48`}},
		1: {want: response{status: 200, rateLimit: `"default";r=1;t=48`}},
		2: {want: response{status: 200, rateLimit: `"default";r=0;t=48`}},
		3: {want: response{status: 429, rateLimit: `"default";r=0;t=48`, retryAfter: "48"}},
		4: {advance: 47*time.Second + 1, want: response{status: 429, rateLimit: `"default";r=0;t=1`, retryAfter: "1"}},
		5: {advance: time.Second - 1, want: response{status: 200, rateLimit: `"default";r=2;t=60`}},
	}
	for i, step := range steps {
		clock.Add(step.advance)
		w := s.get()
		requireResponse(t, step.want, w, "step %d", i)
		require.Equal(t, []string{`"default";q=3;w=60`}, w.Header().Values("RateLimit-Policy"), "step %d", i)
	}
	require.Equal(t, 4, s.served, "denied requests must not reach the handler")
}

func TestMiddlewareDenialBodyIsShortText(t *testing.T) {
	s := newServer(t, fixedWindow(t, 1, time.Minute, newClock()))
	s.get()
	w := s.get()
	require.Equal(t, http.StatusTooManyRequests, w.Code)
	require.Equal(t, "rate limit exceeded\n", w.Body.String())
	require.Equal(t, "text/plain; charset=utf-8", w.Header().Get("Content-Type"))
}

func TestRetryAfterIsWholeSecondsRoundedUp(t *testing.T) {
	// One request per 2.5 s: after the first, the next is admitted 2.5 s
	// later, and Retry-After must never send a client back too early.
	clock := newClock()
	lim, err := sluice.NewGCRA(sluice.Per(1, 2500*time.Millisecond), 1, sluice.WithClock(clock))
	require.NoError(t, err)
	s := newServer(t, lim)
	requireResponse(t, response{status: 200, rateLimit: `"default";r=0;t=3`}, s.get())
	steps := []struct {
		at   time.Duration // since the first request
		want response
	}{
		0: {at: 0, want: response{status: 429, rateLimit: `"default";r=0;t=3`, retryAfter: "3"}},
		1: {at: 1500*time.Millisecond - 1, want: response{status: 429, rateLimit: `"default";r=0;t=2`, retryAfter: "2"}},
		2: {at: 1500 * time.Millisecond, want: response{status: 429, rateLimit: `"default";r=0;t=1`, retryAfter: "1"}},
		3: {at: 2500*time.Millisecond - 1, want: response{status: 429, rateLimit: `"default";r=0;t=1`, retryAfter: "1"}},
		4: {at: 2500 * time.Millisecond, want: response{status: 200, rateLimit: `"default";r=0;t=3`}},
	}
	var elapsed time.Duration
	for i, step := range steps {
		clock.Add(step.at - elapsed)
		elapsed = step.at
		requireResponse(t, step.want, s.get(), "step %d", i)
	}
}

func TestRemainingIsRoundedDown(t *testing.T) {
	clock := newClock()
	lim, err := sluice.NewLeakyBucket(10, sluice.PerSecond(1), sluice.WithClock(clock))
	require.NoError(t, err)
	s := newServer(t, lim, sluicehttp.WithCost(func(*http.Request) (float64, error) { return 2.5, nil }))
	requireResponse(t, response{status: 200, rateLimit: `"default";r=7;t=3`}, s.get())
	requireResponse(t, response{status: 200, rateLimit: `"default";r=5;t=5`}, s.get())
	clock.Add(500 * time.Millisecond) // level 4.5
	requireResponse(t, response{status: 200, rateLimit: `"default";r=3;t=7`}, s.get())
}

func TestPolicyField(t *testing.T) {
	clock := newClock()
	limiter := func(l *sluice.Limiter, err error) *sluice.Limiter {
		require.NoError(t, err)
		return l
	}
	fixed := func(opts ...sluicehttp.Option) []sluicehttp.Option { return opts }
	tests := []struct {
		name string
		lim  *sluice.Limiter
		opts []sluicehttp.Option
		want string
	}{
		{"fixed window: its length", limiter(sluice.NewFixedWindow(100, time.Minute, sluice.WithClock(clock))), nil,
			`"default";q=100;w=60`},
		{"sliding log: its window", limiter(sluice.NewSlidingLog(10, 30*time.Second, sluice.WithClock(clock))), nil,
			`"default";q=10;w=30`},
		{"sliding counter: its window", limiter(sluice.NewSlidingCounter(50, time.Hour, sluice.WithClock(clock))), nil,
			`"default";q=50;w=3600`},
		{"GCRA: burst times emission interval", limiter(sluice.NewGCRA(sluice.PerMinute(100), 100, sluice.WithClock(clock))), nil,
			`"default";q=100;w=60`},
		{"GCRA: half a second rounds up", limiter(sluice.NewGCRA(sluice.PerSecond(10), 5, sluice.WithClock(clock))), nil,
			`"default";q=5;w=1`},
		{"GCRA: under half a second leaves w out", limiter(sluice.NewGCRA(sluice.PerSecond(10), 2, sluice.WithClock(clock))), nil,
			`"default";q=2`},
		{"token bucket: time to refill the burst", limiter(sluice.NewTokenBucket(sluice.PerSecond(10), 20, sluice.WithClock(clock))), nil,
			`"default";q=20;w=2`},
		{"token bucket: continuous refill of 2.5 periods", limiter(sluice.NewTokenBucket(sluice.Per(10, time.Minute), 25, sluice.WithClock(clock))), nil,
			`"default";q=25;w=150`},
		{"token bucket: interval refill takes whole periods", limiter(sluice.NewTokenBucket(sluice.Per(10, time.Minute), 25, sluice.WithIntervalRefill(), sluice.WithClock(clock))), nil,
			`"default";q=25;w=180`},
		{"leaky bucket: time to drain", limiter(sluice.NewLeakyBucket(1000, sluice.Per(1000, 30*24*time.Hour), sluice.WithClock(clock))), nil,
			`"default";q=1000;w=2592000`},
		{"fractional limit rounds down", limiter(sluice.NewFixedWindow(2.5, time.Second, sluice.WithClock(clock))), nil,
			`"default";q=2;w=1`},
		{"window option wins", limiter(sluice.NewFixedWindow(100, time.Minute, sluice.WithClock(clock))),
			fixed(sluicehttp.WithWindow(90 * time.Second)), `"default";q=100;w=90`},
		{"zero window option leaves w out", limiter(sluice.NewFixedWindow(100, time.Minute, sluice.WithClock(clock))),
			fixed(sluicehttp.WithWindow(0)), `"default";q=100`},
		{"policy name is an escaped String", limiter(sluice.NewFixedWindow(100, time.Minute, sluice.WithClock(clock))),
			fixed(sluicehttp.WithPolicyName(`per "ip" \ v2`)), `"per \"ip\" \\ v2";q=100;w=60`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := newServer(t, tt.lim, tt.opts...).get()
			require.Equal(t, http.StatusOK, w.Code)
			require.Equal(t, []string{tt.want}, w.Header().Values("RateLimit-Policy"))
		})
	}
}

func TestPolicyNameAppearsInRateLimit(t *testing.T) {
	s := newServer(t, fixedWindow(t, 10, time.Minute, newClock()), sluicehttp.WithPolicyName("per-ip"))
	requireResponse(t, response{status: 200, rateLimit: `"per-ip";r=9;t=60`}, s.get())
}

func TestLegacyHeadersUseDeltaSeconds(t *testing.T) {
	clock := newClock()
	s := newServer(t, fixedWindow(t, 3, time.Minute, clock), sluicehttp.WithLegacyHeaders())
	clock.Add(12 * time.Second)
	w := s.get()
	require.Equal(t, "3", w.Header().Get("X-RateLimit-Limit"))
	require.Equal(t, "2", w.Header().Get("X-RateLimit-Remaining"))
	require.Equal(t, "48", w.Header().Get("X-RateLimit-Reset"))

	w = newServer(t, fixedWindow(t, 3, time.Minute, clock)).get()
	require.Empty(t, w.Header().Get("X-RateLimit-Limit"), "legacy fields only on request")
}

func TestStackedMiddlewaresListEachPolicy(t *testing.T) {
	clock := newClock()
	perMinute, err := sluicehttp.New(fixedWindow(t, 10, time.Minute, clock), sluicehttp.WithPolicyName("minute"))
	require.NoError(t, err)
	perHour, err := sluicehttp.New(fixedWindow(t, 100, time.Hour, clock), sluicehttp.WithPolicyName("hour"))
	require.NoError(t, err)
	s := wrap(func(h http.Handler) http.Handler { return perHour(perMinute(h)) })
	w := s.get()
	require.Equal(t, []string{`"hour";q=100;w=3600`, `"minute";q=10;w=60`}, w.Header().Values("RateLimit-Policy"))
	require.Equal(t, []string{`"hour";r=99;t=3600`, `"minute";r=9;t=60`}, w.Header().Values("RateLimit"))
}

func TestKeysHaveSeparateAllowances(t *testing.T) {
	s := newServer(t, fixedWindow(t, 1, time.Minute, newClock()))
	require.Equal(t, 200, s.do(newRequest("192.0.2.1:1")).Code)
	require.Equal(t, 429, s.do(newRequest("192.0.2.1:2")).Code, "same IP, other port")
	require.Equal(t, 200, s.do(newRequest("192.0.2.2:1")).Code)
}

func TestSpoofedForwardedForDoesNotChangeTheKey(t *testing.T) {
	trusted := sluicehttp.ClientIP{TrustedProxies: prefixes("10.0.0.0/8")}
	s := newServer(t, fixedWindow(t, 1, time.Minute, newClock()), sluicehttp.WithKey(trusted.Key))

	// A client connecting directly cannot pick a fresh key per request.
	require.Equal(t, 200, s.do(newRequest("192.0.2.1:1", "203.0.113.1")).Code)
	require.Equal(t, 429, s.do(newRequest("192.0.2.1:1", "203.0.113.2")).Code)

	// Through the proxy, entries the client wrote are ignored too.
	require.Equal(t, 200, s.do(newRequest("10.0.0.1:1", "198.51.100.1, 192.0.2.9")).Code)
	require.Equal(t, 429, s.do(newRequest("10.0.0.1:1", "198.51.100.2, 192.0.2.9")).Code)
}

func TestIPv6ClientsShareTheirSlash64(t *testing.T) {
	s := newServer(t, fixedWindow(t, 1, time.Minute, newClock()))
	require.Equal(t, 200, s.do(newRequest("[2001:db8:1:2::1]:1")).Code)
	require.Equal(t, 429, s.do(newRequest("[2001:db8:1:2:ffff::9]:1")).Code, "same /64")
	require.Equal(t, 200, s.do(newRequest("[2001:db8:1:3::1]:1")).Code, "next /64")
}

func TestHeaderKeyLimitsPerAPIKey(t *testing.T) {
	s := newServer(t, fixedWindow(t, 1, time.Minute, newClock()), sluicehttp.WithKey(sluicehttp.HeaderKey("X-API-Key")))
	withKey := func(k string) *http.Request {
		r := newRequest("192.0.2.1:1")
		r.Header.Set("X-API-Key", k)
		return r
	}
	require.Equal(t, 200, s.do(withKey("a")).Code)
	require.Equal(t, 429, s.do(withKey("a")).Code)
	require.Equal(t, 200, s.do(withKey("b")).Code)
	require.Equal(t, 400, s.do(newRequest("192.0.2.1:1")).Code)
}

func TestCostFunctionChargesTheRequest(t *testing.T) {
	cost := func(r *http.Request) (float64, error) { return float64(len(r.URL.Query()["item"])), nil }
	s := newServer(t, fixedWindow(t, 5, time.Minute, newClock()), sluicehttp.WithCost(cost))
	requireResponse(t, response{status: 200, rateLimit: `"default";r=2;t=60`},
		s.do(httptest.NewRequest(http.MethodPost, "/?item=a&item=b&item=c", nil)))
	requireResponse(t, response{status: 429, rateLimit: `"default";r=2;t=60`, retryAfter: "60"},
		s.do(httptest.NewRequest(http.MethodPost, "/?item=a&item=b&item=c", nil)))
	requireResponse(t, response{status: 200, rateLimit: `"default";r=0;t=60`},
		s.do(httptest.NewRequest(http.MethodPost, "/?item=a&item=b", nil)))
}

// failingStore is a store that is down.
type failingStore struct{}

var errStoreDown = errors.New("store down")

func (failingStore) Apply(context.Context, string, *engine.Params, engine.Op) (engine.Decision, error) {
	return engine.Decision{}, errStoreDown
}

func (failingStore) Reset(context.Context, string) error { return errStoreDown }

func TestErrors(t *testing.T) {
	clock := newClock()
	working := fixedWindow(t, 5, time.Minute, clock)
	down, err := sluice.NewFixedWindow(5, time.Minute, sluice.WithStore(failingStore{}), sluice.WithClock(clock))
	require.NoError(t, err)
	badKey := sluicehttp.WithKey(func(*http.Request) (string, error) { return "", errors.New("who?") })
	cost := func(c float64, err error) sluicehttp.Option {
		return sluicehttp.WithCost(func(*http.Request) (float64, error) { return c, err })
	}
	tests := []struct {
		name    string
		lim     *sluice.Limiter
		opts    []sluicehttp.Option
		status  int
		served  bool
		wantErr []error
		// decided reports whether the request was charged, as one
		// whose cost cannot be computed is: its response has a RateLimit
		// field.
		decided bool
	}{
		{name: "store down fails closed by default", lim: down,
			status: 503, wantErr: []error{errStoreDown}},
		{name: "store down fails open on request", lim: down, opts: []sluicehttp.Option{sluicehttp.WithFailOpen()},
			status: 200, served: true, wantErr: []error{errStoreDown}},
		{name: "key error is a bad request", lim: working, opts: []sluicehttp.Option{badKey},
			status: 400, wantErr: []error{sluicehttp.ErrKey}},
		{name: "key error does not fail open", lim: working, opts: []sluicehttp.Option{badKey, sluicehttp.WithFailOpen()},
			status: 400, wantErr: []error{sluicehttp.ErrKey}},
		{name: "cost error is a bad request", lim: working, opts: []sluicehttp.Option{cost(0, errors.New("bad body"))},
			status: 400, wantErr: []error{sluicehttp.ErrCost}, decided: true},
		{name: "negative cost is a bad request", lim: working, opts: []sluicehttp.Option{cost(-1, nil)},
			status: 400, wantErr: []error{sluicehttp.ErrCost, sluice.ErrInvalidCost}, decided: true},
		{name: "cost above the limit is too large, not too many", lim: working, opts: []sluicehttp.Option{cost(6, nil), sluicehttp.WithFailOpen()},
			status: 413, wantErr: []error{sluice.ErrCostExceedsLimit}},
		{name: "dry run serves despite a store error", lim: down, opts: []sluicehttp.Option{sluicehttp.WithDryRun()},
			status: 200, served: true, wantErr: []error{errStoreDown}},
		{name: "dry run serves despite a key error", lim: working, opts: []sluicehttp.Option{badKey, sluicehttp.WithDryRun()},
			status: 200, served: true, wantErr: []error{sluicehttp.ErrKey}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var hooked []error
			hook := sluicehttp.WithErrorHook(func(_ *http.Request, err error) { hooked = append(hooked, err) })
			s := newServer(t, tt.lim, append(tt.opts, hook)...)
			w := s.get()
			require.Equal(t, tt.status, w.Code)
			require.Equal(t, tt.served, s.served == 1)
			require.Len(t, hooked, 1)
			for _, want := range tt.wantErr {
				require.ErrorIs(t, hooked[0], want)
			}
			if !tt.served {
				require.Equal(t, tt.status, sluicehttp.ErrorStatus(hooked[0]))
			}
			require.Equal(t, []string{`"default";q=5;w=60`}, w.Header().Values("RateLimit-Policy"), "the policy is known without a decision")
			if tt.decided {
				require.NotEmpty(t, w.Header().Get("RateLimit"))
			} else {
				require.Empty(t, w.Header().Get("RateLimit"), "no decision, no RateLimit field")
			}
		})
	}
}

func TestErrorHandlerWritesTheResponse(t *testing.T) {
	var got error
	s := newServer(t, fixedWindow(t, 5, time.Minute, newClock()),
		sluicehttp.WithKey(sluicehttp.HeaderKey("X-API-Key")),
		sluicehttp.WithErrorHandler(func(w http.ResponseWriter, _ *http.Request, err error) {
			got = err
			http.Error(w, "an API key is required", http.StatusUnauthorized)
		}))
	w := s.get()
	require.Equal(t, http.StatusUnauthorized, w.Code)
	require.Equal(t, "an API key is required\n", w.Body.String())
	require.ErrorIs(t, got, sluicehttp.ErrKey)
	require.EqualError(t, got, "sluicehttp: no key for request: no X-Api-Key header")
}

func TestDenyHandlerWritesTheResponse(t *testing.T) {
	var got sluice.Decision
	s := newServer(t, fixedWindow(t, 1, time.Minute, newClock()),
		sluicehttp.WithDenyHandler(func(w http.ResponseWriter, _ *http.Request, d sluice.Decision) {
			got = d
			require.Equal(t, "60", w.Header().Get("Retry-After"), "set before the handler runs")
			w.Header().Set("Content-Type", "application/problem+json")
			w.WriteHeader(http.StatusTooManyRequests)
			_, _ = w.Write([]byte(`{"title":"slow down"}`))
		}))
	s.get()
	w := s.get()
	require.Equal(t, http.StatusTooManyRequests, w.Code)
	require.Equal(t, `{"title":"slow down"}`, w.Body.String())
	require.Equal(t, `"default";r=0;t=60`, w.Header().Get("RateLimit"))
	require.False(t, got.Allowed)
	require.Equal(t, time.Minute, got.RetryAfter)
}

func TestDryRunReportsButNeverBlocks(t *testing.T) {
	var decisions []sluice.Decision
	s := newServer(t, fixedWindow(t, 1, time.Minute, newClock()),
		sluicehttp.WithDryRun(),
		sluicehttp.WithDecisionHook(func(_ *http.Request, d sluice.Decision) { decisions = append(decisions, d) }))
	requireResponse(t, response{status: 200, rateLimit: `"default";r=0;t=60`}, s.get())
	requireResponse(t, response{status: 200, rateLimit: `"default";r=0;t=60`}, s.get())
	requireResponse(t, response{status: 200, rateLimit: `"default";r=0;t=60`}, s.get())
	require.Equal(t, 3, s.served)
	require.Len(t, decisions, 3)
	require.True(t, decisions[0].Allowed)
	require.False(t, decisions[1].Allowed, "the hook sees what enforcement would do")
	require.Equal(t, time.Minute, decisions[2].RetryAfter)
}

func TestDecisionHookSeesEveryDecision(t *testing.T) {
	var allowed []bool
	s := newServer(t, fixedWindow(t, 1, time.Minute, newClock()),
		sluicehttp.WithDecisionHook(func(_ *http.Request, d sluice.Decision) { allowed = append(allowed, d.Allowed) }))
	s.get()
	s.get()
	require.Equal(t, []bool{true, false}, allowed)
}

func TestNewRejectsInvalidConfiguration(t *testing.T) {
	lim := fixedWindow(t, 1, time.Minute, newClock())
	tests := []struct {
		name string
		lim  *sluice.Limiter
		opts []sluicehttp.Option
	}{
		{name: "nil limiter"},
		{name: "negative window", lim: lim, opts: []sluicehttp.Option{sluicehttp.WithWindow(-time.Second)}},
		{name: "policy name outside printable ASCII", lim: lim, opts: []sluicehttp.Option{sluicehttp.WithPolicyName("día")}},
		{name: "quota unit outside printable ASCII", lim: lim, opts: []sluicehttp.Option{sluicehttp.WithQuotaUnit("bytes\n")}},
		{name: "negative minimum cost", lim: lim, opts: []sluicehttp.Option{sluicehttp.WithMinCost(-1)}},
		{name: "NaN minimum cost", lim: lim, opts: []sluicehttp.Option{sluicehttp.WithMinCost(math.NaN())}},
		{name: "minimum cost above the limit", lim: lim, opts: []sluicehttp.Option{sluicehttp.WithMinCost(2)}},
		{name: "negative Retry-After for 503", lim: lim, opts: []sluicehttp.Option{sluicehttp.WithUnavailableRetryAfter(-time.Second)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			mw, err := sluicehttp.New(tt.lim, tt.opts...)
			require.ErrorIs(t, err, sluice.ErrInvalidConfig)
			require.Nil(t, mw)
		})
	}
}

func TestMisconfiguredMiddlewareRefusesEveryRequest(t *testing.T) {
	var hooked error
	s := wrap(sluicehttp.Middleware(nil, sluicehttp.WithErrorHook(func(_ *http.Request, err error) { hooked = err })))
	w := s.get()
	require.Equal(t, http.StatusInternalServerError, w.Code)
	require.Zero(t, s.served)
	require.ErrorIs(t, hooked, sluice.ErrInvalidConfig)
	require.ErrorContains(t, hooked, "nil limiter")

	s = wrap(sluicehttp.Middleware(nil, sluicehttp.WithDryRun()))
	require.Equal(t, http.StatusOK, s.get().Code, "dry run never blocks")
}

func TestMiddlewareMatchesNew(t *testing.T) {
	s := wrap(sluicehttp.Middleware(fixedWindow(t, 1, time.Minute, newClock())))
	requireResponse(t, response{status: 200, rateLimit: `"default";r=0;t=60`}, s.get())
	requireResponse(t, response{status: 429, rateLimit: `"default";r=0;t=60`, retryAfter: "60"}, s.get())
}
