package sim

import (
	"bytes"
	"encoding/csv"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
	"unicode/utf8"

	"github.com/sluice-go/sluice"
)

// Summary is what a limiter admitted of its traffic. Amounts of cost are
// per key, where the limits apply; counts of requests are over all keys.
type Summary struct {
	// Limiter is the limiter's label.
	Limiter string
	// Offered, Admitted and Denied count requests.
	Offered, Admitted, Denied int64
	// LargestBurst is the most cost admitted on one key at one instant.
	LargestBurst float64
	// MaxInWindow is the most cost admitted on one key in any interval of
	// length Window (half-open, anywhere: across window boundaries too).
	MaxInWindow float64
	Window      time.Duration
	// LongRunRate is the cost admitted per second over the last 90% of the
	// run, past the transient of its start, over all keys.
	LongRunRate float64
	// RetryP50 and RetryP99 are the 50th and 99th percentiles (nearest
	// rank) of the RetryAfter given to denied requests; zero without
	// denials.
	RetryP50, RetryP99 time.Duration
}

// meter accumulates a Summary, request by request, in time order.
type meter struct {
	s        Summary
	duration time.Duration
	keys     map[string]*keyMeter
	late     float64 // cost admitted in the last 90% of the run
	retries  []time.Duration
}

// keyMeter follows one key's admissions: the cost admitted at its latest
// instant, and its admissions of the last Window.
type keyMeter struct {
	at     time.Duration
	atCost float64
	recent []Request // admissions less than Window before the latest
	head   int       // recent[head:] is live
	sum    float64   // the cost of recent[head:]
}

func newMeter(c *Config) *meter {
	return &meter{s: Summary{Window: c.Window}, duration: c.Duration, keys: map[string]*keyMeter{}}
}

func (m *meter) record(r Request, d sluice.Decision) {
	m.s.Offered++
	if !d.Allowed {
		m.s.Denied++
		m.retries = append(m.retries, d.RetryAfter)
		return
	}
	m.s.Admitted++
	if r.At >= m.duration/10 {
		m.late += r.Cost
	}
	k := m.keys[r.Key]
	if k == nil {
		k = &keyMeter{at: -1}
		m.keys[r.Key] = k
	}
	if r.At != k.at {
		k.at, k.atCost = r.At, 0
	}
	k.atCost += r.Cost
	m.s.LargestBurst = max(m.s.LargestBurst, k.atCost)
	// The most in any interval of length Window: some such interval ends
	// at an admission, so it is enough to sum, at each admission, those
	// less than Window before it.
	k.recent = append(k.recent, r)
	k.sum += r.Cost
	for r.At-k.recent[k.head].At >= m.s.Window {
		k.sum -= k.recent[k.head].Cost
		k.head++
	}
	if k.head > len(k.recent)/2 {
		k.recent = k.recent[:copy(k.recent, k.recent[k.head:])]
		k.head = 0
		k.sum = 0
		for _, e := range k.recent {
			k.sum += e.Cost // recomputed, so rounding does not accumulate
		}
	}
	m.s.MaxInWindow = max(m.s.MaxInWindow, k.sum)
}

func (m *meter) summary(name string) Summary {
	s := m.s
	s.Limiter = name
	s.LongRunRate = m.late / (m.duration - m.duration/10).Seconds()
	slices.Sort(m.retries)
	s.RetryP50, s.RetryP99 = percentile(m.retries, 50), percentile(m.retries, 99)
	return s
}

// WriteTable writes the summaries as an aligned text table.
func WriteTable(w io.Writer, sums []Summary) error {
	// Names are left-aligned by padding them, numbers right-aligned.
	width := len("limiter")
	for _, s := range sums {
		width = max(width, utf8.RuneCountInString(s.Limiter))
	}
	pad := func(name string) string { return name + strings.Repeat(" ", width-utf8.RuneCountInString(name)) }
	var b bytes.Buffer
	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', tabwriter.AlignRight)
	if len(sums) > 0 {
		fmt.Fprintf(tw, "%s\toffered\tadmitted\tdenied\tlargest burst\tmost in any %v\tlong-run rate\tRetryAfter p50\tp99\t\n", pad("limiter"), sums[0].Window)
	}
	for _, s := range sums {
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%s\t%s\t%s/s\t%s\t%s\t\n", pad(s.Limiter), s.Offered, s.Admitted, s.Denied,
			num(s.LargestBurst), num(s.MaxInWindow), strconv.FormatFloat(s.LongRunRate, 'f', 2, 64),
			retry(s.RetryP50, s.Denied), retry(s.RetryP99, s.Denied))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	// Right-aligning pads every first cell with the two spaces between
	// columns: the table starts at the margin without them.
	for _, line := range strings.SplitAfter(b.String(), "\n") {
		if _, err := io.WriteString(w, strings.TrimPrefix(line, "  ")); err != nil {
			return err
		}
	}
	return nil
}

// WriteCSV writes the summaries as CSV, durations in seconds.
func WriteCSV(w io.Writer, sums []Summary) error {
	cw := csv.NewWriter(w)
	cw.Write([]string{"limiter", "offered", "admitted", "denied", "largest_burst", "window_s",
		"most_in_window", "long_run_rate_per_s", "retry_after_p50_s", "retry_after_p99_s"})
	for _, s := range sums {
		cw.Write([]string{s.Limiter, strconv.FormatInt(s.Offered, 10), strconv.FormatInt(s.Admitted, 10),
			strconv.FormatInt(s.Denied, 10), num(s.LargestBurst), seconds(s.Window), num(s.MaxInWindow),
			num(s.LongRunRate), seconds(s.RetryP50), seconds(s.RetryP99)})
	}
	cw.Flush()
	return cw.Error()
}

// num formats an amount in the fewest digits that read back exactly.
func num(v float64) string { return strconv.FormatFloat(v, 'g', -1, 64) }

// seconds formats a duration as exact decimal seconds.
func seconds(d time.Duration) string {
	return strconv.FormatFloat(d.Seconds(), 'f', -1, 64)
}

// retry formats a percentile of RetryAfter for the text table.
func retry(d time.Duration, denied int64) string {
	if denied == 0 {
		return "-"
	}
	return d.String()
}
