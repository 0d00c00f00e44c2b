package ratelimitheader

import (
	"fmt"
	"math"
	"strconv"
	"time"

	"github.com/sluice-go/sluice"
	"github.com/sluice-go/sluice/engine"
)

// Config describes a quota policy as a server names it.
type Config struct {
	// Name is the policy's name; "" means "default".
	Name string
	// Unit is the quota unit, the qu parameter ("content-bytes"); "" leaves
	// it out, which means "requests".
	Unit string
	// Window, when WindowSet, is the policy's window: w is it rounded to
	// the nearest second, and left out when that is 0. Otherwise the
	// window comes from the limiter's Params (see [New]).
	Window    time.Duration
	WindowSet bool
	// MinCost is the least a request is charged: a limiter whose limit
	// is below it could never admit a request.
	MinCost float64
}

// Policy serializes the fields of one quota policy. Its methods are safe
// for concurrent use.
type Policy struct {
	// rawName is the policy's name as configured, and name the same
	// serialized as a Structured Field String.
	rawName, name string
	// params are the serialized parameters after q: qu and w.
	params string
	// field is the whole RateLimit-Policy item, and quota its q.
	field string
	quota int64
}

// New returns the policy lim enforces, named by c, or an error wrapping
// [sluice.ErrInvalidConfig].
//
// q is lim's limit in whole units, rounded down, and a limit below one
// whole unit is an error: no Integer q could describe it. The window w,
// unless c sets it, is the window length for the window algorithms, and
// for GCRA and the buckets the time in which q units drain or refill, so
// that q/w is the long-run rate even for a fractional burst.
func New(lim *sluice.Limiter, c Config) (*Policy, error) {
	if c.Name == "" {
		c.Name = "default"
	}
	name, err := SFString("policy name", c.Name)
	if err != nil {
		return nil, err
	}
	p := &Policy{rawName: c.Name, name: name}
	if c.Unit != "" {
		unit, err := SFString("quota unit", c.Unit)
		if err != nil {
			return nil, err
		}
		p.params = ";qu=" + unit
	}
	if c.WindowSet && c.Window < 0 {
		return nil, fmt.Errorf("%w: negative policy window %v", sluice.ErrInvalidConfig, c.Window)
	}
	params := lim.Params()
	p.quota = WholeUnits(params.Limit, params.Limit)
	if p.quota == 0 {
		return nil, fmt.Errorf("%w: limit %v is less than one whole unit, which RateLimit-Policy cannot state: count in a smaller unit",
			sluice.ErrInvalidConfig, params.Limit)
	}
	if c.MinCost > params.Limit {
		return nil, fmt.Errorf("%w: minimum cost %v exceeds the limit %v: no request could be admitted",
			sluice.ErrInvalidConfig, c.MinCost, params.Limit)
	}
	window := c.Window
	if !c.WindowSet {
		window = Window(params, p.quota)
	}
	p.params += windowParam(window)
	p.field = p.policyField(p.quota)
	return p, nil
}

// Window returns the window over which quota whole units of p's limit
// apply: the window length, or the time quota units take to drain or
// refill.
func Window(p engine.Params, quota int64) time.Duration {
	var ns float64
	switch p.Kind {
	case engine.KindFixedWindow, engine.KindSlidingLog, engine.KindSlidingCounter:
		return time.Duration(p.Interval)
	case engine.KindGCRA:
		ns = float64(quota) * float64(p.Interval)
	case engine.KindLeakyBucket, engine.KindTokenBucket:
		periods := float64(quota) / p.Amount
		if p.IntervalRefill {
			periods = math.Ceil(periods)
		}
		ns = periods * float64(p.Interval)
	}
	if ns >= math.MaxInt64 {
		return math.MaxInt64
	}
	return time.Duration(ns)
}

func windowParam(window time.Duration) string {
	if w := RoundSeconds(window); w > 0 {
		return ";w=" + strconv.FormatInt(w, 10)
	}
	return ""
}

// Name returns the policy's name as the fields carry it, unquoted:
// "default" when the Config named none.
func (p *Policy) Name() string { return p.rawName }

// Field returns the RateLimit-Policy item, which is known without a
// decision.
func (p *Policy) Field() string { return p.field }

// Fields are the values a decision's response carries.
type Fields struct {
	// Policy is the RateLimit-Policy item, and RateLimit the RateLimit
	// item.
	Policy, RateLimit string
	// Quota, Remaining and Reset are q, r and t: the limit in whole units,
	// the whole units left, and the seconds until the allowance is whole
	// again (for a denial, never before Retry-After).
	Quota, Remaining, Reset int64
}

// Fields returns the fields that describe d.
func (p *Policy) Fields(d sluice.Decision) Fields {
	f := Fields{Policy: p.field, Quota: p.quota}
	f.Remaining = WholeUnits(d.Remaining, d.Limit)
	reset := d.ResetAfter
	if !d.Allowed {
		reset = max(reset, d.RetryAfter)
	}
	f.Reset = clampInteger(CeilSeconds(reset))
	f.RateLimit = p.name + ";r=" + strconv.FormatInt(f.Remaining, 10) + ";t=" + strconv.FormatInt(f.Reset, 10)
	return f
}

// policyField serializes the RateLimit-Policy item for quota q.
func (p *Policy) policyField(q int64) string {
	return p.name + ";q=" + strconv.FormatInt(q, 10) + p.params
}
