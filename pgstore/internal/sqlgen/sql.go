package sqlgen

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/sluice-go/sluice/engine"
	"github.com/sluice-go/sluice/internal/arith"
	"github.com/sluice-go/sluice/pgstore/internal/sqlfile"
)

// This file translates the algorithms of package engine (Params.Step, the
// specification) into SQL.
//
// An algorithm is a chain of steps, one per group of Go variables. Each
// step is a derived table that adds its own columns, computed from those
// of the step inside it, and passes on those that the steps above it read
// (see chain): the innermost holds the parameters (see params), the
// request (verb, cost, cn) and the old state (now, t0, a0, b0, lt, lc):
// the key's row until its expiry, carried over to the request's
// parameters by an algorithm that carries (see algorithm.carry).
// OFFSET 0 keeps the planner from merging the steps, which would copy each
// expression into every expression that uses it (the statements would
// take milliseconds to plan and run), and from folding a fresh state's
// constants into branches that are never taken, whose divisions by zero
// it would evaluate. Column names are unique along a chain.
//
// Every float operation is the Go code's, on the same operands in the same
// order, so that PostgreSQL's float8 arithmetic (IEEE doubles, like
// float64) gives the same bits. Integer nanoseconds are bigint. Values
// that depend only on the parameters and the request (GCRA's c*T and
// burst*T, rounded by math.Round, and the slack) are computed in Go by the
// specification's own arithmetic and passed in. Divisions sit inside the
// CASE branch that the Go code guards them with: PostgreSQL raises an
// error where Go would divide by zero.
//
// Where the Go code branches on the verb, so does the SQL, on the column
// verb. VerbAtMost is made of decisions of the others (atmost.go): its
// statement runs the chain once on a zero-cost check, for the allowance
// left, and then once per candidate cost, as rows of one derived table,
// and keeps the first candidate that fits.

// algorithm is one algorithm's step in SQL.
type algorithm struct {
	steps   []string // each step's columns: "expression AS name, ..."
	allowed string   // whether the cost fits (for VerbCancel: is given back)
	used    string   // the allowance in use, before describe's clamp
	retry   string   // RetryAfter in nanoseconds
	reset   string   // ResetAfter in nanoseconds
	// books reports whether the steps book reservations, for fit_at when
	// the column books is true; at is then Decision.At, the booking's
	// mark. Without books, at is Decision.At itself, "" for zero: the
	// concurrency limit's lease.
	books bool
	at    string
	// fill is Params.fillUp: the state (time, a, b, log times and costs)
	// of the key filled to its limit at now, from the columns of the
	// steps on a request that is not a cancel, and the Remaining of its
	// decision, rem. A reservable algorithm's is its full at now (see
	// fillNow).
	fill func(rem string) [5]string
	// full, for a reservable algorithm (nil for the others), is
	// Params.fullAt: the state (time, a, b) of the key whose whole limit
	// is in use at the instant at, a column, never lower than the state
	// (t0, a0, b0) it reads; and the steps, seen, that define
	// from that state the other columns the state reads, under the names
	// the algorithm's own steps give them, as seen at at rather than at
	// now. A counted denial fills the key at now, after the algorithm's
	// steps (fill); an exhaust at now + max_delay, before them (see
	// exhaust.go).
	full func(at string) (seen []string, state [3]string)
	// settle, for a reservable algorithm (nil for the others), is its
	// part of Params.stepSettle: settleGCRA, settleMeter or settleRefill.
	// Its steps move the state (t0, a0, b0) by the op's cost, op_cost,
	// charged or refunded as op_verb says, and define the column moved,
	// the cost moved; state is the state moved (time, a, b), from the
	// columns of the steps, and emptied, Params.emptied, the condition
	// that it is fresh again at now (see settle.go).
	settle func() (steps []string, state [3]string, emptied string)
	// remaining is Remaining given the clamped Used; nil is Limit - Used.
	remaining func(used string) string
	// records is what the step records besides what every algorithm's
	// does (see decision), as a condition on the decision's columns
	// named prefix followed by allowed and at; nil for nothing more.
	records func(prefix string) string
	// carry, if not nil, carries the state (t0, a0) that a statement
	// reads from the key's row over to the request's parameters at now,
	// as the step does first: it returns the expressions of the state's
	// time and A carried over, and of Params.Carries, whether the state
	// must be written back whatever Params.Records says (see decision and
	// strictSteps). It is the row's state as the innermost step of a
	// chain reads it, rather than a step of the chain: the steps would
	// carry nothing from the state they leave (run a second time, for a
	// counted denial's fill or a partial grant's candidates), nor from a
	// fresh state, and a statement's time goes mostly to setting up its
	// columns, each step's passing on those of the one inside it.
	carry func(t0, a0, now string) (time, a, carries string)
	// fresh, if not nil, are steps that decide as steps do from the
	// fresh state (t0, a0 and b0 zero, lt and lc empty), defining every
	// column that the decision and the state read: those of the chain
	// that the upsert runs for a new key's row on every request, which
	// the shorter they are, the sooner it runs.
	fresh []string
	// The state the step returns for a recorded request.
	time, a, b, logTimes, logCosts string
	// source names, for the files' headers, the function that writes
	// the algorithm and the one of package engine it translates.
	source string
}

// The verbs as the column verb carries them.
var (
	verbAllow   = verbSQL(engine.VerbAllow)
	verbCheck   = verbSQL(engine.VerbCheck)
	verbFill    = verbSQL(engine.VerbFill)
	verbReserve = verbSQL(engine.VerbReserve)
	verbCancel  = verbSQL(engine.VerbCancel)
	verbAtMost  = verbSQL(engine.VerbAtMost)
	verbExtend  = verbSQL(engine.VerbExtend)
	verbLeave   = verbSQL(engine.VerbLeave)
	verbCharge  = verbSQL(engine.VerbCharge)
	verbRefund  = verbSQL(engine.VerbRefund)
)

func verbSQL(v engine.Verb) string { return strconv.Itoa(int(v)) }

var (
	// sqlTolerance is the engine's relative float slack, written so that
	// float8 input reads back the same double.
	sqlTolerance = "'" + strconv.FormatFloat(arith.Tolerance, 'g', -1, 64) + "'::float8"
	// maxSpan is the engine's bound on computed durations.
	maxSpan = strconv.FormatInt(arith.MaxSpan, 10)
	// maxTicket is the engine's bound on a ticket in a concurrency
	// limit's line, 2^53, as a float8 like State.A.
	maxTicket = "'" + strconv.FormatInt(1<<53, 10) + "'::float8"
)

const (
	// minTime is the expiry of a row whose state is fresh: it expired
	// before any time, so it never conflicts and is pruned first.
	minTime = "'-9223372036854775808'::int8"
	// noLog and noCosts are the log columns of a state without a log.
	noLog   = "NULL::int8[]"
	noCosts = "NULL::float8[]"
)

// ceilNanos is arith.CeilNanos: ns, a float8 expression, rounded up to
// a whole nanosecond after forgiving the tolerance, capped at maxSpan.
func ceilNanos(ns string) string {
	less := fmt.Sprintf("(%[1]s - %[1]s * %[2]s)", ns, sqlTolerance)
	return fmt.Sprintf("(CASE WHEN NOT (%s > 0) THEN 0::int8 WHEN %s >= %s::float8 THEN %s::int8 ELSE ceil(%s)::int8 END)",
		ns, less, maxSpan, maxSpan, less)
}

// floorNanos is arith.FloorNanos: ns, a float8 expression, rounded down to
// a whole nanosecond after forgiving the tolerance, capped at maxSpan.
func floorNanos(ns string) string {
	more := fmt.Sprintf("(%[1]s + %[1]s * %[2]s)", ns, sqlTolerance)
	return fmt.Sprintf("(CASE WHEN NOT (%s > 0) THEN 0::int8 WHEN %s >= %s::float8 THEN %s::int8 ELSE floor(%s)::int8 END)",
		ns, more, maxSpan, maxSpan, more)
}

// drain is Params.drain: how long x units take to leak away.
func drain(x string) string {
	return fmt.Sprintf("(CASE WHEN %[1]s <= slack THEN 0::int8 ELSE %[2]s END)", x, ceilNanos("("+x+") * ivf / am"))
}

// span is Params.span: when, relative to a point, an excess of x over the
// limit has leaked (before the point, for room to spare).
func span(x string) string {
	return fmt.Sprintf("(CASE WHEN %[1]s >= -slack THEN %[2]s ELSE -%[3]s END)", x, drain(x), floorNanos("(-("+x+")) * ivf / am"))
}

// levelAt is Params.levelAt: the level of the point (t, a) at u, where
// drained is drain(a).
func levelAt(t, a, u, drained string) string {
	return fmt.Sprintf(`(CASE WHEN %[3]s = %[1]s THEN %[2]s
		WHEN %[3]s < %[1]s THEN %[2]s + (%[1]s - %[3]s)::float8 * am / ivf
		WHEN %[3]s - %[1]s >= %[4]s THEN 0::float8
		ELSE greatest(%[2]s - (%[3]s - %[1]s)::float8 * am / ivf, 0) END)`, t, a, u, drained)
}

// refills is Params.refills: how many refills free x tokens.
func refills(x string) string {
	return fmt.Sprintf("(CASE WHEN %[1]s <= slack THEN 0::int8 ELSE %[2]s END)", x, refillCount("ceil(("+x+" - slack) / am)"))
}

// refillsTo is Params.refillsTo: how many refills after a point an excess
// of x tokens takes to go, fewer than one when there is room already.
func refillsTo(x string) string {
	return refillCount(fmt.Sprintf("ceil((%s - slack) / am)", x))
}

// refillCount is Params.refillCount: n, a whole number of refills as a
// float8 expression, as an int8, or maxSpan / iv + 1 (a division of
// integers) if n times the interval exceeds maxSpan, which only a key
// read under a slower limit than it was charged under holds: n::int8, or
// its product with iv, would be out of range. n is capped at 2^63 before
// the comparison's product, which may overflow float8 (an error in
// PostgreSQL, infinite in Go): times the interval, a nanosecond at least,
// 2^63 or more exceeds maxSpan either way.
func refillCount(n string) string {
	return fmt.Sprintf("(CASE WHEN least(%[1]s, '9223372036854775808'::float8) * ivf > %[2]s::float8 THEN %[2]s / iv + 1 ELSE %[1]s::int8 END)",
		n, maxSpan)
}

// refillPoint is Params.refillPoint: the steps that compute the point
// (t, a) as seen at u, as the columns <name>_used and <name>_last.
func refillPoint(name, t, a, u string) []string {
	due := fmt.Sprintf("%[2]s > 0 AND %[3]s > %[1]s", t, a, u)
	return []string{
		fmt.Sprintf(`(%[4]s - %[2]s) / iv AS %[1]s_k,
			CASE WHEN %[5]s THEN greatest(%[3]s - ((%[4]s - %[2]s) / iv)::float8 * am, 0) ELSE %[3]s END AS %[1]s_refilled`,
			name, t, a, u, due),
		// A full bucket's refill clock starts again at u.
		fmt.Sprintf(`CASE WHEN %[4]s < %[2]s THEN %[3]s WHEN %[1]s_refilled <= slack THEN 0::float8 ELSE %[1]s_refilled END AS %[1]s_used,
			CASE WHEN %[4]s < %[2]s THEN %[2]s WHEN %[1]s_refilled <= slack THEN %[4]s WHEN %[5]s THEN %[2]s + %[1]s_k * iv ELSE %[2]s END AS %[1]s_last`,
			name, t, a, u, due),
	}
}

// fill is Params.fill: level plus the cost, clamped at the limit.
func fill(level string) string {
	return fmt.Sprintf("(CASE WHEN %[1]s + cost >= full_at THEN lim ELSE %[1]s + cost END)", level)
}

// fillNow is the fill of a reservable algorithm whose full is full:
// Params.fillUp is its fullAt at now, on the columns that the
// algorithm's steps defined at now.
func fillNow(full func(at string) ([]string, [3]string)) func(rem string) [5]string {
	return func(string) [5]string {
		_, state := full("now")
		return [5]string{state[0], state[1], state[2], noLog, noCosts}
	}
}

// after is the engine's after: how long from now until t, never negative.
func after(t string) string { return "greatest(" + t + " - now, 0)" }

// roundSpan is int64(math.Round(x)) for x, a float8 expression not below
// zero, or maxSpan if x is not below it (a whole number, which math.Round
// leaves as it is).
func roundSpan(x string) string {
	return roundNanos(fmt.Sprintf("least(%s, %s::float8)", x, maxSpan))
}

// roundNanos is int64(math.Round(x)) for x, a float8 expression from zero
// to below 2^63, which int8 holds. math.Round rounds half away from zero,
// PostgreSQL's round(float8) and its cast to int8 half to even (they call
// rint): added to x, 0.49999999999999994, the double below one half, makes
// the sum's rounding to the nearest double reach the next whole number
// exactly when x's fraction is one half or more, so that floor takes it
// there.
func roundNanos(x string) string {
	return "floor(" + x + " + '0.49999999999999994'::float8)::int8"
}

// floorDiv is arith.FloorDiv: a/b rounded toward negative infinity.
func floorDiv(a, b string) string {
	return fmt.Sprintf("(%[1]s / %[2]s - CASE WHEN %[1]s %% %[2]s < 0 THEN 1 ELSE 0 END)", a, b)
}

// givesBack is the cancel's test that the reservation booked for
// booked_at is still the key's last booking, whose point is at point.
func givesBack(point string) string {
	return "verb = " + verbCancel + " AND now < booked_at AND t0 = " + point
}

// notBefore is the step that raises fit_at, the instant at which the
// algorithm would admit the cost (the column fit), to a reservation's
// booked_at if that comes later and after now (then later is true):
// Op.At of VerbReserve, the earliest instant to book.
func notBefore(fit string) string {
	later := "verb = " + verbReserve + " AND booked_at > greatest(" + fit + ", now)"
	return later + " AS later, CASE WHEN " + later + " THEN booked_at ELSE " + fit + " END AS fit_at"
}

// fitsOrBooks is the step that decides whether the request fits now, by
// the condition fits, and otherwise books a reservation for fit_at, if
// that comes within max_delay.
func fitsOrBooks(fits string) string {
	return fits + " AS fits, verb = " + verbReserve + " AND NOT (" + fits + ") AND fit_at - now <= max_delay AS books"
}

// retryAfter is RetryAfter for a request that fits at fit_at: none when
// admitted or for the verbs noRetry, and for a reservation counted to the
// latest instant at which it would be booked.
func retryAfter(noRetry ...string) string {
	return "CASE WHEN ok OR verb IN (" + strings.Join(noRetry, ", ") + ") THEN 0 WHEN verb = " + verbReserve +
		" THEN " + after("fit_at - max_delay") + " ELSE " + after("fit_at") + " END"
}

// algorithmFor returns the step of an algorithm variant.
func algorithmFor(v sqlfile.Variant) algorithm {
	switch {
	case v.Kind == engine.KindLeakyBucket, v.Kind == engine.KindTokenBucket && !v.IntervalRefill:
		return meter()
	case v.Kind == engine.KindGCRA:
		return gcra()
	case v.Kind == engine.KindTokenBucket:
		return intervalRefill()
	case v.Kind == engine.KindFixedWindow:
		return fixedWindow(v)
	case v.Kind == engine.KindSlidingLog:
		return slidingLog()
	case v.Kind == engine.KindConcurrency:
		return leases()
	default:
		return slidingCounter()
	}
}

// meter is Params.stepMeter: the leaky bucket, and the token bucket with
// continuous refill. The state is the point (t0, a0); the request moves
// it to (t1, a1), from which the level at now and the time until empty
// follow for every verb (where Go computes them otherwise, for an
// admission, it gets the same).
func meter() algorithm {
	return algorithm{
		source: "meter (sql.go), from engine.Params.stepMeter (engine/bucket.go)",
		steps: []string{
			givesBack("booked_at") + " AS gives_back, a0 + cost - lim AS excess, " + drain("a0") + " AS drained",
			"t0 + " + span("excess") + " AS fit_kind",
			notBefore("fit_kind"),
			// A fill-up may cost more than the capacity: that never fits.
			fitsOrBooks("verb <> " + verbCancel + " AND cost <= lim AND now >= fit_at"),
			`CASE WHEN verb = ` + verbCancel + ` THEN gives_back ELSE fits OR books END AS ok,
			verb = ` + verbFill + ` OR fits OR books AS moves,
			greatest(t0, CASE WHEN books THEN fit_at ELSE now END) AS moved_to`,
			// The point moves to the later of the old one and the instant
			// recorded; before the old one, the cost adds to its level.
			"CASE WHEN moves THEN " + levelAt("t0", "a0", "moved_to", "drained") + " END AS level_then",
			// Given back a nanosecond late, the point moves to the next
			// nanosecond.
			`CASE WHEN moves THEN moved_to WHEN gives_back THEN booked_at + 1 ELSE t0 END AS t1,
			CASE WHEN moves THEN ` + fill("level_then") + ` WHEN gives_back THEN greatest(a0 - cost, 0) ELSE a0 END AS a1`,
			drain("a1") + " AS drained1, " + levelAt("t1", "a1", "now", drain("a1")) + " AS level",
		},
		allowed: "ok",
		used:    "level",
		retry:   retryAfter(verbFill, verbCancel),
		// emptyAfter
		reset: "CASE WHEN t1 > now THEN " + after("t1 + drained1") + " ELSE " + after("now + "+drain("level")) + " END",
		books: true,
		at:    "fit_at",
		time:  "t1", a: "a1", b: "0", logTimes: noLog, logCosts: noCosts,
		fill:   fillNow(meterFull),
		full:   meterFull,
		settle: meterSettle,
	}
}

// meterFull is the meter's fullAt. Full at at: the level's line through
// (at, limit), kept at the point if that lies after at and the line is
// higher there; never lower than the level. A point at or before at is
// replaced, and B with it. (Go replaces the whole State, its block's end
// too, which its callers then set again.)
func meterFull(at string) ([]string, [3]string) {
	replaced := "t0 <= " + at
	return []string{drain("a0") + " AS drained"}, [3]string{
		"CASE WHEN " + replaced + " THEN " + at + " ELSE t0 END",
		"CASE WHEN " + replaced + " THEN greatest(" + levelAt("t0", "a0", at, "drained") + ", lim) ELSE greatest(a0, " + levelAt(at, "lim", "t0", drain("lim")) + ") END",
		"CASE WHEN " + replaced + " THEN 0::float8 ELSE b0 END",
	}
}

// gcra is Params.stepGCRA, with the DecideTAT it calls for an Allow or
// a check. tau is the burst in nanoseconds and cn the
// cost in nanoseconds, both rounded by Params.gcraNanos. The state's A
// (a0) is the emission interval its TAT (t0) was computed with, zero in a
// state written before intervals were recorded.
func gcra() algorithm {
	return algorithm{
		source: "gcra (sql.go), from engine.Params.stepGCRA (engine/gcra.go)",
		// stepGCRA's test that the TAT, computed with another interval,
		// is carried over to iv, and Params.carriedTAT: the cost the TAT
		// holds, (t0 - now) / a0 units, in nanoseconds at iv (backlog),
		// at most maxSpan ahead; its interval, iv. Params.Carries: by any
		// verb but a check.
		carry: func(t0, a0, now string) (string, string, string) {
			carrying := fmt.Sprintf("%[2]s <> ivf AND %[2]s <> 0 AND %[1]s > %[3]s", t0, a0, now)
			backlog := fmt.Sprintf("(%[1]s - %[3]s)::float8 / %[2]s * ivf", t0, a0, now)
			return fmt.Sprintf("CASE WHEN %s THEN %s + %s ELSE %s END", carrying, now, roundSpan(backlog), t0),
				fmt.Sprintf("CASE WHEN %[1]s THEN ivf ELSE %[2]s END", carrying, a0),
				carrying + " AND op_verb <> " + verbCheck
		},
		steps: []string{
			`greatest(t0, now) AS tat0, ` + givesBack("booked_at + tau") + ` AS gives_back,
			greatest(t0, now) + cn - tau AS fit_kind`,
			// Booked no earlier than booked_at, as an arrival then.
			notBefore("fit_kind") + `,
			CASE WHEN verb = ` + verbReserve + ` AND booked_at > greatest(fit_kind, now) THEN greatest(t0, booked_at) ELSE tat0 END + cn AS next`,
			// Booked for fit_at, which it then owns: the next booking's
			// instant comes c*T after it.
			fitsOrBooks("verb <> " + verbCancel + " AND now >= fit_at"),
			`fits OR books OR gives_back AS ok,
			CASE WHEN gives_back THEN greatest(t0 - (cn - 1), now) WHEN fits OR books THEN next ELSE tat0 END AS tat`,
		},
		allowed: "ok",
		used:    "(tat - now)::float8 / ivf",
		// Remaining from the nanosecond arithmetic, as in Go.
		remaining: func(used string) string {
			return fmt.Sprintf("CASE WHEN lim - %[1]s > 0 THEN least((tau - (tat - now))::float8 / ivf, lim) ELSE lim - %[1]s END", used)
		},
		retry: retryAfter(verbCancel),
		reset: after("tat"),
		books: true,
		// Booked later than the GCRA needed, the TAT is not the instant
		// plus the tolerance: the booking cannot be given back.
		at:     "CASE WHEN later THEN 0 ELSE fit_at END",
		fill:   fillNow(gcraFull),
		full:   gcraFull,
		settle: gcraSettle,
		// A cancel gives back its cost less a nanosecond. Its TAT, t0 - (cn
		// - 1), is tat unless it is in the past, when the key is fresh
		// again. The state written by an admission, a booking or a cancel
		// that gives back records iv; so does one carried, whose TAT, t0,
		// is tat unless it is in the past. A GCRA takes no fill-up, the
		// only decision that records without admitting. B is no part of
		// a GCRA's state: zero in every state a store holds.
		time: "tat", a: "ivf", b: "0", logTimes: noLog, logCosts: noCosts,
	}
}

// gcraFull is the GCRA's fullAt. Full at at: a TAT a burst after it,
// never earlier, at iv.
func gcraFull(at string) ([]string, [3]string) {
	return nil, [3]string{"greatest(t0, " + at + " + tau)", "ivf", "0"}
}

// intervalRefill is Params.stepIntervalRefill: the token bucket whose
// tokens arrive once per whole interval. The state is the point (t0, a0),
// or the one a cancel moves it to, (t_in, a_in), seen at now as (pt_used,
// pt_last).
func intervalRefill() algorithm {
	return algorithm{
		source: "intervalRefill (sql.go), from engine.Params.stepIntervalRefill (engine/tokenbucket.go)",
		steps: slices.Concat(
			[]string{
				// Given back a nanosecond late, the point moves to a
				// nanosecond after the refill before it, the tokens its own
				// refill brings still in use.
				givesBack("booked_at") + ` AS gives_back,
				CASE WHEN ` + givesBack("booked_at") + ` THEN booked_at - iv + 1 ELSE t0 END AS t_in,
				CASE WHEN ` + givesBack("booked_at") + ` THEN greatest(a0 - cost, 0) + am ELSE a0 END AS a_in`,
			},
			refillPoint("pt", "t_in", "a_in", "now"),
			[]string{
				"pt_last + " + refillsTo("(pt_used + cost - lim)") + " * iv AS fit_kind",
				notBefore("fit_kind"),
				fitsOrBooks("verb <> " + verbCancel + " AND now >= fit_at"),
				`CASE WHEN verb = ` + verbCancel + ` THEN gives_back ELSE fits OR books END AS ok,
				fits OR books AS takes,
				CASE WHEN books THEN fit_at ELSE now END AS taken_at`,
			},
			// The point advances to the instant recorded, unless that
			// lies before it.
			refillPoint("tk", "pt_last", "pt_used", "taken_at"),
			[]string{
				`CASE WHEN NOT takes THEN pt_used WHEN taken_at >= pt_last THEN ` + fill("tk_used") + ` ELSE ` + fill("pt_used") + ` END AS used,
				CASE WHEN takes AND taken_at >= pt_last THEN tk_last ELSE pt_last END AS last`,
			},
		),
		allowed: "ok",
		// usedAt
		used:  "CASE WHEN last <= now THEN used ELSE used + ((last - now + iv - 1) / iv)::float8 * am END",
		retry: retryAfter(verbCancel),
		reset: after("last + " + refills("used") + " * iv"),
		books: true,
		// Booked between refills, its point lies before its instant: the
		// booking cannot be given back.
		at: "CASE WHEN later THEN 0 ELSE fit_at END",
		// Admitting nothing into a full bucket leaves the state as it was,
		// unless its point lies after now; a cancel leaves the point it
		// moved to.
		time:     "CASE WHEN takes AND (used > 0 OR last > now) THEN last ELSE t_in END",
		a:        "CASE WHEN takes AND (used > 0 OR last > now) THEN used ELSE a_in END",
		b:        "CASE WHEN takes AND (used > 0 OR last > now) THEN 0 ELSE b0 END",
		logTimes: noLog, logCosts: noCosts,
		fill:   fillNow(intervalRefillFull),
		full:   intervalRefillFull,
		settle: intervalRefillSettle,
	}
}

// intervalRefillFull is the interval-refill token bucket's fullAt. Every
// token in use at at: at the point seen at at (pt_used, pt_last, as the
// bucket's steps see it at now), or, after at, as many as the refills
// before it leave room for; never fewer than are. A point seen at or
// before at is replaced, and B with it. (Go replaces the whole State, its
// block's end too, which its callers then set again.)
func intervalRefillFull(at string) ([]string, [3]string) {
	replaced := "pt_last <= " + at
	return refillPoint("pt", "t0", "a0", at), [3]string{
		"pt_last",
		"CASE WHEN " + replaced + " THEN greatest(pt_used, lim) ELSE greatest(pt_used, lim - ((pt_last - " + at + " + iv - 1) / iv)::float8 * am) END",
		"CASE WHEN " + replaced + " THEN 0::float8 ELSE b0 END",
	}
}

// fixedWindow is Params.stepFixedWindow, with windows aligned to the
// epoch or anchored at a key's first request, and its calendar branch,
// Params.stepCalendarWindow. Each counts in the window from start to end:
// the aligned and anchored windows keep its start in the state's time,
// the calendar window its end.
func fixedWindow(v sqlfile.Variant) algorithm {
	// ws: alignedStart of now; ts: of the stored start, which a window
	// counted under another length may not align (Go aligns it only when
	// it is not ws, which is aligned: the same).
	window := []string{
		floorDiv("now", "iv") + " * iv AS ws, " + floorDiv("t0", "iv") + " * iv AS ts",
		"greatest(ws, ts) AS start, CASE WHEN ws > ts THEN 0::float8 ELSE a0 END AS count0",
	}
	source, time, end := "stepFixedWindow", "start", "start + iv"
	switch {
	case v.Anchored:
		window = []string{
			"a0 <= 0 OR now - t0 >= iv AS opens",
			"CASE WHEN opens THEN greatest(now, t0) ELSE t0 END AS start, CASE WHEN opens THEN 0::float8 ELSE a0 END AS count0",
		}
	case v.Calendar:
		window = []string{
			// ws, we: Params.window, the calendar window holding now, one
			// of [w0, w1), [w1, w2) and [w2, w3), the boundaries the
			// caller gave (Params.Windows), in which now lies.
			`CASE WHEN now < w1 THEN w0 WHEN now < w2 THEN w1 ELSE w2 END AS ws,
			CASE WHEN now < w1 THEN w1 WHEN now < w2 THEN w2 ELSE w3 END AS we`,
			// t0 is the end of the window the state counted in. count0:
			// none if that window ended by ws (an earlier window's count,
			// or none); otherwise a0, counted in now's window or in a later
			// one (a clock that stepped back), whose end, t0, is kept:
			// ends_at is the end of the window counted in.
			`CASE WHEN t0 <= ws THEN 0::float8 ELSE a0 END AS count0,
			CASE WHEN t0 > we THEN t0 ELSE we END AS ends_at`,
		}
		source, time, end = "stepCalendarWindow", "ends_at", "ends_at"
	}
	return algorithm{
		source: "fixedWindow (sql.go), from engine.Params." + source + " (engine/fixedwindow.go)",
		steps: append(window,
			"count0 + cost - lim <= slack AS ok",
			"CASE WHEN ok THEN "+fill("count0")+" ELSE count0 END AS count1",
		),
		allowed: "ok",
		used:    "count1",
		retry:   "CASE WHEN ok THEN 0 ELSE " + after(end) + " END",
		reset:   "CASE WHEN count1 > 0 THEN " + after(end) + " ELSE 0 END",
		time:    time, a: "count1", b: "0", logTimes: noLog, logCosts: noCosts,
		// An Allow of the room left, rem, which fits.
		fill: func(rem string) [5]string {
			fits := "(" + rem + " > 0 AND count0 + " + rem + " - lim <= slack)"
			return [5]string{
				"CASE WHEN " + fits + " THEN " + time + " ELSE t0 END",
				"CASE WHEN NOT " + fits + " THEN a0 WHEN count0 + " + rem + " >= full_at THEN lim ELSE count0 + " + rem + " END",
				"CASE WHEN " + fits + " THEN 0::float8 ELSE b0 END",
				noLog, noCosts,
			}
		},
	}
}

// slidingCounter is Params.stepSlidingCounter, with counterWindow as the
// columns start, cur0 and prev, and counterAdmitAt as the column
// admit_at.
func slidingCounter() algorithm {
	return algorithm{
		source: "slidingCounter (sql.go), from engine.Params.stepSlidingCounter (engine/slidingwindow.go)",
		steps: []string{
			// ws: the window of now; ts: alignedStart of the stored start,
			// which a window counted under another length may not align
			// (Go aligns it only when it is not ws, which is aligned: the
			// same).
			floorDiv("now", "iv") + " * iv AS ws, " + floorDiv("t0", "iv") + " * iv AS ts",
			"ws > ts AS turns",
			`CASE WHEN turns THEN ws ELSE ts END AS start,
			CASE WHEN turns THEN 0::float8 ELSE a0 END AS cur0,
			CASE WHEN NOT turns THEN b0 WHEN ws - ts = iv THEN a0 ELSE 0::float8 END AS prev`,
			// r: the previous window's weight at which the cost fits in
			// this window; r_next: the same in the next window.
			`greatest(now - start, 0) AS elapsed,
			cur0 + cost - lim <= slack AS fits_now,
			CASE WHEN prev > 0 THEN greatest((lim - cur0 - cost) / prev, 0) END AS r,
			CASE WHEN cur0 > 0 THEN (lim - cost) / cur0 END AS r_next`,
			`cur0 + prev * (iv - elapsed)::float8 / ivf AS estimate0,
			CASE WHEN NOT fits_now THEN start + iv + ` + ceilNanos("ivf * (1 - r_next)") + `
				WHEN prev <= 0 OR r >= 1 THEN start
				ELSE start + ` + ceilNanos("ivf * (1 - r)") + ` END AS admit_at`,
			"start + elapsed >= admit_at AS ok",
			`CASE WHEN ok THEN estimate0 + cost ELSE estimate0 END AS estimate,
			CASE WHEN ok THEN cur0 + cost ELSE cur0 END AS cur`,
		},
		allowed: "ok",
		used:    "estimate",
		retry:   "CASE WHEN ok THEN 0 ELSE " + after("admit_at") + " END",
		reset:   "CASE WHEN cur > 0 THEN " + after("start + 2 * iv") + " WHEN prev > 0 THEN " + after("start + iv") + " ELSE 0 END",
		time:    "start", a: "cur", b: "prev", logTimes: noLog, logCosts: noCosts,
		// The room left, rem, counted in the window of now.
		fill: func(rem string) [5]string {
			return [5]string{
				"CASE WHEN " + rem + " > 0 THEN start ELSE t0 END",
				"CASE WHEN " + rem + " > 0 THEN cur0 + " + rem + " ELSE a0 END",
				"CASE WHEN " + rem + " > 0 THEN prev ELSE b0 END",
				noLog, noCosts,
			}
		},
	}
}

// slidingLog is Params.stepSlidingLog and Params.record. The log is two
// arrays, of times and of costs, oldest first.
func slidingLog() algorithm {
	return algorithm{
		source: "slidingLog (sql.go), from engine.Params.stepSlidingLog (engine/slidingwindow.go)",
		steps: []string{
			// The live entries follow the leading ones that left the window.
			`cardinality(lt) AS n0,
			coalesce((SELECT min(e.i) FROM unnest(lt) WITH ORDINALITY AS e(t, i) WHERE e.t + iv > now), cardinality(lt) + 1)::int4 AS first_live`,
			"lt[first_live:n0] AS live_t, lc[first_live:n0] AS live_c, n0 - first_live + 1 AS n",
			// The sum in the log's order, as Go adds.
			`coalesce((SELECT sum(e.c ORDER BY e.i) FROM unnest(live_c) WITH ORDINALITY AS e(c, i)), 0) AS total0,
			live_t[n] AS newest0`,
			"total0 + cost - lim AS excess",
			"excess <= slack AS ok, excess <= slack AND cost > 0 AS grows",
			// Denied: admitted once the oldest entries whose costs, taken
			// off the excess one by one, bring it within the slack have
			// left the window. The running sum of (excess, -cost1,
			// -cost2, ...) subtracts in Go's order.
			"CASE WHEN ok THEN " + fill("total0") + ` ELSE total0 END AS total,
			CASE WHEN ok THEN 0 ELSE coalesce((SELECT ` + after("r.t + iv") + ` FROM (
				SELECT e.t, e.i, sum(e.v) OVER (ORDER BY e.i ROWS UNBOUNDED PRECEDING) AS run FROM (
					SELECT NULL::int8, 0::int8, excess
					UNION ALL SELECT u.t, u.i, -u.c FROM unnest(live_t, live_c) WITH ORDINALITY AS u(t, c, i)
				) AS e(t, i, v)) AS r
				WHERE r.i > 0 AND r.run <= slack ORDER BY r.i LIMIT 1), 0) END AS retry`,
			// The newest entry after the request, and the time record
			// gives a new one: never earlier than the newest, so that the
			// log stays sorted when the clock steps back.
			`CASE WHEN grows AND (n = 0 OR now > newest0) THEN now ELSE newest0 END AS newest,
			n > 0 OR grows AS nonempty,
			CASE WHEN n > 0 THEN greatest(now, newest0) ELSE now END AS entry_t`,
		},
		allowed: "ok",
		used:    "total",
		retry:   "retry",
		reset:   "CASE WHEN nonempty THEN " + after("newest + iv") + " ELSE 0 END",
		time:    "t0", a: "a0", b: "b0",
		// A full log merges the cost into its newest entry.
		logTimes: `CASE WHEN NOT grows THEN lt
			WHEN n > 0 AND n >= maxe THEN live_t[1:n - 1] || entry_t
			ELSE live_t || entry_t END`,
		logCosts: `CASE WHEN NOT grows THEN lc
			WHEN n > 0 AND n >= maxe THEN live_c[1:n - 1] || (live_c[n] + cost)
			ELSE live_c || cost END`,
		// An Allow of the room left, rem, which fits: recorded as the
		// request's cost would be.
		fill: func(rem string) [5]string {
			grows := "(" + rem + " > 0 AND total0 + " + rem + " - lim <= slack)"
			return [5]string{"t0", "a0", "b0",
				`CASE WHEN NOT ` + grows + ` THEN lt
				WHEN n > 0 AND n >= maxe THEN live_t[1:n - 1] || entry_t
				ELSE live_t || entry_t END`,
				`CASE WHEN NOT ` + grows + ` THEN lc
				WHEN n > 0 AND n >= maxe THEN live_c[1:n - 1] || (live_c[n] + ` + rem + `)
				ELSE live_c || ` + rem + ` END`,
			}
		},
	}
}

// leases is Params.stepLeases, the concurrency limit, with splitLeases,
// place, waiting, leaseAt and leaseSum. The log's two arrays hold the
// leases, earliest expiry first (a lease's time is its expiry, its cost
// what it holds), and then the line of waiters, first come first (a
// waiter's time is its deadline, its cost minus its ticket). t0 is the
// latest expiry the key handed out, its mark; a0 the latest ticket. A
// release (VerbCancel) and an extension (VerbExtend) name a lease by its
// expiry, booked_at (Op.At); an acquisition (VerbAllow), a check
// (VerbCheck) and a leaving (VerbLeave) name a waiter by its ticket,
// booked_at too (0 for none); max_delay is an acquisition's patience.
//
// A statement's time goes mostly to setting up its expressions, each
// operator, subscript and subquery, whether it runs or not: the steps are
// few, and compute each value once, and the upsert's chain for a new key's
// row, which it runs on every request, has steps of its own (fresh). The
// line is most often empty: the steps then run none of the subqueries that
// look through it (place, waiting), nor those that look through the leases
// where the log's first or last entry answers.
func leases() algorithm {
	// named is Go's case VerbCancel, VerbExtend: an op naming a lease.
	named := "verb IN (" + verbCancel + ", " + verbExtend + ")"
	// acquires is Go's default case: VerbAllow and VerbCheck.
	acquires := "verb IN (" + verbAllow + ", " + verbCheck + ")"
	// log is the log as the op found it, each entry e(t, c, i): its
	// time, its cost and its index, from 1. The line is its entries of a
	// cost below zero (a lease's is above zero): a waiter's deadline,
	// minus its ticket, and its place in the log.
	const log = "unnest(lt, lc) WITH ORDINALITY AS e(t, c, i)"
	// isAhead is, over the waiters still waiting, place's test that one
	// is ahead of the op's: before its place, or anywhere if it has none.
	const isAhead = "mine_at IS NULL OR e.i < mine_at"
	// stays is, over log, waiting's test that a waiter stays in line:
	// its deadline has not passed, and it does not leave now (its ticket
	// is not out_ticket).
	const stays = "e.c < 0 AND e.t > now AND -e.c <> out_ticket::float8"
	return algorithm{
		source: "leases (sql.go), from engine.Params.stepLeases (engine/leases.go)",
		steps: []string{
			// split: splitLeases, and Go's held, in one pass over the log.
			// split[1]: the leases are the log's entries up to the last of
			// a cost not below zero; the line is the rest. split[2]: held
			// is the leases after the leading ones that expired, from the
			// first entry that is a live lease or a waiter on (the leases
			// come first); past the log's end for none. A log that is
			// empty, or ends with a lease and starts with a live one (the
			// most common), needs no pass. ticket: the ticket the op
			// names, which place and waiting look for; none (0) for an op
			// naming a lease.
			`CASE WHEN coalesce(lc[cardinality(lc)] >= 0 AND lt[1] > now, true) THEN ARRAY[cardinality(lc), 1]
				ELSE (SELECT ARRAY[coalesce(max(e.i) FILTER (WHERE e.c >= 0), 0), coalesce(min(e.i) FILTER (WHERE e.t > now OR e.c < 0), cardinality(lt) + 1)]::int4[]
					FROM ` + log + `) END AS split,
			CASE WHEN ` + named + ` THEN 0::int8 ELSE booked_at END AS ticket`,
			// live: Go's held. has_line: whether the log holds a line.
			// mine_at: place, the op's place in the log, that of the
			// waiter with its ticket (a line hands a ticket out once, and
			// a ticket is above zero) if it is still waiting; NULL for
			// none (Go's mine is false).
			`lt[split[2]:split[1]] AS live_t, lc[split[2]:split[1]] AS live_c,
			split[1] < cardinality(lc) AS has_line,
			CASE WHEN lt[array_position(lc, -ticket::float8)] > now THEN array_position(lc, -ticket::float8) END AS mine_at`,
			// lease_i: leaseAt, the index in live of the lease that an op
			// naming one names, NULL for none (Go's i < 0). The live
			// leases' cost, and over_entries, Go's over: how many leases
			// are to expire before one more is live (-1 for a cost of
			// zero, which takes none). place, in one pass over the line
			// (none over an empty one): place[1], how many waiters are
			// ahead of the op, and place[2], the earliest of their
			// deadlines (0 for none); place[3], the latest deadline of the
			// waiters still waiting but the op's (NULL for none).
			`CASE WHEN ` + named + ` THEN array_position(live_t, booked_at) END AS lease_i,
			` + leaseSum("live_c") + ` AS live_sum,
			CASE WHEN cost = 0 THEN -1 ELSE cardinality(live_t) - maxe END AS over_entries,
			mine_at IS NOT NULL AS mine,
			CASE WHEN has_line THEN (SELECT ARRAY[count(*) FILTER (WHERE ` + isAhead + `), coalesce(min(e.t) FILTER (WHERE ` + isAhead + `), 0),
				max(e.t) FILTER (WHERE e.i IS DISTINCT FROM mine_at)] FROM ` + log + ` WHERE e.c < 0 AND e.t > now) ELSE '{0, 0, NULL}'::int8[] END AS place`,
			// excess: Go's x. ahead: place[1]. room: the leases alone
			// admit the cost. An acquisition is admitted if no waiter is
			// ahead of it too; a leaving is allowed if its ticket waits.
			// tickets: those handed out, none once the key is fresh again
			// (its mark has passed and no waiter waits: neither the op's
			// nor any ahead of it, every one if it has no place).
			`live_sum + cost - lim AS excess,
			place[1] AS ahead,
			CASE WHEN t0 <= now AND NOT mine AND place[1] = 0 THEN 0::float8 ELSE a0 END AS tickets,
			live_sum + cost - lim <= slack AND over_entries < 0 AS room,
			CASE WHEN ` + named + ` THEN lease_i IS NOT NULL WHEN verb = ` + verbLeave + ` THEN mine
				ELSE live_sum + cost - lim <= slack AND over_entries < 0 AND place[1] = 0 END AS ok`,
			// mark: the mark moves to the expiry handed out: an
			// extension's, an admitted cost's (a check's too, whose
			// ResetAfter counts to it). adds: whether the op adds a lease,
			// at the mark, an extension's or an admission's. leases: the
			// live leases but the one released or extended (kept in Go),
			// or all of them. A denied VerbAllow with a patience
			// waits: it keeps its place (waits), or joins the line with
			// the next ticket (joins) while fewer than maxe wait and
			// tickets up to 2^53 last. out_ticket: Go's gone, the ticket
			// that leaves the line, an admitted acquisition's (a check's,
			// as the acquisition would) or a leaving's (0 for none).
			`CASE WHEN ok AND (verb = ` + verbExtend + ` OR ` + acquires + ` AND cost > 0) THEN greatest(now + iv, t0 + 1) ELSE t0 END AS mark,
			ok AND (verb = ` + verbExtend + ` OR verb = ` + verbAllow + ` AND cost > 0) AS adds,
			CASE WHEN ` + named + ` AND ok THEN live_t[:lease_i - 1] || live_t[lease_i + 1:] ELSE live_t END AS leases_t,
			CASE WHEN ` + named + ` AND ok THEN live_c[:lease_i - 1] || live_c[lease_i + 1:] ELSE live_c END AS leases_c,
			NOT ok AND verb = ` + verbAllow + ` AND max_delay > 0 AND mine AS waits,
			NOT ok AND verb = ` + verbAllow + ` AND max_delay > 0 AND NOT mine AND ahead < maxe AND tickets < ` + maxTicket + ` AS joins,
			CASE WHEN ok AND verb IN (` + verbAllow + `, ` + verbCheck + `, ` + verbLeave + `) THEN ticket ELSE 0::int8 END AS out_ticket`,
			// waiting: the waiters still waiting, in order, but the one
			// that leaves; the one that waits on with its new deadline
			// (none without a line).
			`CASE WHEN has_line THEN ARRAY(SELECT CASE WHEN waits AND -e.c = ticket::float8 THEN now + max_delay ELSE e.t END
				FROM ` + log + ` WHERE ` + stays + ` ORDER BY e.i) ELSE '{}'::int8[] END AS wait_t,
			CASE WHEN has_line THEN ARRAY(SELECT e.c FROM ` + log + ` WHERE ` + stays + ` ORDER BY e.i) ELSE '{}'::float8[] END AS wait_c`,
			// The log (s.Log) when the op records: the leases, and the one
			// it adds last (an extended lease at its new expiry, with its
			// cost; an admission's), then the line, where a waiter that
			// joins comes last; as it was for an admission of no cost
			// that did not wait in line. The sum: of the leases left after
			// a release or an extension (of the live ones if it named
			// none), kept's and then the extended lease's, as Go adds
			// them; of the live ones and the cost admitted, by fill. Denied, an
			// acquisition is admitted once enough of the earliest leases
			// have expired, and at least over_entries + 1 of them (the
			// running sum of (excess - cost1, -cost2, ...) subtracts in
			// Go's order, and lease i is Go's held[i - 1]), and once the
			// first of the waiters ahead could have left. The key is fresh
			// again once its mark and the deadlines of the line as the op
			// leaves it have passed (a check's, as the acquisition would):
			// the others' still waiting, a waiter's that waits on or
			// joins, the op's own if it neither leaves nor waits on
			// (greatest ignores NULLs).
			`CASE WHEN adds THEN leases_t || mark || wait_t WHEN joins THEN leases_t || wait_t || (now + max_delay)
				WHEN verb = ` + verbAllow + ` AND ok AND NOT mine THEN lt ELSE leases_t || wait_t END AS log_t,
			CASE WHEN adds THEN leases_c || CASE WHEN verb = ` + verbExtend + ` THEN live_c[lease_i] ELSE cost END || wait_c
				WHEN joins THEN leases_c || wait_c || -(tickets + 1) WHEN verb = ` + verbAllow + ` AND ok AND NOT mine THEN lc
				ELSE leases_c || wait_c END AS log_c,
			CASE WHEN NOT ok THEN live_sum WHEN ` + named + ` THEN ` + leaseSum("leases_c") + ` + CASE WHEN verb = ` + verbExtend + ` THEN live_c[lease_i] ELSE 0 END
				WHEN ` + acquires + ` THEN ` + fill("live_sum") + ` ELSE live_sum END AS used,
			CASE WHEN ok OR NOT (` + acquires + `) THEN 0 ELSE ` + after(`greatest(place[2], CASE WHEN room THEN 0 ELSE coalesce((SELECT r.t FROM (
				SELECT e.t, e.i, sum(CASE WHEN e.i = 1 THEN excess - e.c ELSE -e.c END) OVER (ORDER BY e.i ROWS UNBOUNDED PRECEDING) AS run
				FROM unnest(live_t, live_c) WITH ORDINALITY AS e(t, c, i)) AS r
				WHERE r.i - 1 >= over_entries AND r.run <= slack ORDER BY r.i LIMIT 1), 0) END)`) + ` END AS retry,
			greatest(mark, CASE WHEN joins OR waits THEN now + max_delay END, place[3],
				CASE WHEN mine AND out_ticket = 0 AND NOT waits THEN lt[mine_at] END) AS fresh_at`,
		},
		// The steps from the fresh state: no lease and no line, the mark
		// and the tickets handed out zero, so that tickets is zero, no
		// waiter is ahead and none is the op's (mine, waits); Go's sum is
		// 0 and its over -MaxEntries (-1 for a cost of zero). Nothing to
		// release, extend or leave: ok admits an acquisition alone; mark,
		// adds, joins, used and retry are as above with no lease and no
		// line (retry is after(0)). The log: the lease added, or the
		// waiter that joins, with the first ticket; the key is fresh
		// again after the mark and that waiter's deadline.
		fresh: []string{
			`0::float8 AS tickets, false AS mine, false AS waits, 0::int8 AS ticket,
			NOT (` + named + ` OR verb = ` + verbLeave + `) AND 0::float8 + cost - lim <= slack AND (cost = 0 OR maxe > 0) AS ok`,
			`CASE WHEN ok AND ` + acquires + ` AND cost > 0 THEN greatest(now + iv, 1) ELSE 0::int8 END AS mark,
			ok AND verb = ` + verbAllow + ` AND cost > 0 AS adds,
			NOT ok AND verb = ` + verbAllow + ` AND max_delay > 0 AND maxe > 0 AS joins,
			CASE WHEN ok AND ` + acquires + ` THEN ` + fill("0::float8") + ` ELSE 0::float8 END AS used,
			CASE WHEN ok OR NOT (` + acquires + `) THEN 0 ELSE ` + after("0::int8") + ` END AS retry`,
			`CASE WHEN adds THEN ARRAY[mark] WHEN joins THEN ARRAY[now + max_delay] ELSE '{}'::int8[] END AS log_t,
			CASE WHEN adds THEN ARRAY[cost] WHEN joins THEN ARRAY[-(tickets + 1)] ELSE '{}'::float8[] END AS log_c,
			greatest(mark, CASE WHEN joins THEN now + max_delay END) AS fresh_at`,
		},
		allowed: "ok",
		used:    "used",
		retry:   "retry",
		reset:   after("fresh_at"),
		// The lease's identity: an acquisition's new lease, an extended
		// one's new expiry; a check takes none. A waiter's ticket: its
		// own, or the next.
		at: "CASE WHEN adds THEN mark WHEN waits THEN ticket WHEN joins THEN (tickets + 1)::int8 ELSE 0 END",
		// Params.Records: a leaving that was allowed, and a denied
		// acquisition that waits in line (its Decision.At is its ticket).
		records: func(prefix string) string {
			return "verb = " + verbLeave + " AND " + prefix + "allowed OR verb = " + verbAllow + " AND " + prefix + "at <> 0"
		},
		// The latest ticket: the next one, handed out; those handed out,
		// after an admission that writes the log (none if the key was
		// fresh again).
		time: "mark", b: "b0", logTimes: "log_t", logCosts: "log_c",
		a: "CASE WHEN joins THEN tickets + 1 WHEN verb = " + verbAllow + " AND ok AND (cost > 0 OR mine) THEN tickets ELSE a0 END",
	}
}

// leaseSum is the engine's leaseSum: the costs in the float8 array costs
// added in their order, from zero, as Go adds them. Zero or one lease, the
// most common, needs no subquery: the sum of one cost is that cost, which
// is above zero (0 + c is c).
func leaseSum(costs string) string {
	return "(CASE cardinality(" + costs + ") WHEN 0 THEN 0::float8 WHEN 1 THEN " + costs + "[1]" +
		" ELSE (SELECT sum(e.c ORDER BY e.i) FROM unnest(" + costs + ") WITH ORDINALITY AS e(c, i)) END)"
}
