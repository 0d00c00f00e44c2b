package sluicehttp_test

import (
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sluice-go/sluice"
	"github.com/sluice-go/sluice/internal/plantest"
	"github.com/sluice-go/sluice/sluicehttp"
)

// BenchmarkMiddleware measures the middleware's own cost on an admitted
// request: keying, deciding on the in-memory store, and the header fields.
func BenchmarkMiddleware(b *testing.B) {
	for _, bc := range []struct {
		name       string
		remoteAddr string
		opts       []sluicehttp.Option
	}{
		{name: "IPv4", remoteAddr: "192.0.2.1:1234"},
		{name: "IPv6/64", remoteAddr: "[2001:db8:1:2::1]:1234"},
		{name: "IPv4+legacy", remoteAddr: "192.0.2.1:1234", opts: []sluicehttp.Option{sluicehttp.WithLegacyHeaders()}},
		// Admitted at once under WithMaxDelay: a reservation instead of an
		// Allow, with no delay to sleep.
		{name: "IPv4+max delay", remoteAddr: "192.0.2.1:1234", opts: []sluicehttp.Option{sluicehttp.WithMaxDelay(time.Second)}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			lim, err := sluice.NewGCRA(sluice.PerSecond(1e9), 1e9)
			require.NoError(b, err)
			defer lim.Close()
			mw, err := sluicehttp.New(lim, bc.opts...)
			require.NoError(b, err)
			h := mw(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
			r := httptest.NewRequest(http.MethodGet, "/", nil)
			r.RemoteAddr = bc.remoteAddr
			w := httptest.NewRecorder()
			b.ReportAllocs()
			for b.Loop() {
				clear(w.Header())
				h.ServeHTTP(w, r)
			}
			require.Equal(b, http.StatusOK, w.Code)
		})
	}
}

// BenchmarkMiddlewareLimit measures an admitted request as
// BenchmarkMiddleware does, under a limiter with a fixed limit and under
// a per-key limiter of the same limit ([sluice.NewPerKey]), whose lookup
// is a map of tiers: the second pays the lookup, twice (for the fields,
// then for the decision), and the policy's cache. Compare with
// benchstat -col /limit.
func BenchmarkMiddlewareLimit(b *testing.B) {
	for _, limit := range []string{"fixed", "per-key"} {
		for _, bc := range []struct {
			name string
			opts []sluicehttp.Option
		}{
			{name: "IPv4"},
			{name: "IPv4+legacy", opts: []sluicehttp.Option{sluicehttp.WithLegacyHeaders()}},
			{name: "IPv4+max delay", opts: []sluicehttp.Option{sluicehttp.WithMaxDelay(time.Second)}},
		} {
			b.Run("limit="+limit+"/"+bc.name, func(b *testing.B) {
				lim := plantest.BenchLimiter(b, limit == "per-key")
				mw, err := sluicehttp.New(lim, bc.opts...)
				require.NoError(b, err)
				h := mw(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
				r := httptest.NewRequest(http.MethodGet, "/", nil)
				r.RemoteAddr = "192.0.2.1:1234"
				w := httptest.NewRecorder()
				b.ReportAllocs()
				for b.Loop() {
					clear(w.Header())
					h.ServeHTTP(w, r)
				}
				require.Equal(b, http.StatusOK, w.Code)
			})
		}
	}
}
