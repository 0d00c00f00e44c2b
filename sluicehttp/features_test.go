package sluicehttp_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sluice-go/sluice"
	"github.com/sluice-go/sluice/sluicehttp"
)

func TestPatternKeyGivesEachRouteItsAllowance(t *testing.T) {
	// One limiter guards two routes; each client gets one request per
	// minute on each route, whatever the path's variable part.
	lim := fixedWindow(t, 1, time.Minute, newClock())
	limit, err := sluicehttp.New(lim, sluicehttp.WithKey(sluicehttp.Keys(sluicehttp.PatternKey, sluicehttp.ClientIP{}.Key)))
	require.NoError(t, err)
	ok := http.HandlerFunc(func(http.ResponseWriter, *http.Request) {})
	mux := http.NewServeMux()
	mux.Handle("GET /items/{id}", limit(ok))
	mux.Handle("GET /users/{id}", limit(ok))
	get := func(path, remoteAddr string) int {
		r := httptest.NewRequest(http.MethodGet, path, nil)
		r.RemoteAddr = remoteAddr
		w := httptest.NewRecorder()
		mux.ServeHTTP(w, r)
		return w.Code
	}
	require.Equal(t, 200, get("/items/1", "192.0.2.1:1"))
	require.Equal(t, 429, get("/items/2", "192.0.2.1:1"), "same route, same client")
	require.Equal(t, 200, get("/users/1", "192.0.2.1:1"), "other route")
	require.Equal(t, 200, get("/items/1", "192.0.2.2:1"), "other client")
}

func TestPatternKeyFailsOutsideAServeMuxRoute(t *testing.T) {
	_, err := sluicehttp.PatternKey(httptest.NewRequest(http.MethodGet, "/", nil))
	require.ErrorContains(t, err, "wrap the route's handler")
}

func TestKeysJoinPartsUnambiguously(t *testing.T) {
	header := func(name string) sluicehttp.KeyFunc { return sluicehttp.HeaderKey(name) }
	key := sluicehttp.Keys(sluicehttp.MethodKey, header("A"), header("B"))
	tests := []struct{ a, b, want string }{
		{a: "x", b: "y", want: `POST|x|y`},
		{a: "x|y", b: "z", want: `POST|x\|y|z`},
		{a: "x", b: "y|z", want: `POST|x|y\|z`},
		{a: `x\`, b: "y", want: `POST|x\\|y`},
	}
	for _, tt := range tests {
		r := httptest.NewRequest(http.MethodPost, "/", nil)
		r.Header.Set("A", tt.a)
		r.Header.Set("B", tt.b)
		got, err := key(r)
		require.NoError(t, err)
		require.Equal(t, tt.want, got)
	}
	_, err := key(httptest.NewRequest(http.MethodPost, "/", nil))
	require.EqualError(t, err, "no A header", "a failing part fails the key")
}

func TestSkipPassesRequestsUndecided(t *testing.T) {
	health := sluicehttp.WithSkip(func(r *http.Request) bool { return r.URL.Path == "/healthz" })
	s := newServer(t, fixedWindow(t, 1, time.Minute, newClock()), health)
	for range 3 {
		w := s.do(httptest.NewRequest(http.MethodGet, "/healthz", nil))
		require.Equal(t, 200, w.Code)
		require.Empty(t, w.Header().Values("RateLimit-Policy"), "a skipped request is not reported")
	}
	require.Equal(t, 200, s.get().Code, "skipped requests spent nothing")
	require.Equal(t, 429, s.get().Code)
}

func TestQuotaUnitIsInThePolicy(t *testing.T) {
	lim := fixedWindow(t, 65535, 10*time.Second, newClock())
	bodyBytes := sluicehttp.WithCost(func(r *http.Request) (float64, error) { return float64(r.ContentLength), nil })
	s := newServer(t, lim, bodyBytes, sluicehttp.WithPolicyName("peruser"), sluicehttp.WithQuotaUnit("content-bytes"))
	w := s.do(httptest.NewRequest(http.MethodPost, "/", strings.NewReader(strings.Repeat("x", 300))))
	require.Equal(t, `"peruser";q=65535;qu="content-bytes";w=10`, w.Header().Get("RateLimit-Policy"))
	require.Equal(t, `"peruser";r=65235;t=10`, w.Header().Get("RateLimit"))
}

func TestFieldsWriteADecisionMadeInAHandler(t *testing.T) {
	clock := newClock()
	lim, err := sluice.NewGCRA(sluice.PerMinute(6), 2, sluice.WithClock(clock))
	require.NoError(t, err)
	fields, err := sluicehttp.NewFields(lim, sluicehttp.WithPolicyName("orders"), sluicehttp.WithLegacyHeaders())
	require.NoError(t, err)
	handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		d, err := lim.Allow(r.Context(), r.URL.Query().Get("account"), 1)
		require.NoError(t, err)
		fields.Write(w.Header(), d)
		if !d.Allowed {
			w.WriteHeader(http.StatusTooManyRequests)
		}
	})
	get := func() *httptest.ResponseRecorder {
		w := httptest.NewRecorder()
		handler.ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/?account=a", nil))
		return w
	}
	requireResponse(t, response{status: 200, rateLimit: `"orders";r=1;t=10`}, get())
	requireResponse(t, response{status: 200, rateLimit: `"orders";r=0;t=20`}, get())
	w := get()
	requireResponse(t, response{status: 429, rateLimit: `"orders";r=0;t=20`, retryAfter: "10"}, w)
	require.Equal(t, `"orders";q=2;w=20`, w.Header().Get("RateLimit-Policy"))
	require.Equal(t, "2", w.Header().Get("X-RateLimit-Limit"))
	require.Equal(t, "20", w.Header().Get("X-RateLimit-Reset"))
}

func TestNewFieldsRejectsWhatItCannotReport(t *testing.T) {
	_, err := sluicehttp.NewFields(nil)
	require.ErrorIs(t, err, sluice.ErrInvalidConfig)
	lim, err := sluice.NewTokenBucket(sluice.PerSecond(1), 0.9)
	require.NoError(t, err)
	defer lim.Close()
	_, err = sluicehttp.NewFields(lim)
	require.ErrorIs(t, err, sluice.ErrInvalidConfig)
	require.ErrorContains(t, err, "less than one whole unit")
}

// countingBody is a request body that counts the bytes read from it.
type countingBody struct {
	r    io.Reader
	read int
}

func (b *countingBody) Read(p []byte) (int, error) {
	n, err := b.r.Read(p)
	b.read += n
	return n, err
}

func (*countingBody) Close() error { return nil }

func TestPeekBodyReadsOnlyWhatTheCostNeeds(t *testing.T) {
	// The batch's first line is its item count; the middleware reads it,
	// and the handler gets the whole body.
	body := &countingBody{r: strings.NewReader("3\n" + strings.Repeat("item\n", 1000))}
	var readBeforeHandler int
	var handlerGot string
	byCount := sluicehttp.WithCost(func(r *http.Request) (float64, error) {
		head, err := sluicehttp.PeekBody(r, 16)
		if err != nil {
			return 0, err
		}
		line, _, _ := strings.Cut(string(head), "\n")
		return float64(len(line)), nil // stands for parsing the count
	})
	mw, err := sluicehttp.New(fixedWindow(t, 10, time.Minute, newClock()), byCount)
	require.NoError(t, err)
	h := mw(http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) {
		readBeforeHandler = body.read
		b, err := io.ReadAll(r.Body)
		require.NoError(t, err)
		handlerGot = string(b)
	}))
	r := httptest.NewRequest(http.MethodPost, "/", nil)
	r.Body = body
	h.ServeHTTP(httptest.NewRecorder(), r)
	require.Equal(t, 16, readBeforeHandler)
	require.Equal(t, "3\n"+strings.Repeat("item\n", 1000), handlerGot)
}

func TestReadBodyAnswersTooLargeBodies413(t *testing.T) {
	perLine := sluicehttp.WithCost(func(r *http.Request) (float64, error) {
		b, err := sluicehttp.ReadBody(r, 8)
		return float64(strings.Count(string(b), "\n")), err
	})
	var handlerGot string
	mw, err := sluicehttp.New(fixedWindow(t, 100, time.Minute, newClock()), perLine)
	require.NoError(t, err)
	h := mw(http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		handlerGot = string(b)
	}))
	tests := []struct {
		name    string
		body    string
		chunked bool
		status  int
	}{
		{name: "fits", body: "a\nb\nc\n", status: 200},
		{name: "exactly the limit", body: "abcdefg\n", status: 200},
		{name: "declared longer", body: "a\nb\nc\nd\ne\n", status: 413},
		{name: "chunked longer", body: "a\nb\nc\nd\ne\n", chunked: true, status: 413},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			handlerGot = ""
			r := httptest.NewRequest(http.MethodPost, "/", strings.NewReader(tt.body))
			if tt.chunked {
				r.ContentLength = -1
			}
			w := httptest.NewRecorder()
			h.ServeHTTP(w, r)
			require.Equal(t, tt.status, w.Code)
			if tt.status == 200 {
				require.Equal(t, tt.body, handlerGot)
			}
		})
	}
}

func TestMinCostZeroLetsFreeRequestsThrough(t *testing.T) {
	free := sluicehttp.WithCost(func(*http.Request) (float64, error) { return 0, nil })
	s := newServer(t, fixedWindow(t, 1, time.Minute, newClock()), free, sluicehttp.WithMinCost(0))
	for range 3 {
		require.Equal(t, 200, s.get().Code)
	}
}

// TestMisplacedOrEmptyKeysAreTheServersMistake pins that a key function
// misconfigured by the server (PatternKey on a middleware that wraps the
// whole mux, Keys with no parts) answers 500, not a 400 that blames the
// client, and never puts every request on one key.
func TestMisplacedOrEmptyKeysAreTheServersMistake(t *testing.T) {
	for name, key := range map[string]sluicehttp.KeyFunc{
		"PatternKey around the mux": sluicehttp.PatternKey,
		"Keys of nothing":           sluicehttp.Keys(),
	} {
		t.Run(name, func(t *testing.T) {
			lim, err := sluice.NewGCRA(sluice.PerSecond(1), 5)
			require.NoError(t, err)
			limit, err := sluicehttp.New(lim, sluicehttp.WithKey(key))
			require.NoError(t, err)
			mux := http.NewServeMux()
			mux.Handle("GET /items/{id}", http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
			rec := httptest.NewRecorder()
			limit(mux).ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/items/1", nil))
			require.Equal(t, http.StatusInternalServerError, rec.Code)
			_, err = key(httptest.NewRequest(http.MethodGet, "/items/1", nil))
			require.ErrorIs(t, err, sluice.ErrInvalidConfig)
		})
	}
}
