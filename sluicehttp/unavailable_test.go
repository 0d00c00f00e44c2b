package sluicehttp_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sluice-go/sluice"
	"github.com/sluice-go/sluice/engine"
	"github.com/sluice-go/sluice/sluicehttp"
)

// stalledStore is a store whose every call blocks until its context ends,
// as a remote store does when its server hangs. entered receives a value
// when a call starts.
type stalledStore struct{ entered chan struct{} }

func (s stalledStore) Apply(ctx context.Context, _ string, _ *engine.Params, _ engine.Op) (engine.Decision, error) {
	s.entered <- struct{}{}
	<-ctx.Done()
	return engine.Decision{}, ctx.Err()
}

func (s stalledStore) Reset(ctx context.Context, _ string) error {
	<-ctx.Done()
	return ctx.Err()
}

func TestFailClosedAnswerCarriesRetryAfter(t *testing.T) {
	down, err := sluice.NewFixedWindow(5, time.Minute, sluice.WithStore(failingStore{}), sluice.WithClock(newClock()))
	require.NoError(t, err)
	mw, err := sluicehttp.New(down)
	require.NoError(t, err)
	srv := httptest.NewServer(mw(http.NotFoundHandler()))
	defer srv.Close()

	resp, err := srv.Client().Get(srv.URL)
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusServiceUnavailable, resp.StatusCode)
	require.Equal(t, "1", resp.Header.Get("Retry-After"))
}

func TestClientGoneWhileDecidingIsNotAStoreError(t *testing.T) {
	for _, failOpen := range []bool{false, true} {
		t.Run(map[bool]string{false: "fail closed", true: "fail open"}[failOpen], func(t *testing.T) {
			store := stalledStore{entered: make(chan struct{}, 1)}
			lim, err := sluice.NewFixedWindow(5, time.Minute, sluice.WithStore(store), sluice.WithClock(newClock()))
			require.NoError(t, err)
			hooked := make(chan error, 1)
			opts := []sluicehttp.Option{sluicehttp.WithErrorHook(func(_ *http.Request, err error) { hooked <- err })}
			if failOpen {
				opts = append(opts, sluicehttp.WithFailOpen())
			}
			mw, err := sluicehttp.New(lim, opts...)
			require.NoError(t, err)
			var served atomic.Int32
			srv := httptest.NewServer(mw(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { served.Add(1) })))
			defer srv.Close()

			ctx, cancel := context.WithCancel(context.Background())
			req, err := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL, nil)
			require.NoError(t, err)
			sent := make(chan error, 1)
			go func() {
				resp, err := srv.Client().Do(req)
				if err == nil {
					resp.Body.Close()
				}
				sent <- err
			}()
			<-store.entered // the decision is pending
			cancel()        // and the client hangs up
			require.ErrorIs(t, <-sent, context.Canceled)

			err = <-hooked
			require.ErrorIs(t, err, context.Canceled)
			require.ErrorIs(t, err, sluicehttp.ErrRequestCanceled)
			require.False(t, errors.Is(err, errStoreDown))
			srv.Close() // waits for the handler to return
			require.Zero(t, served.Load(), "nobody is there to serve")
		})
	}
}

// keyRefusingStore refuses every key, as pgstore refuses a key that is
// not valid UTF-8.
type keyRefusingStore struct{}

func (keyRefusingStore) Apply(_ context.Context, key string, _ *engine.Params, _ engine.Op) (engine.Decision, error) {
	return engine.Decision{}, fmt.Errorf("%w: key %q", sluice.ErrInvalidKey, key)
}

func (keyRefusingStore) Reset(context.Context, string) error { return sluice.ErrInvalidKey }

// TestKeyTheStoreCannotHoldIsABadRequest pins that a key refused by the
// store as bad input (pgstore refuses one that is not UTF-8) is the
// client's 400, not a 503 that reports an outage, and is not served under
// fail-open, which is for outages.
func TestKeyTheStoreCannotHoldIsABadRequest(t *testing.T) {
	require.Equal(t, http.StatusServiceUnavailable, sluicehttp.ErrorStatus(errors.New("connection refused")))
	lim, err := sluice.NewFixedWindow(5, time.Minute, sluice.WithStore(keyRefusingStore{}), sluice.WithClock(newClock()))
	require.NoError(t, err)
	for _, opts := range [][]sluicehttp.Option{nil, {sluicehttp.WithFailOpen()}} {
		mw, err := sluicehttp.New(lim, opts...)
		require.NoError(t, err)
		served := false
		rec := httptest.NewRecorder()
		mw(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { served = true })).
			ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/", nil))
		require.Equal(t, http.StatusBadRequest, rec.Code)
		require.False(t, served)
		require.Empty(t, rec.Header().Get("Retry-After"), "nothing to wait for")
	}
}
