package reference

import (
	"math/big"

	"github.com/sluice-go/sluice/engine"
)

// slidingLog keeps the admitted requests and admits c iff the cost of the
// entries with t > now - W, plus c, is at most Limit. An admitted request
// drops the entries that left the window and appends (max(now, newest
// time), c), or, when MaxEntries live entries are kept already, merges its
// cost into the newest entry, which takes that time. A zero cost changes no
// sum, so it is not recorded: it would only hold an entry and keep the key
// from being fresh.
type slidingLog struct {
	limit      *big.Rat
	limitF     float64
	window     int64
	maxEntries int
	entries    []entry // oldest first
}

type entry struct {
	time int64
	cost *big.Rat
}

func newSlidingLog(p engine.Params) *slidingLog {
	return &slidingLog{limit: rat(p.Limit), limitF: p.Limit, window: p.Interval, maxEntries: p.MaxEntries}
}

func (l *slidingLog) Reset() { l.entries = nil }

func (l *slidingLog) Load(s engine.State) {
	l.entries = l.entries[:0]
	for _, e := range s.Log {
		l.entries = append(l.entries, entry{time: e.Time, cost: rat(e.Cost)})
	}
}

func (l *slidingLog) Apply(op engine.Op) Decision {
	var live []entry
	for _, e := range l.entries {
		if op.Now-e.time < l.window {
			live = append(live, e)
		}
	}
	total := new(big.Rat)
	for _, e := range live {
		total = add(total, e.cost)
	}
	c := rat(op.Cost)
	sum := add(total, c)
	d := Decision{Allowed: sum.Cmp(l.limit) <= 0, Used: total, Margin: relative(sub(sum, l.limit), l.limitF)}
	if !d.Allowed {
		// The cost fits once enough of the oldest entries have left: entry
		// e leaves the window at e.time + W.
		rest := sum
		for _, e := range live {
			rest = sub(rest, e.cost)
			d.Margin = min(d.Margin, relative(sub(rest, l.limit), l.limitF))
			if rest.Cmp(l.limit) <= 0 {
				d.RetryAfter = e.time + l.window - op.Now
				break
			}
		}
	} else {
		d.Used = sum
		if c.Sign() > 0 {
			live = l.record(live, op.Now, c)
		}
	}
	if n := len(live); n > 0 {
		d.ResetAfter = max(live[n-1].time+l.window-op.Now, 0)
	}
	if op.Verb == engine.VerbAllow && d.Allowed && c.Sign() > 0 {
		l.entries = live
	}
	return d
}

// record returns live with the admitted cost c added at now.
func (l *slidingLog) record(live []entry, now int64, c *big.Rat) []entry {
	n := len(live)
	if n == 0 {
		return []entry{{time: now, cost: c}}
	}
	t := max(now, live[n-1].time)
	if n >= l.maxEntries {
		merged := append([]entry(nil), live...)
		merged[n-1] = entry{time: t, cost: add(live[n-1].cost, c)}
		return merged
	}
	return append(live, entry{time: t, cost: c})
}
