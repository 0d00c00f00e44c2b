package allowance

import (
	"math"
	"time"

	"github.com/sluice-go/sluice/engine"
	"github.com/sluice-go/sluice/internal/evict"
)

// entry is what a Store knows of one key: its block, its hold, and the
// cost asked for it lately.
type entry struct {
	params engine.Params
	lease  lease
	hold   hold
	demand demand
	// renewing is closed when the round trip asking for the key's next
	// block ends; nil when none is under way.
	renewing chan struct{}
	// backoff is how many times the key's hold at its limit is doubled:
	// one more after each block that came short, one less after each
	// whole one.
	backoff uint8
}

// lease is a block of units the remote store admitted at start, which the
// key spends in process until end.
type lease struct {
	start, end int64
	left       float64
	// basis is the remote decision that granted the block.
	basis   engine.Decision
	resetAt int64
	// short reports that the block was less than asked for: the key was
	// at its limit.
	short bool
}

// hold makes a key deny, until until, the requests its block cannot
// cover, with denial's fields.
type hold struct {
	until  int64
	denial engine.Decision
}

// demand is the cost asked for a key in the lease time that began at
// start (cur) and in the one before it (prev), if that ended at start.
type demand struct {
	start     int64
	cur, prev float64
}

// entry returns key's entry, made for p at now if the shard has none or
// had one for other Params, making room for it if the shard holds limit.
// New Params are validated then, once.
func (sh *shard) entry(key string, p *engine.Params, now int64, limit int) (*entry, error) {
	e := sh.keys[key]
	if e != nil && e.params == *p {
		return e, nil
	}
	if err := p.Validate(); err != nil {
		return nil, err
	}
	if e == nil {
		if len(sh.keys) >= limit {
			sh.makeRoom(now)
		}
		e = &entry{}
		sh.keys[key] = e
	}
	// Other Params: the block was taken under the old limit; drop it. A
	// renewal under way finds the Params changed and keeps nothing.
	e.params, e.lease, e.hold, e.backoff = *p, lease{}, hold{}, 0
	e.demand = demand{start: now}
	return e, nil
}

// answer decides op from the key's block or hold, if either covers it:
// an Allow or a check of a cost the live block holds is admitted (an
// Allow spends it); any other is denied while the key is held.
func (e *entry) answer(op *engine.Op, sh *shard) (engine.Decision, bool) {
	l := &e.lease
	now := max(op.Now, l.start) // a caller whose clock read came before the block's
	if now < l.end && op.Cost <= l.left {
		if op.Verb == engine.VerbAllow {
			l.left -= op.Cost
			sh.spent += op.Cost
		}
		sh.local++
		return l.admitted(now, e.params.Limit), true
	}
	if op.Now < e.hold.until {
		sh.local++
		return e.hold.denied(op.Now), true
	}
	return engine.Decision{}, false
}

// block returns how many units the key's next block asks for: half the
// cost asked for it in the last lease time, at most share of its limit,
// in whole units.
func (e *entry) block(share float64) float64 {
	d := max(e.demand.cur, e.demand.prev) / 2
	return math.Floor(min(d, e.params.Limit*share))
}

// giveBack takes the unspent units out of the key's block before it is
// renewed at now, and returns those to give back to the remote store: all
// of them while the lease is live and the algorithm can refund, otherwise
// none (they are lost to the limit: see the package comment).
func (e *entry) giveBack(now int64) float64 {
	l := &e.lease
	left := l.left
	l.left = 0
	if left > 0 && max(now, l.start) < l.end && e.params.Reservable() {
		return left
	}
	return 0
}

// strictAtLimit reports whether the key's limit has a penalty or counts
// denials and its live block came short of what was asked: the requests
// the block cannot cover go to the remote store, which must see each
// overflow, without asking for a block first.
func (e *entry) strictAtLimit(now int64) bool {
	return e.lease.short && now < e.lease.end && (e.params.Penalty > 0 || e.params.CountDenied)
}

// admitted is the decision on a request admitted from the block at now:
// the remote decision that granted the block, with the block's unspent
// units added back to what remains.
func (l *lease) admitted(now int64, limit float64) engine.Decision {
	rem := min(l.basis.Remaining+l.left, limit)
	return engine.Decision{
		Allowed:    true,
		Limit:      limit,
		Used:       limit - rem,
		Remaining:  rem,
		ResetAfter: time.Duration(max(l.resetAt-now, 0)),
	}
}

// blocked is the hold of a key that d, a decision at now, says a penalty
// blocks: everything is denied until the block ends.
func blocked(now int64, d engine.Decision) hold {
	return hold{until: now + int64(d.RetryAfter), denial: d}
}

// denied is the hold's denial as of now, before until.
func (h *hold) denied(now int64) engine.Decision {
	d := h.denial
	d.Allowed, d.Granted, d.At, d.Delay = false, 0, 0, 0
	d.RetryAfter = time.Duration(h.until - now)
	d.ResetAfter = max(d.ResetAfter, d.RetryAfter)
	return d
}

// add counts cost asked at now, rolling the lease times of length
// leaseTime over.
func (m *demand) add(now int64, cost float64, leaseTime int64) {
	if now-m.start >= leaseTime {
		m.prev = 0
		if now-m.start < 2*leaseTime {
			m.prev = m.cur
		}
		m.start, m.cur = now, 0
	}
	m.cur += cost
}

// makeRoom drops the sampled keys whose block and hold have ended, or if
// none has the sampled key whose block ends soonest, never one being
// renewed.
func (sh *shard) makeRoom(now int64) {
	evict.Sample(sh.keys, evictSample, func(e *entry) (int64, bool, bool) {
		return e.lease.end, e.lease.end <= now && e.hold.until <= now, e.renewing != nil
	})
}

// holds reports whether key's entry is still e, for p, with no Reset
// since epoch: whether what a round trip brings back for e may be kept.
func (sh *shard) holds(key string, e *entry, p *engine.Params, epoch uint64) bool {
	return sh.epoch == epoch && sh.keys[key] == e && e.params == *p
}

// forget drops key's entry and keeps out a renewal under way.
func (sh *shard) forget(key string) {
	sh.mu.Lock()
	defer sh.mu.Unlock()
	sh.epoch++
	delete(sh.keys, key)
}
