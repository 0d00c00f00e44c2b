// Package standin serves stand-ins for third-party APIs that limit their
// clients without telling them the limit in advance, as real ones do: a
// number of requests (and, for an LLM API, of tokens) per fixed window,
// refused with 429 beyond it, and header fields in one of the styles seen
// in the wild. Tests and examples pace clients against them.
package standin

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"time"
)

// Style is what an API says in its answers.
type Style uint8

const (
	// XRateLimit sends X-RateLimit-Limit, -Remaining and -Reset (an epoch
	// instant in seconds) on every answer; a 429 says nothing more.
	XRateLimit Style = iota + 1
	// RetryAfter says nothing but a 429 with Retry-After in seconds.
	RetryAfter
	// LLM sends x-ratelimit-limit-, -remaining- and -reset-requests and
	// -tokens on every answer, the resets as durations ("6m0s").
	LLM
	// Silent answers 429 and nothing else.
	Silent
)

// TokensHeader is the request header an LLM client states its request's
// tokens in: the stand-in's way of knowing what a prompt costs.
const TokensHeader = "X-Tokens"

// API is a stand-in API. Its windows start at its first request. It is
// safe for concurrent use.
type API struct {
	style   Style
	window  time.Duration
	latency time.Duration

	mu             sync.Mutex
	limit, tokens  float64     // per window
	next           *[2]float64 // the limits from the next window on, if changed
	first, start   time.Time   // the first request, and the current window's start
	used, usedToks float64
	log            []answer
}

// answer is one request the API answered.
type answer struct {
	at      time.Time
	refused bool
	tokens  float64
}

// New returns an API of style that serves limit requests (and, for LLM,
// tokens tokens) per window, answering each after latency.
func New(style Style, limit, tokens float64, window, latency time.Duration) *API {
	return &API{style: style, limit: limit, tokens: tokens, window: window, latency: latency}
}

// SetLimit changes the API's limits from its next window on.
func (a *API) SetLimit(limit, tokens float64) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.next = &[2]float64{limit, tokens}
}

// RoundTrip answers r in process, after the API's latency: it implements
// http.RoundTripper, for a client to send with.
func (a *API) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Body != nil {
		r.Body.Close()
	}
	select {
	case <-time.After(a.latency):
	case <-r.Context().Done():
		return nil, r.Context().Err()
	}
	rec := httptest.NewRecorder()
	a.ServeHTTP(rec, r)
	return rec.Result(), nil
}

// ServeHTTP answers r at once: it implements http.Handler, for a server.
func (a *API) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	toks := 0.0
	if v := r.Header.Get(TokensHeader); v != "" {
		n, err := strconv.ParseFloat(v, 64)
		if err != nil || !(n >= 0) {
			http.Error(w, "bad "+TokensHeader, http.StatusBadRequest)
			return
		}
		toks = n
	}
	now := time.Now()
	a.mu.Lock()
	if a.start.IsZero() || now.Sub(a.start) >= a.window {
		if a.start.IsZero() {
			a.start, a.first = now, now
		}
		a.start = a.start.Add(now.Sub(a.start) / a.window * a.window)
		a.used, a.usedToks = 0, 0
		if a.next != nil {
			a.limit, a.tokens, a.next = a.next[0], a.next[1], nil
		}
	}
	ok := a.used+1 <= a.limit && (a.style != LLM || a.usedToks+toks <= a.tokens)
	if ok {
		a.used++
		a.usedToks += toks
	}
	a.log = append(a.log, answer{at: now, refused: !ok, tokens: toks})
	reset := a.start.Add(a.window).Sub(now)
	h := w.Header()
	switch a.style {
	case XRateLimit:
		h.Set("X-RateLimit-Limit", strconv.FormatFloat(a.limit, 'f', -1, 64))
		h.Set("X-RateLimit-Remaining", strconv.FormatFloat(a.limit-a.used, 'f', -1, 64))
		h.Set("X-RateLimit-Reset", strconv.FormatInt(a.start.Add(a.window+time.Second-1).Unix(), 10))
	case RetryAfter:
		if !ok {
			h.Set("Retry-After", strconv.FormatInt(int64(math.Ceil(reset.Seconds())), 10))
		}
	case LLM:
		reset = reset.Round(time.Millisecond)
		h.Set("x-ratelimit-limit-requests", strconv.FormatFloat(a.limit, 'f', -1, 64))
		h.Set("x-ratelimit-remaining-requests", strconv.FormatFloat(a.limit-a.used, 'f', -1, 64))
		h.Set("x-ratelimit-reset-requests", reset.String())
		h.Set("x-ratelimit-limit-tokens", strconv.FormatFloat(a.tokens, 'f', -1, 64))
		h.Set("x-ratelimit-remaining-tokens", strconv.FormatFloat(max(a.tokens-a.usedToks, 0), 'f', -1, 64))
		h.Set("x-ratelimit-reset-tokens", reset.String())
	}
	a.mu.Unlock()
	if !ok {
		http.Error(w, "rate limit exceeded", http.StatusTooManyRequests)
		return
	}
	fmt.Fprintln(w, "ok")
}

// Tally is what an API answered over a span of time.
type Tally struct {
	Served, Refused int
	Tokens          float64 // of the requests served
}

// Tally returns what the API answered from from, inclusive, to to,
// exclusive.
func (a *API) Tally(from, to time.Time) Tally {
	a.mu.Lock()
	defer a.mu.Unlock()
	var t Tally
	for _, x := range a.log {
		switch {
		case x.at.Before(from) || !x.at.Before(to):
		case x.refused:
			t.Refused++
		default:
			t.Served++
			t.Tokens += x.tokens
		}
	}
	return t
}

// Windows returns the API's tally in each of its first n windows, from
// its first request: in each, it never serves more than its limit.
func (a *API) Windows(n int) []Tally {
	a.mu.Lock()
	first := a.first
	a.mu.Unlock()
	ts := make([]Tally, n)
	for i := range ts {
		from := first.Add(time.Duration(i) * a.window)
		ts[i] = a.Tally(from, from.Add(a.window))
	}
	return ts
}

// Drive sends requests to the API through each of clients from workers
// goroutines each, until ctx ends: each worker its next request as soon
// as its last is answered. tokens, if not nil, states the tokens of a
// worker's n-th request (TokensHeader). It returns the first error but
// the end of ctx.
func Drive(ctx context.Context, clients []*http.Client, workers int, tokens func(n int) float64) error {
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		first error
	)
	for _, c := range clients {
		for range workers {
			wg.Go(func() {
				if err := drive(ctx, c, tokens); err != nil {
					mu.Lock()
					first = cmp.Or(first, err)
					mu.Unlock()
				}
			})
		}
	}
	wg.Wait()
	return first
}

// drive is one worker of Drive.
func drive(ctx context.Context, c *http.Client, tokens func(n int) float64) error {
	for n := 0; ; n++ {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, "https://api.example/v1/complete", nil)
		if err != nil {
			return err
		}
		if tokens != nil {
			req.Header.Set(TokensHeader, strconv.FormatFloat(tokens(n), 'f', -1, 64))
		}
		resp, err := c.Do(req)
		switch {
		case ctx.Err() != nil || errors.Is(err, context.DeadlineExceeded):
			return nil // the end of ctx, or a turn after it
		case err != nil:
			return err
		}
		_, err = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if err != nil {
			return err
		}
	}
}
