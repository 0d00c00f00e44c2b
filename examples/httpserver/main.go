// Command httpserver serves a small JSON API whose clients are limited per
// IP address by sluicehttp: each may spend a burst of 5 units, refilled at
// 1 unit per second. GET /items costs 1 unit; POST /batch costs one unit
// per item in its body. GET /report, which takes 2 seconds to build, is
// limited by how many run at once: 2 per client, each holding a lease of
// a concurrency limit for as long as it runs.
//
//	go run ./examples/httpserver -addr 127.0.0.1:8080
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
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
	// concurrent is how many reports a client may have built at once.
	concurrent float64
	// reportTime is how long a report takes to build.
	reportTime time.Duration
}

// maxBody bounds the size of a request body.
const maxBody = 1 << 20

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stderr)
	stop()
	os.Exit(code)
}

// run runs the command with the arguments args until ctx ends, and returns
// its exit status: 2 for a bad command line, reported on stderr with the
// usage before anything listens, as the flag package does; 1 when the
// server cannot start or stops with an error.
func run(ctx context.Context, args []string, stderr io.Writer) int {
	addr, cfg, err := parseFlags(args, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		return 2
	}
	logger := log.New(stderr, "", log.LstdFlags)
	handler, err := newHandler(cfg)
	if err == nil {
		err = serve(ctx, addr, handler, logger.Printf)
	}
	if err != nil {
		logger.Print(err)
		return 1
	}
	return 0
}

// parseFlags returns the listen address and the limits args ask for. A
// flag it cannot use, a trusted proxy range ClientIP cannot read safely
// among them, is reported on stderr, naming the flag and its value, and
// returned.
func parseFlags(args []string, stderr io.Writer) (addr string, cfg config, err error) {
	fs := flag.NewFlagSet("httpserver", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&addr, "addr", "127.0.0.1:8080", "listen `address`")
	perSecond := fs.Float64("rate", 1, "units each client regains per second")
	fs.Float64Var(&cfg.burst, "burst", 5, "units each client may spend at once")
	fs.Float64Var(&cfg.concurrent, "concurrent", 2, "reports each client may have built at once")
	fs.DurationVar(&cfg.reportTime, "report", 2*time.Second, "how long a report takes to build")
	fs.Func("trust", "trust X-Forwarded-For from the proxies in `CIDR` (repeatable)", func(s string) error {
		p, err := netip.ParsePrefix(s)
		if err != nil {
			return err
		}
		// Now, not at each request, which would all fail with it.
		if err := (sluicehttp.ClientIP{TrustedProxies: []netip.Prefix{p}}).Validate(); err != nil {
			return err
		}
		cfg.trustedProxies = append(cfg.trustedProxies, p)
		return nil
	})
	if err := fs.Parse(args); err != nil {
		return "", config{}, err
	}
	cfg.rate = sluice.PerSecond(*perSecond)
	return addr, cfg, nil
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
//
// It fails with an error wrapping sluice.ErrInvalidConfig for trusted
// proxy ranges ClientIP cannot read safely, which would otherwise fail
// every request.
func newHandler(cfg config) (http.Handler, error) {
	clientIP := sluicehttp.ClientIP{TrustedProxies: cfg.trustedProxies}
	if err := clientIP.Validate(); err != nil {
		return nil, err
	}
	var opts []sluice.Option
	if cfg.clock != nil {
		opts = append(opts, sluice.WithClock(cfg.clock))
	}
	lim, err := sluice.NewTokenBucket(cfg.rate, cfg.burst, opts...)
	if err != nil {
		return nil, err
	}
	common := []sluicehttp.Option{
		sluicehttp.WithKey(clientIP.Key),
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
	// Reports are slow: what limits them is how many run at once.
	reports, err := sluice.NewConcurrencyLimit(cfg.concurrent, time.Minute, opts...)
	if err != nil {
		return nil, err
	}
	atOnce, err := sluicehttp.New(reports, append(common[:len(common):len(common)], sluicehttp.WithPolicyName("reports-per-ip"))...)
	if err != nil {
		return nil, err
	}
	mux := http.NewServeMux()
	mux.Handle("GET /items", perRequest(http.HandlerFunc(listItems)))
	mux.Handle("POST /batch", perItem(http.HandlerFunc(acceptBatch)))
	mux.Handle("GET /report", atOnce(buildReport(cfg.reportTime)))
	return mux, nil
}

// buildReport returns the handler of GET /report, which takes d to build
// a report, or stops when its client goes away.
func buildReport(d time.Duration) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-time.After(d):
			writeJSON(w, http.StatusOK, map[string]any{"report": "ready"})
		case <-r.Context().Done():
		}
	})
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
// sluicehttp's default status. The error hook has logged err.
func failed(w http.ResponseWriter, _ *http.Request, err error) {
	code := sluicehttp.ErrorStatus(err)
	var msg string
	switch {
	case code < 500:
		msg = err.Error() // the client's own fault: tell it what
	case code == http.StatusInternalServerError:
		// The server's mistake (sluice.ErrInvalidConfig), which no retry
		// mends: never report it as an outage.
		msg = "server misconfigured: see the server's log"
	default:
		msg = "limiter unavailable"
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
