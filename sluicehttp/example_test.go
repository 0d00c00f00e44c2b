package sluicehttp_test

import (
	"bytes"
	"context"
	"fmt"
	"log"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"sync"
	"time"

	"github.com/sluice-go/sluice"
	"github.com/sluice-go/sluice/sluicehttp"
)

func ExampleMiddleware() {
	// Simulated time makes the output below exact: a server leaves
	// sluice.WithClock out and runs on the system clock.
	clock := newClock()

	// Each client IP may send 2 requests per minute.
	lim, err := sluice.NewFixedWindow(2, time.Minute, sluice.WithClock(clock))
	if err != nil {
		log.Fatal(err)
	}
	api := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprintln(w, `{"ok":true}`)
	})
	handler := sluicehttp.Middleware(lim)(api)

	for range 3 {
		w := httptest.NewRecorder()
		handler.ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/", nil))
		fmt.Println(w.Code, "RateLimit-Policy:", w.Header().Get("RateLimit-Policy"))
		fmt.Println("    RateLimit:", w.Header().Get("RateLimit"))
		if retry := w.Header().Get("Retry-After"); retry != "" {
			fmt.Println("    Retry-After:", retry)
		}
	}
	// Output:
	// 200 RateLimit-Policy: "default";q=2;w=60
	//     RateLimit: "default";r=1;t=60
	// 200 RateLimit-Policy: "default";q=2;w=60
	//     RateLimit: "default";r=0;t=60
	// 429 RateLimit-Policy: "default";q=2;w=60
	//     RateLimit: "default";r=0;t=60
	//     Retry-After: 60
}

func ExampleClientIP() {
	// The server sits behind a load balancer in 10.0.0.0/8 that appends
	// the address of its peer to X-Forwarded-For.
	key := sluicehttp.ClientIP{
		TrustedProxies: []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")},
	}.Key

	show := func(remoteAddr, xff string) {
		r := httptest.NewRequest(http.MethodGet, "/", nil)
		r.RemoteAddr = remoteAddr
		r.Header.Set("X-Forwarded-For", xff)
		k, err := key(r)
		fmt.Printf("%-22s %-30q -> %s %v\n", remoteAddr, xff, k, err)
	}
	show("10.0.0.1:5000", "203.0.113.7")
	show("10.0.0.1:5000", "198.51.100.1, 203.0.113.7") // the client wrote the first entry
	show("192.0.2.1:5000", "203.0.113.7")              // not through the proxy: the header is ignored
	show("10.0.0.1:5000", "2001:db8:1:2::77")          // IPv6 clients are keyed by /64
	// Output:
	// 10.0.0.1:5000          "203.0.113.7"                  -> 203.0.113.7 <nil>
	// 10.0.0.1:5000          "198.51.100.1, 203.0.113.7"    -> 203.0.113.7 <nil>
	// 192.0.2.1:5000         "203.0.113.7"                  -> 192.0.2.1 <nil>
	// 10.0.0.1:5000          "2001:db8:1:2::77"             -> 2001:db8:1:2::/64 <nil>
}

func ExampleHeaderKey() {
	lim, err := sluice.NewTokenBucket(sluice.PerSecond(10), 10, sluice.WithClock(newClock()))
	if err != nil {
		log.Fatal(err)
	}
	limit := sluicehttp.Middleware(lim,
		sluicehttp.WithKey(sluicehttp.HeaderKey("X-API-Key")),
		sluicehttp.WithPolicyName("per-key"),
	)
	handler := limit(http.NotFoundHandler())

	for _, apiKey := range []string{"k-1", ""} {
		r := httptest.NewRequest(http.MethodGet, "/", nil)
		if apiKey != "" {
			r.Header.Set("X-API-Key", apiKey)
		}
		w := httptest.NewRecorder()
		handler.ServeHTTP(w, r)
		fmt.Println(w.Code, w.Header().Values("RateLimit"))
	}
	// Output:
	// 404 ["per-key";r=9;t=1]
	// 400 []
}

func ExampleWithCost() {
	lim, err := sluice.NewFixedWindow(100, time.Minute, sluice.WithClock(newClock()))
	if err != nil {
		log.Fatal(err)
	}
	// A batch costs one unit per line of its body, of at most 1 MiB.
	// ReadBody leaves the body for the handler, and a longer body is
	// answered 413 Content Too Large.
	perLine := func(r *http.Request) (float64, error) {
		body, err := sluicehttp.ReadBody(r, 1<<20)
		if err != nil {
			return 0, err
		}
		return float64(bytes.Count(body, []byte("\n"))), nil
	}
	handler := sluicehttp.Middleware(lim, sluicehttp.WithCost(perLine))(http.NotFoundHandler())

	w := httptest.NewRecorder()
	handler.ServeHTTP(w, httptest.NewRequest(http.MethodPost, "/batch", strings.NewReader("a\nb\nc\n")))
	fmt.Println(w.Header().Get("RateLimit"))
	// Output:
	// "default";r=97;t=60
}

func ExampleKeys() {
	lim, err := sluice.NewFixedWindow(1, time.Minute, sluice.WithClock(newClock()))
	if err != nil {
		log.Fatal(err)
	}
	// Each client has its own allowance on each route. The mux sets the
	// pattern, so the middleware wraps each route's handler.
	limit := sluicehttp.Middleware(lim, sluicehttp.WithKey(
		sluicehttp.Keys(sluicehttp.PatternKey, sluicehttp.ClientIP{}.Key)))
	ok := http.HandlerFunc(func(http.ResponseWriter, *http.Request) {})
	mux := http.NewServeMux()
	mux.Handle("GET /items/{id}", limit(ok))
	mux.Handle("GET /users/{id}", limit(ok))

	for _, path := range []string{"/items/1", "/items/2", "/users/1"} {
		w := httptest.NewRecorder()
		mux.ServeHTTP(w, httptest.NewRequest(http.MethodGet, path, nil))
		fmt.Println(path, w.Code)
	}
	// Output:
	// /items/1 200
	// /items/2 429
	// /users/1 200
}

func ExampleFields() {
	lim, err := sluice.NewGCRA(sluice.PerMinute(6), 2, sluice.WithClock(newClock()))
	if err != nil {
		log.Fatal(err)
	}
	fields, err := sluicehttp.NewFields(lim, sluicehttp.WithPolicyName("orders"))
	if err != nil {
		log.Fatal(err)
	}
	// The handler decides per account, which it knows only once it has
	// read the request, and answers with the fields the middleware sends.
	order := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		d, err := lim.Allow(r.Context(), "account:"+r.FormValue("account"), 1)
		if err != nil {
			http.Error(w, "try later", http.StatusServiceUnavailable)
			return
		}
		fields.Write(w.Header(), d)
		if !d.Allowed {
			http.Error(w, "too many orders", http.StatusTooManyRequests)
		}
	})
	for range 3 {
		w := httptest.NewRecorder()
		order.ServeHTTP(w, httptest.NewRequest(http.MethodPost, "/orders?account=42", nil))
		fmt.Println(w.Code, w.Header().Get("RateLimit"), w.Header().Values("Retry-After"))
	}
	// Output:
	// 200 "orders";r=1;t=10 []
	// 200 "orders";r=0;t=20 []
	// 429 "orders";r=0;t=20 [10]
}

func ExampleNew_concurrency() {
	// Each client IP may have 2 requests in flight at once. A slot comes
	// back when its request ends; one whose server died comes back when
	// its lease expires, a minute after it was taken.
	lim, err := sluice.NewConcurrencyLimit(2, time.Minute)
	if err != nil {
		log.Fatal(err)
	}
	defer lim.Close()
	limit, err := sluicehttp.New(lim, sluicehttp.WithPolicyName("exports"))
	if err != nil {
		log.Fatal(err)
	}
	started, finish := make(chan struct{}, 3), make(chan struct{})
	export := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		started <- struct{}{}
		<-finish // a long export
		fmt.Fprintln(w, "exported")
	})
	handler := limit(export)
	get := func() *httptest.ResponseRecorder {
		w := httptest.NewRecorder()
		handler.ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/export", nil))
		return w
	}

	done := make(chan *httptest.ResponseRecorder, 2)
	for range 2 {
		go func() { done <- get() }()
		<-started
	}
	// A third request while two are in flight is refused.
	w := get()
	fmt.Println(w.Code, "RateLimit-Policy:", w.Header().Get("RateLimit-Policy"))
	fmt.Println("    RateLimit:", w.Header().Get("RateLimit"))
	fmt.Println("    Retry-After:", w.Header().Get("Retry-After"))

	close(finish)
	fmt.Println((<-done).Code, (<-done).Code)
	// Their slots are free again once they have ended.
	w = get()
	fmt.Println(w.Code, "RateLimit:", w.Header().Get("RateLimit"))
	// Output:
	// 429 RateLimit-Policy: "exports";q=2;qu="concurrent-requests"
	//     RateLimit: "exports";r=0
	//     Retry-After: 1
	// 200 200
	// 200 RateLimit: "exports";r=1
}

func ExampleNew_perKey() {
	clock := newClock() // exact output; a server runs on the system clock

	// One limiter per plan, made once; a plan's limiter serves as a limit
	// only. The per-key limiter keeps every key's state.
	free, _ := sluice.NewFixedWindow(2, time.Minute)
	pro, _ := sluice.NewFixedWindow(100, time.Minute)
	var mu sync.Mutex
	plans := map[string]*sluice.Limiter{"k-acme": pro} // from a database, say
	lim, err := sluice.NewPerKey(func(_ context.Context, apiKey string) (*sluice.Limiter, error) {
		mu.Lock()
		defer mu.Unlock()
		if plan, ok := plans[apiKey]; ok {
			return plan, nil
		}
		return free, nil
	}, sluice.WithClock(clock))
	if err != nil {
		log.Fatal(err)
	}
	limit, err := sluicehttp.New(lim, sluicehttp.WithKey(sluicehttp.HeaderKey("X-API-Key")))
	if err != nil {
		log.Fatal(err)
	}
	handler := limit(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprintln(w, `{"ok":true}`)
	}))
	get := func(apiKey string) {
		r := httptest.NewRequest(http.MethodGet, "/", nil)
		r.Header.Set("X-API-Key", apiKey)
		w := httptest.NewRecorder()
		handler.ServeHTTP(w, r)
		fmt.Println(apiKey, w.Code, w.Header().Get("RateLimit-Policy"), w.Header().Get("RateLimit"))
	}

	get("k-acme")
	for range 3 {
		get("k-hobby")
	}
	// An upgrade applies at the next request; what was used still counts.
	mu.Lock()
	plans["k-hobby"] = pro
	mu.Unlock()
	get("k-hobby")
	// Output:
	// k-acme 200 "default";q=100;w=60 "default";r=99;t=60
	// k-hobby 200 "default";q=2;w=60 "default";r=1;t=60
	// k-hobby 200 "default";q=2;w=60 "default";r=0;t=60
	// k-hobby 429 "default";q=2;w=60 "default";r=0;t=60
	// k-hobby 200 "default";q=100;w=60 "default";r=97;t=60
}
