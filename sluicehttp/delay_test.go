package sluicehttp_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/benbjohnson/clock"
	"github.com/stretchr/testify/require"

	"github.com/sluice-go/sluice"
	"github.com/sluice-go/sluice/sluicehttp"
)

// sleepClock is the fake clock that tells the test when a held request
// starts to sleep on it, so that the test moves time only once the sleep's
// timer is set.
// A server paused (write-locking paused) wakes no sleeper until it
// continues, as a stopped process runs none of its goroutines.
type sleepClock struct {
	*clock.Mock
	sleeps chan time.Duration
	paused *sync.RWMutex
}

func (c sleepClock) After(d time.Duration) <-chan time.Time {
	ch := c.Mock.After(d)
	c.sleeps <- d
	woken := make(chan time.Time, 1)
	go func() {
		t := <-ch
		c.paused.RLock()
		defer c.paused.RUnlock()
		woken <- t
	}()
	return woken
}

// shaper is a real HTTP server whose requests are held by WithMaxDelay,
// on a fake clock. Every request is from 127.0.0.1, so all share one key.
type shaper struct {
	t       *testing.T
	clock   sleepClock
	srv     *httptest.Server
	decided chan sluice.Decision // from the decision hook
	errs    chan error           // from the error hook

	mu     sync.Mutex
	served []served          // in the order the handler ran
	protos map[string]string // of the served requests, by id
}

// served is a request that reached the handler, and when.
type served struct {
	id string
	at time.Duration // since start
}

// reply is what a client got.
type reply struct {
	status     int
	rateLimit  string
	retryAfter string
	err        error
}

// newShaper serves requests over HTTP/1.1, limited by the limiter that
// newLimiter makes on the clock it is given.
func newShaper(t *testing.T, newLimiter func(sluice.Clock) (*sluice.Limiter, error), opts ...sluicehttp.Option) *shaper {
	t.Helper()
	return newShaperOver(t, "HTTP/1.1", newLimiter, opts...)
}

// newShaperOver is newShaper over proto: "HTTP/1.1", or "HTTP/2.0" (over
// TLS).
func newShaperOver(t *testing.T, proto string, newLimiter func(sluice.Clock) (*sluice.Limiter, error), opts ...sluicehttp.Option) *shaper {
	t.Helper()
	s := &shaper{
		t:       t,
		clock:   sleepClock{Mock: newClock(), sleeps: make(chan time.Duration, 1), paused: new(sync.RWMutex)},
		decided: make(chan sluice.Decision, 1),
		errs:    make(chan error, 1),
		protos:  map[string]string{},
	}
	lim, err := newLimiter(s.clock)
	require.NoError(t, err)
	opts = append(opts,
		sluicehttp.WithDecisionHook(func(_ *http.Request, d sluice.Decision) { s.decided <- d }),
		sluicehttp.WithErrorHook(func(_ *http.Request, err error) { s.errs <- err }))
	mw, err := sluicehttp.New(lim, opts...)
	require.NoError(t, err)
	s.srv = httptest.NewUnstartedServer(mw(http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		defer s.mu.Unlock()
		id := r.URL.Query().Get("id")
		s.served = append(s.served, served{id: id, at: s.clock.Now().Sub(start)})
		s.protos[id] = r.Proto
	})))
	switch proto {
	case "HTTP/1.1":
		s.srv.Start()
	case "HTTP/2.0":
		s.srv.EnableHTTP2 = true
		s.srv.StartTLS()
	default:
		t.Fatalf("no server for %s", proto)
	}
	t.Cleanup(s.srv.Close)
	return s
}

// send sends request id under ctx and returns its decision, once the
// request is decided and, if it is held, asleep; its reply comes later on
// the channel.
func (s *shaper) send(ctx context.Context, id string) (sluice.Decision, <-chan reply) {
	s.t.Helper()
	return s.sendBody(ctx, http.MethodGet, id, "")
}

// sendBody is send for a request of method with body, which the client
// sends whole.
func (s *shaper) sendBody(ctx context.Context, method, id, body string) (sluice.Decision, <-chan reply) {
	s.t.Helper()
	req, err := http.NewRequestWithContext(ctx, method, s.srv.URL+"/?id="+id, strings.NewReader(body))
	require.NoError(s.t, err)
	replies := make(chan reply, 1)
	go func() {
		resp, err := s.srv.Client().Do(req)
		if err != nil {
			replies <- reply{err: err}
			return
		}
		resp.Body.Close()
		replies <- reply{status: resp.StatusCode, rateLimit: resp.Header.Get("RateLimit"), retryAfter: resp.Header.Get("Retry-After")}
	}()
	d := <-s.decided
	if d.Delay > 0 {
		require.Equal(s.t, d.Delay, <-s.clock.sleeps, "request %s sleeps its delay", id)
	}
	return d, replies
}

// protoOf returns the protocol request id was served over.
func (s *shaper) protoOf(id string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.protos[id]
}

// servedSoFar returns the requests served so far.
func (s *shaper) servedSoFar() []served {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]served(nil), s.served...)
}

func gcra(rate sluice.Rate, burst float64) func(sluice.Clock) (*sluice.Limiter, error) {
	return func(c sluice.Clock) (*sluice.Limiter, error) {
		return sluice.NewGCRA(rate, burst, sluice.WithClock(c))
	}
}

func TestHeldRequestsAreServedInArrivalOrderAtTheirInstants(t *testing.T) {
	// One request a second, two at once: the next three are held 1, 2
	// and 3 seconds, and the sixth, 4 seconds away, is refused.
	s := newShaper(t, gcra(sluice.PerSecond(1), 2), sluicehttp.WithMaxDelay(3*time.Second))
	want := []struct {
		delay time.Duration
		reply reply
	}{
		{0, reply{status: 200, rateLimit: `"default";r=1;t=1`}},
		{0, reply{status: 200, rateLimit: `"default";r=0;t=2`}},
		// A held request's t counts from when it is served.
		{1 * time.Second, reply{status: 200, rateLimit: `"default";r=0;t=2`}},
		{2 * time.Second, reply{status: 200, rateLimit: `"default";r=0;t=2`}},
		{3 * time.Second, reply{status: 200, rateLimit: `"default";r=0;t=2`}},
		// Retry-After: in 1 s the turn 4 s away is within the 3 s.
		{0, reply{status: 429, rateLimit: `"default";r=0;t=5`, retryAfter: "1"}},
	}
	replies := make([]<-chan reply, len(want))
	for i, w := range want {
		d, r := s.send(t.Context(), strconv.Itoa(i))
		require.Equal(t, w.delay, d.Delay, "request %d", i)
		require.Equal(t, w.reply.status == 200, d.Allowed, "request %d", i)
		replies[i] = r
	}
	for i := range 2 {
		require.Equal(t, want[i].reply, <-replies[i], "request %d is served at once", i)
	}
	require.Equal(t, want[5].reply, <-replies[5], "request 5 is refused at once")
	for i := 2; i < 5; i++ {
		s.clock.Add(time.Second)
		require.Equal(t, want[i].reply, <-replies[i], "request %d", i)
	}
	require.Equal(t, []served{{"0", 0}, {"1", 0}, {"2", time.Second}, {"3", 2 * time.Second}, {"4", 3 * time.Second}}, s.servedSoFar())
}

func TestHeldRequestIsServedNoSoonerThanItsTurn(t *testing.T) {
	s := newShaper(t, gcra(sluice.PerSecond(1), 1), sluicehttp.WithMaxDelay(time.Second))
	_, first := s.send(t.Context(), "a")
	require.Equal(t, 200, (<-first).status)
	_, held := s.send(t.Context(), "b")
	s.clock.Add(time.Second - 1)
	require.Len(t, s.servedSoFar(), 1, "one nanosecond early")
	s.clock.Add(1)
	require.Equal(t, 200, (<-held).status)
	require.Equal(t, []served{{"a", 0}, {"b", time.Second}}, s.servedSoFar())
}

// TestHeldResponseFieldsAreTheKeysWhenServed pins that the RateLimit
// field of a held response says what a check of the key says at the
// instant it is served, for every algorithm that holds requests.
func TestHeldResponseFieldsAreTheKeysWhenServed(t *testing.T) {
	tests := []struct {
		name string
		make func(sluice.Clock) (*sluice.Limiter, error)
	}{
		{"GCRA", gcra(sluice.PerSecond(1), 3)},
		{"leaky bucket", func(c sluice.Clock) (*sluice.Limiter, error) {
			return sluice.NewLeakyBucket(3, sluice.PerSecond(1), sluice.WithClock(c))
		}},
		{"token bucket", func(c sluice.Clock) (*sluice.Limiter, error) {
			return sluice.NewTokenBucket(sluice.PerSecond(1), 3, sluice.WithClock(c))
		}},
		{"token bucket, interval refill", func(c sluice.Clock) (*sluice.Limiter, error) {
			return sluice.NewTokenBucket(sluice.PerSecond(1), 3, sluice.WithIntervalRefill(), sluice.WithClock(c))
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var lim *sluice.Limiter
			s := newShaper(t, func(c sluice.Clock) (l *sluice.Limiter, err error) {
				lim, err = tt.make(c)
				return lim, err
			}, sluicehttp.WithMaxDelay(10*time.Second))
			for i := range 3 {
				_, r := s.send(t.Context(), strconv.Itoa(i))
				require.Equal(t, 200, (<-r).status)
			}
			s.clock.Add(400 * time.Millisecond)
			d, held := s.send(t.Context(), "held")
			require.Equal(t, 600*time.Millisecond, d.Delay)
			s.clock.Add(600 * time.Millisecond)
			got := <-held
			require.Equal(t, 200, got.status)

			check, err := lim.CanAccept(t.Context(), "127.0.0.1", 0)
			require.NoError(t, err)
			fields, err := sluicehttp.NewFields(lim)
			require.NoError(t, err)
			h := http.Header{}
			fields.Write(h, check)
			require.Equal(t, h.Get("RateLimit"), got.rateLimit)
			require.Equal(t, `"default";r=0;t=3`, got.rateLimit)
		})
	}
}

func TestClientLeavingWhileHeldGivesItsTurnBack(t *testing.T) {
	tests := []struct {
		name string
		// ahead is how many requests are held before the one that
		// leaves, and behind how many after it.
		ahead, behind int
		// next is the delay of the request that comes after it left.
		next time.Duration
	}{
		// A turn given back comes a nanosecond late (see sluice.Reservation.Cancel).
		{name: "the last turn booked is freed for the next request", ahead: 1, next: 2*time.Second + 1},
		{name: "a turn booked before others is kept, as they may be acting on theirs", behind: 1, next: 3 * time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := newShaper(t, gcra(sluice.PerSecond(1), 1), sluicehttp.WithMaxDelay(time.Minute))
			_, first := s.send(t.Context(), "first")
			require.Equal(t, 200, (<-first).status)
			var stay []<-chan reply
			for i := range tt.ahead {
				_, r := s.send(t.Context(), "ahead"+strconv.Itoa(i))
				stay = append(stay, r)
			}
			ctx, hangUp := context.WithCancel(t.Context())
			leaving, left := s.send(ctx, "leaving")
			for i := range tt.behind {
				_, r := s.send(t.Context(), "behind"+strconv.Itoa(i))
				stay = append(stay, r)
			}
			hangUp()
			require.ErrorIs(t, (<-left).err, context.Canceled)
			err := <-s.errs
			require.ErrorIs(t, err, sluicehttp.ErrRequestCanceled)
			require.ErrorIs(t, err, context.Canceled)

			next, r := s.send(t.Context(), "next")
			stay = append(stay, r)
			require.Equal(t, tt.next, next.Delay)
			if tt.behind == 0 {
				require.Equal(t, leaving.At+1, next.At, "the next request books the freed instant, a nanosecond late")
			}
			s.clock.Add(time.Minute)
			for _, r := range stay {
				require.Equal(t, 200, (<-r).status)
			}
			for _, got := range s.servedSoFar() {
				require.NotEqual(t, "leaving", got.id, "nobody is there to serve")
			}
			require.Len(t, s.servedSoFar(), 2+tt.ahead+tt.behind)
		})
	}
}

// TestHeldClientThatLeavesGivesItsTurnBackOnceTheServerCanTell pins when
// a client that hangs up while held gives its turn back: when the server
// sees it leave, which cancels the request's context. Go's HTTP/1.1
// server watches the connection only once the request's body is read to
// its end; HTTP/2 sees the stream reset at once. An HTTP/1.1 request
// whose body is unread keeps its turn, and is served to nobody.
func TestHeldClientThatLeavesGivesItsTurnBackOnceTheServerCanTell(t *testing.T) {
	readBody := sluicehttp.WithCost(func(r *http.Request) (float64, error) {
		_, err := sluicehttp.ReadBody(r, 1<<10)
		return 1, err
	})
	tests := []struct {
		name         string
		proto        string
		method, body string
		opts         []sluicehttp.Option
		givenBack    bool
	}{
		{name: "HTTP/1.1, no body", proto: "HTTP/1.1", method: http.MethodGet, givenBack: true},
		{name: "HTTP/1.1, a body read to its end", proto: "HTTP/1.1", method: http.MethodPost, body: `{"items":[1]}`,
			opts: []sluicehttp.Option{readBody}, givenBack: true},
		{name: "HTTP/2, a body unread", proto: "HTTP/2.0", method: http.MethodPost, body: `{"items":[1]}`, givenBack: true},
		{name: "HTTP/1.1, a body unread: not seen, so kept", proto: "HTTP/1.1", method: http.MethodPost, body: `{"items":[1]}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := newShaperOver(t, tt.proto, gcra(sluice.PerSecond(1), 1), append(tt.opts, sluicehttp.WithMaxDelay(time.Minute))...)
			_, first := s.sendBody(t.Context(), tt.method, "first", tt.body)
			require.Equal(t, 200, (<-first).status)
			require.Equal(t, tt.proto, s.protoOf("first"))

			ctx, hangUp := context.WithCancel(t.Context())
			leaving, left := s.sendBody(ctx, tt.method, "leaving", tt.body)
			require.Equal(t, time.Second, leaving.Delay)
			hangUp()
			require.ErrorIs(t, (<-left).err, context.Canceled)
			want := []string{"first", "next"}
			if tt.givenBack {
				// The hook runs once the turn is given back.
				err := <-s.errs
				require.ErrorIs(t, err, sluicehttp.ErrRequestCanceled)
				require.ErrorIs(t, err, context.Canceled)
			} else {
				want = []string{"first", "leaving", "next"}
			}

			next, r := s.sendBody(t.Context(), tt.method, "next", tt.body)
			if tt.givenBack {
				require.Equal(t, time.Second+1, next.Delay, "the next request books the freed turn, a nanosecond late")
			} else {
				require.Equal(t, 2*time.Second, next.Delay, "the next request books the turn after the one kept")
			}
			s.clock.Add(time.Minute)
			require.Equal(t, 200, (<-r).status)
			s.srv.Close() // waits for every handler to return
			var got []string
			for _, sv := range s.servedSoFar() {
				got = append(got, sv.id)
			}
			require.ElementsMatch(t, want, got)
		})
	}
}

func TestMaxDelayConfiguration(t *testing.T) {
	window := fixedWindow(t, 1, time.Minute, newClock())
	bucket, err := sluice.NewGCRA(sluice.PerSecond(1), 1, sluice.WithClock(newClock()))
	require.NoError(t, err)
	tests := []struct {
		name    string
		lim     *sluice.Limiter
		delay   time.Duration
		wantErr []error // nil: valid
	}{
		{"a window limiter cannot hold requests", window, time.Second, []error{sluice.ErrInvalidConfig, sluice.ErrUnsupported}},
		{"zero holds nothing, whatever the limiter", window, 0, nil},
		{"negative", bucket, -1, []error{sluice.ErrInvalidConfig, sluice.ErrInvalidDelay}},
		{"beyond 2^60 ns", bucket, 1<<60 + 1, []error{sluice.ErrInvalidConfig, sluice.ErrInvalidDelay}},
		{"2^60 ns", bucket, 1 << 60, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			mw, err := sluicehttp.New(tt.lim, sluicehttp.WithMaxDelay(tt.delay))
			if tt.wantErr == nil {
				require.NoError(t, err)
				return
			}
			for _, want := range tt.wantErr {
				require.ErrorIs(t, err, want)
			}
			require.Nil(t, mw)
			s := wrap(sluicehttp.Middleware(tt.lim, sluicehttp.WithMaxDelay(tt.delay)))
			require.Equal(t, http.StatusInternalServerError, s.get().Code)
			require.Zero(t, s.served)
		})
	}
}

func TestDryRunBooksTurnsButHoldsNothing(t *testing.T) {
	lim, err := sluice.NewGCRA(sluice.PerSecond(1), 1, sluice.WithClock(newClock()))
	require.NoError(t, err)
	var delays []time.Duration
	s := newServer(t, lim, sluicehttp.WithMaxDelay(2*time.Second), sluicehttp.WithDryRun(),
		sluicehttp.WithDecisionHook(func(_ *http.Request, d sluice.Decision) { delays = append(delays, d.Delay) }))
	// Each request is served at once, and its fields say so: t counts
	// from now, not from the turn it would have waited for.
	requireResponse(t, response{status: 200, rateLimit: `"default";r=0;t=1`}, s.get())
	requireResponse(t, response{status: 200, rateLimit: `"default";r=0;t=2`}, s.get())
	requireResponse(t, response{status: 200, rateLimit: `"default";r=0;t=3`}, s.get())
	requireResponse(t, response{status: 200, rateLimit: `"default";r=0;t=3`}, s.get(), "would be refused")
	require.Equal(t, []time.Duration{0, time.Second, 2 * time.Second, 0}, delays, "the turns enforcement would book")
	require.Equal(t, 4, s.served)
}

func TestRequestWithoutACostIsNeverHeld(t *testing.T) {
	lim, err := sluice.NewGCRA(sluice.PerSecond(1), 1, sluice.WithClock(newClock()))
	require.NoError(t, err)
	bad := sluicehttp.WithCost(func(*http.Request) (float64, error) { return 0, errors.New("unreadable batch") })
	s := newServer(t, lim, sluicehttp.WithMaxDelay(time.Minute), bad)
	requireResponse(t, response{status: 400, rateLimit: `"default";r=0;t=1`}, s.get())
	requireResponse(t, response{status: 429, rateLimit: `"default";r=0;t=1`, retryAfter: "1"}, s.get(),
		"refused at once: a request that is answered 400 anyway is not held for it")
	require.Zero(t, s.served)
}

// TestHeldRequestsWhoseTurnsWentStaleAreDecidedAgain pauses the server
// past two held requests' turns (their clock jumps 2 s past the first):
// woken late, they are not served together, as a paused process acting on
// all its stale turns would; each is decided again, the first served at
// once and the second held for its new turn a second later.
func TestHeldRequestsWhoseTurnsWentStaleAreDecidedAgain(t *testing.T) {
	s := newShaper(t, gcra(sluice.PerSecond(1), 1), sluicehttp.WithMaxDelay(2*time.Second))
	_, first := s.send(t.Context(), "a")
	require.Equal(t, 200, (<-first).status)
	_, b := s.send(t.Context(), "b")
	_, c := s.send(t.Context(), "c")
	s.clock.paused.Lock()
	s.clock.Add(3 * time.Second) // the turns at 1 s and 2 s pass while the server is paused
	s.clock.paused.Unlock()
	require.Equal(t, time.Second, <-s.clock.sleeps, "one of them is held again, for the next turn")
	var later <-chan reply
	select { // one is served now, the other once the clock moves
	case r := <-b:
		require.Equal(t, 200, r.status)
		later = c
	case r := <-c:
		require.Equal(t, 200, r.status)
		later = b
	}
	require.Len(t, s.servedSoFar(), 2)
	s.clock.Add(time.Second)
	require.Equal(t, 200, (<-later).status)
	var at []time.Duration
	for _, sv := range s.servedSoFar() {
		at = append(at, sv.at)
	}
	require.Equal(t, []time.Duration{0, 3 * time.Second, 4 * time.Second}, at)
}
