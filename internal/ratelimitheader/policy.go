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
	// Unit is the quota unit, the qu parameter ("content-bytes"); "" is
	// the limiter's own: left out, which means "requests", for a rate
	// limit, and [ConcurrentRequests] for a concurrency limit.
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

// ConcurrentRequests is the quota unit of a concurrency limit
// ([sluice.NewConcurrencyLimit]), registered by the draft: q is how many
// requests may be in flight at once, and r how many more may start now.
const ConcurrentRequests = "concurrent-requests"

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
	// concurrent says that the policy is a concurrency limit's.
	concurrent bool
}

// New returns the policy lim enforces, named by c, or an error wrapping
// [sluice.ErrInvalidConfig]: [FromParams] of lim's Params.
func New(lim *sluice.Limiter, c Config) (*Policy, error) {
	if lim == nil {
		return nil, fmt.Errorf("%w: nil limiter", sluice.ErrInvalidConfig)
	}
	p, _ := lim.Params()
	return FromParams(p, c)
}

// FromParams returns the policy of the limit params describes, named by
// c, or an error wrapping [sluice.ErrInvalidConfig]. The limit of a
// per-key limiter ([sluice.NewPerKey]) differs per key: a key's policy is
// that of [sluice.Limiter.ParamsFor] for the key, and a [Cache] keeps one
// per limit.
//
// q is the limit in whole units, rounded down, and a limit below one
// whole unit is an error: no Integer q could describe it. The window w,
// unless c sets it, is the window length for the window algorithms, and
// for GCRA and the buckets the time in which q units drain or refill, so
// that q/w is the long-run rate even for a fractional burst. A
// concurrency limit has no window of its own: w is left out unless c sets
// one, and its unit is [ConcurrentRequests] unless c names another.
func FromParams(params engine.Params, c Config) (*Policy, error) {
	if c.Name == "" {
		c.Name = "default"
	}
	name, err := SFString("policy name", c.Name)
	if err != nil {
		return nil, err
	}
	p := &Policy{rawName: c.Name, name: name, concurrent: params.Kind == engine.KindConcurrency}
	if c.Unit == "" && p.concurrent {
		c.Unit = ConcurrentRequests
	}
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

// check reports whether what c says holds whatever the limit, as
// [FromParams] would find: a name and a unit that a Structured Field
// String can carry, and a window that is not negative.
func (c *Config) check() error {
	if _, err := SFString("policy name", c.Name); err != nil {
		return err
	}
	if _, err := SFString("quota unit", c.Unit); err != nil {
		return err
	}
	if c.WindowSet && c.Window < 0 {
		return fmt.Errorf("%w: negative policy window %v", sluice.ErrInvalidConfig, c.Window)
	}
	return nil
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

// Concurrent reports whether the policy is a concurrency limit's: its
// quota is held by the requests in flight and comes back as each ends,
// at an instant nobody knows beforehand, so that its fields carry no t
// (see [Policy.Fields]) and its denials no exact delay (see
// [Policy.RetryDelay]).
func (p *Policy) Concurrent() bool { return p.concurrent }

// Fields are the values a decision's response carries.
type Fields struct {
	// Policy is the RateLimit-Policy item, and RateLimit the RateLimit
	// item.
	Policy, RateLimit string
	// Quota, Remaining and Reset are q, r and t: the limit in whole units,
	// the whole units left, and the seconds until the allowance is whole
	// again (for a denial, never before Retry-After). Reset is 0, and t
	// left out, unless HasReset.
	Quota, Remaining, Reset int64
	// HasReset reports whether the fields carry t: always but for a
	// concurrency limit (see [Policy.Concurrent]).
	HasReset bool
}

// Fields returns the fields that describe d.
//
// For a concurrency limit they carry r alone, the slots free after this
// request, and no t. The draft's t is a time within which no more than r
// may be used; the slots of a concurrency limit come back as requests
// end, which no server can tell beforehand. The only time it knows,
// d.ResetAfter, is when the last lease would expire if never released:
// a bound for a holder that died, minutes away for a request that ends
// in milliseconds, which a client would read as a window to wait out.
func (p *Policy) Fields(d sluice.Decision) Fields {
	f := Fields{Policy: p.field, Quota: p.quota}
	f.Remaining = WholeUnits(d.Remaining, d.Limit)
	f.RateLimit = p.name + ";r=" + strconv.FormatInt(f.Remaining, 10)
	if p.concurrent {
		return f
	}
	reset := d.ResetAfter
	if !d.Allowed {
		reset = max(reset, d.RetryAfter)
	}
	f.Reset, f.HasReset = clampInteger(CeilSeconds(reset)), true
	f.RateLimit += ";t=" + strconv.FormatInt(f.Reset, 10)
	return f
}

// RetryDelay returns how long a client that d denied should wait before
// it tries again, and whether to tell it at all.
//
// For a rate limit it is d.RetryAfter, exact: one nanosecond sooner the
// same request is still denied. For a concurrency limit d.RetryAfter is
// only when enough of the earliest leases expire: a bound, which a
// request that ends and releases its lease beats by as much as the
// lease's time to live. The delay is then busy, a hint of how soon slots
// usually come back, capped at that bound, by which the store gives a
// slot back even if nobody releases one; busy <= 0 tells nothing.
func (p *Policy) RetryDelay(d sluice.Decision, busy time.Duration) (time.Duration, bool) {
	switch {
	case !p.concurrent:
		return d.RetryAfter, true
	case busy <= 0:
		return 0, false
	case d.RetryAfter > 0:
		return min(busy, d.RetryAfter), true
	}
	return busy, true // no bound known: a wait that timed out, say
}

// policyField serializes the RateLimit-Policy item for quota q.
func (p *Policy) policyField(q int64) string {
	return p.name + ";q=" + strconv.FormatInt(q, 10) + p.params
}
