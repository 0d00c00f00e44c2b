package policy

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/sluice-go/sluice"
	"github.com/sluice-go/sluice/engine"
)

// Error is a configuration document's mistake: where it is, and
// what is wrong. It wraps [sluice.ErrInvalidConfig].
type Error struct {
	// Line is the line of the document the mistake is on, from 1.
	Line int
	// Policy and Tier name the policy and tier it is in, if any; Field
	// the field.
	Policy, Tier, Field string
	// Reason says what is wrong.
	Reason string
}

func (e *Error) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "sluice: configuration, line %d", e.Line)
	if e.Policy != "" {
		fmt.Fprintf(&b, ", policy %q", e.Policy)
	}
	if e.Tier != "" {
		fmt.Fprintf(&b, ", tier %q", e.Tier)
	}
	if e.Field != "" {
		fmt.Fprintf(&b, ", %s", e.Field)
	}
	return b.String() + ": " + e.Reason
}

// Unwrap returns [sluice.ErrInvalidConfig].
func (e *Error) Unwrap() error { return sluice.ErrInvalidConfig }

// limitSpec is a policy's or a tier's fields as a document gives them:
// each field's value, read once to check it, and its line.
type limitSpec struct {
	algorithm string
	raw       map[string]json.RawMessage
	lines     map[string]int
}

func newLimitSpec() limitSpec {
	return limitSpec{raw: map[string]json.RawMessage{}, lines: map[string]int{}}
}

// limitValues are a limit's numbers and options, read from a limitSpec.
type limitValues struct {
	rate                          sluice.Rate
	burst, capacity, limit        float64
	window, ttl, penalty          time.Duration
	anchored, refill, countDenied bool
	maxEntries                    int
	period                        sluice.Period
	zone                          *time.Location
}

// configFields are the fields of a policy, and those of a tier (all but
// the algorithm and the tiers), with how each is read into a limitSpec.
var configFields = map[string]func(s *limitValues, raw json.RawMessage) error{
	"rate":            func(s *limitValues, raw json.RawMessage) error { return parseRate(raw, &s.rate) },
	"burst":           func(s *limitValues, raw json.RawMessage) error { return json.Unmarshal(raw, &s.burst) },
	"capacity":        func(s *limitValues, raw json.RawMessage) error { return json.Unmarshal(raw, &s.capacity) },
	"limit":           func(s *limitValues, raw json.RawMessage) error { return json.Unmarshal(raw, &s.limit) },
	"window":          func(s *limitValues, raw json.RawMessage) error { return parseDuration(raw, &s.window) },
	"ttl":             func(s *limitValues, raw json.RawMessage) error { return parseDuration(raw, &s.ttl) },
	"penalty":         func(s *limitValues, raw json.RawMessage) error { return parseDuration(raw, &s.penalty) },
	"anchored":        func(s *limitValues, raw json.RawMessage) error { return json.Unmarshal(raw, &s.anchored) },
	"interval_refill": func(s *limitValues, raw json.RawMessage) error { return json.Unmarshal(raw, &s.refill) },
	"count_denied":    func(s *limitValues, raw json.RawMessage) error { return json.Unmarshal(raw, &s.countDenied) },
	"max_entries":     func(s *limitValues, raw json.RawMessage) error { return json.Unmarshal(raw, &s.maxEntries) },
	"period":          func(s *limitValues, raw json.RawMessage) error { return parsePeriod(raw, &s.period) },
	"zone":            func(s *limitValues, raw json.RawMessage) error { return parseZone(raw, &s.zone) },
}

// algorithmFields are the fields each algorithm takes: those it needs
// first, then those it may take.
var algorithmFields = map[string]struct{ needs, takes []string }{
	"gcra":            {[]string{"rate", "burst"}, []string{"penalty", "count_denied"}},
	"token-bucket":    {[]string{"rate", "burst"}, []string{"interval_refill", "penalty", "count_denied"}},
	"leaky-bucket":    {[]string{"capacity", "rate"}, []string{"penalty", "count_denied"}},
	"fixed-window":    {[]string{"limit", "window"}, []string{"anchored", "penalty", "count_denied"}},
	"sliding-log":     {[]string{"limit", "window"}, []string{"max_entries", "penalty", "count_denied"}},
	"sliding-counter": {[]string{"limit", "window"}, []string{"penalty", "count_denied"}},
	"calendar-window": {[]string{"limit", "period", "zone"}, []string{"penalty", "count_denied"}},
	"concurrency":     {[]string{"limit", "ttl"}, []string{"max_entries"}},
}

// parse reads a document into its policies, each tier built as a
// limit, or returns the document's first mistake.
func parse(doc []byte) (*document, error) {
	r := reader{doc: doc, dec: json.NewDecoder(bytes.NewReader(doc)), limits: sluice.NewMemStore(sluice.MemStoreConfig{Shards: 1})}
	r.dec.UseNumber()
	set := &document{policies: map[string]*limits{}}
	err := r.object("", "", "", func(key string, line int) error {
		if key != "policies" {
			return &Error{Line: line, Field: key, Reason: `unknown field: the document holds "policies"`}
		}
		return r.object("", "", key, func(name string, line int) error {
			if name == "" {
				return &Error{Line: line, Reason: "a policy needs a name"}
			}
			p, err := r.policy(name, line)
			set.policies[name] = p
			return err
		})
	})
	if err != nil {
		return nil, err
	}
	if _, err := r.dec.Token(); err != io.EOF {
		return nil, &Error{Line: r.line(r.dec.InputOffset()), Reason: "more after the document's end"}
	}
	if len(set.policies) == 0 {
		return nil, &Error{Line: 1, Reason: "no policies"}
	}
	return set, nil
}

// reader reads a document token by token, so that every mistake
// is told with its line.
type reader struct {
	doc []byte
	dec *json.Decoder
	// limits is the store the limits' limiters are built on, one small
	// store for the document: none of them decides, as a per-key
	// limiter keeps every key's state in its own store.
	limits engine.Store
}

// line returns the line of the byte at offset.
func (r *reader) line(offset int64) int {
	return 1 + bytes.Count(r.doc[:min(int(offset), len(r.doc))], []byte("\n"))
}

// valueLine returns the line of the value the decoder reads next, past
// the blanks and the colon before it.
func (r *reader) valueLine() int {
	off := int(r.dec.InputOffset())
	for off < len(r.doc) && strings.IndexByte(" \t\r\n:", r.doc[off]) >= 0 {
		off++
	}
	return r.line(int64(off))
}

// object reads a JSON object whose fields it hands to field, each with
// the line its value is on; policy, tier and name describe where the
// object is, for errors.
func (r *reader) object(policy, tier, name string, field func(key string, line int) error) error {
	line := r.valueLine()
	tok, err := r.dec.Token()
	if err != nil {
		return r.syntax(err)
	}
	if tok != json.Delim('{') {
		return &Error{Line: line, Policy: policy, Tier: tier, Field: name, Reason: "want an object"}
	}
	seen := map[string]bool{}
	for r.dec.More() {
		tok, err := r.dec.Token()
		if err != nil {
			return r.syntax(err)
		}
		key := tok.(string) // a decoder reads object keys as strings
		line := r.valueLine()
		if seen[key] {
			return &Error{Line: line, Policy: policy, Tier: tier, Field: key, Reason: "given twice"}
		}
		seen[key] = true
		if err := field(key, line); err != nil {
			return err
		}
	}
	if _, err := r.dec.Token(); err != nil { // the closing brace
		return r.syntax(err)
	}
	return nil
}

// syntax is a decoder's error, with its line.
func (r *reader) syntax(err error) error {
	var se *json.SyntaxError
	if errors.As(err, &se) {
		return &Error{Line: r.line(se.Offset), Reason: se.Error()}
	}
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return &Error{Line: r.line(int64(len(r.doc))), Reason: "the document ends too early"}
	}
	return &Error{Line: r.line(r.dec.InputOffset()), Reason: err.Error()}
}

// policy reads the policy named name, whose object begins on line, and
// builds its limits.
func (r *reader) policy(name string, line int) (*limits, error) {
	own := newLimitSpec()
	tierSpecs := map[string]limitSpec{}
	tierLines := map[string]int{}
	err := r.object(name, "", "", func(key string, line int) error {
		switch key {
		case "algorithm":
			own.lines[key] = line
			return r.value(name, "", key, line, func(raw json.RawMessage) error { return json.Unmarshal(raw, &own.algorithm) })
		case "tiers":
			return r.object(name, "", key, func(tier string, line int) error {
				if tier == "" {
					return &Error{Line: line, Policy: name, Reason: "a tier needs a name"}
				}
				t, err := r.spec(name, tier)
				tierSpecs[tier], tierLines[tier] = t, line
				return err
			})
		}
		return r.field(&own, name, "", key, line)
	})
	if err != nil {
		return nil, err
	}
	fields, ok := algorithmFields[own.algorithm]
	if !ok {
		return nil, &Error{Line: max(own.lines["algorithm"], line), Policy: name, Field: "algorithm",
			Reason: fmt.Sprintf("%q is not an algorithm: want one of %s", own.algorithm, strings.Join(slices.Sorted(maps.Keys(algorithmFields)), ", "))}
	}
	p := &limits{tiers: map[string]*sluice.Limiter{}}
	if missing := own.missing(fields.needs); missing == "" {
		if p.limit, err = own.build(r.limits, name, "", line); err != nil {
			return nil, err
		}
	} else if len(tierSpecs) == 0 {
		return nil, &Error{Line: line, Policy: name, Field: missing, Reason: "missing, and no tier gives it"}
	}
	if err := own.allowed(name, "", fields.needs, fields.takes); err != nil {
		return nil, err
	}
	for tier, t := range tierSpecs {
		if err := t.allowed(name, tier, fields.needs, fields.takes); err != nil {
			return nil, err
		}
		merged := own.with(t)
		if missing := merged.missing(fields.needs); missing != "" {
			return nil, &Error{Line: tierLines[tier], Policy: name, Tier: tier, Field: missing, Reason: "missing from the tier and its policy"}
		}
		if p.tiers[tier], err = merged.build(r.limits, name, tier, tierLines[tier]); err != nil {
			return nil, err
		}
	}
	return p, nil
}

// spec reads a tier's object.
func (r *reader) spec(policy, tier string) (limitSpec, error) {
	s := newLimitSpec()
	err := r.object(policy, tier, "", func(key string, line int) error {
		if key == "algorithm" || key == "tiers" {
			return &Error{Line: line, Policy: policy, Tier: tier, Field: key, Reason: "a tier takes its policy's"}
		}
		return r.field(&s, policy, tier, key, line)
	})
	return s, err
}

// field reads the value of the field key into s.
func (r *reader) field(s *limitSpec, policy, tier, key string, line int) error {
	read, ok := configFields[key]
	if !ok {
		return &Error{Line: line, Policy: policy, Tier: tier, Field: key, Reason: "unknown field"}
	}
	s.lines[key] = line
	return r.value(policy, tier, key, line, func(raw json.RawMessage) error {
		s.raw[key] = raw
		var v limitValues
		return read(&v, raw)
	})
}

// value reads the next value and hands it to read.
func (r *reader) value(policy, tier, key string, line int, read func(json.RawMessage) error) error {
	var raw json.RawMessage
	if err := r.dec.Decode(&raw); err != nil {
		return r.syntax(err)
	}
	if err := read(raw); err != nil {
		var te *json.UnmarshalTypeError
		reason := err.Error()
		if errors.As(err, &te) {
			reason = fmt.Sprintf("want %s, not %s", jsonKind(te.Type.Kind()), te.Value)
		}
		return &Error{Line: line, Policy: policy, Tier: tier, Field: key, Reason: reason}
	}
	return nil
}

// jsonKind names what a document must give for a Go value of kind k.
func jsonKind(k reflect.Kind) string {
	switch k {
	case reflect.Bool:
		return "true or false"
	case reflect.String:
		return "a string"
	case reflect.Int, reflect.Int64:
		return "a whole number"
	}
	return "a number"
}

// missing returns the first of needs that s does not give, or "".
func (s *limitSpec) missing(needs []string) string {
	for _, f := range needs {
		if s.lines[f] == 0 {
			return f
		}
	}
	return ""
}

// allowed reports a field of s that its algorithm does not take.
func (s *limitSpec) allowed(policy, tier string, needs, takes []string) error {
	for f, line := range s.lines {
		if f == "algorithm" || slices.Contains(needs, f) || slices.Contains(takes, f) {
			continue
		}
		return &Error{Line: line, Policy: policy, Tier: tier, Field: f, Reason: "not a field of " + s.algorithm}
	}
	return nil
}

// with returns s with the fields t gives in place of its own.
func (s limitSpec) with(t limitSpec) limitSpec {
	m := limitSpec{algorithm: s.algorithm, raw: map[string]json.RawMessage{}, lines: map[string]int{}}
	for _, from := range []limitSpec{s, t} {
		for f, raw := range from.raw {
			m.raw[f], m.lines[f] = raw, from.lines[f]
		}
	}
	return m
}

// values reads s's fields, each checked already.
func (s *limitSpec) values() limitValues {
	var v limitValues
	for f, raw := range s.raw {
		_ = configFields[f](&v, raw)
	}
	return v
}

// build returns the limiter on st that serves as s's limit, built by its
// algorithm's constructor, which checks the numbers.
func (s *limitSpec) build(st engine.Store, policy, tier string, line int) (*sluice.Limiter, error) {
	v := s.values()
	opts := []sluice.Option{sluice.WithStore(st)}
	if s.lines["penalty"] != 0 {
		opts = append(opts, sluice.WithPenalty(v.penalty))
	}
	if v.countDenied {
		opts = append(opts, sluice.WithCountDenied())
	}
	if s.lines["max_entries"] != 0 {
		opts = append(opts, sluice.WithMaxEntries(v.maxEntries))
	}
	if v.anchored {
		opts = append(opts, sluice.WithAnchoredWindows())
	}
	if v.refill {
		opts = append(opts, sluice.WithIntervalRefill())
	}
	var l *sluice.Limiter
	var err error
	switch s.algorithm {
	case "gcra":
		l, err = sluice.NewGCRA(v.rate, v.burst, opts...)
	case "token-bucket":
		l, err = sluice.NewTokenBucket(v.rate, v.burst, opts...)
	case "leaky-bucket":
		l, err = sluice.NewLeakyBucket(v.capacity, v.rate, opts...)
	case "fixed-window":
		l, err = sluice.NewFixedWindow(v.limit, v.window, opts...)
	case "sliding-log":
		l, err = sluice.NewSlidingLog(v.limit, v.window, opts...)
	case "sliding-counter":
		l, err = sluice.NewSlidingCounter(v.limit, v.window, opts...)
	case "calendar-window":
		l, err = sluice.NewCalendarWindow(v.limit, v.period, v.zone, opts...)
	default:
		l, err = sluice.NewConcurrencyLimit(v.limit, v.ttl, opts...)
	}
	if err != nil {
		return nil, &Error{Line: line, Policy: policy, Tier: tier, Reason: strings.TrimPrefix(err.Error(), sluice.ErrInvalidConfig.Error()+": ")}
	}
	return l, nil
}

// parsePeriod reads a calendar period: "day", "week", "month" or "year".
func parsePeriod(raw json.RawMessage, p *sluice.Period) error {
	var s string
	if err := json.Unmarshal(raw, &s); err == nil {
		for q := sluice.Day; q <= sluice.Year; q++ {
			if s == q.String() {
				*p = q
				return nil
			}
		}
	}
	return errors.New(`want a calendar period: "day", "week", "month" or "year"`)
}

// parseZone reads an IANA time zone's name ("Europe/Paris", "UTC").
func parseZone(raw json.RawMessage, loc **time.Location) error {
	var s string
	if err := json.Unmarshal(raw, &s); err != nil || s == "" {
		return errors.New(`want a time zone's name, "Europe/Paris"`)
	}
	l, err := time.LoadLocation(s)
	if err != nil {
		return fmt.Errorf("no time zone %q in the zone database: %w", s, err)
	}
	*loc = l
	return nil
}

// parseRate reads a rate, "amount/period": an amount per a Go duration,
// or per a unit alone ("10/s", "600/1m", "1000/720h").
func parseRate(raw json.RawMessage, r *sluice.Rate) error {
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		return errors.New(`want a rate as a string, "amount/period" ("10/s", "1000/720h")`)
	}
	amount, period, ok := strings.Cut(s, "/")
	if !ok {
		return fmt.Errorf(`%q is not a rate: want "amount/period" ("10/s", "1000/720h")`, s)
	}
	a, err := strconv.ParseFloat(strings.TrimSpace(amount), 64)
	if err != nil {
		return fmt.Errorf("%q is not a rate: the amount is not a number", s)
	}
	period = strings.TrimSpace(period)
	if period != "" && (period[0] < '0' || period[0] > '9') && period[0] != '.' {
		period = "1" + period // "10/s" is 10 per 1s
	}
	d, err := time.ParseDuration(period)
	if err != nil {
		return fmt.Errorf("%q is not a rate: the period is not a duration", s)
	}
	*r = sluice.Per(a, d)
	return nil
}

// parseDuration reads a duration in Go's syntax ("1.5s", "720h").
func parseDuration(raw json.RawMessage, d *time.Duration) error {
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		return errors.New(`want a duration as a string ("1.5s", "720h")`)
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		return fmt.Errorf("%q is not a duration", s)
	}
	*d = v
	return nil
}
