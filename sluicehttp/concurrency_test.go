package sluicehttp_test

import (
	"context"
	"errors"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sluice-go/sluice"
	"github.com/sluice-go/sluice/sluicehttp"
)

// slots returns a concurrency limit of limit per key, with leases of ttl,
// on clock (the system's if nil), closed when the test ends.
func slots(t *testing.T, limit float64, ttl time.Duration, clock sluice.Clock, opts ...sluice.Option) *sluice.Limiter {
	t.Helper()
	if clock != nil {
		opts = append(opts, sluice.WithClock(clock))
	}
	lim, err := sluice.NewConcurrencyLimit(limit, ttl, opts...)
	require.NoError(t, err)
	t.Cleanup(func() { lim.Close() })
	return lim
}

// inUse returns the slots held on key.
func inUse(t *testing.T, lim *sluice.Limiter, key string) float64 {
	t.Helper()
	d, err := lim.CanAccept(context.Background(), key, 0)
	require.NoError(t, err)
	return d.Used
}

// hold takes n leases on key, as requests in flight would.
func hold(t *testing.T, lim *sluice.Limiter, key string, n int) []sluice.Lease {
	t.Helper()
	leases := make([]sluice.Lease, n)
	for i := range leases {
		lease, err := lim.TryAcquire(context.Background(), key, 1)
		require.NoError(t, err)
		require.True(t, lease.Allowed, "lease %d", i)
		leases[i] = lease
	}
	return leases
}

// returned wraps h so that done receives a value once h has returned,
// the middleware inside it included: its deferred release is made by then.
func returned(h http.Handler, done chan<- struct{}) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer func() { done <- struct{}{} }()
		h.ServeHTTP(w, r)
	})
}

// statusOf sends a GET to url with client and returns its status, or 0 if
// it failed.
func statusOf(client *http.Client, url string) int {
	resp, err := client.Get(url)
	if err != nil {
		return 0
	}
	resp.Body.Close()
	return resp.StatusCode
}

// TestConcurrencyLimitNeverServesMoreThanItsSlotsAtOnce sends 64 requests
// at once on one key through a real server, and counts the requests in
// flight as the handlers themselves see them. Each handler stays until
// the test lets it go, so that the limit is reached: the denied are
// answered 429 while the slots are held, and the waiting
// ([sluicehttp.WithMaxDelay]) are served one by one as slots come back.
func TestConcurrencyLimitNeverServesMoreThanItsSlotsAtOnce(t *testing.T) {
	const requests = 64
	tests := []struct {
		name  string
		limit int
		wait  bool
	}{
		{name: "one slot, the others denied", limit: 1},
		{name: "two slots, the others denied", limit: 2},
		{name: "five slots, the others denied", limit: 5},
		{name: "one slot, the others waiting", limit: 1, wait: true},
		{name: "two slots, the others waiting", limit: 2, wait: true},
		{name: "five slots, the others waiting", limit: 5, wait: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			lim := slots(t, float64(tt.limit), time.Minute, nil)
			var opts []sluicehttp.Option
			if tt.wait {
				opts = append(opts, sluicehttp.WithMaxDelay(time.Minute))
			}
			mw, err := sluicehttp.New(lim, opts...)
			require.NoError(t, err)
			var inFlight, most atomic.Int64
			entered := make(chan struct{}, requests)
			proceed := make(chan struct{})
			srv := httptest.NewServer(mw(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {
				n := inFlight.Add(1)
				for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
				}
				entered <- struct{}{}
				<-proceed
				inFlight.Add(-1)
			})))
			defer srv.Close()

			codes := make(chan int, requests)
			for range requests {
				go func() { codes <- statusOf(srv.Client(), srv.URL) }()
			}
			answered := 0 // of the codes
			for range tt.limit {
				<-entered
			}
			for range requests - tt.limit {
				if !tt.wait {
					require.Equal(t, http.StatusTooManyRequests, <-codes)
					answered++
					continue
				}
				proceed <- struct{}{} // one ends, and one waiting takes its slot
				for next := false; !next; {
					select {
					case <-entered:
						next = true
					case code := <-codes: // the one that ended, or one that waited in vain
						require.Equal(t, http.StatusOK, code)
						answered++
					}
				}
			}
			close(proceed)
			for ; answered < requests; answered++ {
				require.Equal(t, http.StatusOK, <-codes)
			}
			require.Equal(t, int64(tt.limit), most.Load(), "as many at once as the limit, never more")
			srv.Close() // waits for every handler, and its release
			require.Zero(t, inUse(t, lim, "127.0.0.1"), "every slot given back")
		})
	}
}

// TestFullConcurrencyLimitIsAnswered429WithItsFields pins the whole
// answer to a request, admitted or denied, with leases already held on its
// key by requests in flight: 30 s leases taken 10 s apart, on a fake
// clock, so that the earliest expires in 20 s.
func TestFullConcurrencyLimitIsAnswered429WithItsFields(t *testing.T) {
	const policy = `"default";q=2;qu="concurrent-requests"`
	busy := func(d time.Duration) []sluicehttp.Option {
		return []sluicehttp.Option{sluicehttp.WithConcurrencyRetryAfter(d)}
	}
	tests := []struct {
		name       string
		held       int
		opts       []sluicehttp.Option
		status     int
		rateLimit  string
		retryAfter string
		body       string
	}{
		0: {name: "a free key", held: 0, status: 200, rateLimit: `"default";r=1`, body: "ok"},
		1: {name: "the last slot", held: 1, status: 200, rateLimit: `"default";r=0`, body: "ok"},
		2: {name: "full: 429 with the hint of a second", held: 2, status: 429, rateLimit: `"default";r=0`, retryAfter: "1",
			body: "too many concurrent requests\n"},
		3: {name: "a hint rounds up", held: 2, opts: busy(2500 * time.Millisecond), status: 429, rateLimit: `"default";r=0`, retryAfter: "3",
			body: "too many concurrent requests\n"},
		4: {name: "a hint past the earliest expiry is capped there", held: 2, opts: busy(time.Hour), status: 429, rateLimit: `"default";r=0`, retryAfter: "20",
			body: "too many concurrent requests\n"},
		5: {name: "no hint, no Retry-After", held: 2, opts: busy(0), status: 429, rateLimit: `"default";r=0`,
			body: "too many concurrent requests\n"},
		6: {name: "503 through the deny handler, as nginx's limit_conn", held: 2, status: 503, rateLimit: `"default";r=0`, retryAfter: "1",
			opts: []sluicehttp.Option{sluicehttp.WithDenyHandler(func(w http.ResponseWriter, _ *http.Request, _ sluice.Decision) {
				http.Error(w, "server busy", http.StatusServiceUnavailable)
			})},
			body: "server busy\n"},
		7: {name: "dry run serves a request the limit would deny", held: 2, opts: []sluicehttp.Option{sluicehttp.WithDryRun()},
			status: 200, rateLimit: `"default";r=0`, body: "ok"},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clock := newClock()
			lim := slots(t, 2, 30*time.Second, clock)
			for j := range tt.held {
				if j > 0 {
					clock.Add(10 * time.Second)
				}
				hold(t, lim, "192.0.2.1", 1)
			}
			s := newServer(t, lim, tt.opts...)
			w := s.get()
			require.Equal(t, tt.status, w.Code, "row %d", i)
			require.Equal(t, []string{policy}, w.Header().Values("RateLimit-Policy"), "row %d", i)
			require.Equal(t, []string{tt.rateLimit}, w.Header().Values("RateLimit"), "row %d", i)
			require.Equal(t, tt.retryAfter, w.Header().Get("Retry-After"), "row %d", i)
			require.Equal(t, tt.body, w.Body.String(), "row %d", i)
			require.Equal(t, float64(tt.held), inUse(t, lim, "192.0.2.1"), "row %d: the request's own lease given back", i)
		})
	}
}

func TestConcurrencyLegacyHeadersHaveNoReset(t *testing.T) {
	clock := newClock()
	perMinute, err := sluicehttp.New(fixedWindow(t, 10, time.Minute, clock), sluicehttp.WithLegacyHeaders(), sluicehttp.WithPolicyName("minute"))
	require.NoError(t, err)
	atOnce, err := sluicehttp.New(slots(t, 2, time.Minute, clock), sluicehttp.WithLegacyHeaders(), sluicehttp.WithPolicyName("slots"))
	require.NoError(t, err)
	w := wrap(func(h http.Handler) http.Handler { return perMinute(atOnce(h)) }).get()
	require.Equal(t, http.StatusOK, w.Code)
	require.Equal(t, []string{`"minute";r=9;t=60`, `"slots";r=1`}, w.Header().Values("RateLimit"))
	require.Equal(t, "2", w.Header().Get("X-RateLimit-Limit"), "the innermost policy's")
	require.Equal(t, "1", w.Header().Get("X-RateLimit-Remaining"))
	require.Empty(t, w.Header().Values("X-RateLimit-Reset"), "no reset to tell, and not the outer policy's beside the inner's limit")
}

// TestPanickingHandlerGivesItsSlotBack requires that a handler that panics
// gives its slot back as the panic leaves the middleware, and that the
// panic goes on to the server as it would without the middleware: called
// directly, and through a real server, which recovers it.
func TestPanickingHandlerGivesItsSlotBack(t *testing.T) {
	for _, value := range []any{"boom", http.ErrAbortHandler} {
		t.Run(fmtValue(value), func(t *testing.T) {
			lim := slots(t, 1, time.Hour, nil)
			mw, err := sluicehttp.New(lim)
			require.NoError(t, err)
			var panicking atomic.Bool
			panicking.Store(true)
			h := mw(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
				if panicking.Load() {
					panic(value)
				}
				_, _ = w.Write([]byte("ok"))
			}))

			require.PanicsWithValue(t, value, func() { h.ServeHTTP(httptest.NewRecorder(), newRequest("192.0.2.1:1")) },
				"the panic leaves the middleware as it came")
			require.Zero(t, inUse(t, lim, "192.0.2.1"))

			srv := httptest.NewUnstartedServer(h)
			srv.Config.ErrorLog = log.New(io.Discard, "", 0) // the server logs the panic it recovers
			srv.Start()
			defer srv.Close()
			require.Zero(t, statusOf(srv.Client(), srv.URL), "the server drops the connection of a panicking handler")
			panicking.Store(false)
			require.Equal(t, http.StatusOK, statusOf(srv.Client(), srv.URL), "the next request gets the slot")
		})
	}
}

func fmtValue(v any) string {
	if err, ok := v.(error); ok {
		return err.Error()
	}
	return v.(string)
}

// TestClientGoneMidRequestGivesItsSlotBack cancels a request while its
// handler runs, over HTTP/1.1 and HTTP/2: the server cancels the
// request's context, the handler returns, and the lease is released
// though the context it was taken under has ended.
func TestClientGoneMidRequestGivesItsSlotBack(t *testing.T) {
	for _, proto := range []string{"HTTP/1.1", "HTTP/2.0"} {
		t.Run(proto, func(t *testing.T) {
			lim := slots(t, 1, time.Hour, nil)
			hooked := make(chan error, 1)
			mw, err := sluicehttp.New(lim, sluicehttp.WithErrorHook(func(_ *http.Request, err error) { hooked <- err }))
			require.NoError(t, err)
			entered := make(chan string, 1)
			done := make(chan struct{}, 3)
			srv := httptest.NewUnstartedServer(returned(mw(http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) {
				entered <- r.Proto
				if r.URL.Query().Has("slow") {
					<-r.Context().Done() // until the client goes
				}
			})), done))
			srv.EnableHTTP2 = proto == "HTTP/2.0"
			srv.StartTLS()
			defer srv.Close()

			ctx, hangUp := context.WithCancel(t.Context())
			req, err := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL+"/?slow", nil)
			require.NoError(t, err)
			left := make(chan error, 1)
			go func() {
				resp, err := srv.Client().Do(req)
				if err == nil {
					resp.Body.Close()
				}
				left <- err
			}()
			require.Equal(t, proto, <-entered)
			require.Equal(t, http.StatusTooManyRequests, statusOf(srv.Client(), srv.URL), "the slot is held meanwhile")
			<-done

			hangUp()
			require.ErrorIs(t, <-left, context.Canceled)
			<-done // the slow request's handler and middleware have returned
			require.Zero(t, inUse(t, lim, "127.0.0.1"), "released after its context ended")
			require.Equal(t, http.StatusOK, statusOf(srv.Client(), srv.URL), "the next request gets the slot")
			<-entered
			require.Empty(t, hooked, "a release made after the client left is no error")
		})
	}
}

// TestRequestOutlivingItsLeaseReportsErrRelease runs a handler past the
// lease's time to live: its slot may have gone to another request, and
// the release, which finds the lease expired, says so to the error hook.
func TestRequestOutlivingItsLeaseReportsErrRelease(t *testing.T) {
	clock := newClock()
	lim := slots(t, 1, 10*time.Second, clock)
	var hooked []error
	mw, err := sluicehttp.New(lim, sluicehttp.WithErrorHook(func(_ *http.Request, err error) { hooked = append(hooked, err) }))
	require.NoError(t, err)
	h := mw(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { clock.Add(11 * time.Second) }))
	w := httptest.NewRecorder()
	h.ServeHTTP(w, newRequest("192.0.2.1:1"))
	require.Equal(t, http.StatusOK, w.Code)
	require.Len(t, hooked, 1)
	require.ErrorIs(t, hooked[0], sluicehttp.ErrRelease)
	require.ErrorIs(t, hooked[0], sluice.ErrNotHeld)
}

// TestConcurrencyLimitWaitsForASlotUpToMaxDelay holds requests in a
// testing/synctest bubble, whose clock moves only when every goroutine
// waits: a request that finds the slot taken is served as soon as it is
// given back; one that finds it taken for the whole delay is answered 429
// at its end, to the nanosecond; one whose client leaves while it waits is
// neither served nor answered.
func TestConcurrencyLimitWaitsForASlotUpToMaxDelay(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		lim, err := sluice.NewConcurrencyLimit(1, time.Hour)
		require.NoError(t, err)
		defer lim.Close()
		var hooked []error
		decided := make(chan sluice.Decision, 4)
		mw, err := sluicehttp.New(lim, sluicehttp.WithMaxDelay(5*time.Second),
			sluicehttp.WithErrorHook(func(_ *http.Request, err error) { hooked = append(hooked, err) }),
			sluicehttp.WithDecisionHook(func(_ *http.Request, d sluice.Decision) { decided <- d }))
		require.NoError(t, err)
		proceed := make(chan struct{})
		h := mw(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Query().Has("slow") {
				<-proceed
			}
			_, _ = w.Write([]byte(r.URL.Query().Get("id")))
		}))
		send := func(ctx context.Context, query string) <-chan *httptest.ResponseRecorder {
			replies := make(chan *httptest.ResponseRecorder, 1)
			go func() {
				w := httptest.NewRecorder()
				h.ServeHTTP(w, httptest.NewRequestWithContext(ctx, http.MethodGet, "/?"+query, nil))
				replies <- w
			}()
			synctest.Wait()
			return replies
		}

		first := send(t.Context(), "id=first&slow")
		require.True(t, (<-decided).Allowed)
		waiting := send(t.Context(), "id=waiting")
		require.Empty(t, decided, "waiting, undecided")
		time.Sleep(2 * time.Second) // the bubble's clock: two seconds of the delay pass
		proceed <- struct{}{}
		require.Equal(t, "first", (<-first).Body.String())
		w := <-waiting
		require.Equal(t, http.StatusOK, w.Code)
		require.Equal(t, "waiting", w.Body.String(), "served once the slot came back")
		require.True(t, (<-decided).Allowed)

		held := send(t.Context(), "id=held&slow")
		<-decided
		begin := time.Now()
		timedOut := send(t.Context(), "id=late")
		w = <-timedOut
		require.Equal(t, 5*time.Second, time.Since(begin), "denied when the delay is over, not sooner")
		require.Equal(t, http.StatusTooManyRequests, w.Code)
		require.Equal(t, `"default";r=0`, w.Header().Get("RateLimit"))
		require.Equal(t, "1", w.Header().Get("Retry-After"))
		require.False(t, (<-decided).Allowed)

		ctx, hangUp := context.WithCancel(t.Context())
		leaving := send(ctx, "id=leaving")
		hangUp()
		w = <-leaving
		require.Empty(t, w.Header().Values("RateLimit"), "nothing written for a client that left")
		require.Empty(t, w.Body.String())
		require.Len(t, hooked, 1)
		require.ErrorIs(t, hooked[0], sluicehttp.ErrRequestCanceled)
		require.ErrorIs(t, hooked[0], context.Canceled)

		proceed <- struct{}{}
		require.Equal(t, http.StatusOK, (<-held).Code)
		require.Zero(t, inUse(t, lim, "192.0.2.1"))
	})
}

func TestMaxDelayTakesAConcurrencyLimitButNotAWindow(t *testing.T) {
	_, err := sluicehttp.New(slots(t, 2, time.Minute, newClock()), sluicehttp.WithMaxDelay(time.Second))
	require.NoError(t, err)
	_, err = sluicehttp.New(fixedWindow(t, 2, time.Minute, newClock()), sluicehttp.WithMaxDelay(time.Second))
	require.ErrorIs(t, err, sluice.ErrUnsupported)
	_, err = sluicehttp.New(slots(t, 2, time.Minute, newClock()), sluicehttp.WithConcurrencyRetryAfter(-time.Second))
	require.ErrorIs(t, err, sluice.ErrInvalidConfig)
}

func TestFieldsOfAConcurrencyLimitSendTheRetryHint(t *testing.T) {
	clock := newClock()
	lim := slots(t, 1, time.Minute, clock)
	fields, err := sluicehttp.NewFields(lim, sluicehttp.WithConcurrencyRetryAfter(3*time.Second))
	require.NoError(t, err)
	hold(t, lim, "k", 1)
	lease, err := lim.TryAcquire(context.Background(), "k", 1)
	require.NoError(t, err)
	require.False(t, lease.Allowed)
	h := http.Header{}
	fields.Write(h, lease.Decision)
	require.Equal(t, `"default";q=1;qu="concurrent-requests"`, h.Get("RateLimit-Policy"))
	require.Equal(t, `"default";r=0`, h.Get("RateLimit"))
	require.Equal(t, "3", h.Get("Retry-After"), "the hint, not the lease's minute")
}

// groupOfSlots returns a group middleware of a rate of 1 a second (burst
// 3) and 1 request at once, per client, on one store and a fake clock.
func groupOfSlots(t *testing.T, opts ...sluicehttp.Option) (func(http.Handler) http.Handler, *sluice.Limiter, *sluice.Limiter) {
	t.Helper()
	st := sluice.NewMemStore(sluice.MemStoreConfig{})
	t.Cleanup(func() { st.Close() })
	c := newClock()
	rate, err := sluice.NewGCRA(sluice.PerSecond(1), 3, sluice.WithStore(st), sluice.WithClock(c))
	require.NoError(t, err)
	atOnce := slots(t, 1, time.Minute, c, sluice.WithStore(st))
	mw, err := sluicehttp.NewGroup([]sluicehttp.Policy{{Limiter: rate, Name: "rate"}, {Limiter: atOnce, Name: "slots"}}, opts...)
	require.NoError(t, err)
	return mw, rate, atOnce
}

// TestAGroupHoldsItsLeaseWhileServing pins a group of a rate and a
// concurrency limit: a request holds the slot while it is served and
// gives it back when its handler returns or panics; a request that finds
// the slot taken is answered 429 with the hint and recorded in neither
// policy; one the rate denies is answered with the rate's exact
// Retry-After.
func TestAGroupHoldsItsLeaseWhileServing(t *testing.T) {
	mw, rate, atOnce := groupOfSlots(t)
	const key = "{192.0.2.1}:slots"
	var inner *httptest.ResponseRecorder
	var h http.Handler
	h = mw(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		require.Equal(t, 1.0, inUse(t, atOnce, key), "held while served")
		switch r.URL.Query().Get("do") {
		case "nest": // a second request while this one is served
			inner = httptest.NewRecorder()
			h.ServeHTTP(inner, httptest.NewRequest(http.MethodGet, "/", nil))
		case "panic":
			panic("boom")
		}
	}))
	get := func(do string) *httptest.ResponseRecorder {
		w := httptest.NewRecorder()
		h.ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/?do="+do, nil))
		return w
	}

	w := get("nest")
	require.Equal(t, http.StatusOK, w.Code)
	require.Equal(t, []string{`"rate";q=3;w=3`, `"slots";q=1;qu="concurrent-requests"`}, w.Header().Values("RateLimit-Policy"))
	require.Equal(t, []string{`"rate";r=2;t=1`, `"slots";r=0`}, w.Header().Values("RateLimit"))
	require.Equal(t, http.StatusTooManyRequests, inner.Code)
	require.Equal(t, "too many concurrent requests\n", inner.Body.String())
	require.Equal(t, "1", inner.Header().Get("Retry-After"), "the hint: the rate would admit it")
	require.Zero(t, inUse(t, atOnce, key))

	require.Panics(t, func() { get("panic") })
	require.Zero(t, inUse(t, atOnce, key), "given back by a panicking handler")

	w = get("")
	require.Equal(t, http.StatusOK, w.Code)
	require.Equal(t, []string{`"rate";r=0;t=3`, `"slots";r=0`}, w.Header().Values("RateLimit"),
		"the rate spent by the three served, not by the one the slot denied")
	w = get("")
	require.Equal(t, http.StatusTooManyRequests, w.Code)
	require.Equal(t, "rate limit exceeded\n", w.Body.String())
	require.Equal(t, "1", w.Header().Get("Retry-After"), "the rate's: one a second")
	require.Equal(t, []string{`"rate";r=0;t=3`, `"slots";r=1`}, w.Header().Values("RateLimit"))
	d, err := rate.CanAccept(context.Background(), "{192.0.2.1}:rate", 0)
	require.NoError(t, err)
	require.Zero(t, d.Remaining)
	require.Zero(t, inUse(t, atOnce, key))
}

// TestAGroupWithSlotsWaitsForEveryPolicy holds a request of a group with
// a concurrency limit and a fixed window, which cannot reserve: under
// WithMaxDelay the group waits with Acquire until the slot comes back.
func TestAGroupWithSlotsWaitsForEveryPolicy(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := sluice.NewMemStore(sluice.MemStoreConfig{})
		defer st.Close()
		window, err := sluice.NewFixedWindow(10, time.Minute, sluice.WithStore(st))
		require.NoError(t, err)
		defer window.Close()
		atOnce, err := sluice.NewConcurrencyLimit(1, time.Hour, sluice.WithStore(st))
		require.NoError(t, err)
		defer atOnce.Close()
		mw, err := sluicehttp.NewGroup([]sluicehttp.Policy{{Limiter: window, Name: "minute"}, {Limiter: atOnce, Name: "slots"}},
			sluicehttp.WithMaxDelay(time.Second))
		require.NoError(t, err)
		proceed := make(chan struct{})
		h := mw(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { <-proceed }))
		codes := make(chan int, 3)
		for range 3 {
			go func() {
				w := httptest.NewRecorder()
				h.ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/", nil))
				codes <- w.Code
			}()
		}
		synctest.Wait() // one served, two waiting
		proceed <- struct{}{}
		require.Equal(t, http.StatusOK, <-codes)
		synctest.Wait()         // the first waiting is served once the slot came back
		time.Sleep(time.Second) // the other waits out its delay, on the bubble's clock
		require.Equal(t, http.StatusTooManyRequests, <-codes)
		proceed <- struct{}{}
		require.Equal(t, http.StatusOK, <-codes)
		d, err := window.CanAccept(context.Background(), "{192.0.2.1}:minute", 0)
		require.NoError(t, err)
		require.Equal(t, 8.0, d.Remaining, "the window charged for the two served only")
	})
}

// TestErrorsOfAConcurrencyLimitAreAnsweredAsARateLimitsAre pins that a
// lease that cannot be taken fails as a decision does.
func TestErrorsOfAConcurrencyLimitAreAnsweredAsARateLimitsAre(t *testing.T) {
	down := slots(t, 2, time.Minute, newClock(), sluice.WithStore(failingStore{}))
	tests := []struct {
		name   string
		lim    *sluice.Limiter
		opts   []sluicehttp.Option
		status int
		served bool
		want   error
	}{
		0: {name: "store down fails closed", lim: down, status: 503, want: errStoreDown},
		1: {name: "store down fails open on request", lim: down, opts: []sluicehttp.Option{sluicehttp.WithFailOpen()}, status: 200, served: true, want: errStoreDown},
		2: {name: "more than every slot is too large", lim: slots(t, 2, time.Minute, newClock()),
			opts: []sluicehttp.Option{sluicehttp.WithCost(func(*http.Request) (float64, error) { return 3, nil })}, status: 413, want: sluice.ErrCostExceedsLimit},
		3: {name: "a cost error is a bad request, its slot given back", lim: slots(t, 2, time.Minute, newClock()),
			opts: []sluicehttp.Option{sluicehttp.WithCost(func(*http.Request) (float64, error) { return 0, errors.New("bad") })}, status: 400, want: sluicehttp.ErrCost},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var hooked []error
			s := newServer(t, tt.lim, append(tt.opts, sluicehttp.WithErrorHook(func(_ *http.Request, err error) { hooked = append(hooked, err) }))...)
			w := s.get()
			require.Equal(t, tt.status, w.Code, "row %d", i)
			require.Equal(t, tt.served, s.served == 1, "row %d", i)
			require.Len(t, hooked, 1, "row %d", i)
			require.ErrorIs(t, hooked[0], tt.want, "row %d", i)
			if tt.lim != down {
				require.Zero(t, inUse(t, tt.lim, "192.0.2.1"), "row %d", i)
			}
		})
	}
}
