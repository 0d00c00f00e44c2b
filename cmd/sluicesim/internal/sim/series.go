package sim

import (
	"encoding/csv"
	"fmt"
	"io"
	"math"
	"strconv"
	"time"

	"github.com/sluice-go/sluice"
	"github.com/sluice-go/sluice/engine"
)

// Series is what a limiter's figure draws.
type Series struct {
	// Bin is the width of the bins; Offered, Admitted and Denied count the
	// requests of each, over all keys.
	Bin                       time.Duration
	Offered, Admitted, Denied []int64
	// Key is the watched key, whose state State draws, with StateName
	// saying what it is. Limit is the state's ceiling.
	Key       string
	StateName string
	Limit     float64
	State     []Point
	// Denials are the watched key's denied requests, at its state then.
	Denials []Point
	// StateStride and DenialStride say how a long run was thinned to
	// draw in bounded memory: State holds the watched key's state around
	// every StateStride-th of its requests (and twice per bin throughout),
	// Denials every DenialStride-th of its denials. 1 is every one.
	StateStride, DenialStride int64
}

// Point is a value at a time since the start of the simulation.
type Point struct {
	At    time.Duration
	Value float64
}

// sheet records a Series.
type sheet struct {
	Series
	sampleEvery time.Duration
	stateOf     func(sluice.Decision) float64
	samples     []Point // the watched key's state, twice per bin
	detail      thinned // its state around its requests
	denials     thinned // its denials
}

func newSheet(c *Config, p engine.Params) *sheet {
	n := int((c.Duration + c.Bin - 1) / c.Bin)
	sh := &sheet{
		Series: Series{
			Bin:     c.Bin,
			Offered: make([]int64, n), Admitted: make([]int64, n), Denied: make([]int64, n),
			Key: c.Watch, Limit: p.Limit,
		},
		sampleEvery: max(c.Bin/samplesPerBin, 1),
		stateOf:     func(d sluice.Decision) float64 { return d.Used },
		detail:      thinned{stride: 1, max: maxStatePoints},
		denials:     thinned{stride: 1, max: maxDenialMarks},
	}
	sh.StateName = stateName(p)
	if p.Kind == engine.KindTokenBucket {
		sh.stateOf = func(d sluice.Decision) float64 { return d.Remaining }
	}
	return sh
}

// stateName says what a limiter's state line shows, read through the
// public API: a decision's Used (Remaining for the token bucket).
func stateName(p engine.Params) string {
	switch p.Kind {
	case engine.KindLeakyBucket:
		return "bucket level"
	case engine.KindGCRA:
		return fmt.Sprintf("TAT − now, in emission intervals of %v", time.Duration(p.Interval))
	case engine.KindTokenBucket:
		return "tokens in the bucket"
	case engine.KindFixedWindow:
		return "count in the current window"
	case engine.KindSlidingLog:
		return fmt.Sprintf("count in the last %v", time.Duration(p.Interval))
	case engine.KindSlidingCounter:
		return fmt.Sprintf("weighted count of the last %v", time.Duration(p.Interval))
	}
	return "used"
}

// detailNext counts a request of the watched key and reports whether its
// state is drawn around it: before, at and after it.
func (sh *sheet) detailNext() bool { return sh.detail.keep(3) }

// state records the watched key's state at a time: around a request when
// detail is set, else as a sample.
func (sh *sheet) state(at time.Duration, d sluice.Decision, detail bool) {
	p := Point{at, sh.stateOf(d)}
	if detail {
		sh.detail.add(p)
	} else {
		sh.samples = append(sh.samples, p)
	}
}

// record counts a decided request, and draws the watched key's state
// after it when detail is set.
func (sh *sheet) record(r Request, d sluice.Decision, detail bool) {
	b := int(r.At / sh.Bin)
	sh.Offered[b]++
	if d.Allowed {
		sh.Admitted[b]++
	} else {
		sh.Denied[b]++
		if r.Key == sh.Key && sh.denials.keep(1) {
			sh.denials.add(Point{r.At, sh.stateOf(d)})
		}
	}
	if detail {
		sh.state(r.At, d, true)
	}
}

// series returns the Series recorded, its state line simplified for a
// ceiling of limit.
func (sh *sheet) series(limit float64) Series {
	s := sh.Series
	s.State = simplify(merge(sh.detail.points, sh.samples), limit)
	s.Denials = sh.denials.points
	s.StateStride, s.DenialStride = sh.detail.stride, sh.denials.stride
	return s
}

// merge interleaves a and b, each in time order, into one line in time
// order, a's points first at equal times: a sample at a request's instant
// is taken after the request.
func merge(a, b []Point) []Point {
	out := make([]Point, 0, len(a)+len(b))
	for len(a) > 0 && len(b) > 0 {
		if a[0].At <= b[0].At {
			out, a = append(out, a[0]), a[1:]
		} else {
			out, b = append(out, b[0]), b[1:]
		}
	}
	return append(append(out, a...), b...)
}

// thinned keeps the points of every stride-th of a run's events (the
// watched key's requests, its denials) in at most max points: when full
// it drops the points of every other event it kept and doubles stride, so
// that what it keeps spans the whole run evenly however long the run.
type thinned struct {
	points []Point
	events []int64 // the event of each point, counted from 0
	stride int64
	n      int64 // the events so far
	max    int
}

// keep counts an event and reports whether its points, at most width of
// them, are kept: then add keeps them.
func (t *thinned) keep(width int) bool {
	e := t.n
	t.n++
	for e%t.stride == 0 {
		if len(t.points)+width <= t.max {
			return true
		}
		t.halve()
	}
	return false
}

// add keeps a point of the event keep last kept.
func (t *thinned) add(p Point) {
	t.points = append(t.points, p)
	t.events = append(t.events, t.n-1)
}

// halve doubles the stride, dropping the points of the events off it.
func (t *thinned) halve() {
	t.stride *= 2
	kept := 0
	for i, e := range t.events {
		if e%t.stride == 0 {
			t.points[kept], t.events[kept] = t.points[i], e
			kept++
		}
	}
	t.points, t.events = t.points[:kept], t.events[:kept]
}

// WriteSeries writes the runs' bins as CSV: one row per limiter and bin.
func WriteSeries(w io.Writer, runs []Run) error {
	cw := csv.NewWriter(w)
	cw.Write([]string{"limiter", "bin_start_s", "offered", "admitted", "denied"})
	for _, r := range runs {
		s := r.Series
		for i := range s.Offered {
			cw.Write([]string{r.Name, seconds(time.Duration(i) * s.Bin),
				strconv.FormatInt(s.Offered[i], 10), strconv.FormatInt(s.Admitted[i], 10), strconv.FormatInt(s.Denied[i], 10)})
		}
	}
	cw.Flush()
	return cw.Error()
}

// WriteState writes the watched key's state lines and denials as CSV.
func WriteState(w io.Writer, runs []Run) error {
	cw := csv.NewWriter(w)
	cw.Write([]string{"limiter", "key", "what", "t_s", "value"})
	for _, r := range runs {
		s := r.Series
		for _, p := range s.State {
			cw.Write([]string{r.Name, s.Key, s.StateName, seconds(p.At), num(p.Value)})
		}
		for _, p := range s.Denials {
			cw.Write([]string{r.Name, s.Key, "denied", seconds(p.At), num(p.Value)})
		}
	}
	cw.Flush()
	return cw.Error()
}

// simplify drops the points of a line that lie on the straight segment
// between their neighbours (within a billionth of scale), which draw
// nothing: a state that stays flat or drains steadily between two
// requests needs only its ends.
func simplify(ps []Point, scale float64) []Point {
	if len(ps) < 3 {
		return ps
	}
	tol := scale * 1e-9
	out := ps[:1]
	for i := 1; i < len(ps)-1; i++ {
		a, b, c := out[len(out)-1], ps[i], ps[i+1]
		if c.At == a.At {
			if b.Value == a.Value && b.Value == c.Value {
				continue
			}
		} else if b.At != a.At && b.At != c.At {
			f := float64(b.At-a.At) / float64(c.At-a.At)
			if math.Abs(a.Value+f*(c.Value-a.Value)-b.Value) <= tol {
				continue
			}
		}
		out = append(out, b)
	}
	return append(out, ps[len(ps)-1])
}
