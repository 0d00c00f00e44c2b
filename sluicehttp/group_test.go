package sluicehttp_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sluice-go/sluice"
	"github.com/sluice-go/sluice/engine"
	"github.com/sluice-go/sluice/sluicehttp"
)

// limits returns a daily window of 1000 and a token bucket of 5 on one
// store, as a new user would configure an API's two limits, on a fake
// clock at start: the bucket's token a second would otherwise come back
// whenever the machine paused a second between requests, and the day's
// window would end midway if the test ran across midnight UTC.
func limits(t *testing.T) (daily, burst *sluice.Limiter) {
	t.Helper()
	st := sluice.NewMemStore(sluice.MemStoreConfig{})
	t.Cleanup(func() { st.Close() })
	c := newClock()
	d, err := sluice.NewFixedWindow(1000, 24*time.Hour, sluice.WithStore(st), sluice.WithClock(c))
	require.NoError(t, err)
	b, err := sluice.NewTokenBucket(sluice.PerSecond(1), 5, sluice.WithStore(st), sluice.WithClock(c))
	require.NoError(t, err)
	return d, b
}

// get sends n requests and returns the status codes and the last response.
func get(t *testing.T, url string, n int) ([]int, *http.Response) {
	t.Helper()
	var codes []int
	var last *http.Response
	for range n {
		resp, err := http.Get(url)
		require.NoError(t, err)
		resp.Body.Close()
		codes = append(codes, resp.StatusCode)
		last = resp
	}
	return codes, last
}

func TestStackedMiddlewaresChargeTheOuterLimitForRequestsTheInnerDenies(t *testing.T) {
	// On a fake clock, so that no pause of the machine refills the
	// bucket between the requests (see limits).
	c := newClock()
	daily, err := sluice.NewFixedWindow(1000, 24*time.Hour, sluice.WithClock(c))
	require.NoError(t, err)
	burst, err := sluice.NewTokenBucket(sluice.PerSecond(1), 5, sluice.WithClock(c))
	require.NoError(t, err)
	h := sluicehttp.Middleware(daily, sluicehttp.WithPolicyName("day"))(
		sluicehttp.Middleware(burst, sluicehttp.WithPolicyName("burst"))(http.NotFoundHandler()))
	srv := httptest.NewServer(h)
	defer srv.Close()
	codes, _ := get(t, srv.URL, 8)
	require.Equal(t, []int{404, 404, 404, 404, 404, 429, 429, 429}, codes)
	d, err := daily.CanAccept(context.Background(), "127.0.0.1", 0)
	require.NoError(t, err)
	require.Equal(t, 992.0, d.Remaining, "the daily limit paid for the three the inner one refused")
}

func TestAGroupMiddlewareChargesEveryPolicyOnlyForWhatItServes(t *testing.T) {
	daily, burst := limits(t)
	mw, err := sluicehttp.NewGroup([]sluicehttp.Policy{
		{Limiter: daily, Name: "day"},
		{Limiter: burst, Name: "burst"},
	})
	require.NoError(t, err)
	srv := httptest.NewServer(mw(http.NotFoundHandler()))
	defer srv.Close()
	codes, last := get(t, srv.URL, 8)
	require.Equal(t, []int{404, 404, 404, 404, 404, 429, 429, 429}, codes)
	d, err := daily.CanAccept(context.Background(), "{127.0.0.1}:day", 0)
	require.NoError(t, err)
	require.Equal(t, 995.0, d.Remaining, "only what was served")
	require.Equal(t, []string{`"day";q=1000;w=86400`, `"burst";q=5;w=5`}, last.Header.Values("RateLimit-Policy"))
	fields := last.Header.Values("RateLimit")
	require.Len(t, fields, 2)
	require.Equal(t, `"day";r=995;t=43200`, fields[0], "every policy with its own remaining allowance, the day's until midnight UTC")
	require.Equal(t, `"burst";r=0;t=5`, fields[1])
	require.Equal(t, "1", last.Header.Get("Retry-After"))
}

func TestAGroupMiddlewareKeysEachPolicyItsOwnWay(t *testing.T) {
	st := sluice.NewMemStore(sluice.MemStoreConfig{})
	defer st.Close()
	// On a fake clock: the global cap must not regain a unit when the
	// machine pauses a second between the requests.
	c := newClock()
	perClient, err := sluice.NewGCRA(sluice.PerSecond(10), 10, sluice.WithStore(st), sluice.WithClock(c))
	require.NoError(t, err)
	global, err := sluice.NewGCRA(sluice.PerSecond(1), 3, sluice.WithStore(st), sluice.WithClock(c))
	require.NoError(t, err)
	mw, err := sluicehttp.NewGroup([]sluicehttp.Policy{
		{Limiter: perClient, Name: "client", Key: sluicehttp.HeaderKey("X-Api-Key")},
		{Limiter: global, Name: "all", Key: func(*http.Request) (string, error) { return "all", nil }},
	})
	require.NoError(t, err)
	srv := httptest.NewServer(mw(http.NotFoundHandler()))
	defer srv.Close()
	for i, want := range []int{404, 404, 404, 429} {
		req, _ := http.NewRequest(http.MethodGet, srv.URL, nil)
		req.Header.Set("X-Api-Key", []string{"a", "b", "c", "d"}[i])
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		resp.Body.Close()
		require.Equal(t, want, resp.StatusCode, "request %d: the global cap of 3 holds across clients", i)
	}
}

func TestNewGroupRefusesPoliciesItCannotDecideAsOne(t *testing.T) {
	daily, burst := limits(t)
	other, err := sluice.NewGCRA(sluice.PerSecond(1), 1) // its own store
	require.NoError(t, err)
	for name, policies := range map[string][]sluicehttp.Policy{
		"none":          nil,
		"unnamed":       {{Limiter: daily}},
		"same names":    {{Limiter: daily, Name: "a"}, {Limiter: burst, Name: "a"}},
		"no limiter":    {{Name: "a"}},
		"another store": {{Limiter: daily, Name: "a"}, {Limiter: other, Name: "b"}},
	} {
		_, err := sluicehttp.NewGroup(policies)
		require.ErrorIs(t, err, sluice.ErrInvalidConfig, name)
	}
}

// failingGroupStore is a store that is down, for groups.
type failingGroupStore struct{ failingStore }

func (failingGroupStore) ApplyGroup(context.Context, []engine.GroupOp, []engine.Decision) (engine.Decision, error) {
	return engine.Decision{}, errStoreDown
}

// TestEveryAnswerOfAGroupListsEveryPolicy pins that the answers a group
// middleware gives without a decision (no key, a cost over the limit, a
// store that is down) list every policy in RateLimit-Policy, as its
// decided answers do, not only the first.
func TestEveryAnswerOfAGroupListsEveryPolicy(t *testing.T) {
	group := func(t *testing.T, st engine.Store) func(http.Handler) http.Handler {
		t.Helper()
		c := newClock()
		daily, err := sluice.NewFixedWindow(1000, 24*time.Hour, sluice.WithStore(st), sluice.WithClock(c))
		require.NoError(t, err)
		burst, err := sluice.NewTokenBucket(sluice.PerSecond(1), 5, sluice.WithStore(st), sluice.WithClock(c))
		require.NoError(t, err)
		mw, err := sluicehttp.NewGroup([]sluicehttp.Policy{{Limiter: daily, Name: "day"}, {Limiter: burst, Name: "burst"}},
			sluicehttp.WithKey(sluicehttp.HeaderKey("X-Client")),
			sluicehttp.WithCost(func(r *http.Request) (float64, error) { return strconv.ParseFloat(r.Header.Get("X-Cost"), 64) }))
		require.NoError(t, err)
		return mw
	}
	mem := sluice.NewMemStore(sluice.MemStoreConfig{})
	t.Cleanup(func() { mem.Close() })
	up, down := wrap(group(t, mem)), wrap(group(t, failingGroupStore{}))
	every := []string{`"day";q=1000;w=86400`, `"burst";q=5;w=5`}
	// In order, on one key: the first request spends the burst.
	steps := []struct {
		name   string
		server *server
		client string // "" sends no key
		cost   string
		status int
	}{
		{"admitted", up, "a", "5", http.StatusOK},
		{"denied", up, "a", "1", http.StatusTooManyRequests},
		{"no key", up, "", "1", http.StatusBadRequest},
		{"a cost over the limit", up, "b", "6", http.StatusRequestEntityTooLarge},
		{"the store down", down, "a", "1", http.StatusServiceUnavailable},
	}
	for _, step := range steps {
		t.Run(step.name, func(t *testing.T) {
			r := httptest.NewRequest(http.MethodGet, "/", nil)
			if step.client != "" {
				r.Header.Set("X-Client", step.client)
			}
			r.Header.Set("X-Cost", step.cost)
			w := step.server.do(r)
			require.Equal(t, step.status, w.Code)
			require.Equal(t, every, w.Header().Values("RateLimit-Policy"))
		})
	}
}

// TestLimitsGuideShowsWhatAGroupSends runs the group of docs/limits.md's
// "Over HTTP" section and compares the fields it sends, one field line per
// policy, with the lines the guide shows.
func TestLimitsGuideShowsWhatAGroupSends(t *testing.T) {
	shown := sectionFields(t, "../docs/limits.md", "## Over HTTP")
	st := sluice.NewMemStore(sluice.MemStoreConfig{})
	t.Cleanup(func() { st.Close() })
	c := newClock() // noon UTC: the day's window ends in 43,200 s
	perSecond, err := sluice.NewGCRA(sluice.PerSecond(10), 10, sluice.WithStore(st), sluice.WithClock(c))
	require.NoError(t, err)
	perDay, err := sluice.NewFixedWindow(1000, 24*time.Hour, sluice.WithStore(st), sluice.WithClock(c))
	require.NoError(t, err)
	global, err := sluice.NewTokenBucket(sluice.PerSecond(50), 50, sluice.WithStore(st), sluice.WithClock(c))
	require.NoError(t, err)
	mw, err := sluicehttp.NewGroup([]sluicehttp.Policy{ // as in the guide
		{Limiter: perSecond, Name: "second", Key: sluicehttp.HeaderKey("X-Api-Key")},
		{Limiter: perDay, Name: "day", Key: sluicehttp.HeaderKey("X-Api-Key")},
		{Limiter: global, Name: "all", Key: func(*http.Request) (string, error) { return "all", nil }},
	})
	require.NoError(t, err)
	r := httptest.NewRequest(http.MethodGet, "/", nil)
	r.Header.Set("X-Api-Key", "k-123")
	w := wrap(mw).do(r)
	require.Equal(t, http.StatusOK, w.Code)
	require.Equal(t, shown["RateLimit-Policy"], w.Header().Values("RateLimit-Policy"))
	require.Equal(t, shown["RateLimit"], w.Header().Values("RateLimit"))
}

// sectionFields returns every RateLimit-Policy and RateLimit line a
// guide shows in the section that heading begins.
func sectionFields(t *testing.T, path, heading string) map[string][]string {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	_, section, ok := strings.Cut(string(b), "\n"+heading+"\n")
	require.True(t, ok, "the guide has %q", heading)
	section, _, _ = strings.Cut(section, "\n## ")
	fields := map[string][]string{}
	for line := range strings.Lines(section) {
		name, value, ok := strings.Cut(strings.TrimSuffix(line, "\n"), ": ")
		if ok && (name == "RateLimit-Policy" || name == "RateLimit") {
			fields[name] = append(fields[name], value)
		}
	}
	require.Len(t, fields, 2, "the section shows both fields")
	return fields
}

// TestAGroupsHeldRequestsWhoseTurnsWentStaleAreDecidedAgain holds two
// requests of a group (1 a second, and 100 a minute) and pauses the
// server past both turns: they are not served together on stale turns;
// each is decided again, one served at once and one held for its new
// turn a second later.
func TestAGroupsHeldRequestsWhoseTurnsWentStaleAreDecidedAgain(t *testing.T) {
	clk := sleepClock{Mock: newClock(), sleeps: make(chan time.Duration, 1), paused: new(sync.RWMutex)}
	st := sluice.NewMemStore(sluice.MemStoreConfig{})
	t.Cleanup(func() { st.Close() })
	second, err := sluice.NewGCRA(sluice.PerSecond(1), 1, sluice.WithStore(st), sluice.WithClock(clk))
	require.NoError(t, err)
	minute, err := sluice.NewGCRA(sluice.PerMinute(100), 100, sluice.WithStore(st), sluice.WithClock(clk))
	require.NoError(t, err)
	mw, err := sluicehttp.NewGroup([]sluicehttp.Policy{{Limiter: second, Name: "second"}, {Limiter: minute, Name: "minute"}},
		sluicehttp.WithMaxDelay(2*time.Second))
	require.NoError(t, err)
	var (
		mu     sync.Mutex
		served []time.Duration
	)
	srv := httptest.NewServer(mw(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		served = append(served, clk.Now().Sub(start))
	})))
	t.Cleanup(srv.Close)
	send := func() <-chan int {
		status := make(chan int, 1)
		go func() {
			resp, err := srv.Client().Get(srv.URL)
			if err != nil {
				status <- 0
				return
			}
			resp.Body.Close()
			status <- resp.StatusCode
		}()
		return status
	}
	require.Equal(t, 200, <-send())
	b := send()
	require.Equal(t, time.Second, <-clk.sleeps)
	c := send()
	require.Equal(t, 2*time.Second, <-clk.sleeps)

	clk.paused.Lock()
	clk.Add(3 * time.Second) // both turns pass while the server is paused
	clk.paused.Unlock()
	require.Equal(t, time.Second, <-clk.sleeps, "one of them is held again, for the next turn")
	var later <-chan int
	select {
	case s := <-b:
		require.Equal(t, 200, s)
		later = c
	case s := <-c:
		require.Equal(t, 200, s)
		later = b
	}
	clk.Add(time.Second)
	require.Equal(t, 200, <-later)
	mu.Lock()
	defer mu.Unlock()
	require.Equal(t, []time.Duration{0, 3 * time.Second, 4 * time.Second}, served)
}
