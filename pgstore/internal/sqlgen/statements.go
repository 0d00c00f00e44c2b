package sqlgen

import (
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/sluice-go/sluice/engine"
	"github.com/sluice-go/sluice/pgstore/internal/sqlfile"
)

// This file assembles the statements of an algorithm variant from its
// translation (sql.go) and, under a penalty or with denials counted, from
// decideStrict's (strict.go).

// params is the CTE p holding the statement's parameters, named. Its
// order is the order of Store.args; paramColumns are its columns. After
// the fourteen every statement takes come, by the caller's clock, the
// time, $15 (caller_now); then, in a calendar window's statements alone,
// the four boundaries of its windows, Params.Windows (w0 to w3, see
// windowParams): $16 to $19 by the caller's clock, $15 to $18 by the
// database's.
const params = `WITH p AS (SELECT $1::text AS key, $2::int2 AS op_verb, $3::float8 AS op_cost,
	$4::float8 AS lim, $4::float8 - $6::float8 AS full_at, $5::int8 AS iv, $5::int8::float8 AS ivf,
	$6::float8 AS slack, $7::float8 AS am, $8::int8 AS tau, $9::int8 AS op_cn, $10::int4 AS maxe,
	$11::int8 AS max_delay, $12::int8 AS op_at, $13::int8 AS penalty, $14::bool AS count_denied%s)
`

var paramColumns = []string{"key", "op_verb", "op_cost", "lim", "full_at", "iv", "ivf", "slack", "am", "tau", "op_cn", "maxe",
	"max_delay", "op_at", "penalty", "count_denied"}

// windowParams are the columns of p holding a calendar window's
// boundaries, Params.Windows, from the parameter $first on, and their
// names.
func windowParams(first int) (string, []string) {
	names := []string{"w0", "w1", "w2", "w3"}
	var cols string
	for i, name := range names {
		cols += fmt.Sprintf(", $%d::int8 AS %s", first+i, name)
	}
	return cols, names
}

// requestColumns are the columns of the request a chain decides, and
// stateColumns those of the state it decides from: booked_at is Op.At (a
// cancel's booking, a reservation's earliest instant), u0 State.Until.
var (
	requestColumns = []string{"verb", "cost", "cn", "booked_at"}
	stateColumns   = []string{"now", "t0", "a0", "b0", "lt", "lc", "u0"}
)

// Statements are the SQL texts of one algorithm variant, on the table
// sqlfile.Table (and the channel sqlfile.Channel).
type Statements struct {
	// Apply decides VerbAllow, VerbFill, VerbReserve, VerbCancel and
	// VerbExtend, and the concurrency limit's VerbLeave: the atomic
	// upsert. The concurrency limit's returns one column more, after the
	// decision's: released, which notifies a release, or a waiter that
	// left its line or was served (see released).
	Apply  string
	AtMost string // VerbAtMost: the same, trying several costs; "" for a variant without it
	Check  string // VerbCheck: a plain SELECT
	// Exhaust decides VerbExhaust: the upsert of the key full until an
	// instant, described as a check would describe it; "" for a variant
	// without it (see exhaust.go).
	Exhaust string
	// Settle decides VerbCharge and VerbRefund, which its parameter of
	// the verb ($2) tells apart: the upsert of the key with the cost
	// charged or refunded, described as a check of no cost would describe
	// it, with the cost moved as Decision.Granted; "" for a variant
	// without it (see settle.go).
	Settle string
}

// A decider is the chain of steps deciding one request (Params.decide,
// or the kind's step alone for a lenient variant), from the request and
// state columns to the decision's columns, d_*, and the state a recorded
// decision writes.
type decider struct {
	steps []string
	// state is the state a decision writes when it records one that is
	// not fresh again: time_ns, a, b, log_times, log_costs and until_ns,
	// as expressions over the chain's columns.
	state [6]string
	// blocked is Decision.Blocked.
	blocked string
	// always says that every decision records, whatever the chain's
	// column d_recorded says (Params.Records of VerbExhaust, VerbCharge
	// and VerbRefund).
	always bool
}

// deciderFor returns the decider of alg under strictness s. Under a
// penalty, with zeroRow, the check of no cost is the chain's row of prio
// 2 (see strict.go); without, the innermost step has its decision. With
// carries, the chain decides from a state that alg carried, whose column
// carries says whether it must be written back (see algorithm.carry).
func deciderFor(alg algorithm, s sqlfile.Strictness, zeroRow, carries bool) decider {
	carries = carries && alg.carry != nil
	if s == sqlfile.Lenient {
		// The state's Until is the algorithm's business only under a
		// penalty: it is kept as it is.
		return decider{
			steps:   slices.Concat(alg.steps, alg.decision("d_", carries)),
			state:   [6]string{alg.time, alg.a, alg.b, alg.logTimes, alg.logCosts, "u0"},
			blocked: "false",
		}
	}
	steps := slices.Concat([]string{gate()}, alg.steps, alg.decision("k_", false))
	if zeroRow {
		steps = append(steps, zeroRowStep())
	}
	return decider{
		steps:   append(steps, strictSteps(alg, s == sqlfile.Counting, carries)...),
		state:   [6]string{"s_time", "s_a", "s_b", "s_lt", "s_lc", "s_until"},
		blocked: "d_blocked",
	}
}

// Build writes the statements of v. With callerClock, the time is the
// parameter $15, else the database's clock.
//
// A calendar window's statements by the database's clock must find the
// window holding its time among the caller's three, and refuse a time
// outside them, writing nothing, as a row holding another algorithm's
// live state is left alone. They read the clock once, in the CTE n, and
// its time is p's column db_now; p has no row when that time lies outside
// the windows, so that there is nothing to insert, update or select.
// Each statement is then a CTE of its own, d, and returns the time read
// before d's columns, with NULLs for d's when d returned no row: the
// store tells a time outside the windows from a conflict by the time, and
// names it (see Store.Apply). By the caller's clock, the store refuses a
// time outside the windows before the round trip.
func Build(v sqlfile.Variant, callerClock bool) Statements {
	table := sqlfile.Table
	alg := algorithmFor(v)
	kind := strconv.Itoa(int(v.Kind))
	// extra are p's columns after the fourteen of every statement.
	now, extra, pcols := serverNow, "", paramColumns
	if callerClock {
		now, extra, pcols = "caller_now", ", $15::int8 AS caller_now", append(slices.Clip(paramColumns), "caller_now")
	}
	// statement is a statement of the body given, after the CTE p, cte.
	cte := fmt.Sprintf(params, extra)
	statement := func(body string) string { return cte + body }
	whereNow := nowForWhere(callerClock)
	serverCalendar := v.Calendar && !callerClock
	if v.Calendar {
		// The windows' parameters come after the time's, if any.
		first := 15
		if callerClock {
			first = 16
		}
		windows, names := windowParams(first)
		pcols = append(slices.Clip(pcols), names...)
		cte = fmt.Sprintf(params, extra+windows)
		if serverCalendar {
			w0, w3 := fmt.Sprintf("$%d::int8", first), fmt.Sprintf("$%d::int8", first+3)
			cte = "WITH n AS (SELECT " + serverNow + " AS now),\n" + strings.TrimPrefix(fmt.Sprintf(params,
				windows+", n.now AS db_now\n\tFROM n WHERE n.now >= "+w0+" AND n.now < "+w3), "WITH ")
			now, whereNow = "db_now", "(SELECT db_now FROM p)"
			statement = func(body string) string {
				return strings.TrimSuffix(cte, "\n") + ",\nd AS (" + body + ")\nSELECT n.now AS db_now, d.* FROM n LEFT JOIN d ON true"
			}
		}
	}

	// The old state is the row's until its expiry, from which a key is
	// fresh, whatever the Params now (see "State and time" in package
	// engine): so is a row holding another algorithm's expired state, or
	// a group's placeholder (of kind 0, which expired before any time). A
	// row holding another algorithm's live state is never decided from:
	// the statements leave it alone. rowNow is the time as the innermost
	// step that reads the row names it, and clocked makes that step's
	// FROM list of from: the database's clock, which each call of
	// clock_timestamp() reads anew, is read once, in a derived table, for
	// the expiry and the decision.
	rowNow, clocked := now, func(from string) string { return from }
	if !callerClock && !serverCalendar {
		rowNow = "n.now"
		clocked = func(from string) string { return from + " CROSS JOIN (SELECT " + serverNow + " AS now OFFSET 0) AS n" }
	}
	ofRow := func(col, fresh string) string {
		return fmt.Sprintf("CASE WHEN s.expires_at > %s THEN %s ELSE %s END", rowNow, col, fresh)
	}
	// The row's time and A, carried over to the request's parameters by
	// an algorithm that carries; and for a decision that may record, the
	// column carries, which carried names among the columns of its chain.
	t0, a0, carries, carried := "s.time_ns", "s.a", "", []string(nil)
	if alg.carry != nil {
		var c string
		t0, a0, c = alg.carry(t0, a0, rowNow)
		carries, carried = ", "+ofRow(c, "false")+" AS carries", []string{"carries"}
	}
	rowState := fmt.Sprintf("%s AS now, %s AS t0, %s AS a0, %s AS b0, %s AS lt, %s AS lc, %s AS u0",
		rowNow, ofRow(t0, "0"), ofRow(a0, "0"), ofRow("s.b", "0"),
		ofRow("coalesce(s.log_times, '{}')", "'{}'::int8[]"), ofRow("coalesce(s.log_costs, '{}')", "'{}'::float8[]"),
		ofRow("s.until_ns", "0"))
	freshState := now + " AS now, 0::int8 AS t0, 0::float8 AS a0, 0::float8 AS b0, '{}'::int8[] AS lt, '{}'::float8[] AS lc, 0::int8 AS u0"

	dec := deciderFor(alg, v.Strict, true, true)
	// A check, and a partial grant's candidate, is never a counted
	// denial: only the block's gate applies to it.
	checking := v.Strict
	if checking == sqlfile.Counting {
		checking = sqlfile.Blocking
	}
	values := decisionValues(dec.blocked)
	innerColumns := slices.Concat(pcols, requestColumns, stateColumns)
	// request is the innermost step of a chain that decides the request
	// itself, from the state (columns) of from; under a penalty, and the
	// check of no cost as a second row, of prio 2 (the request's is 1),
	// and pick is the condition that keeps the request's row.
	request := func(state, from string) string {
		return "SELECT p.*, op_verb AS verb, op_cost AS cost, op_cn AS cn, op_at AS booked_at, " + state + " FROM " + from
	}
	chainColumns, pick := innerColumns, ""
	if v.Strict != sqlfile.Lenient {
		request = func(state, from string) string {
			return "SELECT p.*, c.*, " + state + " FROM " + from + " CROSS JOIN LATERAL (VALUES (1, op_verb, op_cost, op_cn, op_at), (2, " +
				verbCheck + "::int2, 0::float8, 0::int8, op_at)) AS c(prio, verb, cost, cn, booked_at)"
		}
		chainColumns, pick = append(slices.Clip(innerColumns), "prio"), "prio = 1"
	}
	// decided is the chain of steps deciding the request, from the state
	// (the columns of the innermost step, columns) of from, for SQL that
	// reads the columns it names in reads.
	decided := func(steps, columns []string, state, from, reads string) string {
		if v.Strict == sqlfile.Lenient {
			return chain(steps, request(state, from), columns, reads, true)
		}
		return "(SELECT * FROM " + chain(steps, request(state, from), columns, reads+" "+pick, true) + " WHERE " + pick + ") AS x"
	}
	// requested is the chain of the request, from the key's row.
	requested := func(state, reads string) string {
		return decided(dec.steps, slices.Concat(chainColumns, carried), state+carries, clocked("p"), reads)
	}
	// requestedFresh is the chain of the request from the fresh state,
	// which carries nothing, by the algorithm's fresh steps if it has
	// them (a lenient variant's).
	fromFresh := deciderFor(alg, v.Strict, true, false)
	requestedFresh := func(state, reads string) string { return decided(fromFresh.steps, chainColumns, state, "p", reads) }
	if alg.fresh != nil && v.Strict == sqlfile.Lenient {
		steps := slices.Concat(alg.fresh, alg.decision("d_", false))
		requestedFresh = func(state, reads string) string {
			return chain(steps, request(state, "p"), chainColumns, reads, true)
		}
	}
	// atMost is stepAtMost, from the fresh state or from the key's row:
	// the allowance left (a zero-cost check, which a block does not
	// change, and which describes a blocked key), then the candidates in
	// the order Go tries them, each decided as a VerbAtMost (VerbAllow,
	// recorded iff it grants more than zero); the first that fits, or
	// else a check of the least cost worth granting. GCRA's c*T of a
	// candidate, a whole number, is exact in float8. The allowance left
	// is decided from the row's state as carried, and the candidates from
	// the same, with carries.
	atMost := func(fromRow bool) func(state, reads string) string {
		return func(state, reads string) string {
			nanos := func(c string) string { return "0::int8" }
			if v.Kind == engine.KindGCRA {
				nanos = func(c string) string { return "(" + c + " * ivf)::int8" }
			}
			from, carriedHere := "p", []string(nil)
			if fromRow {
				state, from, carriedHere = state+carries, clocked("p"), carried
			}
			columns := slices.Concat(pcols, stateColumns, carriedHere)
			left := fmt.Sprintf("SELECT %s, booked_at, least(floor(d_remaining + slack), ceil(op_cost) - 1, floor(lim)) AS g,\n\td_used AS z_used, d_remaining AS z_remaining, d_reset AS z_reset",
				strings.Join(columns, ", "))
			left += "\nFROM " + chain(slices.Concat(alg.steps, alg.decision("d_", false)),
				"SELECT p.*, "+verbCheck+"::int2 AS verb, 0::float8 AS cost, 0::int8 AS cn, op_at AS booked_at, "+state+" FROM "+from,
				slices.Concat(innerColumns, carriedHere), left, false)
			candidates := fmt.Sprintf(`SELECT z.*, c.* FROM (%[1]s) AS z
CROSS JOIN LATERAL (VALUES
	(1, %[2]s::int2, op_cost, op_cn),
	(2, %[2]s::int2, g, %[4]s),
	(3, %[2]s::int2, g - 1, %[5]s),
	(4, %[2]s::int2, 1::float8, %[6]s),
	(5, %[3]s::int2, least(op_cost, 1), CASE WHEN op_cost < 1 THEN op_cn ELSE %[6]s END)
) AS c(prio, verb, cost, cn)
WHERE c.prio = 5 OR c.prio = 1 AND op_cost <= lim OR c.prio > 1 AND c.cost >= 1 AND c.cost <= ceil(op_cost) - 1`,
				left, verbAtMost, verbCheck, nanos("g"), nanos("(g - 1)"), nanos("1::float8"))
			pick := " WHERE d_allowed OR prio = 5 ORDER BY prio LIMIT 1"
			columns = slices.Concat(columns, []string{"booked_at", "g", "z_used", "z_remaining", "z_reset", "prio", "verb", "cost", "cn"})
			steps := deciderFor(alg, checking, false, fromRow).steps
			return "(SELECT * FROM " + chain(steps, candidates, columns, pick+reads, false) + pick + ") AS x"
		}
	}

	// The row a decision writes: the state the decision leaves, or the
	// zero State when it is fresh again (Step's normalisation; the row
	// then stands for an absent key until Prune deletes it), or the row
	// as it was when nothing is recorded (never, by a decider that always
	// records). Then the decision.
	written := func(dec decider, kept [8]string, values string) string {
		col := func(i int, recorded, freshAgain string) string {
			switch {
			case dec.always && recorded == freshAgain:
				return recorded
			case dec.always:
				return fmt.Sprintf("CASE WHEN d_lasts THEN %s ELSE %s END", recorded, freshAgain)
			}
			return fmt.Sprintf("CASE WHEN NOT d_recorded THEN %s WHEN d_lasts THEN %s ELSE %s END", kept[i], recorded, freshAgain)
		}
		kindOf := "CASE WHEN d_recorded THEN " + kind + " ELSE " + kept[0] + " END"
		if dec.always {
			kindOf = kind
		}
		return strings.Join([]string{
			kindOf,
			col(1, dec.state[0], "0"),
			col(2, dec.state[1], "0"),
			col(3, dec.state[2], "0"),
			col(4, dec.state[3], noLog),
			col(5, dec.state[4], noCosts),
			col(6, dec.state[5], "0"),
			col(7, "now + d_reset", minTime),
			values,
		}, ",\n\t")
	}
	absent := [8]string{kind, "0", "0", "0", noLog, noCosts, "0", minTime}
	asWas := [8]string{"s.kind", "s.time_ns", "s.a", "s.b", "s.log_times", "s.log_costs", "s.until_ns", "s.expires_at"}

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
	returning := decisionColumns
	if v.Kind == engine.KindConcurrency {
		returning += ",\n\t" + released
	}
	upsert := func(dec decider, decideFresh, decide func(state, reads string) string, values string) string {
		return statement(fmt.Sprintf(`INSERT INTO %[1]s AS s (key, %[2]s)
SELECT key,
	%[3]s
FROM %[4]s
ON CONFLICT (key) DO UPDATE SET (%[2]s) = (SELECT
	%[5]s
FROM %[6]s)
WHERE s.kind = %[7]s OR s.expires_at <= %[8]s
RETURNING %[9]s`,
			table, columns, written(dec, absent, values), decideFresh(freshState, "key "+written(dec, absent, values)),
			written(dec, asWas, values), decide(rowState, written(dec, asWas, values)),
			kind, whereNow, returning))
	}
	checked := "held_kind IS NULL OR held_kind = " + kind + " OR held_expiry <= now"
	if v.Strict != sqlfile.Lenient {
		checked = pick + " AND (" + checked + ")"
	}
	checked = "WHERE " + checked
	stmts := Statements{
		Apply: upsert(dec, requestedFresh, requested, values),
		// A check records nothing: it decides from the state carried, and
		// has no use for carries.
		Check: statement("SELECT " + values + "\nFROM " + chain(deciderFor(alg, checking, true, false).steps,
			request("s.kind AS held_kind, s.expires_at AS held_expiry, "+rowState, clocked("p LEFT JOIN "+table+" AS s ON s.key = p.key")),
			slices.Concat(chainColumns, []string{"held_kind", "held_expiry"}), values+checked, false) + "\n" + checked),
	}
	if slices.Contains(v.Statements(), sqlfile.AtMost) {
		// A partial grant of nothing is not admitted, though its check is.
		stmts.AtMost = upsert(dec, atMost(false), atMost(true), strings.Replace(values, "d_allowed", "d_allowed AND op_cost > 0", 1))
	}
	if slices.Contains(v.Statements(), sqlfile.Exhaust) {
		// The key full at max_delay from now, from the fresh state or
		// from the row's as carried, and then the check's chain.
		ex := exhauster(alg, checking)
		stmts.Exhaust = upsert(ex,
			func(state, reads string) string { return decided(ex.steps, chainColumns, state, "p", reads) },
			func(state, reads string) string { return decided(ex.steps, chainColumns, state, clocked("p"), reads) },
			decisionValues(ex.blocked))
	}
	if slices.Contains(v.Statements(), sqlfile.Settle) {
		// The cost charged or refunded, from the fresh state or from the
		// row's as carried, and then the check's chain; Granted is the
		// cost moved.
		se := settler(alg, checking)
		stmts.Settle = upsert(se,
			func(state, reads string) string { return decided(se.steps, chainColumns, state, "p", reads) },
			func(state, reads string) string { return decided(se.steps, chainColumns, state, clocked("p"), reads) },
			strings.Replace(decisionValues(se.blocked), "d_granted", "moved", 1))
	}
	return stmts
}

// chain nests steps on the derived table innermost, a SELECT of the
// columns given, and returns the chain as a derived table for SQL that
// reads the columns it names in reads.
//
// Each step selects, of the columns of the step inside it, only those
// that a later step or reads uses before defining them again: PostgreSQL
// plans every column of every level, and a statement planned for each
// execution (with pgx's execution modes other than the statement cache,
// and a prepared statement's first five) costs three times as much to
// plan when each level carries them all. A step may define a column
// again, replacing it for the steps after it: the gate of a penalty
// redefines the request's verb, and the fill of a counted denial the
// whole request and state, to run the algorithm a second time.
//
// With fenced, OFFSET 0 keeps the outermost step too from merging into the
// SQL that reads it, which would copy each of the step's expressions into
// every expression there that reads its column: fenced, a column that SQL
// reads several times (the upsert reads d_recorded and d_lasts for each
// column it writes) is computed once.
func chain(steps []string, innermost string, columns []string, reads string, fenced bool) string {
	// live[i] holds the names that steps[i:] and reads use from below
	// steps[i]; defs[i] the columns steps[i] defines.
	live := make([]map[string]bool, len(steps)+1)
	defs := make([][]string, len(steps))
	live[len(steps)] = names(reads)
	for i := len(steps) - 1; i >= 0; i-- {
		defs[i] = defined(steps[i])
		live[i] = names(aliases.ReplaceAllString(steps[i], ""))
		for name := range live[i+1] {
			if !slices.Contains(defs[i], name) {
				live[i][name] = true
			}
		}
	}
	// Each step selects from the one before it: its SELECT list goes
	// before the SQL so far, and its subquery's end after. The lists are
	// written outermost first, so the text is copied once.
	selects := make([]string, len(steps))
	for i, step := range steps {
		kept := slices.DeleteFunc(slices.Clone(columns), func(c string) bool { return !live[i+1][c] || slices.Contains(defs[i], c) })
		selects[i] = "SELECT " + strings.Join(append(kept, step), ",\n\t") + "\nFROM ("
		columns = append(kept, defs[i]...)
	}
	var b strings.Builder
	b.WriteString("(")
	for i := len(selects) - 1; i >= 0; i-- {
		b.WriteString(selects[i])
	}
	b.WriteString(innermost)
	for range selects {
		b.WriteString(" OFFSET 0) AS x")
	}
	if fenced {
		b.WriteString(" OFFSET 0")
	}
	b.WriteString(") AS x")
	return b.String()
}

var (
	// sqlName matches the names in SQL text, which are lower case, unlike
	// its keywords.
	sqlName = regexp.MustCompile(`[a-z_][a-z0-9_]*`)
	// aliases matches the names a step defines, with their AS, which
	// are not read.
	aliases = regexp.MustCompile(`\bAS [a-z_][a-z0-9_]*`)
)

// names returns the set of names in sql: all the columns it reads, and
// perhaps functions and types, which no column is named after.
func names(sql string) map[string]bool {
	set := make(map[string]bool)
	for _, name := range sqlName.FindAllString(sql, -1) {
		set[name] = true
	}
	return set
}

// defined returns the columns a step defines: the name after each AS
// outside parentheses (inside are subqueries and their aliases).
func defined(step string) []string {
	var cols []string
	depth := 0
	for i := range len(step) {
		switch step[i] {
		case '(':
			depth++
		case ')':
			depth--
		case ' ', '\t', '\n':
			if depth == 0 && strings.HasPrefix(step[i+1:], "AS ") {
				cols = append(cols, sqlName.FindString(step[i+4:]))
			}
		}
	}
	return cols
}

// decision returns the steps that end the algorithm's chain: its
// decision, as Params.describe fills it in, in the columns named prefix
// followed by allowed, used, retry, reset, delay, at, remaining and
// granted, and whether the step functions record it, in prefix +
// "recorded" (Params.Records for a lenient variant: a release and an
// extension, as a cancel, record iff allowed; and what alg.records adds,
// the concurrency limit's leaving and waiting in line).
//
// With carries, a decision is recorded too when the column carries,
// Params.Carries, is true: the state it was decided from, carried over
// to the request's parameters, is written back. The decision a statement
// writes (prefix d_) has d_lasts too: whether ResetAfter is above zero,
// so that the state it records is not fresh again.
func (alg algorithm) decision(prefix string, carries bool) []string {
	remaining := "lim - " + prefix + "used"
	if alg.remaining != nil {
		remaining = alg.remaining(prefix + "used")
	}
	delay, at := "0", "0"
	switch {
	case alg.books:
		delay, at = "CASE WHEN books THEN fit_at - now ELSE 0 END", "CASE WHEN books THEN "+alg.at+" ELSE 0 END"
	case alg.at != "":
		at = alg.at
	}
	records := ""
	if alg.records != nil {
		records = " OR " + alg.records(prefix)
	}
	if carries {
		records += " OR carries"
	}
	lasts := ""
	if prefix == "d_" {
		lasts = ",\n\t\t\td_reset > 0 AS d_lasts"
	}
	return []string{
		fmt.Sprintf("%[1]s AS %[7]sallowed, least(greatest(%[2]s, 0), lim) AS %[7]sused, %[3]s AS %[7]sretry, %[4]s AS %[7]sreset, %[5]s AS %[7]sdelay, %[6]s AS %[7]sat",
			alg.allowed, alg.used, alg.retry, alg.reset, delay, at, prefix),
		fmt.Sprintf(`%[1]s AS %[7]sremaining,
			CASE WHEN verb = %[2]s AND %[7]sallowed THEN cost ELSE 0::float8 END AS %[7]sgranted,
			verb = %[3]s OR verb IN (%[4]s, %[5]s, %[6]s, %[8]s) AND %[7]sallowed OR verb = %[2]s AND %[7]sallowed AND cost > 0%[9]s AS %[7]srecorded%[10]s`,
			remaining, verbAtMost, verbFill, verbAllow, verbReserve, verbCancel, prefix, verbExtend, records, lasts),
	}
}

// columns are the columns a decision writes, after the key.
const columns = "kind, time_ns, a, b, log_times, log_costs, until_ns, expires_at, " + decisionColumns

// decisionColumns are the columns that hold the row's latest decision,
// which Apply reads back.
const decisionColumns = "last_allowed, last_used, last_remaining, last_retry_after, last_reset_after, last_delay, last_at, last_granted, last_blocked"

// decisionValues are the chain's columns that fill decisionColumns, with
// blocked for Decision.Blocked.
func decisionValues(blocked string) string {
	return "d_allowed, d_used, d_remaining, d_retry, d_reset, d_delay, d_at, d_granted, " + blocked
}

// released is the column that the concurrency limit's upsert returns
// after the decision: when the decision may let a waiter in
// (Params.Frees: a lease released, a VerbCancel allowed; a waiter that
// left the line, a VerbLeave allowed; or a waiter served with room left,
// a VerbAllow with a ticket, $12, admitted with last_remaining above
// zero, after which the next may be first and fit), it
// notifies sqlfile.Channel, and is NULL.
// pg_notify is transactional: the notification is sent when the
// statement's transaction commits (a group's, or the statement's own),
// and never if it rolls back, so that no release goes untold and none is
// told that did not happen. The payload is the hexadecimal SHA-256 of the
// key's UTF-8 bytes, 64 bytes whatever the key (which may be long, while
// a payload must be shorter than 8,000 bytes); watchers compute it in Go
// to match it.
var released = "CASE WHEN last_allowed AND ($2::int2 IN (" + verbCancel + ", " + verbLeave + ") OR $2::int2 = " + verbAllow +
	" AND $12::int8 <> 0 AND last_remaining > 0) THEN " + notifyRelease("key") + " END AS released"

// notifyRelease is the notice of a release of a lease of the key key (a
// column or a parameter) on sqlfile.Channel, whose payload is the key's
// SHA-256 in hexadecimal (see released).
func notifyRelease(key string) string {
	return "pg_notify(" + sqlfile.Channel + ", encode(sha256(convert_to(" + key + ", 'UTF8')), 'hex'))"
}

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
