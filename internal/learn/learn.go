// Package learn holds what a client that paces its calls to a service
// learns from the service's answers, key by key: the holds it records in
// the store (Limiter.Exhaust) and the share of the configured rate it
// paces at (Limiter.Slowed). sluicehttp's Transport and sluicegrpc's Pacer
// learn with it; their Learn options document the rules for users.
package learn

import (
	"context"
	"fmt"
	"math"
	"sync"
	"time"

	"github.com/sluice-go/sluice"
	"github.com/sluice-go/sluice/engine"
	"github.com/sluice-go/sluice/internal/answers"
)

// DefaultMaxHold is the longest an answer can hold a key back unless
// SetMaxHold says otherwise.
const DefaultMaxHold = time.Hour

// The rules a learner follows.
const (
	// silentBackoff is the first hold after a refusal that says nothing;
	// each one in a row doubles it.
	silentBackoff = time.Second
	// regainPerSecond is the share of the configured rate a learner
	// regains each second after a cut, up to the whole.
	regainPerSecond = 1.0 / 64
	// levelsPerHalving is how finely a share is rounded down: to a power
	// of 2^(-1/32), at most 2.2 % below it.
	levelsPerHalving = 32
	// lowestLevel is the smallest share, 2^-20 of the configured rate.
	lowestLevel = 20 * levelsPerHalving
	// maxRewaits bounds how often a request waits again for a hold
	// learned while it waited.
	maxRewaits = 3
)

// Learner learns, for one limiter, from the answers to the calls it
// paces. It is safe for concurrent use.
type Learner struct {
	lim     *sluice.Limiter
	unit    answers.Unit
	maxHold time.Duration

	mu     sync.Mutex
	keys   map[string]*learned     // keys with something learned, or calls in flight
	slowed map[int]*sluice.Limiter // by level (see level); nil for a limiter that cannot be slowed
}

// New returns a learner for calls paced by lim, following the service's
// quotas of unit, or an error wrapping sluice.ErrUnsupported for a limiter
// whose keys cannot be held back (a window, a concurrency limit). who
// names the caller in the error.
func New(who string, lim *sluice.Limiter, unit answers.Unit) (*Learner, error) {
	p, fixed := lim.Params()
	if fixed && !p.Reservable() {
		return nil, fmt.Errorf("%w: %s learns with a GCRA or a bucket, not a %v", sluice.ErrUnsupported, who, p.Kind)
	}
	lr := &Learner{lim: lim, unit: unit, maxHold: DefaultMaxHold, keys: map[string]*learned{}}
	if fixed {
		lr.slowed = map[int]*sluice.Limiter{0: lim}
	}
	return lr, nil
}

// SetMaxHold bounds every hold from now on; d must be positive.
func (lr *Learner) SetMaxHold(d time.Duration) { lr.maxHold = d }

// Wait blocks until a call of cost on key is admitted: by the limiter at
// the key's learned pace, and again after a hold recorded while it waited
// (at most maxRewaits times). An admitted call is counted as sent, in
// flight until Heed.
func (lr *Learner) Wait(ctx context.Context, key string, cost float64) error {
	for i := 1; ; i++ {
		lim, holds := lr.limiter(key, time.Now())
		if err := lim.Wait(ctx, key, cost); err != nil {
			return err
		}
		if lr.send(key, cost, holds, time.Now(), i == maxRewaits) {
			return nil
		}
	}
}

// learned is what a learner knows of a key.
type learned struct {
	inflight float64 // the cost of the requests sent and not answered yet
	// heldUntil is the end of the last hold the transport recorded, and
	// holds how many it recorded; sent is the cost it has sent since: a
	// hold that ends no later than heldUntil plus that cost at the
	// limiter's pace is in the store already.
	heldUntil time.Time
	holds     int
	sent      float64
	// cutShare is the share of the configured rate at cut, which grows
	// back by regainPerSecond from then; silent is the number of refusals
	// in a row that said nothing.
	cutShare float64
	cut      time.Time
	silent   int
	// quotaShare is the share of the configured rate that the service's
	// remaining count allows until quotaEnd, its reset.
	quotaShare float64
	quotaEnd   time.Time
}

// shareAt returns the share of the configured rate that k is paced at,
// at now.
func (k *learned) shareAt(now time.Time) float64 {
	share := 1.0
	if k.cutShare > 0 {
		share = min(1, k.cutShare+regainPerSecond*now.Sub(k.cut).Seconds())
	}
	if now.Before(k.quotaEnd) {
		share = min(share, k.quotaShare)
	}
	return share
}

// idle reports whether k holds nothing a later request needs.
func (k *learned) idle(now time.Time) bool {
	return k.inflight == 0 && !k.heldUntil.After(now) && k.shareAt(now) == 1 && k.silent == 0
}

// level returns the level of share: the least n for which
// 2^(-n/levelsPerHalving) is at most share, at most lowestLevel.
func level(share float64) int {
	if share >= 1 {
		return 0
	}
	return min(int(math.Ceil(-levelsPerHalving*math.Log2(share))), lowestLevel)
}

// limiter returns the limiter to pace a request on key with at now: the
// configured one, or one slowed to the key's share of its rate; and the
// number of holds recorded so far (see send).
func (lr *Learner) limiter(key string, now time.Time) (*sluice.Limiter, int) {
	lr.mu.Lock()
	defer lr.mu.Unlock()
	k := lr.keys[key]
	if k == nil {
		return lr.lim, 0
	}
	if lr.slowed == nil {
		return lr.lim, k.holds
	}
	n := level(k.shareAt(now))
	if lim, ok := lr.slowed[n]; ok {
		return lim, k.holds
	}
	lim, err := lr.lim.Slowed(math.Exp2(-float64(n) / levelsPerHalving))
	if err != nil {
		return lr.lim, k.holds // a rate the limiter cannot hold: the configured one
	}
	lr.slowed[n] = lim
	return lim, k.holds
}

// send counts a call of cost on key that waited for its turn from when
// holds holds had been recorded as sent, and reports true; or, unless
// last, reports false when it must wait again: a hold was recorded since,
// and lasts beyond now.
func (lr *Learner) send(key string, cost float64, holds int, now time.Time, last bool) bool {
	lr.mu.Lock()
	defer lr.mu.Unlock()
	k := lr.keys[key]
	if k == nil {
		k = &learned{}
		lr.keys[key] = k
	} else if !last && k.holds != holds && k.heldUntil.After(now) {
		return false
	}
	k.inflight += cost
	k.sent += cost
	return true
}

// Heed learns from what the service answered a call of cost on key that
// Wait admitted: a, read at now, whether it refused the call (a 429
// or 503, a ResourceExhausted), and whether it answered at all (false for
// a call that failed on the way); and records the hold it calls for.
func (lr *Learner) Heed(ctx context.Context, key string, cost float64, a answers.Answer, now time.Time, refused, answered bool) {
	ctx = context.WithoutCancel(ctx) // the answer is in: what it says is recorded
	p, err := lr.lim.ParamsFor(ctx, key)
	perUnit := unitTime(p)

	lr.mu.Lock()
	k := lr.keys[key]
	k.inflight = max(0, k.inflight-cost)
	var hold time.Duration
	told := refused && a.HasRetryAfter
	if told {
		hold = a.RetryAfter
	}
	for _, q := range a.Quotas {
		if q.Unit != lr.unit || err != nil || perUnit == 0 || q.Reset == 0 {
			continue
		}
		told = true
		// The remaining count, less what is in flight, paced to last
		// until the reset; none left holds everything back until then.
		left := max(0, q.Remaining-k.inflight)
		if left < cost {
			hold = max(hold, q.Reset)
			continue
		}
		share := left * perUnit.Seconds() / q.Reset.Seconds()
		if end := now.Add(q.Reset); share < 1 && (!now.Before(k.quotaEnd) || share < k.quotaShare || end.After(k.quotaEnd)) {
			k.quotaShare, k.quotaEnd = share, end
		}
	}
	switch {
	case refused && !told && !now.Before(k.heldUntil):
		// The first refusal since the last hold ended (the answers to
		// requests sent before it change nothing more).
		hold = silentBackoff << min(k.silent, 30)
		k.silent++
		k.cutShare, k.cut = max(k.shareAt(now)/2, math.Exp2(-lowestLevel/levelsPerHalving)), now
	case !refused && answered:
		k.silent = 0
	}
	hold = min(hold, lr.maxHold)
	end := now.Add(hold)
	recorded := !end.After(k.heldUntil.Add(time.Duration(k.sent * float64(perUnit))))
	if hold > 0 && !recorded {
		k.heldUntil, k.sent = end, 0
		k.holds++
	}
	if k.idle(now) {
		delete(lr.keys, key)
	}
	lr.mu.Unlock()

	if hold > 0 && !recorded {
		lr.lim.Exhaust(ctx, key, hold) //nolint:errcheck // the limiter's observer sees a failure
	}
}

// unitTime returns how long p's limit takes to free one unit: GCRA's
// emission interval, the buckets' period per amount; zero for a limit that
// frees none continuously.
func unitTime(p engine.Params) time.Duration {
	switch {
	case p.Kind == engine.KindGCRA:
		return time.Duration(p.Interval)
	case p.Amount > 0:
		return time.Duration(float64(p.Interval) / p.Amount)
	}
	return 0
}
