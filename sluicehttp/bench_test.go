package sluicehttp_test

import (
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sluice-go/sluice"
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
