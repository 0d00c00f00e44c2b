package sim

import (
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/sluice-go/sluice"
)

// LimiterSpec is a limiter described in the words of its constructor:
//
//	leakybucket capacity=10 leak=5/s      sluice.NewLeakyBucket(10, sluice.PerSecond(5))
//	gcra rate=10/s burst=5                sluice.NewGCRA(sluice.PerSecond(10), 5)
//	tokenbucket rate=10/s [burst=20] [intervalrefill]
//	fixedwindow limit=10 window=1s [anchored]
//	slidinglog limit=10 window=1s [maxentries=10]
//	slidingcounter limit=10 window=1s
//
// Every spec also takes name=..., the label of its figures and table row
// (by default the spec as written).
type LimiterSpec struct {
	// Name labels the limiter's figures and its row of the summary.
	Name string
	// build makes the limiter with the given options (a clock).
	build func(opts ...sluice.Option) (*sluice.Limiter, error)
}

// algorithm describes one constructor: its parameters, for error messages,
// and how to build it from a spec.
type algorithm struct {
	params string
	build  func(s *spec) (func(opts ...sluice.Option) (*sluice.Limiter, error), error)
}

var algorithms = map[string]algorithm{
	"leakybucket": {"capacity=, leak= (or rate=), name=", func(s *spec) (func(...sluice.Option) (*sluice.Limiter, error), error) {
		capacity, err := s.mustNumber("capacity", "10")
		if err != nil {
			return nil, err
		}
		name := "leak"
		if _, ok := s.params["rate"]; ok {
			if _, both := s.params["leak"]; both {
				return nil, fmt.Errorf("%q: leak and rate are the same parameter: give one", s.text)
			}
			name = "rate"
		}
		leak, err := s.rate(name)
		if err != nil {
			return nil, err
		}
		return func(opts ...sluice.Option) (*sluice.Limiter, error) {
			return sluice.NewLeakyBucket(capacity, leak, opts...)
		}, nil
	}},
	"gcra": {"rate=, burst=, name=", func(s *spec) (func(...sluice.Option) (*sluice.Limiter, error), error) {
		rate, err := s.rate("rate")
		if err != nil {
			return nil, err
		}
		burst, err := s.mustNumber("burst", "5")
		if err != nil {
			return nil, err
		}
		return func(opts ...sluice.Option) (*sluice.Limiter, error) { return sluice.NewGCRA(rate, burst, opts...) }, nil
	}},
	"tokenbucket": {"rate=, burst=, intervalrefill, name=", func(s *spec) (func(...sluice.Option) (*sluice.Limiter, error), error) {
		rate, err := s.rate("rate")
		if err != nil {
			return nil, err
		}
		var extra []sluice.Option
		burst := rate.Amount
		if s.has("burst") {
			if burst, err = s.number("burst", 0); err != nil {
				return nil, err
			}
		}
		refill, err := s.flag("intervalrefill")
		if err != nil {
			return nil, err
		}
		if refill {
			extra = append(extra, sluice.WithIntervalRefill())
		}
		return func(opts ...sluice.Option) (*sluice.Limiter, error) {
			return sluice.NewTokenBucket(rate, burst, append(extra, opts...)...)
		}, nil
	}},
	"fixedwindow": {"limit=, window=, anchored, name=", func(s *spec) (func(...sluice.Option) (*sluice.Limiter, error), error) {
		limit, window, err := limitWindow(s)
		if err != nil {
			return nil, err
		}
		anchored, err := s.flag("anchored")
		if err != nil {
			return nil, err
		}
		var extra []sluice.Option
		if anchored {
			extra = append(extra, sluice.WithAnchoredWindows())
		}
		return func(opts ...sluice.Option) (*sluice.Limiter, error) {
			return sluice.NewFixedWindow(limit, window, append(extra, opts...)...)
		}, nil
	}},
	"slidinglog": {"limit=, window=, maxentries=, name=", func(s *spec) (func(...sluice.Option) (*sluice.Limiter, error), error) {
		limit, window, err := limitWindow(s)
		if err != nil {
			return nil, err
		}
		var extra []sluice.Option
		if s.has("maxentries") {
			n, err := s.integer("maxentries", 0)
			if err != nil {
				return nil, err
			}
			extra = append(extra, sluice.WithMaxEntries(n))
		}
		return func(opts ...sluice.Option) (*sluice.Limiter, error) {
			return sluice.NewSlidingLog(limit, window, append(extra, opts...)...)
		}, nil
	}},
	"slidingcounter": {"limit=, window=, name=", func(s *spec) (func(...sluice.Option) (*sluice.Limiter, error), error) {
		limit, window, err := limitWindow(s)
		if err != nil {
			return nil, err
		}
		return func(opts ...sluice.Option) (*sluice.Limiter, error) {
			return sluice.NewSlidingCounter(limit, window, opts...)
		}, nil
	}},
}

// limitWindow reads the parameters every window algorithm takes.
func limitWindow(s *spec) (float64, time.Duration, error) {
	limit, err := s.mustNumber("limit", "10")
	if err != nil {
		return 0, 0, err
	}
	window, err := s.mustDuration("window", "1s")
	return limit, window, err
}

// algorithmNames lists the algorithms for error messages.
func algorithmNames() string {
	names := make([]string, 0, len(algorithms))
	for n := range algorithms {
		names = append(names, n)
	}
	sort.Strings(names)
	return strings.Join(names, ", ")
}

// ParseLimiter reads a limiter spec. The limiter is built once to check
// its configuration, so an error here is every error the constructor
// would give.
func ParseLimiter(text string) (LimiterSpec, error) {
	s, err := parseSpec(text)
	if err != nil {
		return LimiterSpec{}, fmt.Errorf("limiter %w", err)
	}
	alg, ok := algorithms[s.word]
	if !ok {
		return LimiterSpec{}, fmt.Errorf("limiter %q: unknown algorithm %q (want one of %s)", s.text, s.word, algorithmNames())
	}
	build, err := alg.build(s)
	if err != nil {
		return LimiterSpec{}, fmt.Errorf("limiter %w", err)
	}
	name := s.str("name", s.text)
	if err := s.unused(alg.params); err != nil {
		return LimiterSpec{}, fmt.Errorf("limiter %w", err)
	}
	l, err := build()
	if err != nil {
		return LimiterSpec{}, fmt.Errorf("limiter %q: %w", s.text, err)
	}
	if err := l.Close(); err != nil {
		return LimiterSpec{}, err
	}
	return LimiterSpec{Name: name, build: build}, nil
}

// New builds the limiter on clock c.
func (ls LimiterSpec) New(c sluice.Clock) (*sluice.Limiter, error) {
	if ls.build == nil {
		return nil, fmt.Errorf("limiter %q was not made by ParseLimiter", ls.Name)
	}
	return ls.build(sluice.WithClock(c))
}
