package sim

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strconv"
	"time"

	"github.com/sluice-go/sluice"
)

// TrafficSpec is a pattern of requests, offered by one or more clients:
//
//	uniform rate=10/s              one request every 100ms
//	poisson rate=10/s [seed=1]     random arrivals at 10/s on average, the same every run
//	bursts n=20 every=2s           20 requests at once, every 2 seconds
//	edge n=5 [window=1s] [gap=1ms] n requests gap before each window boundary, n more on it
//	greedy                         as fast as allowed: again at once when admitted, and
//	                               exactly when RetryAfter says when denied
//	csv file=log.csv               timestamp,key,cost rows (a reduced access log)
//
// Every pattern but csv also takes cost= (1 by default), clients= (1),
// key= (the key of the client, "client" by default; with several clients,
// key-1, key-2, ...) and start= (when the pattern starts, 0s by default).
// A rate is each client's: uniform rate=10/s clients=3 offers 30/s.
type TrafficSpec struct {
	// Text is the spec as written.
	Text    string
	pattern string
	rate    sluice.Rate
	seed    uint64
	n       int
	every   time.Duration
	window  time.Duration
	gap     time.Duration
	cost    float64
	clients int
	key     string
	start   time.Duration
	rows    []Request // csv
}

// Request is one offered request, at a time measured from the start of
// the simulation.
type Request struct {
	At   time.Duration
	Key  string
	Cost float64
}

const trafficCommon = "cost=, clients=, key=, start="

// maxClients bounds clients=: each client is a source and a key held for
// the whole run, so a mistyped count must be an error, not an allocation
// that fails.
const maxClients = 1_000_000

var trafficParams = map[string]string{
	"uniform": "rate=, " + trafficCommon,
	"poisson": "rate=, seed=, " + trafficCommon,
	"bursts":  "n=, every=, " + trafficCommon,
	"edge":    "n=, window=, gap=, " + trafficCommon,
	"greedy":  trafficCommon,
	"csv":     "file=",
}

// ParseTraffic reads a traffic spec. A csv file is read now, from dir
// when its name is relative (dir "" is the working directory).
func ParseTraffic(text, dir string) (TrafficSpec, error) {
	s, err := parseSpec(text)
	if err != nil {
		return TrafficSpec{}, fmt.Errorf("traffic %w", err)
	}
	ts, err := parseTraffic(s, dir)
	if err != nil {
		return TrafficSpec{}, fmt.Errorf("traffic %w", err)
	}
	return ts, nil
}

func parseTraffic(s *spec, dir string) (TrafficSpec, error) {
	ts := TrafficSpec{Text: s.text, pattern: s.word, cost: 1, clients: 1, key: "client"}
	known, ok := trafficParams[s.word]
	if !ok {
		return ts, fmt.Errorf("%q: unknown pattern %q (want uniform, poisson, bursts, edge, greedy or csv)", s.text, s.word)
	}
	var err error
	switch s.word {
	case "uniform", "poisson":
		if ts.rate, err = s.rate("rate"); err != nil {
			return ts, err
		}
		if !(ts.rate.Amount > 0) || math.IsInf(ts.rate.Amount, 0) || ts.rate.Period <= 0 {
			return ts, s.errorf("rate", "%v must be positive", ts.rate)
		}
		if s.has("seed") {
			if ts.seed, err = strconv.ParseUint(s.params["seed"], 10, 64); err != nil {
				return ts, s.errorf("seed", "%q is not a whole number", s.params["seed"])
			}
		}
	case "bursts":
		if _, ok := s.params["n"]; !ok {
			return ts, s.required("n", "20")
		}
		if ts.n, err = s.integer("n", 0); err != nil {
			return ts, err
		}
		if ts.every, err = s.mustDuration("every", "2s"); err != nil {
			return ts, err
		}
	case "edge":
		if _, ok := s.params["n"]; !ok {
			return ts, s.required("n", "5")
		}
		if ts.n, err = s.integer("n", 0); err != nil {
			return ts, err
		}
		if ts.window, err = s.duration("window", time.Second); err != nil {
			return ts, err
		}
		if ts.gap, err = s.duration("gap", time.Millisecond); err != nil {
			return ts, err
		}
		if ts.window <= 0 || ts.gap <= 0 || ts.gap >= ts.window {
			return ts, fmt.Errorf("%q: want 0 < gap < window, have gap=%v window=%v", s.text, ts.gap, ts.window)
		}
	case "csv":
		if !s.has("file") {
			return ts, s.required("file", "access.csv")
		}
		if err := s.unused(known); err != nil {
			return ts, err // before reading a file the spec may not mean
		}
		if ts.rows, err = readCSV(s.params["file"], dir); err != nil {
			return ts, fmt.Errorf("%q: %w", s.text, err)
		}
	}
	if s.word != "csv" {
		if ts.cost, err = s.number("cost", 1); err != nil {
			return ts, err
		}
		if !(ts.cost >= 0) || math.IsInf(ts.cost, 0) || ts.cost == 0 && s.word == "greedy" {
			return ts, s.errorf("cost", "%v: want a finite cost, positive for greedy (0 would ask forever)", ts.cost)
		}
		if ts.clients, err = s.integer("clients", 1); err != nil {
			return ts, err
		}
		if ts.clients > maxClients {
			return ts, s.errorf("clients", "%d: at most %d", ts.clients, maxClients)
		}
		ts.key = s.str("key", ts.key)
		if ts.start, err = s.duration("start", 0); err != nil {
			return ts, err
		}
		if ts.start < 0 {
			return ts, s.errorf("start", "must not be negative")
		}
	}
	return ts, s.unused(known)
}

// keys returns the keys of the spec's clients, in order.
func (ts TrafficSpec) keys() []string {
	if ts.pattern == "csv" {
		var keys []string
		seen := map[string]bool{}
		for _, r := range ts.rows {
			if !seen[r.Key] {
				seen[r.Key] = true
				keys = append(keys, r.Key)
			}
		}
		return keys
	}
	if ts.clients == 1 {
		return []string{ts.key}
	}
	keys := make([]string, ts.clients)
	for i := range keys {
		keys[i] = fmt.Sprintf("%s-%d", ts.key, i+1)
	}
	return keys
}

// source is one client's requests. next returns its next request given
// the outcome of its previous one (nil before the first), or false when it
// has no more.
type source interface {
	next(prev *outcome) (Request, bool)
}

// outcome is a decided request.
type outcome struct {
	Request
	sluice.Decision
}

// sources returns a source per client. epoch is the simulation's start in
// nanoseconds since the Unix epoch, which places window boundaries.
func (ts TrafficSpec) sources(epoch int64) []source {
	if ts.pattern == "csv" {
		return []source{&rows{rows: ts.rows}}
	}
	out := make([]source, 0, ts.clients)
	for i, key := range ts.keys() {
		req := Request{At: ts.start, Key: key, Cost: ts.cost}
		var src source
		switch ts.pattern {
		case "uniform":
			src = &uniform{req: req, gap: float64(ts.rate.Period) / ts.rate.Amount}
		case "poisson":
			rng := rand.New(rand.NewPCG(ts.seed, uint64(i)))
			src = &poisson{req: req, mean: float64(ts.rate.Period) / ts.rate.Amount, rng: rng}
		case "bursts":
			src = &bursts{req: req, n: ts.n, every: ts.every}
		case "edge":
			// The first window boundary at least gap after the start.
			w := int64(ts.window)
			first := (epoch+int64(ts.start)+int64(ts.gap)+w-1)/w*w - epoch
			src = &edge{req: req, n: ts.n, first: time.Duration(first), window: ts.window, gap: ts.gap}
		default:
			src = &greedy{req: req}
		}
		out = append(out, src)
	}
	return out
}

type uniform struct {
	req Request
	gap float64 // ns between requests
	k   int64
}

func (u *uniform) next(*outcome) (Request, bool) {
	r := u.req
	r.At += time.Duration(math.Round(float64(u.k) * u.gap))
	u.k++
	return r, true
}

type poisson struct {
	req  Request
	mean float64 // ns between requests, on average
	rng  *rand.Rand
	at   time.Duration
	k    int
}

func (p *poisson) next(*outcome) (Request, bool) {
	if p.k == 0 {
		p.at = p.req.At
	}
	p.k++
	p.at += time.Duration(math.Round(p.rng.ExpFloat64() * p.mean))
	r := p.req
	r.At = p.at
	return r, true
}

type bursts struct {
	req   Request
	n     int
	every time.Duration
	k     int64
}

func (b *bursts) next(*outcome) (Request, bool) {
	r := b.req
	r.At += time.Duration(b.k/int64(b.n)) * b.every
	b.k++
	return r, true
}

type edge struct {
	req                Request
	n                  int
	first, window, gap time.Duration
	k                  int64
}

func (e *edge) next(*outcome) (Request, bool) {
	pair, i := e.k/int64(2*e.n), e.k%int64(2*e.n)
	r := e.req
	r.At = e.first + time.Duration(pair)*e.window
	if i < int64(e.n) {
		r.At -= e.gap
	}
	e.k++
	return r, true
}

type greedy struct{ req Request }

func (g *greedy) next(prev *outcome) (Request, bool) {
	r := g.req
	switch {
	case prev == nil:
	case prev.Allowed:
		r.At = prev.Request.At
	default:
		// A denial always says to wait; at least a nanosecond, so that a
		// limiter saying otherwise could not hold the client at one instant.
		r.At = prev.Request.At + max(prev.RetryAfter, 1)
	}
	return r, true
}

// rows replays the requests of a csv file.
type rows struct {
	rows []Request
	i    int
}

func (p *rows) next(*outcome) (Request, bool) {
	if p.i >= len(p.rows) {
		return Request{}, false
	}
	p.i++
	return p.rows[p.i-1], true
}
