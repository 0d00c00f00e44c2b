package sim

import (
	"fmt"
	"math"
	"sort"
	"strconv"
	"time"

	"github.com/sluice-go/sluice/engine"
)

// DefaultMaxRequests is the most requests a simulation offers a limiter
// unless Options.MaxRequests says otherwise: ten million, seconds of work
// and at most about a gigabyte of memory.
const DefaultMaxRequests = 10_000_000

// bytesPerRequest is about the most memory a request holds until its
// limiter's run ends: an admission is kept for the summary's most in any
// window, a denial's RetryAfter for its percentiles, each with the spare
// room of append. Ten million admissions in one window peaked at 1 GB.
const bytesPerRequest = 100

// checkSize refuses, before any work, a simulation that would offer a
// limiter of params more than most requests: memory grows with them.
func (c *Config) checkSize(params []engine.Params, most int64) error {
	var worst, biggest float64
	var culprit TrafficSpec
	for _, p := range params {
		var total float64
		for _, t := range c.Traffic {
			n := t.expected(c.Duration, p)
			total += n
			if n > biggest {
				biggest, culprit = n, t
			}
		}
		worst = max(worst, total)
	}
	// Written so that NaN, which no traffic should give, is refused too.
	if worst <= float64(most) {
		return nil
	}
	amount, memory := "about "+grouped(int64(worst)), "up to about "+size(worst*bytesPerRequest)
	if !(worst < 1e15) {
		amount, memory = "more than 10^15", "more than 100 PB"
	}
	return fmt.Errorf("%w: the traffic would offer a limiter %s requests in %v (%s of memory), most of them from %q, "+
		"more than the %s a run may offer (-max-requests): offer fewer, with %s",
		errConfig, amount, c.Duration, memory, culprit.Text, grouped(most), shrink[culprit.pattern])
}

// shrink says how each pattern offers fewer requests.
var shrink = map[string]string{
	"uniform": "a lower rate= (which is per client), fewer clients= or a shorter -duration",
	"poisson": "a lower rate= (which is per client), fewer clients= or a shorter -duration",
	"bursts":  "a smaller n=, a longer every=, fewer clients= or a shorter -duration",
	"edge":    "a smaller n=, a longer window=, fewer clients= or a shorter -duration",
	"greedy":  "a higher cost=, fewer clients=, a slower limiter or a shorter -duration",
	"csv":     "fewer rows or a shorter -duration",
}

// expected returns about how many requests ts offers in a run of length d
// against a limiter of p, in floating point so that no spec overflows it.
func (ts TrafficSpec) expected(d time.Duration, p engine.Params) float64 {
	if ts.pattern == "csv" {
		return float64(sort.Search(len(ts.rows), func(i int) bool { return ts.rows[i].At >= d }))
	}
	span := float64(d - ts.start) // ns
	if span <= 0 {
		return 0
	}
	var each float64 // a client's requests
	switch ts.pattern {
	case "uniform", "poisson":
		each = ts.rate.Amount * (span / float64(ts.rate.Period))
	case "bursts":
		each = float64(ts.n) * math.Ceil(span/float64(ts.every))
	case "edge":
		each = 2 * float64(ts.n) * math.Ceil(span/float64(ts.window))
	case "greedy":
		// A greedy client is admitted at most twice the limit (a fresh
		// key's burst, a window's on both sides of a boundary) and the
		// rate over the span, and denied at most once after each admission.
		each = 2 * (2*p.Limit + span*perNanosecond(p)) / ts.cost
	}
	return float64(ts.clients) * each
}

// perNanosecond returns the long-run rate of a limiter of p, in cost per
// nanosecond.
func perNanosecond(p engine.Params) float64 {
	switch p.Kind {
	case engine.KindLeakyBucket, engine.KindTokenBucket:
		return p.Amount / float64(p.Interval)
	case engine.KindGCRA:
		return 1 / float64(p.Interval)
	}
	return p.Limit / float64(p.Interval)
}

// grouped formats a count with its thousands separated by commas.
func grouped(n int64) string {
	s := strconv.FormatInt(n, 10)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}

// size formats a number of bytes in decimal units.
func size(b float64) string {
	for _, u := range []struct {
		unit  string
		scale float64
	}{{"PB", 1e15}, {"TB", 1e12}, {"GB", 1e9}, {"MB", 1e6}, {"kB", 1e3}} {
		if b >= u.scale {
			return strconv.FormatFloat(b/u.scale, 'f', 0, 64) + " " + u.unit
		}
	}
	return strconv.FormatFloat(b, 'f', 0, 64) + " bytes"
}
