// Command httpserver serves a small JSON API whose clients are limited per
// IP address by sluicehttp: each may spend a burst of 5 units, refilled at
// 1 unit per second. GET /items costs 1 unit; POST /batch costs one unit
// per item in its body.
//
//	go run ./examples/httpserver -addr 127.0.0.1:8080
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/signal"
	"strconv"
	"syscall"
	"time"

	"github.com/sluice-go/sluice"
	"github.com/sluice-go/sluice/sluicehttp"
)

// config is what the API's limits depend on.
type config struct {
	// rate is how fast each client's allowance refills.
	rate sluice.Rate
	// burst is the most a client may spend at once: also the largest
	// batch.
	burst float64
	// trustedProxies are the reverse proxies whose X-Forwarded-For is
	// believed.
	trustedProxies []netip.Prefix
	// clock is the limiter's clock; nil means the system clock.
	clock sluice.Clock
}

// maxBody bounds the size of a request body.
const maxBody = 1 << 20

func main() {
	addr := flag.String("addr", "127.0.0.1:8080", "listen `address`")
	perSecond := flag.Float64("rate", 1, "units each client regains per second")
	burst := flag.Float64("burst", 5, "units each client may spend at once")
	var trusted []netip.Prefix
	flag.Func("trust", "trust X-Forwarded-For from the proxies in `CIDR` (repeatable)", func(s string) error {
		p, err := netip.ParsePrefix(s)
		if err != nil {
			return err
		}
		trusted = append(trusted, p)
		return nil
	})
	flag.Parse()

	handler, err := newHandler(config{rate: sluice.PerSecond(*perSecond), burst: *burst, trustedProxies: trusted})
	if err != nil {
		log.Fatal(err)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := serve(ctx, *addr, handler, log.Printf); err != nil {
		log.Fatal(err)
	}
}

// serve serves h on addr until ctx ends, then shuts down gracefully. It
// logs the address it listens on, which is the port the system chose when
// addr's port is 0.
func serve(ctx context.Context, addr string, h http.Handler, logf func(format string, args ...any)) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	done := make(chan error, 1)
	stopShutdown := context.AfterFunc(ctx, func() {
		shutdown, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		done <- srv.Shutdown(shutdown)
	})
	logf("listening on http://%s", ln.Addr())
	if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
		stopShutdown()
		return err
	}
	return <-done
}

// newHandler returns the API: GET /items and POST /batch, limited per
// client IP by one token bucket, so that both endpoints spend the same
// allowance.
func newHandler(cfg config) (http.Handler, error) {
	opts := []sluice.Option{sluice.WithBurst(cfg.burst)}
	if cfg.clock != nil {
		opts = append(opts, sluice.WithClock(cfg.clock))
	}
	lim, err := sluice.NewTokenBucket(cfg.rate, opts...)
	if err != nil {
		return nil, err
	}
	common := []sluicehttp.Option{
		sluicehttp.WithKey(sluicehttp.ClientIP{TrustedProxies: cfg.trustedProxies}.Key),
		sluicehttp.WithPolicyName("per-ip"),
		sluicehttp.WithDenyHandler(denied),
		sluicehttp.WithErrorHandler(failed),
		sluicehttp.WithErrorHook(func(r *http.Request, err error) { log.Printf("%s %s: %v", r.Method, r.URL.Path, err) }),
	}
	perRequest, err := sluicehttp.New(lim, common...)
	if err != nil {
		return nil, err
	}
	perItem, err := sluicehttp.New(lim, append(common, sluicehttp.WithCost(batchSize))...)
	if err != nil {
		return nil, err
	}
	mux := http.NewServeMux()
	mux.Handle("GET /items", perRequest(http.HandlerFunc(listItems)))
	mux.Handle("POST /batch", perItem(http.HandlerFunc(acceptBatch)))
	return mux, nil
}

func listItems(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, map[string]any{"items": []string{"apple", "pear", "plum"}})
}

// batch is the body of POST /batch.
type batch struct {
	Items []json.RawMessage `json:"items"`
}

func acceptBatch(w http.ResponseWriter, r *http.Request) {
	var b batch
	if err := json.NewDecoder(r.Body).Decode(&b); err != nil {
		writeJSON(w, http.StatusBadRequest, map[string]any{"error": err.Error()})
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"accepted": len(b.Items)})
}

// batchSize is the cost of a batch: its number of items. It reads the
// body and puts an identical one back for the handler.
func batchSize(r *http.Request) (float64, error) {
	body, err := sluicehttp.ReadBody(r, maxBody) // a longer body is answered 413
	if err != nil {
		return 0, err
	}
	var b batch
	if err := json.Unmarshal(body, &b); err != nil {
		return 0, fmt.Errorf("batch: %w", err)
	}
	return float64(len(b.Items)), nil
}

// denied answers a request over the limit with a JSON body; sluicehttp
// has already set Retry-After and the RateLimit fields.
func denied(w http.ResponseWriter, _ *http.Request, _ sluice.Decision) {
	retry, _ := strconv.Atoi(w.Header().Get("Retry-After"))
	writeJSON(w, http.StatusTooManyRequests, map[string]any{
		"error":               "rate limit exceeded",
		"retry_after_seconds": retry,
	})
}

// failed answers a request that could not be decided with a JSON body and
// sluicehttp's default status.
func failed(w http.ResponseWriter, _ *http.Request, err error) {
	code, msg := sluicehttp.ErrorStatus(err), "limiter unavailable"
	if code < 500 {
		msg = err.Error() // the client's own fault: tell it what
	}
	writeJSON(w, code, map[string]any{"error": msg})
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		log.Print(err)
	}
}
