package sluicehttp_test

import (
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sluice-go/sluice/sluicehttp"
)

func TestZeroCostRequestsAreChargedTheMinimumCost(t *testing.T) {
	// An empty batch costs 0 by the cost function; a flood of them must
	// still be limited.
	empty := sluicehttp.WithCost(func(*http.Request) (float64, error) { return 0, nil })
	s := newServer(t, fixedWindow(t, 2, time.Minute, newClock()), empty)
	require.Equal(t, 200, s.get().Code)
	require.Equal(t, 200, s.get().Code)
	requireResponse(t, response{status: 429, rateLimit: `"default";r=0;t=60`, retryAfter: "60"}, s.get())
	require.Equal(t, 2, s.served)
}

func TestFailingCostFunctionStillChargesTheMinimumCost(t *testing.T) {
	// A flood of malformed requests is answered 400 while the key has
	// allowance left, then 429: it cannot bypass the limit.
	broken := sluicehttp.WithCost(func(*http.Request) (float64, error) { return 0, errors.New("bad batch") })
	s := newServer(t, fixedWindow(t, 2, time.Minute, newClock()), broken)
	requireResponse(t, response{status: 400, rateLimit: `"default";r=1;t=60`}, s.get())
	requireResponse(t, response{status: 400, rateLimit: `"default";r=0;t=60`}, s.get())
	requireResponse(t, response{status: 429, rateLimit: `"default";r=0;t=60`, retryAfter: "60"}, s.get())
	require.Zero(t, s.served)
}

func TestBodyLargerThanTheCostFunctionReadsIsTooLarge(t *testing.T) {
	perLine := sluicehttp.WithCost(func(r *http.Request) (float64, error) {
		b, err := io.ReadAll(http.MaxBytesReader(nil, r.Body, 8))
		if err != nil {
			return 0, err
		}
		return float64(strings.Count(string(b), "\n")), nil
	})
	s := newServer(t, fixedWindow(t, 100, time.Minute, newClock()), perLine)
	w := s.do(httptest.NewRequest(http.MethodPost, "/", strings.NewReader("a\nb\nc\nd\ne\n")))
	require.Equal(t, http.StatusRequestEntityTooLarge, w.Code)
	require.Zero(t, s.served)
}
