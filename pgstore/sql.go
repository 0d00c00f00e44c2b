package pgstore

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/sluice-go/sluice"
	"github.com/sluice-go/sluice/internal/arith"
)

// This file translates the algorithms of package sluice (Params.Step, the
// specification) into SQL.
//
// An algorithm is a chain of steps, one per group of Go variables. Each
// step is a derived table that selects everything of the step inside it
// and adds its own columns, computed from those: the innermost holds the
// parameters (see params) and the old state (now, t0, a0, b0, lt, lc).
// OFFSET 0 keeps the planner from merging the steps, which would copy each
// expression into every expression that uses it (the statements would take
// milliseconds to plan and run), and from folding a fresh state's
// constants into branches that are never taken, whose divisions by zero it
// would evaluate. Column names are unique along a chain.
//
// Every float operation is the Go code's, on the same operands in the same
// order, so that PostgreSQL's float8 arithmetic (IEEE doubles, like
// float64) gives the same bits. Integer nanoseconds are bigint. Values
// that depend only on the parameters and the cost (GCRA's c*T and
// burst*T, rounded by math.Round, and the slack) are computed in Go by the
// specification's own arithmetic and passed in. Divisions sit inside the
// CASE branch that the Go code guards them with: PostgreSQL raises an
// error where Go would divide by zero.

// algorithm is one algorithm's step in SQL.
type algorithm struct {
	steps   []string // each step's columns: "expression AS name, ..."
	allowed string   // whether the cost fits
	used    string   // the allowance in use, before describe's clamp
	retry   string   // RetryAfter in nanoseconds
	reset   string   // ResetAfter in nanoseconds
	// remaining is Remaining given the clamped Used; nil is Limit - Used.
	remaining func(used string) string
	// The state the step returns for a recorded request.
	time, a, b, logTimes, logCosts string
}

// The verbs as the parameter verb carries them.
var (
	verbAllow = strconv.Itoa(int(sluice.VerbAllow))
	verbFill  = strconv.Itoa(int(sluice.VerbFill))
)

var (
	// sqlTolerance is sluice's relative float slack, written so that
	// float8 input reads back the same double.
	sqlTolerance = "'" + strconv.FormatFloat(arith.Tolerance, 'g', -1, 64) + "'::float8"
	// maxSpan is sluice's bound on computed durations.
	maxSpan = strconv.FormatInt(arith.MaxSpan, 10)
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

// drain is Params.drain: how long x units take to leak away.
func drain(x string) string {
	return fmt.Sprintf("(CASE WHEN %[1]s <= slack THEN 0::int8 ELSE %[2]s END)", x, ceilNanos("("+x+") * ivf / am"))
}

// refills is Params.refills: how many refills free x tokens.
func refills(x string) string {
	return fmt.Sprintf("(CASE WHEN %[1]s <= slack THEN 0::int8 ELSE ceil((%[1]s - slack) / am)::int8 END)", x)
}

// fill is Params.fill: level plus the cost, clamped at the limit.
func fill(level string) string {
	return fmt.Sprintf("(CASE WHEN %[1]s + cost >= full_at THEN lim ELSE %[1]s + cost END)", level)
}

// after is sluice's after: how long from now until t, never negative.
func after(t string) string { return "greatest(" + t + " - now, 0)" }

// floorDiv is arith.FloorDiv: a/b rounded toward negative infinity.
func floorDiv(a, b string) string {
	return fmt.Sprintf("(%[1]s / %[2]s - CASE WHEN %[1]s %% %[2]s < 0 THEN 1 ELSE 0 END)", a, b)
}

// algorithmFor returns the step of an algorithm variant.
func algorithmFor(v variant) algorithm {
	switch {
	case v.kind == sluice.KindLeakyBucket, v.kind == sluice.KindTokenBucket && !v.intervalRefill:
		return meter()
	case v.kind == sluice.KindGCRA:
		return gcra()
	case v.kind == sluice.KindTokenBucket:
		return intervalRefill()
	case v.kind == sluice.KindFixedWindow:
		return fixedWindow(v.anchored)
	case v.kind == sluice.KindSlidingLog:
		return slidingLog()
	default:
		return slidingCounter()
	}
}

// meter is Params.stepMeter: the leaky bucket, and the token bucket with
// continuous refill.
func meter() algorithm {
	return algorithm{
		steps: []string{
			"now - t0 AS elapsed, greatest(t0, now) AS last, " + drain("a0") + " AS drained, " + drain("a0 + cost - lim") + " AS wait",
			// leaked, and whether the cost fits.
			`CASE WHEN elapsed <= 0 THEN a0 WHEN elapsed >= drained THEN 0::float8
				ELSE greatest(a0 - elapsed::float8 * am / ivf, 0) END AS leaked,
			cost <= lim AND greatest(elapsed, 0) >= wait AS fits`,
			"CASE WHEN verb = " + verbFill + " OR fits THEN " + fill("leaked") + " ELSE leaked END AS level",
		},
		allowed: "fits",
		used:    "level",
		retry:   "CASE WHEN verb <> " + verbFill + " AND NOT fits THEN " + after("t0 + wait") + " ELSE 0 END",
		reset:   after("last + " + drain("level")),
		time:    "last", a: "level", b: "0", logTimes: noLog, logCosts: noCosts,
	}
}

// gcra is Params.stepGCRA. tau is the burst in nanoseconds and cn the
// cost in nanoseconds, both rounded by Params.gcraNanos in Go.
func gcra() algorithm {
	return algorithm{
		steps: []string{
			"greatest(t0, now) AS tat0",
			"tat0 + cn - tau AS allow_at",
			"now >= allow_at AS ok, CASE WHEN now >= allow_at THEN tat0 + cn ELSE tat0 END AS tat",
		},
		allowed: "ok",
		used:    "(tat - now)::float8 / ivf",
		// Remaining from the nanosecond arithmetic, as in Go.
		remaining: func(used string) string {
			return fmt.Sprintf("CASE WHEN lim - %[1]s > 0 THEN least((tau - (tat - now))::float8 / ivf, lim) ELSE lim - %[1]s END", used)
		},
		retry: "CASE WHEN ok THEN 0 ELSE " + after("allow_at") + " END",
		reset: after("tat"),
		time:  "tat", a: "a0", b: "b0", logTimes: noLog, logCosts: noCosts,
	}
}

// intervalRefill is Params.stepIntervalRefill: the token bucket whose
// tokens arrive once per whole interval.
func intervalRefill() algorithm {
	return algorithm{
		steps: []string{
			"a0 > 0 AND now > t0 AS due, (now - t0) / iv AS k",
			`CASE WHEN due THEN greatest(a0 - k::float8 * am, 0) ELSE a0 END AS refilled,
			CASE WHEN due THEN t0 + k * iv ELSE t0 END AS refilled_at`,
			// A full bucket's refill clock starts again now.
			`CASE WHEN refilled <= slack THEN 0::float8 ELSE refilled END AS in_use,
			CASE WHEN refilled <= slack THEN greatest(now, t0) ELSE refilled_at END AS last`,
			"in_use + cost - lim AS excess",
			"excess <= slack AS ok, CASE WHEN excess <= slack THEN " + fill("in_use") + " ELSE in_use END AS used",
		},
		allowed: "ok",
		used:    "used",
		retry:   "CASE WHEN ok THEN 0 ELSE " + after("last + "+refills("excess")+" * iv") + " END",
		reset:   after("last + " + refills("used") + " * iv"),
		// Admitting nothing into a full bucket leaves the state as it was.
		time:     "CASE WHEN used > 0 THEN last ELSE t0 END",
		a:        "CASE WHEN used > 0 THEN used ELSE a0 END",
		b:        "CASE WHEN used > 0 THEN 0 ELSE b0 END",
		logTimes: noLog, logCosts: noCosts,
	}
}

// fixedWindow is Params.stepFixedWindow, with windows aligned to the
// epoch or anchored at a key's first request.
func fixedWindow(anchored bool) algorithm {
	window := []string{
		floorDiv("now", "iv") + " * iv AS ws",
		"greatest(ws, t0) AS start, CASE WHEN ws > t0 THEN 0::float8 ELSE a0 END AS count0",
	}
	if anchored {
		window = []string{
			"a0 <= 0 OR now - t0 >= iv AS opens",
			"CASE WHEN opens THEN greatest(now, t0) ELSE t0 END AS start, CASE WHEN opens THEN 0::float8 ELSE a0 END AS count0",
		}
	}
	return algorithm{
		steps: append(window,
			"count0 + cost - lim <= slack AS ok",
			"CASE WHEN ok THEN "+fill("count0")+" ELSE count0 END AS count1",
		),
		allowed: "ok",
		used:    "count1",
		retry:   "CASE WHEN ok THEN 0 ELSE " + after("start + iv") + " END",
		reset:   "CASE WHEN count1 > 0 THEN " + after("start + iv") + " ELSE 0 END",
		time:    "start", a: "count1", b: "0", logTimes: noLog, logCosts: noCosts,
	}
}

// slidingCounter is Params.stepSlidingCounter, with counterAdmitAt as the
// column admit_at.
func slidingCounter() algorithm {
	return algorithm{
		steps: []string{
			floorDiv("now", "iv") + " * iv AS ws",
			"ws > t0 AS turns",
			`CASE WHEN turns THEN ws ELSE t0 END AS start,
			CASE WHEN turns THEN 0::float8 ELSE a0 END AS cur0,
			CASE WHEN NOT turns THEN b0 WHEN ws - t0 = iv THEN a0 ELSE 0::float8 END AS prev`,
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
	}
}

// slidingLog is Params.stepSlidingLog and Params.record. The log is two
// arrays, of times and of costs, oldest first.
func slidingLog() algorithm {
	return algorithm{
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
	}
}

// params is the CTE p holding the statement's parameters, named. Its
// order is the order of Store.args.
const params = `WITH p AS (SELECT $1::text AS key, $2::int2 AS verb, $3::float8 AS cost,
	$4::float8 AS lim, $4::float8 - $6::float8 AS full_at, $5::int8 AS iv, $5::int8::float8 AS ivf,
	$6::float8 AS slack, $7::float8 AS am, $8::int8 AS tau, $9::int8 AS cn, $10::int4 AS maxe%s)
`

// statements are the SQL texts of one algorithm variant.
type statements struct {
	apply string // VerbAllow and VerbFill: the atomic upsert
	check string // VerbCheck: a plain SELECT
}

// buildStatements writes the statements of v on the table. With
// callerClock, the time is the parameter $11, else the database's clock.
func buildStatements(table string, v variant, callerClock bool) statements {
	alg := algorithmFor(v)
	kind := strconv.Itoa(int(v.kind))
	now, cte := serverNow, fmt.Sprintf(params, "")
	if callerClock {
		now, cte = "caller_now", fmt.Sprintf(params, ", $11::int8 AS caller_now")
	}

	// The old state is the row's, unless the row holds another
	// algorithm's expired state, which is as good as absent.
	ofRow := func(col, fresh string) string {
		return fmt.Sprintf("CASE WHEN s.kind = %s THEN %s ELSE %s END", kind, col, fresh)
	}
	fromRow := fmt.Sprintf("p.*, %s AS now, %s AS t0, %s AS a0, %s AS b0, %s AS lt, %s AS lc",
		now, ofRow("s.time_ns", "0"), ofRow("s.a", "0"), ofRow("s.b", "0"),
		ofRow("coalesce(s.log_times, '{}')", "'{}'::int8[]"), ofRow("coalesce(s.log_costs, '{}')", "'{}'::float8[]"))
	fresh := fmt.Sprintf("p.*, %s AS now, 0::int8 AS t0, 0::float8 AS a0, 0::float8 AS b0, '{}'::int8[] AS lt, '{}'::float8[] AS lc", now)

	remaining := "lim - d_used"
	if alg.remaining != nil {
		remaining = alg.remaining("d_used")
	}
	steps := slices.Concat(alg.steps, []string{
		fmt.Sprintf("%s AS d_allowed, least(greatest(%s, 0), lim) AS d_used, %s AS d_retry, %s AS d_reset",
			alg.allowed, alg.used, alg.retry, alg.reset),
		fmt.Sprintf("%s AS d_remaining, verb = %s OR verb = %s AND d_allowed AS recorded", remaining, verbFill, verbAllow),
	})
	// chain nests the steps on the innermost derived table, whose columns
	// are inner and whose FROM is from.
	chain := func(inner, from string) string {
		sql := "SELECT " + inner + " FROM " + from
		for _, step := range steps {
			sql = "SELECT *,\n\t" + step + "\nFROM (" + sql + " OFFSET 0) AS x"
		}
		return "(" + sql + ") AS x"
	}

	// The row a decision writes: the state Step returns, or the zero
	// State when it is fresh again (Step's normalisation; the row then
	// stands for an absent key until Prune deletes it), or the row as it
	// was when nothing is recorded. Then the decision.
	written := func(kept [7]string) string {
		col := func(i int, recorded, freshAgain string) string {
			return fmt.Sprintf("CASE WHEN NOT recorded THEN %s WHEN d_reset > 0 THEN %s ELSE %s END", kept[i], recorded, freshAgain)
		}
		return strings.Join([]string{
			"CASE WHEN recorded THEN " + kind + " ELSE " + kept[0] + " END",
			col(1, alg.time, "0"),
			col(2, alg.a, "0"),
			col(3, alg.b, "0"),
			col(4, alg.logTimes, noLog),
			col(5, alg.logCosts, noCosts),
			col(6, "now + d_reset", minTime),
			"d_allowed, d_used, d_remaining, d_retry, d_reset",
		}, ",\n\t")
	}
	absent := [7]string{kind, "0", "0", "0", noLog, noCosts, minTime}
	asWas := [7]string{"s.kind", "s.time_ns", "s.a", "s.b", "s.log_times", "s.log_costs", "s.expires_at"}

	var st statements
	// A new key's row is computed from the fresh state. When the key
	// exists, or a concurrent statement has just inserted it, DO UPDATE
	// computes the row again from the existing one, locked: EXCLUDED
	// holds the fresh computation, which must not be used.
	//
	// PostgreSQL 15's RETURNING sees only the row as written, and the
	// decision depends on the row as it was, so the row carries the
	// decision of its latest statement (the last_* columns). For the same
	// reason a denied request writes the row back with its state as it
	// was, rather than skipping the update with DO UPDATE's WHERE, which
	// would return no row: the state is unchanged, the row gets a new
	// version. A key holding another algorithm's live state is left
	// alone: DO UPDATE's WHERE is false, and the statement returns no row.
	st.apply = cte + fmt.Sprintf(`INSERT INTO %[1]s AS s (key, %[2]s)
SELECT key,
	%[3]s
FROM %[4]s
ON CONFLICT (key) DO UPDATE SET (%[2]s) = (SELECT
	%[5]s
FROM %[6]s)
WHERE s.kind = %[7]s OR s.expires_at <= %[8]s
RETURNING %[9]s`,
		table, columns, written(absent), chain(fresh, "p"), written(asWas), chain(fromRow, "p"),
		kind, nowForWhere(callerClock), decisionColumns)

	st.check = cte + fmt.Sprintf(`SELECT d_allowed, d_used, d_remaining, d_retry, d_reset
FROM %[1]s
WHERE held_kind IS NULL OR held_kind = %[2]s OR held_expiry <= now`,
		chain("s.kind AS held_kind, s.expires_at AS held_expiry, "+fromRow,
			"p LEFT JOIN "+table+" AS s ON s.key = p.key"), kind)
	return st
}

// columns are the columns a decision writes, after the key.
const columns = "kind, time_ns, a, b, log_times, log_costs, expires_at, last_allowed, last_used, last_remaining, last_retry_after, last_reset_after"

// decisionColumns are the columns Apply reads back.
const decisionColumns = "last_allowed, last_used, last_remaining, last_retry_after, last_reset_after"

// serverNow is the database's current time in nanoseconds since the Unix
// epoch: clock_timestamp(), the time of the call, rather than now(), the
// start of the transaction. extract returns numeric, so the product is
// exact (at the microsecond resolution of timestamps).
const serverNow = "(extract(epoch FROM clock_timestamp()) * 1000000000)::int8"

func nowForWhere(callerClock bool) string {
	if callerClock {
		return "(SELECT caller_now FROM p)"
	}
	return serverNow
}
