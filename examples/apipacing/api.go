package main

import (
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"time"
)

// thirdPartyAPI stands in for a third party's API, served in process: it
// admits limit requests per window, counted from its first request, and
// refuses the rest with 429 until the window ends. It does not publish its
// limit; its answers say how many requests are left and in how many
// seconds the window resets (X-RateLimit-Remaining and
// X-RateLimit-Reset-After, to the millisecond), as many APIs do.
type thirdPartyAPI struct {
	limit   int
	window  time.Duration
	latency time.Duration

	mu              sync.Mutex
	start           time.Time // of the current window
	used            int
	served, refused int
}

// RoundTrip answers r after the API's latency: the client sends with it
// as it would with http.DefaultTransport.
func (a *thirdPartyAPI) RoundTrip(r *http.Request) (*http.Response, error) {
	select {
	case <-time.After(a.latency):
	case <-r.Context().Done():
		return nil, r.Context().Err()
	}
	rec := httptest.NewRecorder()
	now := time.Now()
	a.mu.Lock()
	if a.start.IsZero() {
		a.start = now
	}
	if elapsed := now.Sub(a.start); elapsed >= a.window {
		a.start, a.used = a.start.Add(elapsed/a.window*a.window), 0
	}
	ok := a.used < a.limit
	if ok {
		a.used++
		a.served++
	} else {
		a.refused++
	}
	rec.Header().Set("X-RateLimit-Remaining", strconv.Itoa(a.limit-a.used))
	reset := a.start.Add(a.window).Sub(now)
	rec.Header().Set("X-RateLimit-Reset-After", strconv.FormatFloat(reset.Seconds(), 'f', 3, 64))
	a.mu.Unlock()
	if !ok {
		rec.WriteHeader(http.StatusTooManyRequests)
	}
	return rec.Result(), nil
}

// tally returns the requests served and refused so far.
func (a *thirdPartyAPI) tally() (served, refused int) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.served, a.refused
}
