package allowance_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sluice-go/sluice"
	"github.com/sluice-go/sluice/allowance"
	"github.com/sluice-go/sluice/engine"
)

// modelStart is the traces' first instant; modelLease and modelShare, the
// Config both the Store and its model run with.
var modelStart = time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC).UnixNano()

const modelLease, modelShare = 50 * time.Millisecond, 0.25

// The model's per-key state, as the spec names it.
type (
	// mLease models a key's block: spendable in [start, end), left
	// unspent, granted by basis; resetAt is when the key is fresh; short
	// if it was less than asked for.
	mLease struct {
		start, end, resetAt int64
		left                float64
		basis               engine.Decision
		short               bool
	}
	// mHold models denials answered in process before until, with
	// denial's fields.
	mHold struct {
		until  int64
		denial engine.Decision
	}
	// mDemand models the cost asked for a key in the lease time begun at
	// start (cur) and in the one before (prev).
	mDemand struct {
		start     int64
		cur, prev float64
	}
	// mKey is everything the model keeps per key; backoff doubles its
	// hold at the limit.
	mKey struct {
		params  engine.Params
		lease   mLease
		hold    mHold
		demand  mDemand
		backoff int
	}
)

// add models the demand rule: a new period after L, the previous one kept
// only if it just ended.
func (m *mDemand) add(now, l int64, cost float64) {
	if now-m.start >= l {
		m.prev = 0
		if now-m.start < 2*l {
			m.prev = m.cur
		}
		m.start, m.cur = now, 0
	}
	m.cur += cost
}

// model is the naive reading of the Store's rules: one map, one goroutine,
// its own remote store; paths counts the rules taken, for every trace.
type model struct {
	remote engine.Store
	l      int64
	share  float64
	keys   map[string]*mKey
	st     allowance.Stats
	paths  map[string]int
}

// call models a remote call: counted in Remote.
func (m *model) call(key string, p *engine.Params, op engine.Op) (engine.Decision, error) {
	m.st.Remote++
	return m.remote.Apply(context.Background(), key, p, op)
}

// leasable models which requests the Store may answer in process.
func leasable(p *engine.Params, op engine.Op) bool {
	return (op.Verb == engine.VerbAllow || op.Verb == engine.VerbCheck) && op.At == 0 && op.MaxDelay == 0 &&
		op.Cost >= 0 && op.Cost <= p.Limit && p.Kind != engine.KindConcurrency && engine.CheckTime(op.Now) == nil
}

// admitted models an admission from the key's block at t.
func (k *mKey) admitted(t int64) engine.Decision {
	r := min(k.lease.basis.Remaining+k.lease.left, k.params.Limit)
	return engine.Decision{Allowed: true, Limit: k.params.Limit, Remaining: r, Used: k.params.Limit - r,
		ResetAfter: time.Duration(max(k.lease.resetAt-t, 0))}
}

// denied models a denial answered by the key's hold at now.
func (k *mKey) denied(now int64) engine.Decision {
	d := k.hold.denial
	d.Allowed, d.Granted, d.At, d.Delay = false, 0, 0, 0
	d.RetryAfter = time.Duration(k.hold.until - now)
	d.ResetAfter = max(d.ResetAfter, d.RetryAfter)
	return d
}

// Apply models Store.Apply.
func (m *model) Apply(key string, p *engine.Params, op engine.Op) (engine.Decision, error) {
	if p == nil {
		m.paths["nil params"]++
		return engine.Decision{}, fmt.Errorf("%w: model: nil params", sluice.ErrInvalidConfig)
	}
	if !leasable(p, op) {
		m.paths["pass"]++
		return m.call(key, p, op)
	}
	if err := p.Validate(); err != nil {
		m.paths["invalid"]++
		return engine.Decision{}, err
	}
	k := m.keys[key]
	if k == nil || k.params != *p {
		if k != nil {
			m.paths["params change"]++
		}
		k = &mKey{params: *p, demand: mDemand{start: op.Now}}
		m.keys[key] = k
	}
	if op.Verb == engine.VerbAllow {
		k.demand.add(op.Now, m.l, op.Cost)
	}
	if t := max(op.Now, k.lease.start); t < k.lease.end && op.Cost <= k.lease.left {
		if op.Verb == engine.VerbAllow {
			k.lease.left -= op.Cost
			m.st.Spent += op.Cost
		}
		m.st.Local++
		m.paths["local admit"]++
		return k.admitted(t), nil
	}
	if op.Now < k.hold.until {
		m.st.Local++
		m.paths["hold denial"]++
		return k.denied(op.Now), nil
	}
	block := math.Floor(min(max(k.demand.cur, k.demand.prev)/2, p.Limit*m.share))
	strictShort := (p.Penalty > 0 || p.CountDenied) && k.lease.short && op.Now < k.lease.end
	if block < 2 || op.Verb == engine.VerbCheck || strictShort {
		m.paths["cold pass"]++
		if strictShort {
			m.paths["strict pass"]++
		}
		d, err := m.call(key, p, op)
		if err == nil && d.Blocked {
			k.hold = mHold{until: op.Now + int64(d.RetryAfter), denial: d}
			m.paths["pass blocked hold"]++
		}
		return d, err
	}
	return m.renew(key, k, op, max(block, op.Cost))
}

// renew models a renewal: the refund of the live block, the new block,
// and the decision of a request the block cannot cover.
func (m *model) renew(key string, k *mKey, op engine.Op, ask float64) (engine.Decision, error) {
	p, now := &k.params, op.Now
	u := k.lease.left
	k.lease.left = 0
	if u > 0 && max(now, k.lease.start) < k.lease.end && p.Reservable() {
		d, err := m.call(key, p, engine.Op{Verb: engine.VerbRefund, Cost: u, Now: now})
		if err != nil {
			return d, err
		}
		m.st.Refunded += d.Granted
		m.paths["refund"]++
	}
	d, err := m.call(key, p, engine.Op{Verb: engine.VerbAtMost, Cost: ask, Now: now})
	if err != nil {
		return d, err
	}
	m.st.Leases++
	m.st.Leased += d.Granted
	m.paths["lease"]++
	lease := mLease{start: now, end: now + m.l, left: d.Granted, basis: d, resetAt: now + int64(d.ResetAfter), short: d.Granted < ask}
	strict := p.Penalty > 0 || p.CountDenied
	backoff, short := k.backoff, mHold{}
	if lease.short && !strict {
		hold := wait(p, d, ask)
		for range backoff {
			hold = min(2*hold, 1<<60)
		}
		short = mHold{until: now + hold, denial: d}
		backoff = min(backoff+1, 3)
	} else if !lease.short {
		backoff = max(backoff-1, 0)
	}
	if d.Granted >= op.Cost {
		k.lease, k.hold, k.backoff = lease, short, backoff
		if lease.short && !strict {
			m.paths["short hold"]++
		}
		k.lease.left -= op.Cost
		m.st.Spent += op.Cost
		m.paths["lease admit"]++
		return k.admitted(now), nil
	}
	rest := op.Cost - d.Granted
	if d.Blocked || !strict && d.Remaining < rest {
		hold, path := mHold{until: now + int64(d.RetryAfter), denial: d}, "blocked hold"
		if !d.Blocked {
			hold, path = short, "wait hold"
		}
		k.lease, k.hold, k.backoff = lease, hold, backoff
		m.paths[path]++
		return k.denied(now), nil
	}
	top := op
	top.Cost = rest
	td, err := m.call(key, p, top)
	if err != nil {
		return td, err
	}
	k.lease, k.hold, k.backoff = lease, mHold{}, backoff
	if td.Allowed {
		m.st.Spent += d.Granted
		k.lease.left, k.lease.basis, k.lease.resetAt = 0, td, now+int64(td.ResetAfter)
		m.paths["top-up admit"]++
		return td, nil
	}
	m.paths["top-up denial"]++
	if td.Blocked {
		k.hold = mHold{until: now + int64(td.RetryAfter), denial: td}
		m.paths["top-up hold"]++
	}
	return td, nil
}

// wait models how long a key at its limit asks for no block: until its
// reset, or until the missing units come back if sooner; at least the
// remote RetryAfter and a nanosecond.
func wait(p *engine.Params, d engine.Decision, ask float64) int64 {
	per := math.Inf(1)
	switch p.Kind {
	case engine.KindGCRA:
		per = float64(p.Interval)
	case engine.KindLeakyBucket, engine.KindTokenBucket:
		per = float64(p.Interval) / p.Amount
	case engine.KindSlidingLog, engine.KindSlidingCounter:
		per = float64(p.Interval) / p.Limit
	}
	w := int64(d.ResetAfter)
	if c := math.Ceil((ask - d.Granted - d.Remaining) * per); c < float64(w) {
		w = int64(c)
	}
	return max(w, int64(d.RetryAfter), 1)
}

// Reset models Store.Reset.
func (m *model) Reset(key string) error {
	delete(m.keys, key)
	return m.remote.Reset(context.Background(), key)
}

// errText is an error as the test compares it: its message, or for nil
// Params (whose message the spec leaves open) whether it wraps
// ErrInvalidConfig.
func errText(err error, nilParams bool) string {
	switch {
	case err == nil:
		return ""
	case nilParams:
		return fmt.Sprint("invalid config: ", errors.Is(err, sluice.ErrInvalidConfig))
	}
	return err.Error()
}

// gap draws how far the clock moves before a request: hot phases offer
// many times the limit, cold ones less; rarely a long pause, or a step back.
func gap(rng *rand.Rand, phase int) int64 {
	ms := int64(time.Millisecond)
	switch x := rng.IntN(1000); {
	case x < 5:
		return -rng.Int64N(5 * ms)
	case x < 15:
		return 1000*ms + rng.Int64N(1000*ms)
	case phase == 0 && x%3 == 0:
		return 0
	case phase == 0:
		return rng.Int64N(3 * ms)
	case phase == 1:
		return rng.Int64N(25 * ms)
	}
	return 20*ms + rng.Int64N(200*ms)
}

// randomOp draws a request on p: mostly Allow, some Check, a few other
// verbs and odd requests that the Store passes on or refuses.
func randomOp(rng *rand.Rand, p *engine.Params, now int64) (*engine.Params, engine.Op) {
	costs := [...]float64{1, 1, 1, 0.5, 2, 3, p.Limit}
	op := engine.Op{Verb: engine.VerbAllow, Cost: costs[rng.IntN(len(costs))], Now: now}
	switch x := rng.IntN(1000); {
	case x < 120:
		op.Verb = engine.VerbCheck
	case x < 160:
		op.Verb = engine.VerbAtMost
	case x < 170:
		op.Verb, op.MaxDelay = engine.VerbReserve, int64(100*time.Millisecond)
	case x < 175:
		op.Cost = p.Limit + 1
	case x < 178:
		op.At = now
	case x < 181:
		op.MaxDelay = 1
	case x < 183:
		op.Now = -1
	case x < 185:
		return nil, op
	case x < 188:
		bad := *p
		bad.Interval = 0
		return &bad, op
	case x < 235:
		op.Cost = 0
	}
	return p, op
}

// modelCases are the limits that grant part of a cost, each with the
// other Params a key switches to.
var modelCases = []struct {
	name string
	p    engine.Params
}{
	{"leaky bucket", engine.Params{Kind: engine.KindLeakyBucket, Limit: 32, Interval: int64(time.Second), Amount: 16}},
	{"GCRA", engine.Params{Kind: engine.KindGCRA, Limit: 20, Interval: int64(50 * time.Millisecond)}},
	{"token bucket", engine.Params{Kind: engine.KindTokenBucket, Limit: 24, Interval: int64(time.Second), Amount: 24}},
	{"token bucket interval refill", engine.Params{Kind: engine.KindTokenBucket, Limit: 16, Interval: int64(time.Second), Amount: 16, IntervalRefill: true}},
	{"fixed window", engine.Params{Kind: engine.KindFixedWindow, Limit: 40, Interval: int64(time.Second)}},
	{"anchored fixed window", engine.Params{Kind: engine.KindFixedWindow, Limit: 48, Interval: int64(time.Second), Anchored: true}},
	{"sliding log", engine.Params{Kind: engine.KindSlidingLog, Limit: 32, Interval: int64(time.Second), MaxEntries: 48}},
	{"sliding counter", engine.Params{Kind: engine.KindSlidingCounter, Limit: 64, Interval: int64(time.Second)}},
	{"GCRA penalty", engine.Params{Kind: engine.KindGCRA, Limit: 16, Interval: int64(62500 * time.Microsecond), Penalty: int64(500 * time.Millisecond)}},
	{"token bucket count denied", engine.Params{Kind: engine.KindTokenBucket, Limit: 20, Interval: int64(time.Second), Amount: 20, CountDenied: true}},
}

// TestStoreDecidesAsItsModel runs random traces through the Store and
// through its model, each over a fresh memory store, and requires every
// decision, every error and the final Stats to agree.
func TestStoreDecidesAsItsModel(t *testing.T) {
	ctx := context.Background()
	paths := map[string]int{}
	for _, c := range modelCases {
		alt := c.p
		alt.Limit += 8
		for seed := range uint64(3) {
			rng := rand.New(rand.NewPCG(seed, 0x5eed))
			remote, alone := sluice.NewMemStore(sluice.MemStoreConfig{}), sluice.NewMemStore(sluice.MemStoreConfig{})
			t.Cleanup(func() { remote.Close(); alone.Close() })
			store, err := allowance.New(remote, allowance.Config{LeaseTime: modelLease, MaxShare: modelShare, MaxKeys: 1 << 12})
			require.NoError(t, err)
			m := &model{remote: alone, l: int64(modelLease), share: modelShare, keys: map[string]*mKey{}, paths: paths}
			keys := []string{"a", "b", "c"}[:1+rng.IntN(3)]
			params, which := [2]*engine.Params{&c.p, &alt}, map[string]int{}
			now, phase := modelStart, 0
			for step := range 2000 {
				if step%150 == 0 {
					phase = rng.IntN(3)
				}
				now += gap(rng, phase)
				key := keys[rng.IntN(len(keys))]
				msg := fmt.Sprintf("%s seed %d step %d key %q", c.name, seed, step, key)
				switch x := rng.IntN(1000); {
				case x < 3:
					paths["reset"]++
					require.Equal(t, errText(m.Reset(key), false), errText(store.Reset(ctx, key), false), msg)
					continue
				case x < 8:
					which[key] ^= 1 // the key's other Params
				}
				p, op := randomOp(rng, params[which[key]], now)
				msg += fmt.Sprintf(" op %+v params %v", op, p)
				want, werr := m.Apply(key, p, op)
				got, gerr := store.Apply(ctx, key, p, op)
				require.Equal(t, errText(werr, p == nil), errText(gerr, p == nil), msg)
				require.Equal(t, want, got, msg)
			}
			st := store.Stats()
			st.Keys = 0
			require.Equal(t, m.st, st, "%s seed %d: stats", c.name, seed)
		}
	}
	for _, path := range []string{"pass", "cold pass", "invalid", "nil params", "params change", "reset",
		"local admit", "hold denial", "lease", "lease admit", "refund", "blocked hold", "wait hold",
		"top-up admit", "top-up denial", "top-up hold", "strict pass", "pass blocked hold", "short hold"} {
		require.Positive(t, paths[path], "path %q never taken", path)
	}
	t.Logf("paths: %v", paths)
}
