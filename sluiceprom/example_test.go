package sluiceprom_test

import (
	"bufio"
	"context"
	"fmt"
	"net/http/httptest"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/sluice-go/sluice"
	"github.com/sluice-go/sluice/sluiceprom"
)

// A limiter named "login" reports to Metrics, served on /metrics; a scrape
// after four attempts shows the decisions by outcome.
func Example() {
	m, err := sluiceprom.New()
	if err != nil {
		panic(err)
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(m)

	lim, err := sluice.NewGCRA(sluice.PerMinute(3), 3, sluice.WithName("login"), sluice.WithObserver(m.Observe))
	if err != nil {
		panic(err)
	}
	for range 4 {
		if _, err := lim.Allow(context.Background(), "user:42", 1); err != nil {
			panic(err)
		}
	}

	// What Prometheus reads from the handler you serve on /metrics.
	rec := httptest.NewRecorder()
	promhttp.HandlerFor(reg, promhttp.HandlerOpts{}).ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	sc := bufio.NewScanner(rec.Body)
	for sc.Scan() {
		if line := sc.Text(); strings.Contains(line, "sluice_decisions_total") ||
			strings.HasPrefix(line, "sluice_decision_duration_seconds_count") {
			fmt.Println(line)
		}
	}
	// Output:
	// sluice_decision_duration_seconds_count{algorithm="gcra",limiter="login",verb="allow"} 4
	// # HELP sluice_decisions_total Decisions made by sluice limiters, by limiter, algorithm, verb and outcome.
	// # TYPE sluice_decisions_total counter
	// sluice_decisions_total{algorithm="gcra",limiter="login",outcome="allowed",verb="allow"} 3
	// sluice_decisions_total{algorithm="gcra",limiter="login",outcome="denied",verb="allow"} 1
}
