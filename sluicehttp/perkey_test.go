package sluicehttp_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sluice-go/sluice"
	"github.com/sluice-go/sluice/internal/plantest"
	"github.com/sluice-go/sluice/sluicehttp"
)

// byAPIKey keys requests by their X-API-Key header.
var byAPIKey = sluicehttp.WithKey(sluicehttp.HeaderKey("X-API-Key"))

// getAs sends a GET with X-API-Key key to s.
func (s *server) getAs(key string) *httptest.ResponseRecorder {
	r := httptest.NewRequest(http.MethodGet, "/", nil)
	r.Header.Set("X-API-Key", key)
	return s.do(r)
}

func TestPerKeyTiersEachSendTheirOwnFieldsAndAreDeniedAtTheirOwnLimits(t *testing.T) {
	clock := newClock()
	p := plantest.New(t, map[string]*sluice.Limiter{
		"free":    plantest.Must(sluice.NewFixedWindow(2, time.Minute)),
		"pro":     plantest.Must(sluice.NewFixedWindow(5, time.Minute)),
		"metered": plantest.Must(sluice.NewFixedWindow(3, 20*time.Second)),
	})
	p.Set("k-pro", "pro")
	p.Set("k-metered", "metered")
	s := newServer(t, p.Limiter(t, clock), byAPIKey)
	clock.Add(12 * time.Second) // 48 s left in the window

	tests := []struct {
		key      string
		policy   string
		admitted []string // the RateLimit of each admitted request, in turn
		denied   response // then
	}{
		0: {key: "k-free", policy: `"default";q=2;w=60`,
			admitted: []string{`"default";r=1;t=48`, `"default";r=0;t=48`},
			denied:   response{status: 429, rateLimit: `"default";r=0;t=48`, retryAfter: "48"}},
		1: {key: "k-pro", policy: `"default";q=5;w=60`,
			admitted: []string{`"default";r=4;t=48`, `"default";r=3;t=48`, `"default";r=2;t=48`, `"default";r=1;t=48`, `"default";r=0;t=48`},
			denied:   response{status: 429, rateLimit: `"default";r=0;t=48`, retryAfter: "48"}},
		2: {key: "k-metered", policy: `"default";q=3;w=20`,
			admitted: []string{`"default";r=2;t=8`, `"default";r=1;t=8`, `"default";r=0;t=8`},
			denied:   response{status: 429, rateLimit: `"default";r=0;t=8`, retryAfter: "8"}},
	}
	// Turn by turn across the keys, so that each key's requests come
	// between the others'.
	for turn := 0; turn <= 5; turn++ {
		for i, tt := range tests {
			if turn > len(tt.admitted) {
				continue
			}
			want := tt.denied
			if turn < len(tt.admitted) {
				want = response{status: 200, rateLimit: tt.admitted[turn]}
			}
			w := s.getAs(tt.key)
			requireResponse(t, want, w, "row %d (%s), turn %d", i, tt.key, turn)
			require.Equal(t, []string{tt.policy}, w.Header().Values("RateLimit-Policy"), "row %d, turn %d", i, turn)
		}
	}
	require.Equal(t, 2+5+3, s.served)
}

func TestPerKeyTierChangeTakesEffectAtTheNextRequest(t *testing.T) {
	clock := newClock()
	p := plantest.New(t, map[string]*sluice.Limiter{
		"free": plantest.Must(sluice.NewFixedWindow(2, time.Minute)),
		"pro":  plantest.Must(sluice.NewFixedWindow(5, time.Minute)),
	})
	s := newServer(t, p.Limiter(t, clock), byAPIKey)
	clock.Add(12 * time.Second)
	const free, pro = `"default";q=2;w=60`, `"default";q=5;w=60`
	steps := []struct {
		plan   string // set before the request
		policy string
		want   response
	}{
		0: {plan: "free", policy: free, want: response{status: 200, rateLimit: `"default";r=1;t=48`}},
		1: {plan: "free", policy: free, want: response{status: 200, rateLimit: `"default";r=0;t=48`}},
		2: {plan: "free", policy: free, want: response{status: 429, rateLimit: `"default";r=0;t=48`, retryAfter: "48"}},
		// Upgraded: the two requests used count, against the new limit.
		3: {plan: "pro", policy: pro, want: response{status: 200, rateLimit: `"default";r=2;t=48`}},
		4: {plan: "pro", policy: pro, want: response{status: 200, rateLimit: `"default";r=1;t=48`}},
		5: {plan: "pro", policy: pro, want: response{status: 200, rateLimit: `"default";r=0;t=48`}},
		6: {plan: "pro", policy: pro, want: response{status: 429, rateLimit: `"default";r=0;t=48`, retryAfter: "48"}},
		// Downgraded, with five used: denied at once, nothing forgotten.
		7: {plan: "free", policy: free, want: response{status: 429, rateLimit: `"default";r=0;t=48`, retryAfter: "48"}},
	}
	for i, step := range steps {
		p.Set("acme", step.plan)
		w := s.getAs("acme")
		requireResponse(t, step.want, w, "step %d", i)
		require.Equal(t, []string{step.policy}, w.Header().Values("RateLimit-Policy"), "step %d", i)
	}
	require.Equal(t, 5, s.served)
}

// TestPerKeyLookupThatFailsIsAnsweredAsAStoreThatFails sends the same
// request to a per-key limiter whose lookup fails and to a limiter whose
// store is down, under each configuration, and requires the same answer
// of both: 503 with Retry-After, the request served under fail-open or dry
// run, and the error hook given the failure. Only RateLimit-Policy
// differs: no limit is known for the key.
func TestPerKeyLookupThatFailsIsAnsweredAsAStoreThatFails(t *testing.T) {
	errNoPlan := errors.New("plans database down")
	tests := []struct {
		name     string
		opts     []sluicehttp.Option
		canceled bool // the client is gone when the request is decided
		status   int
		served   bool
		hooked   error // what the hook's error wraps, beside the failure
	}{
		0: {name: "fails closed", status: 503},
		1: {name: "fails open on request", opts: []sluicehttp.Option{sluicehttp.WithFailOpen()}, status: 200, served: true},
		2: {name: "served under dry run", opts: []sluicehttp.Option{sluicehttp.WithDryRun()}, status: 200, served: true},
		3: {name: "its Retry-After as configured", opts: []sluicehttp.Option{sluicehttp.WithUnavailableRetryAfter(2500 * time.Millisecond)}, status: 503},
		4: {name: "the error handler writes the answer", status: 418, opts: []sluicehttp.Option{
			sluicehttp.WithErrorHandler(func(w http.ResponseWriter, _ *http.Request, err error) {
				http.Error(w, err.Error(), http.StatusTeapot)
			})}},
		5: {name: "a client gone is neither served nor a failure", canceled: true, status: 200, hooked: sluicehttp.ErrRequestCanceled},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := plantest.New(t, map[string]*sluice.Limiter{"free": plantest.Must(sluice.NewFixedWindow(5, time.Minute))})
			p.Fail(errNoPlan)
			down, err := sluice.NewFixedWindow(5, time.Minute, sluice.WithStore(failingStore{}), sluice.WithClock(newClock()))
			require.NoError(t, err)
			answer := func(lim *sluice.Limiter) (*httptest.ResponseRecorder, *server, []error) {
				var hooked []error
				s := newServer(t, lim, append(tt.opts, byAPIKey,
					sluicehttp.WithErrorHook(func(_ *http.Request, err error) { hooked = append(hooked, err) }))...)
				r := httptest.NewRequest(http.MethodGet, "/", nil)
				r.Header.Set("X-API-Key", "k")
				if tt.canceled {
					ctx, cancel := context.WithCancel(r.Context())
					cancel()
					r = r.WithContext(ctx)
				}
				return s.do(r), s, hooked
			}
			storeW, storeS, storeHooked := answer(down)
			w, s, hooked := answer(p.Limiter(t, newClock()))

			require.Equal(t, tt.status, w.Code)
			require.Equal(t, storeW.Code, w.Code, "as the store's")
			require.Equal(t, storeW.Header().Get("Retry-After"), w.Header().Get("Retry-After"), "as the store's")
			require.Equal(t, tt.served, s.served == 1)
			require.Equal(t, storeS.served, s.served, "as the store's")
			require.Len(t, hooked, 1)
			require.Len(t, storeHooked, 1)
			switch {
			case tt.canceled:
				require.ErrorIs(t, hooked[0], context.Canceled)
			case w.Code == http.StatusTeapot:
				require.ErrorIs(t, hooked[0], errNoPlan)
				require.Contains(t, w.Body.String(), errNoPlan.Error(), "the handler is given the lookup's error")
			default:
				require.ErrorIs(t, hooked[0], errNoPlan)
				require.Equal(t, storeW.Body.String(), w.Body.String(), "as the store's")
			}
			if tt.hooked != nil {
				require.ErrorIs(t, hooked[0], tt.hooked)
				require.ErrorIs(t, storeHooked[0], tt.hooked)
			}
			require.Empty(t, w.Header().Values("RateLimit-Policy"), "no limit known for the key")
			require.Empty(t, w.Header().Values("RateLimit"))
		})
	}
}

// TestPerKeyLimitThatDoesNotFitTheMiddlewareIsRefusedOnItsRequest pins
// that what New refuses of a fixed limit is refused, per key, on the
// requests of the keys whose limit it is, as a misconfigured Middleware
// refuses: 500, whether or not the middleware fails open, served only
// under dry run; the other keys are served.
func TestPerKeyLimitThatDoesNotFitTheMiddlewareIsRefusedOnItsRequest(t *testing.T) {
	p := plantest.New(t, map[string]*sluice.Limiter{
		"free":       plantest.Must(sluice.NewGCRA(sluice.PerSecond(10), 5)),
		"window":     plantest.Must(sluice.NewFixedWindow(100, time.Minute)),
		"fractional": plantest.Must(sluice.NewGCRA(sluice.PerSecond(1), 0.5)),
	})
	p.Set("k-window", "window")
	p.Set("k-fractional", "fractional")
	tests := []struct {
		name   string
		key    string
		opts   []sluicehttp.Option
		status int
		served bool
		want   []error
		says   string // in the error
	}{
		0: {name: "a window under WithMaxDelay", key: "k-window", opts: []sluicehttp.Option{sluicehttp.WithMaxDelay(time.Second)},
			status: 500, want: []error{sluice.ErrInvalidConfig, sluice.ErrUnsupported}, says: "WithMaxDelay needs a limiter that reserves"},
		1: {name: "a window under WithMaxDelay, failing open", key: "k-window",
			opts:   []sluicehttp.Option{sluicehttp.WithMaxDelay(time.Second), sluicehttp.WithFailOpen()},
			status: 500, want: []error{sluice.ErrInvalidConfig, sluice.ErrUnsupported}, says: "WithMaxDelay needs a limiter that reserves"},
		2: {name: "a window under WithMaxDelay, dry run", key: "k-window",
			opts:   []sluicehttp.Option{sluicehttp.WithMaxDelay(time.Second), sluicehttp.WithDryRun()},
			status: 200, served: true, want: []error{sluice.ErrInvalidConfig, sluice.ErrUnsupported}},
		3: {name: "a GCRA under WithMaxDelay is served", key: "k-free", opts: []sluicehttp.Option{sluicehttp.WithMaxDelay(time.Second)},
			status: 200, served: true},
		4: {name: "a limit below one whole unit", key: "k-fractional", status: 500, want: []error{sluice.ErrInvalidConfig},
			says: "less than one whole unit"},
		5: {name: "a limit below one whole unit, failing open", key: "k-fractional", opts: []sluicehttp.Option{sluicehttp.WithFailOpen()},
			status: 500, want: []error{sluice.ErrInvalidConfig}, says: "less than one whole unit"},
		6: {name: "a limit below the minimum cost", key: "k-free", opts: []sluicehttp.Option{sluicehttp.WithMinCost(6)},
			status: 500, want: []error{sluice.ErrInvalidConfig}, says: "minimum cost 6 exceeds the limit 5"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var hooked []error
			s := newServer(t, p.Limiter(t, newClock()), append(tt.opts, byAPIKey,
				sluicehttp.WithErrorHook(func(_ *http.Request, err error) { hooked = append(hooked, err) }))...)
			w := s.getAs(tt.key)
			require.Equal(t, tt.status, w.Code)
			require.Equal(t, tt.served, s.served == 1)
			require.Empty(t, w.Header().Get("Retry-After"), "not an outage")
			if len(tt.want) == 0 {
				require.Empty(t, hooked)
				return
			}
			require.Len(t, hooked, 1)
			for _, want := range tt.want {
				require.ErrorIs(t, hooked[0], want)
			}
			require.Contains(t, hooked[0].Error(), "the limit looked up for the request's key")
			require.Contains(t, hooked[0].Error(), tt.says)
		})
	}
}

func TestPerKeyConfigurationIsCheckedWhenTheMiddlewareIsMade(t *testing.T) {
	p := plantest.New(t, map[string]*sluice.Limiter{"free": plantest.Must(sluice.NewFixedWindow(5, time.Minute))})
	lim := p.Limiter(t, newClock())
	for _, opt := range []sluicehttp.Option{
		sluicehttp.WithPolicyName("caf\u00e9"),
		sluicehttp.WithQuotaUnit("\n"),
		sluicehttp.WithWindow(-time.Second),
	} {
		_, err := sluicehttp.New(lim, opt)
		require.ErrorIs(t, err, sluice.ErrInvalidConfig)
	}
	_, err := sluicehttp.NewFields(lim)
	require.ErrorIs(t, err, sluice.ErrInvalidConfig, "a per-key limiter's fields differ per key")
	require.ErrorContains(t, err, "per-key")
	require.Empty(t, p.LookedUp(), "nothing is looked up until a request comes")
}

// TestPerKeyRequestAllocatesNoMoreThanAFixedOne pins that a steady
// request of a per-key limiter, on tiers seen before, allocates no more
// than a fixed limit's: each tier's policy is built once, and kept.
func TestPerKeyRequestAllocatesNoMoreThanAFixedOne(t *testing.T) {
	free, err := sluice.NewGCRA(sluice.PerSecond(1e9), 1e9)
	require.NoError(t, err)
	defer free.Close()
	pro, err := sluice.NewGCRA(sluice.PerSecond(5e8), 5e8)
	require.NoError(t, err)
	defer pro.Close()
	tiered, err := sluice.NewPerKey(func(_ context.Context, key string) (*sluice.Limiter, error) {
		if key == "k-pro" {
			return pro, nil
		}
		return free, nil
	})
	require.NoError(t, err)
	defer tiered.Close()
	allocs := func(lim *sluice.Limiter) float64 {
		mw, err := sluicehttp.New(lim, byAPIKey)
		require.NoError(t, err)
		h := mw(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
		var reqs []*http.Request
		for _, key := range []string{"k-free", "k-pro"} {
			r := httptest.NewRequest(http.MethodGet, "/", nil)
			r.Header.Set("X-API-Key", key)
			reqs = append(reqs, r)
		}
		w := httptest.NewRecorder()
		return testing.AllocsPerRun(100, func() {
			for _, r := range reqs {
				clear(w.Header())
				h.ServeHTTP(w, r)
				if w.Code != http.StatusOK {
					t.Fatalf("status %d", w.Code)
				}
			}
		})
	}
	tieredAllocs, fixedAllocs := allocs(tiered), allocs(free)
	require.LessOrEqual(t, tieredAllocs, fixedAllocs, "per-key %v allocations, fixed %v", tieredAllocs, fixedAllocs)
}

func TestPerKeyConcurrencyTiersHoldALeasePerRequest(t *testing.T) {
	clock := newClock()
	p := plantest.New(t, map[string]*sluice.Limiter{
		"free": plantest.Must(sluice.NewConcurrencyLimit(1, time.Minute)),
		"pro":  plantest.Must(sluice.NewConcurrencyLimit(3, time.Minute)),
	})
	p.Set("k-pro", "pro")
	lim := p.Limiter(t, clock)
	mw, err := sluicehttp.New(lim, byAPIKey)
	require.NoError(t, err)
	// Each request served stays in its handler until the test lets them
	// all go.
	entered, proceed := make(chan string, 8), make(chan struct{})
	done := make(chan struct{}, 8)
	h := returned(mw(http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) {
		key := r.Header.Get("X-API-Key")
		entered <- key
		<-proceed
	})), done)
	type answer struct {
		status    int
		policy    string
		rateLimit string
	}
	send := func(key string) <-chan answer {
		answered := make(chan answer, 1)
		go func() {
			r := httptest.NewRequest(http.MethodGet, "/", nil)
			r.Header.Set("X-API-Key", key)
			w := httptest.NewRecorder()
			h.ServeHTTP(w, r)
			answered <- answer{w.Code, w.Header().Get("RateLimit-Policy"), w.Header().Get("RateLimit")}
		}()
		return answered
	}
	const freeSlots, proSlots = `"default";q=1;qu="concurrent-requests"`, `"default";q=3;qu="concurrent-requests"`
	steps := []struct {
		key       string
		held      bool   // in its handler until the end
		want      answer // else
		free, pro float64
	}{
		0: {key: "k-free", held: true, free: 1},
		1: {key: "k-free", want: answer{429, freeSlots, `"default";r=0`}, free: 1},
		2: {key: "k-pro", held: true, free: 1, pro: 1},
		3: {key: "k-pro", held: true, free: 1, pro: 2},
		4: {key: "k-pro", held: true, free: 1, pro: 3},
		5: {key: "k-pro", want: answer{429, proSlots, `"default";r=0`}, free: 1, pro: 3},
	}
	var held []<-chan answer
	for i, step := range steps {
		answered := send(step.key)
		if step.held {
			require.Equal(t, step.key, <-entered, "step %d", i)
			held = append(held, answered)
		} else {
			if step.want.status == http.StatusOK {
				require.Equal(t, step.key, <-entered, "step %d", i)
			}
			require.Equal(t, step.want, <-answered, "step %d", i)
			<-done
		}
		require.Equal(t, step.free, inUse(t, lim, "k-free"), "step %d", i)
		require.Equal(t, step.pro, inUse(t, lim, "k-pro"), "step %d", i)
	}
	close(proceed)
	for i, answered := range held {
		require.Equal(t, 200, (<-answered).status, "held %d", i)
		<-done
	}
	require.Zero(t, inUse(t, lim, "k-free"), "every lease given back")
	require.Zero(t, inUse(t, lim, "k-pro"))
}

func TestPerKeyTierIsHeldUnderMaxDelay(t *testing.T) {
	p := plantest.New(t, map[string]*sluice.Limiter{"free": plantest.Must(sluice.NewGCRA(sluice.PerSecond(1), 1))})
	s := newShaper(t, func(c sluice.Clock) (*sluice.Limiter, error) {
		return sluice.NewPerKey(p.Lookup, sluice.WithClock(c))
	}, sluicehttp.WithMaxDelay(2*time.Second))
	d, first := s.send(t.Context(), "0")
	require.Zero(t, d.Delay)
	require.Equal(t, reply{status: 200, rateLimit: `"default";r=0;t=1`}, <-first)
	d, second := s.send(t.Context(), "1")
	require.Equal(t, time.Second, d.Delay, "held its turn on the key's tier")
	s.clock.Add(time.Second)
	require.Equal(t, reply{status: 200, rateLimit: `"default";r=0;t=1`}, <-second)
	require.Equal(t, []served{{id: "0"}, {id: "1", at: time.Second}}, s.servedSoFar())
}

func TestPerKeyMemberOfAGroupMiddleware(t *testing.T) {
	st := sluice.NewMemStore(sluice.MemStoreConfig{})
	t.Cleanup(func() { st.Close() })
	clock := newClock()
	daily, err := sluice.NewFixedWindow(1000, 24*time.Hour, sluice.WithStore(st), sluice.WithClock(clock))
	require.NoError(t, err)
	p := plantest.New(t, map[string]*sluice.Limiter{
		"free":  plantest.Must(sluice.NewTokenBucket(sluice.PerSecond(1), 2)),
		"pro":   plantest.Must(sluice.NewTokenBucket(sluice.PerSecond(2), 4)),
		"slots": plantest.Must(sluice.NewConcurrencyLimit(2, time.Minute)),
	})
	// The lookup sees the key the store sees, "{key}:burst".
	p.Set("{k-pro}:burst", "pro")
	p.Set("{k-slots}:burst", "slots")
	burst := p.Limiter(t, clock, sluice.WithStore(st))
	mw, err := sluicehttp.NewGroup([]sluicehttp.Policy{
		{Limiter: daily, Name: "day"},
		{Limiter: burst, Name: "burst"},
	}, byAPIKey)
	require.NoError(t, err)
	s := wrap(mw)
	const day = `"day";q=1000;w=86400`
	steps := []struct {
		key      string
		status   int
		policies []string
		fields   []string
	}{
		0: {key: "k-free", status: 200, policies: []string{day, `"burst";q=2;w=2`}, fields: []string{`"day";r=999;t=43200`, `"burst";r=1;t=1`}},
		1: {key: "k-free", status: 200, policies: []string{day, `"burst";q=2;w=2`}, fields: []string{`"day";r=998;t=43200`, `"burst";r=0;t=2`}},
		// Denied by its tier, the day charged nothing.
		2: {key: "k-free", status: 429, policies: []string{day, `"burst";q=2;w=2`}, fields: []string{`"day";r=998;t=43200`, `"burst";r=0;t=2`}},
		3: {key: "k-pro", status: 200, policies: []string{day, `"burst";q=4;w=2`}, fields: []string{`"day";r=999;t=43200`, `"burst";r=3;t=1`}},
		// A tier of another algorithm than the limiter's first is refused,
		// listing the policies known.
		4: {key: "k-slots", status: 500, policies: []string{day}},
	}
	for i, step := range steps {
		w := s.getAs(step.key)
		require.Equal(t, step.status, w.Code, "step %d", i)
		require.Equal(t, step.policies, w.Header().Values("RateLimit-Policy"), "step %d", i)
		require.Equal(t, step.fields, w.Header().Values("RateLimit"), "step %d", i)
	}
	require.Equal(t, 3, s.served)

	t.Run("a lookup that fails fails the request, listing the others' policies", func(t *testing.T) {
		p.Fail(errors.New("plans database down"))
		defer p.Fail(nil)
		w := s.getAs("k-free")
		require.Equal(t, http.StatusServiceUnavailable, w.Code)
		require.Equal(t, "1", w.Header().Get("Retry-After"))
		require.Equal(t, []string{day}, w.Header().Values("RateLimit-Policy"))
	})
}

// TestGuidePerKeySectionShowsWhatTheMiddlewareSends runs the plans of
// docs/http.md's per-key section and requires the policies it sends for
// a free and a pro key to be those the guide shows.
func TestGuidePerKeySectionShowsWhatTheMiddlewareSends(t *testing.T) {
	b, err := os.ReadFile("../docs/http.md")
	require.NoError(t, err)
	_, section, ok := strings.Cut(string(b), "\n## Limits per key: plans and tiers\n")
	require.True(t, ok, "the guide has the section")
	section, _, _ = strings.Cut(section, "\n## ")
	p := plantest.New(t, map[string]*sluice.Limiter{ // as in the guide
		"free": plantest.Must(sluice.NewFixedWindow(100, time.Hour)),
		"pro":  plantest.Must(sluice.NewFixedWindow(5000, time.Hour)),
	})
	p.Set("k-pro", "pro")
	s := newServer(t, p.Limiter(t, newClock()), byAPIKey)
	free, pro := s.getAs("k-free").Header().Get("RateLimit-Policy"), s.getAs("k-pro").Header().Get("RateLimit-Policy")
	require.Contains(t, section, "RateLimit-Policy: "+free+"\n", "a free key's")
	require.Contains(t, section, "`"+pro+"` for a pro key")
}
