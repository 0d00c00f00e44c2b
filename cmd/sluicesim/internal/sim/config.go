package sim

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"
)

// Config is a simulation: limiters, the traffic offered to each of them,
// and what to measure and draw.
type Config struct {
	// Limiters are simulated one after the other, each on its own simulated
	// clock and store, with the same traffic.
	Limiters []LimiterSpec
	// Traffic is offered together: the union of every spec's requests.
	Traffic []TrafficSpec
	// Duration is how much simulated time to run; requests at or after it
	// are not offered. Zero is 10s, or with csv traffic the end of the
	// file's last whole second.
	Duration time.Duration
	// Window is the length of the intervals in which the summary finds the
	// most admitted. Zero is the longest period of the limiters: the window,
	// or the time the whole burst takes to come back at the rate.
	Window time.Duration
	// Bin is the width of the figures' bins of requests. Zero picks a round
	// width giving 100 to 250 bins.
	Bin time.Duration
	// Watch is the key whose state the figures draw; "" is the first key of
	// the first traffic spec.
	Watch string
	// Plots says which figures to draw: "all" (the default), "each" (a
	// figure per limiter) or "compare" (one of every limiter side by side).
	Plots string
	// Title heads the figures; "" is the traffic specs joined by " + ".
	Title string
}

// ParseConfig reads a config file: one setting per line, in the words of
// the command's flags, with # comments:
//
//	# every algorithm against a greedy client
//	limiter gcra rate=5/s burst=5
//	limiter fixedwindow limit=5 window=1s
//	traffic greedy
//	duration 5s
//
// Relative csv file names are read from dir.
func ParseConfig(r io.Reader, dir string) (Config, error) {
	var c Config
	sc := bufio.NewScanner(r)
	for line := 1; sc.Scan(); line++ {
		text, _, _ := strings.Cut(sc.Text(), "#")
		text = strings.TrimSpace(text)
		if text == "" {
			continue
		}
		word, rest, _ := strings.Cut(text, " ")
		if err := c.Set(normalize(word), strings.TrimSpace(rest), dir); err != nil {
			return c, fmt.Errorf("line %d: %w", line, err)
		}
	}
	return c, sc.Err()
}

// Set applies one setting: limiter and traffic add a spec, the others
// replace their value.
func (c *Config) Set(name, value, dir string) error {
	if value == "" {
		return fmt.Errorf("%s needs a value", name)
	}
	var err error
	switch name {
	case "limiter":
		var l LimiterSpec
		if l, err = ParseLimiter(value); err == nil {
			c.Limiters = append(c.Limiters, l)
		}
	case "traffic":
		var t TrafficSpec
		if t, err = ParseTraffic(value, dir); err == nil {
			c.Traffic = append(c.Traffic, t)
		}
	case "duration", "window", "bin":
		var d time.Duration
		if d, err = parseDuration(value); err == nil && d <= 0 {
			err = fmt.Errorf("%q: must be positive", value)
		}
		if err != nil {
			return fmt.Errorf("%s %w", name, err)
		}
		*map[string]*time.Duration{"duration": &c.Duration, "window": &c.Window, "bin": &c.Bin}[name] = d
	case "watch":
		c.Watch = value
	case "title":
		c.Title = value
	case "plots":
		v := normalize(value)
		if v != "all" && v != "each" && v != "compare" {
			return fmt.Errorf("plots %q: want all, each or compare", value)
		}
		c.Plots = v
	default:
		return fmt.Errorf("unknown setting %q (want limiter, traffic, duration, window, bin, watch, plots or title)", name)
	}
	return err
}

// maxDuration bounds a simulation: the limiters take times up to 2116.
const maxDuration = 80 * 365 * 24 * time.Hour

// errConfig marks a config that cannot be simulated.
var errConfig = errors.New("cannot simulate")

// check completes the defaults and reports what is missing.
func (c *Config) check() error {
	if err := c.complete(); err != nil {
		return fmt.Errorf("%w: %w", errConfig, err)
	}
	return nil
}

func (c *Config) complete() error {
	if len(c.Limiters) == 0 {
		return fmt.Errorf("no limiter: give at least one, as in -limiter 'gcra rate=10/s burst=5'")
	}
	if len(c.Traffic) == 0 {
		return fmt.Errorf("no traffic: give at least one pattern, as in -traffic 'uniform rate=20/s'")
	}
	if c.Duration == 0 {
		for _, t := range c.Traffic {
			if t.pattern == "csv" {
				last := t.rows[len(t.rows)-1].At
				c.Duration = max(c.Duration, last.Truncate(time.Second)+time.Second)
			}
		}
		if c.Duration == 0 {
			c.Duration = 10 * time.Second
		}
	}
	if c.Duration > maxDuration {
		return fmt.Errorf("duration %v: at most %v, so that simulated time, which starts in %d, ends before 2116, the last year sluice takes",
			c.Duration, maxDuration, Epoch.Year())
	}
	if c.Plots == "" {
		c.Plots = "all"
	}
	if c.Title == "" {
		texts := make([]string, len(c.Traffic))
		for i, t := range c.Traffic {
			texts[i] = t.Text
		}
		c.Title = strings.Join(texts, " + ")
	}
	keys := c.keys()
	if c.Watch == "" {
		c.Watch = keys[0]
	}
	if !slices.Contains(keys, c.Watch) {
		if len(keys) > 5 {
			keys = append(keys[:5], "...")
		}
		return fmt.Errorf("watch %q: no traffic uses that key (its keys: %s)", c.Watch, strings.Join(keys, ", "))
	}
	if c.Bin == 0 {
		c.Bin = roundBin(c.Duration)
	}
	if n := c.Duration / c.Bin; n > 100_000 {
		return fmt.Errorf("bin %v makes %d bins of %v: use a wider bin", c.Bin, n, c.Duration)
	}
	return nil
}

// roundBin returns the narrowest of 1, 2 and 5 times a power of ten
// nanoseconds giving at most 250 bins in d: at least 100, unless d is
// shorter than 100ns.
func roundBin(d time.Duration) time.Duration {
	for b := time.Duration(1); ; b *= 10 {
		for _, m := range []time.Duration{1, 2, 5} {
			if d <= 250*b*m {
				return b * m
			}
		}
	}
}

// keys returns the keys of every client of the traffic.
func (c *Config) keys() []string {
	var keys []string
	for _, t := range c.Traffic {
		keys = append(keys, t.keys()...)
	}
	return keys
}
