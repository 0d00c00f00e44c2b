// Package vectors builds storetest's named edge-case vectors from
// [engine.Params.Step] (see Generate) and reads and writes them as the
// JSON file that storetest embeds.
//
// In the file, every float64 is written so that it reads back bit for
// bit: a JSON number in the shortest form that round-trips (-0
// included), or a string for NaN and the infinities. Times and durations
// are integer nanoseconds. Fields that are zero (+0 for a float) are left
// out, and so are a step's Params when it runs under the case's.
package vectors

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/sluice-go/sluice/engine"
)

// A Case is one vector: a short sequence of ops on one fresh key under
// Params, each with the outcome Step gives it.
type Case struct {
	// Name says the algorithm, the verb and the rule the case pins, as
	// "gcra/allow/exact-fit".
	Name string
	// Params are the key's limit, for every step that names none of its
	// own.
	Params engine.Params
	Steps  []Step
}

// A Step is one op of a case and Step's outcome of it.
type Step struct {
	// Params, if not nil, are the limit the op runs under instead of the
	// case's: the key's limit changed (see "Limits that change" in package
	// engine). They are of the case's algorithm and mode. A store replaying
	// the case keeps the state each op leaves as it does for any op: it
	// writes it back iff [engine.Params.Records] the decision or
	// [engine.Params.Carries] the state it read, under the op's Params.
	Params *engine.Params
	Op     engine.Op
	// Err names the sentinel error Step returns, as "ErrCostExceedsLimit",
	// or is empty.
	Err string
	// Want is Step's decision: nil for an op refused without being decided
	// (every error but that of an op that [engine.Params.Overflows]).
	Want *engine.Decision
}

// sentinels are the errors a step returns, by name.
var sentinels = []struct {
	name string
	err  error
}{
	{"ErrInvalidConfig", engine.ErrInvalidConfig},
	{"ErrInvalidCost", engine.ErrInvalidCost},
	{"ErrCostExceedsLimit", engine.ErrCostExceedsLimit},
	{"ErrUnsupported", engine.ErrUnsupported},
	{"ErrInvalidDelay", engine.ErrInvalidDelay},
	{"ErrInvalidKey", engine.ErrInvalidKey},
	{"ErrTimeOutOfRange", engine.ErrTimeOutOfRange},
}

// Sentinel returns the sentinel error of package engine (and sluice)
// named name, or nil if there is none.
func Sentinel(name string) error {
	for _, s := range sentinels {
		if s.name == name {
			return s.err
		}
	}
	return nil
}

// sentinelName returns the name of the sentinel err wraps, or "".
func sentinelName(err error) string {
	for _, s := range sentinels {
		if errors.Is(err, s.err) {
			return s.name
		}
	}
	return ""
}

// kindName returns k's name in the file: its String in lower case, words
// joined by hyphens, as "leaky-bucket".
func kindName(k engine.Kind) string {
	return strings.ReplaceAll(strings.ToLower(k.String()), " ", "-")
}

var verbNames = [...]string{
	engine.VerbAllow:   "allow",
	engine.VerbCheck:   "check",
	engine.VerbFill:    "fill",
	engine.VerbReserve: "reserve",
	engine.VerbCancel:  "cancel",
	engine.VerbAtMost:  "at-most",
	engine.VerbExtend:  "extend",
	engine.VerbLeave:   "leave",
	engine.VerbExhaust: "exhaust",
	engine.VerbCharge:  "charge",
	engine.VerbRefund:  "refund",
}

// verbName returns the name of v in the file and in the cases' names, as
// "at-most", or "verb(7)" for a verb the engine does not know.
func verbName(v engine.Verb) string {
	if int(v) < len(verbNames) && verbNames[v] != "" {
		return verbNames[v]
	}
	return fmt.Sprintf("verb(%d)", v)
}

func parseVerb(s string) (engine.Verb, error) {
	for v, name := range verbNames {
		if name != "" && name == s {
			return engine.Verb(v), nil
		}
	}
	var v uint8
	if _, err := fmt.Sscanf(s, "verb(%d)", &v); err != nil {
		return 0, fmt.Errorf("unknown verb %q", s)
	}
	return engine.Verb(v), nil
}

func parseKind(s string) (engine.Kind, error) {
	for k := engine.KindLeakyBucket; k <= engine.KindConcurrency; k++ {
		if kindName(k) == s {
			return k, nil
		}
	}
	return 0, fmt.Errorf("unknown algorithm %q", s)
}

// number is a float64 written so that it reads back bit for bit.
type number float64

// MarshalJSON writes n as the shortest JSON number that parses back to
// it, or as a string for NaN and the infinities.
func (n number) MarshalJSON() ([]byte, error) {
	f := float64(n)
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return strconv.AppendQuote(nil, strconv.FormatFloat(f, 'g', -1, 64)), nil
	}
	return strconv.AppendFloat(nil, f, 'g', -1, 64), nil
}

// UnmarshalJSON reads what MarshalJSON writes.
func (n *number) UnmarshalJSON(b []byte) error {
	s := string(b)
	if q, err := strconv.Unquote(s); err == nil {
		s = q
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil {
		return err
	}
	*n = number(f)
	return nil
}

// IsZero reports whether n is +0, which the file leaves out; -0 is kept.
func (n number) IsZero() bool { return math.Float64bits(float64(n)) == 0 }

type fileJSON struct {
	About string     `json:"about"`
	Cases []caseJSON `json:"cases"`
}

type caseJSON struct {
	Name   string     `json:"name"`
	Params paramsJSON `json:"params"`
	Steps  []stepJSON `json:"steps"`
}

type paramsJSON struct {
	Kind           string   `json:"kind"`
	Limit          number   `json:"limit"`
	Interval       int64    `json:"interval"`
	Amount         number   `json:"amount,omitzero"`
	IntervalRefill bool     `json:"intervalRefill,omitzero"`
	Anchored       bool     `json:"anchored,omitzero"`
	MaxEntries     int      `json:"maxEntries,omitzero"`
	Penalty        int64    `json:"penalty,omitzero"`
	CountDenied    bool     `json:"countDenied,omitzero"`
	Windows        [4]int64 `json:"windows,omitzero"`
}

type stepJSON struct {
	Params *paramsJSON   `json:"params,omitzero"`
	Op     opJSON        `json:"op"`
	Err    string        `json:"err,omitzero"`
	Want   *decisionJSON `json:"want,omitzero"`
}

type opJSON struct {
	Verb     string `json:"verb"`
	Cost     number `json:"cost"`
	Now      int64  `json:"now"`
	MaxDelay int64  `json:"maxDelay,omitzero"`
	At       int64  `json:"at,omitzero"`
}

type decisionJSON struct {
	Allowed    bool   `json:"allowed,omitzero"`
	Limit      number `json:"limit"`
	Used       number `json:"used,omitzero"`
	Remaining  number `json:"remaining,omitzero"`
	RetryAfter int64  `json:"retryAfter,omitzero"`
	ResetAfter int64  `json:"resetAfter,omitzero"`
	Delay      int64  `json:"delay,omitzero"`
	At         int64  `json:"at,omitzero"`
	Granted    number `json:"granted,omitzero"`
	Blocked    bool   `json:"blocked,omitzero"`
}

// about heads the file, for whoever opens it.
const about = "Named edge-case vectors of engine.Params.Step, which every sluice store replays " +
	"(storetest.RunVectors). Generated by `go generate ./storetest`: do not edit."

// Marshal writes cases as the vectors file: one line per case's name and
// Params, and one per op with its outcome (and its Params, if it has its
// own), so that a change to the specification shows as a readable diff.
func Marshal(cases []Case) ([]byte, error) {
	var b bytes.Buffer
	line := func(v any) error {
		j, err := json.Marshal(v)
		b.Write(j)
		return err
	}
	b.WriteString(`{"about": `)
	if err := line(about); err != nil {
		return nil, err
	}
	b.WriteString(`,` + "\n" + `"cases": [`)
	for i, c := range cases {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString("\n" + `{"name": `)
		if err := line(c.Name); err != nil {
			return nil, err
		}
		b.WriteString(`, "params": `)
		if err := line(encodeParams(c.Params)); err != nil {
			return nil, fmt.Errorf("%s: %w", c.Name, err)
		}
		b.WriteString(`, "steps": [`)
		for j, s := range c.Steps {
			if j > 0 {
				b.WriteByte(',')
			}
			b.WriteString("\n  ")
			if err := line(encodeStep(s)); err != nil {
				return nil, fmt.Errorf("%s, op %d: %w", c.Name, j, err)
			}
		}
		b.WriteString("]}")
	}
	b.WriteString("\n]}\n")
	return b.Bytes(), nil
}

// Unmarshal reads a vectors file that Marshal wrote.
func Unmarshal(data []byte) ([]Case, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var f fileJSON
	if err := dec.Decode(&f); err != nil {
		return nil, fmt.Errorf("vectors: %w", err)
	}
	cases := make([]Case, len(f.Cases))
	for i, c := range f.Cases {
		p, err := decodeParams(c.Params)
		if err != nil {
			return nil, fmt.Errorf("vectors: %s: %w", c.Name, err)
		}
		cases[i] = Case{Name: c.Name, Params: p, Steps: make([]Step, len(c.Steps))}
		for j, s := range c.Steps {
			if cases[i].Steps[j], err = decodeStep(s); err != nil {
				return nil, fmt.Errorf("vectors: %s, op %d: %w", c.Name, j, err)
			}
		}
	}
	return cases, nil
}

func encodeParams(p engine.Params) paramsJSON {
	return paramsJSON{
		Kind: kindName(p.Kind), Limit: number(p.Limit), Interval: p.Interval, Amount: number(p.Amount),
		IntervalRefill: p.IntervalRefill, Anchored: p.Anchored, MaxEntries: p.MaxEntries,
		Penalty: p.Penalty, CountDenied: p.CountDenied, Windows: p.Windows,
	}
}

func decodeParams(j paramsJSON) (engine.Params, error) {
	k, err := parseKind(j.Kind)
	return engine.Params{
		Kind: k, Limit: float64(j.Limit), Interval: j.Interval, Amount: float64(j.Amount),
		IntervalRefill: j.IntervalRefill, Anchored: j.Anchored, MaxEntries: j.MaxEntries,
		Penalty: j.Penalty, CountDenied: j.CountDenied, Windows: j.Windows,
	}, err
}

func encodeStep(s Step) stepJSON {
	j := stepJSON{
		Op:  opJSON{Verb: verbName(s.Op.Verb), Cost: number(s.Op.Cost), Now: s.Op.Now, MaxDelay: s.Op.MaxDelay, At: s.Op.At},
		Err: s.Err,
	}
	if s.Params != nil {
		p := encodeParams(*s.Params)
		j.Params = &p
	}
	if d := s.Want; d != nil {
		j.Want = &decisionJSON{
			Allowed: d.Allowed, Limit: number(d.Limit), Used: number(d.Used), Remaining: number(d.Remaining),
			RetryAfter: int64(d.RetryAfter), ResetAfter: int64(d.ResetAfter), Delay: int64(d.Delay), At: d.At,
			Granted: number(d.Granted), Blocked: d.Blocked,
		}
	}
	return j
}

func decodeStep(j stepJSON) (Step, error) {
	v, err := parseVerb(j.Op.Verb)
	if err != nil {
		return Step{}, err
	}
	if j.Err != "" && Sentinel(j.Err) == nil {
		return Step{}, fmt.Errorf("unknown error %q", j.Err)
	}
	s := Step{
		Op:  engine.Op{Verb: v, Cost: float64(j.Op.Cost), Now: j.Op.Now, MaxDelay: j.Op.MaxDelay, At: j.Op.At},
		Err: j.Err,
	}
	if j.Params != nil {
		p, err := decodeParams(*j.Params)
		if err != nil {
			return Step{}, err
		}
		s.Params = &p
	}
	if d := j.Want; d != nil {
		s.Want = &engine.Decision{
			Allowed: d.Allowed, Limit: float64(d.Limit), Used: float64(d.Used), Remaining: float64(d.Remaining),
			RetryAfter: time.Duration(d.RetryAfter), ResetAfter: time.Duration(d.ResetAfter), Delay: time.Duration(d.Delay),
			At: d.At, Granted: float64(d.Granted), Blocked: d.Blocked,
		}
	}
	return s, nil
}
