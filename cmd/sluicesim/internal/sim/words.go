package sim

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/sluice-go/sluice"
)

// A spec is one line of the simulator's little language: a word naming
// what it describes (an algorithm, a traffic pattern), then parameters
// written name=value and flags written as bare words, in any order:
//
//	gcra rate=10/s burst=5
//	fixedwindow limit=10 window=1s anchored
//
// Words are case-insensitive, and dashes and underscores in them are
// ignored, so "fixed-window" and "FixedWindow" name the same algorithm.
type spec struct {
	text   string            // as written, for error messages
	word   string            // the first word, normalized
	params map[string]string // name=value, names normalized
	flags  map[string]bool   // bare words after the first, normalized
	used   map[string]bool   // the params and flags read so far
}

// normalize returns w in lower case without dashes and underscores.
func normalize(w string) string {
	return strings.NewReplacer("-", "", "_", "").Replace(strings.ToLower(w))
}

// parseSpec splits text into its words.
func parseSpec(text string) (*spec, error) {
	fields := strings.Fields(text)
	if len(fields) == 0 {
		return nil, fmt.Errorf("empty description")
	}
	s := &spec{
		text:   strings.Join(fields, " "),
		word:   normalize(fields[0]),
		params: map[string]string{},
		flags:  map[string]bool{},
		used:   map[string]bool{},
	}
	if strings.Contains(fields[0], "=") {
		return nil, fmt.Errorf("%q: starts with a parameter, want a name first (for example \"gcra rate=10/s burst=5\")", s.text)
	}
	for _, f := range fields[1:] {
		name, value, isParam := strings.Cut(f, "=")
		name = normalize(name)
		if name == "" {
			return nil, fmt.Errorf("%q: %q has no parameter name before '='", s.text, f)
		}
		if _, dup := s.params[name]; dup || s.flags[name] {
			return nil, fmt.Errorf("%q: %s is given twice", s.text, name)
		}
		if !isParam {
			s.flags[name] = true
			continue
		}
		if value == "" {
			return nil, fmt.Errorf("%q: %s= has no value", s.text, name)
		}
		s.params[name] = value
	}
	return s, nil
}

// has reports whether the parameter name was given, and marks it read.
func (s *spec) has(name string) bool {
	_, ok := s.params[name]
	if ok {
		s.used[name] = true
	}
	return ok
}

// flag reports whether the bare word name was given (or name=true), and
// marks it read.
func (s *spec) flag(name string) (bool, error) {
	if s.flags[name] {
		s.used[name] = true
		return true, nil
	}
	v, ok := s.params[name]
	if !ok {
		return false, nil
	}
	s.used[name] = true
	b, err := strconv.ParseBool(v)
	if err != nil {
		return false, s.errorf(name, "%q is neither true nor false (or write %s alone for true)", v, name)
	}
	return b, nil
}

// str returns the parameter name, or def when it is absent.
func (s *spec) str(name, def string) string {
	if s.has(name) {
		return s.params[name]
	}
	return def
}

// errorf returns an error about parameter name.
func (s *spec) errorf(name, format string, args ...any) error {
	return fmt.Errorf("%q: %s: %s", s.text, name, fmt.Sprintf(format, args...))
}

// required returns an error for a missing parameter, with an example.
func (s *spec) required(name, example string) error {
	return fmt.Errorf("%q: %s is required (for example %s=%s)", s.text, name, name, example)
}

// number returns the parameter name as a float, def when absent.
func (s *spec) number(name string, def float64) (float64, error) {
	if !s.has(name) {
		return def, nil
	}
	v, err := strconv.ParseFloat(s.params[name], 64)
	if err != nil {
		return 0, s.errorf(name, "%q is not a number", s.params[name])
	}
	return v, nil
}

// mustNumber returns the parameter name as a float, which must be given.
func (s *spec) mustNumber(name, example string) (float64, error) {
	if _, ok := s.params[name]; !ok {
		return 0, s.required(name, example)
	}
	return s.number(name, 0)
}

// integer returns the parameter name as a positive integer, def when absent.
func (s *spec) integer(name string, def int) (int, error) {
	if !s.has(name) {
		return def, nil
	}
	v, err := strconv.Atoi(s.params[name])
	if err != nil || v < 1 {
		return 0, s.errorf(name, "%q is not a whole number of at least 1", s.params[name])
	}
	return v, nil
}

// duration returns the parameter name as a duration, def when absent.
func (s *spec) duration(name string, def time.Duration) (time.Duration, error) {
	if !s.has(name) {
		return def, nil
	}
	v, err := parseDuration(s.params[name])
	if err != nil {
		return 0, s.errorf(name, "%v", err)
	}
	return v, nil
}

// mustDuration returns the parameter name as a positive duration, which
// must be given.
func (s *spec) mustDuration(name, example string) (time.Duration, error) {
	if _, ok := s.params[name]; !ok {
		return 0, s.required(name, example)
	}
	d, err := s.duration(name, 0)
	if err == nil && d <= 0 {
		err = s.errorf(name, "must be positive")
	}
	return d, err
}

// rate returns the parameter name as a rate, which must be given.
func (s *spec) rate(name string) (sluice.Rate, error) {
	if !s.has(name) {
		return sluice.Rate{}, s.required(name, "10/s")
	}
	r, err := parseRate(s.params[name])
	if err != nil {
		return sluice.Rate{}, s.errorf(name, "%v", err)
	}
	return r, nil
}

// unused returns an error naming a parameter or flag that was not read:
// a misspelling, or one that does not apply.
func (s *spec) unused(known string) error {
	for _, m := range []map[string]string{s.params, flagParams(s.flags)} {
		for name := range m {
			if !s.used[name] {
				return fmt.Errorf("%q: unknown parameter %q for %s (it takes %s)", s.text, name, s.word, known)
			}
		}
	}
	return nil
}

func flagParams(flags map[string]bool) map[string]string {
	m := make(map[string]string, len(flags))
	for f := range flags {
		m[f] = ""
	}
	return m
}

// parseDuration reads a Go duration ("1s", "250ms", "1m30s") or a bare
// number of seconds ("0.25"). A negative or zero duration is returned as
// is; callers decide whether they accept it.
func parseDuration(v string) (time.Duration, error) {
	if _, err := strconv.ParseFloat(v, 64); err == nil {
		v += "s" // ParseDuration converts decimal seconds exactly
	}
	d, err := time.ParseDuration(v)
	if err != nil {
		return 0, fmt.Errorf("%q is not a duration (for example 1s, 250ms, 1m)", v)
	}
	return d, nil
}

// rateUnits are the period words a rate may end with.
var rateUnits = map[string]time.Duration{
	"ns": time.Nanosecond, "us": time.Microsecond, "µs": time.Microsecond, "ms": time.Millisecond,
	"s": time.Second, "sec": time.Second, "second": time.Second,
	"m": time.Minute, "min": time.Minute, "minute": time.Minute,
	"h": time.Hour, "hour": time.Hour, "d": 24 * time.Hour, "day": 24 * time.Hour,
}

// parseRate reads an amount per period: "10/s", "100/min", "5/1s",
// "1000/720h", "3/500ms".
func parseRate(v string) (sluice.Rate, error) {
	amount, per, ok := strings.Cut(v, "/")
	if !ok {
		return sluice.Rate{}, fmt.Errorf("%q is not a rate: write amount/period, as in 10/s, 100/min or 5/250ms", v)
	}
	a, err := strconv.ParseFloat(amount, 64)
	if err != nil {
		return sluice.Rate{}, fmt.Errorf("%q is not a rate: %q is not a number", v, amount)
	}
	period, unit := rateUnits[strings.ToLower(per)]
	if !unit {
		period, err = time.ParseDuration(per)
		if err != nil {
			return sluice.Rate{}, fmt.Errorf("%q is not a rate: %q is not a period (s, min, h, or a duration such as 250ms)", v, per)
		}
	}
	return sluice.Per(a, period), nil
}
