package guarantees

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
	"unsafe"

	"github.com/sluice-go/sluice"
	"github.com/sluice-go/sluice/engine"
)

// The table's setting: a limit of 5 requests per second, offered at 10 per
// second in the long run.
const (
	limit   = 5
	period  = time.Second
	offered = 10 // requests per second
)

// start is where the measurements' simulated time begins: a realistic
// time, 123456789 ns past a whole second so that traffic is not aligned
// with the windows unless a pattern aligns it.
var start = time.Date(2026, 11, 21, 12, 0, 0, 123456789, time.UTC).UnixNano()

// Row is what one algorithm admits at a limit of 5 per second, with unit
// requests.
type Row struct {
	// Name is the algorithm and its variant.
	Name string
	// Params are the algorithm's, as its constructor builds them.
	Params engine.Params
	// Burst is how many requests a fresh key admits at one instant.
	Burst int
	// MaxPerPeriod is the most requests admitted in any interval of one
	// second, over the adversarial patterns of [Adversaries].
	MaxPerPeriod int
	// Rate is the long-run admitted rate, in requests per second, when 10
	// are offered every second.
	Rate float64
	// SlotBytes is the size of the slot a MemStore keeps a key in;
	// EntryBytes the size of each sliding log entry beside it, and
	// MaxEntries how many entries a key keeps at most.
	SlotBytes, EntryBytes, MaxEntries int
}

// Algorithms returns every algorithm and variant configured for a limit of
// 5 per second, built by its constructor.
func Algorithms() ([]Row, error) {
	rate := sluice.Per(limit, period)
	builders := []struct {
		name  string
		build func() (*sluice.Limiter, error)
	}{
		{"Leaky bucket", func() (*sluice.Limiter, error) { return sluice.NewLeakyBucket(limit, rate) }},
		{"GCRA", func() (*sluice.Limiter, error) { return sluice.NewGCRA(rate, limit) }},
		{"Token bucket", func() (*sluice.Limiter, error) { return sluice.NewTokenBucket(rate, rate.Amount) }},
		{"Token bucket, interval refill", func() (*sluice.Limiter, error) {
			return sluice.NewTokenBucket(rate, rate.Amount, sluice.WithIntervalRefill())
		}},
		{"Fixed window", func() (*sluice.Limiter, error) { return sluice.NewFixedWindow(limit, period) }},
		{"Fixed window, anchored", func() (*sluice.Limiter, error) {
			return sluice.NewFixedWindow(limit, period, sluice.WithAnchoredWindows())
		}},
		{"Sliding log", func() (*sluice.Limiter, error) { return sluice.NewSlidingLog(limit, period) }},
		{"Sliding counter", func() (*sluice.Limiter, error) { return sluice.NewSlidingCounter(limit, period) }},
	}
	rows := make([]Row, 0, len(builders))
	for _, b := range builders {
		l, err := b.build()
		if err != nil {
			return nil, fmt.Errorf("%s: %w", b.name, err)
		}
		p, _ := l.Params()
		rows = append(rows, Row{Name: b.name, Params: p})
		if err := l.Close(); err != nil {
			return nil, err
		}
	}
	return rows, nil
}

// Measure fills in a row's measurements.
func (r *Row) Measure() error {
	p := r.Params
	fresh := NewKey(p)
	for {
		d, err := fresh.Apply(engine.VerbAllow, start, 1)
		if err != nil {
			return err
		}
		if !d.Allowed {
			break
		}
		r.Burst++
	}
	for _, adv := range Adversaries(p, 1) {
		k := NewKey(p)
		if err := adv.Run(k, start); err != nil {
			return fmt.Errorf("%s: %s: %w", r.Name, adv.Name, err)
		}
		r.MaxPerPeriod = max(r.MaxPerPeriod, int(MaxInWindow(k.Admitted(), int64(period))))
	}
	// The long run: 1000 s of traffic, measured over the last 900 s.
	steady := NewKey(p)
	const warmUp, measured = 100 * time.Second, 900 * time.Second
	if err := steady.Uniform(start, start+int64(warmUp+measured), int64(time.Second/offered), 1); err != nil {
		return err
	}
	n := 0
	for _, a := range steady.Admitted() {
		if a.Time >= start+int64(warmUp) {
			n++
		}
	}
	r.Rate = float64(n) / measured.Seconds()
	// A slot holds the key's 120-bit id (16 bytes) and its expiry, which is
	// a GCRA key's whole state (its theoretical arrival time); the other
	// algorithms' slots add the State's time and two amounts.
	// memtable_test.go pins both sizes.
	var s engine.State
	r.SlotBytes = 16 + int(unsafe.Sizeof(s.Time))
	if p.Kind != engine.KindGCRA {
		r.SlotBytes += int(unsafe.Sizeof(s.Time) + unsafe.Sizeof(s.A) + unsafe.Sizeof(s.B))
	}
	if p.Kind == engine.KindSlidingLog {
		r.EntryBytes, r.MaxEntries = int(unsafe.Sizeof(engine.Entry{})), p.MaxEntries
	}
	return nil
}

// Table returns every algorithm's measured row.
func Table() ([]Row, error) {
	rows, err := Algorithms()
	if err != nil {
		return nil, err
	}
	for i := range rows {
		if err := rows[i].Measure(); err != nil {
			return nil, err
		}
	}
	return rows, nil
}

// Markdown formats rows as the README's table, with a line saying how it
// was measured.
func Markdown(rows []Row) string {
	var b strings.Builder
	fmt.Fprintf(&b, "Each algorithm limited to %d requests per second, measured with unit requests on simulated time by\n", limit)
	b.WriteString("`go run ./internal/guarantees/cmd/table`. \"Most in any 1 s\" is the worst over adversarial traffic\n")
	b.WriteString("(hammering at the exact instants of admission, bursts on both sides of window boundaries, ten times\n")
	fmt.Fprintf(&b, "the rate), counting every interval, across window boundaries too; the long-run rate is with %d requests\n", offered)
	b.WriteString("offered per second. \"In memory\" is the slot the in-memory store keeps a key in; its tables are\n")
	b.WriteString("kept at most three quarters full, so the heap per key is larger: about 50 bytes per GCRA key at a\n")
	b.WriteString("million keys ([benchmarks/README.md](benchmarks/README.md)).\n\n")
	b.WriteString("| Algorithm | Burst from rest | Most in any 1 s | Long-run rate | In memory, per key |\n")
	b.WriteString("|---|---:|---:|---:|---|\n")
	for _, r := range rows {
		state := fmt.Sprintf("%d-byte slot", r.SlotBytes)
		if r.EntryBytes > 0 {
			state = fmt.Sprintf("%d-byte slot + %d per entry (at most %d: %d bytes)",
				r.SlotBytes, r.EntryBytes, r.MaxEntries, r.SlotBytes+r.EntryBytes*r.MaxEntries)
		}
		fmt.Fprintf(&b, "| %s | %d | %d | %.2f/s | %s |\n", r.Name, r.Burst, r.MaxPerPeriod, r.Rate, state)
	}
	return b.String()
}

// The lines that delimit the table in the README.
const (
	BeginMarker = "<!-- guarantees:begin -->"
	EndMarker   = "<!-- guarantees:end -->"
)

// ErrNoMarkers reports a README without the lines that delimit the table.
var ErrNoMarkers = errors.New("README has no " + BeginMarker + " and " + EndMarker + " lines")

// Section returns what the README holds between the markers.
func Section(readme []byte) (string, error) {
	_, inside, _, err := split(readme)
	return string(inside), err
}

// Replace returns readme with section between the markers. A README
// without them gets them, around section, at its end.
func Replace(readme []byte, section string) []byte {
	before, _, after, err := split(readme)
	if err != nil {
		var b bytes.Buffer
		b.Write(bytes.TrimRight(readme, "\n"))
		fmt.Fprintf(&b, "\n\n%s\n%s%s\n", BeginMarker, section, EndMarker)
		return b.Bytes()
	}
	return slices.Concat(before, []byte(section), after)
}

// split cuts readme into what comes up to and including the begin marker's
// line, what lies between the markers, and the rest from the end marker's
// line.
func split(readme []byte) (before, inside, after []byte, err error) {
	begin := bytes.Index(readme, []byte(BeginMarker+"\n"))
	end := bytes.Index(readme, []byte(EndMarker))
	if begin < 0 || end < begin {
		return nil, nil, nil, ErrNoMarkers
	}
	begin += len(BeginMarker) + 1
	return readme[:begin], readme[begin:end], readme[end:], nil
}
