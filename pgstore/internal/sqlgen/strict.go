package sqlgen

import "strings"

// This file translates Params.decideStrict, the algorithm under a penalty
// or with denials counted, into steps around an algorithm's chain: the
// gate in front of it, and after its decision (the columns k_*) the
// block's consequences and the fill of a counted denial, after which the
// algorithm's steps run a second time, on the full key.
//
// A blocked Allow or check that would fit is described by a check of no
// cost on the key as it stands. Its decision is the chain's columns z_*:
// the apply and check statements decide it as a second row beside the
// request's (prio 2), whose columns a window carries to the first; the
// partial grant's statement has it already, as the allowance left.

// gate is the step in front of the algorithm: the block in force, until0
// (zero for none: a block that has ended is none), and the request the
// algorithm decides instead of the op's own, whose verb stays in o_verb:
// during a block an Allow (or a partial grant's candidate) is decided as
// a check, and a reservation is booked no earlier than the block's end.
// An Allow or a reservation above the limit, which never fits (never), is
// decided as a check of no cost: the key as it stands.
func gate() string {
	never := `verb IN (` + verbAllow + `, ` + verbReserve + `) AND cost > lim`
	return `verb AS o_verb, CASE WHEN u0 > now THEN u0 ELSE 0::int8 END AS until0, ` + never + ` AS never,
	CASE WHEN ` + never + ` OR u0 > now AND verb IN (` + verbAllow + `, ` + verbAtMost + `) THEN ` + verbCheck + `::int2 ELSE verb END AS verb,
	CASE WHEN ` + never + ` THEN 0::float8 ELSE cost END AS cost, CASE WHEN ` + never + ` THEN 0::int8 ELSE cn END AS cn,
	CASE WHEN u0 > now AND verb = ` + verbReserve + ` THEN greatest(booked_at, u0) ELSE booked_at END AS booked_at`
}

// zeroRowStep is the step that carries the decision of the check of no
// cost, decided as the row of prio 2, to every row, as the columns z_*.
func zeroRowStep() string {
	var cols []string
	for _, c := range []string{"used", "remaining", "reset"} {
		cols = append(cols, "max(k_"+c+") FILTER (WHERE prio = 2) OVER () AS z_"+c)
	}
	return strings.Join(cols, ", ")
}

// strictSteps are the steps after the algorithm's decision, k_*, and the
// zero-cost check's, z_*: the decision and state decideStrict makes of
// them, as the columns d_* and s_*. With counted, a denial that overflows
// the key fills it, and the request is decided again on the full key (its
// columns e_*). With carries, the state was carried over to the request's
// parameters as the chain read it (see algorithm.carry), and the column
// carries says whether it is written back whatever Params.Records says.
func strictSteps(alg algorithm, counted, carries bool) []string {
	// Verbs a block denies, and those that overflow a key when denied.
	denied := "until0 <> 0 AND o_verb IN (" + strings.Join([]string{verbAllow, verbCheck, verbFill, verbAtMost}, ", ") + ")"
	overflow := "NOT allowed1 AND o_verb IN (" + strings.Join([]string{verbAllow, verbReserve, verbFill}, ", ") + ")"
	// A request that never fits is denied, and waits for the block's end.
	waits := "(" + denied + " OR never)"
	// A blocked Allow or check that would fit is described by the check
	// of no cost: the key as it stands.
	stands := "until0 <> 0 AND o_verb IN (" + verbAllow + ", " + verbCheck + ", " + verbAtMost + ") AND k_allowed"
	// A reservation's retry is until one as long as it would book: its
	// MaxDelay before the block's end.
	lead := "CASE WHEN o_verb = " + verbReserve + " AND NOT never THEN max_delay ELSE 0 END"
	steps := []string{
		`k_allowed AND NOT ` + waits + ` AS allowed1,
		CASE WHEN ` + waits + ` THEN greatest(k_retry, until0 - now) ELSE k_retry END AS retry1,
		CASE WHEN ` + stands + ` THEN z_used ELSE k_used END AS used1,
		CASE WHEN ` + stands + ` THEN z_remaining ELSE k_remaining END AS remaining1,
		CASE WHEN ` + stands + ` THEN z_reset ELSE k_reset END AS reset1, ` +
			stateAfter(alg),
		// A block starts on an overflow unless one is in force.
		overflow + ` AND penalty > 0 AND until0 = 0 AS starts`,
	}
	used, remaining, retry, reset := "used1", "remaining1", "retry1", "reset1"
	granted := "CASE WHEN o_verb = " + verbAtMost + " AND allowed1 THEN cost ELSE 0::float8 END"
	state := [5]string{"s1_time", "s1_a", "s1_b", "s1_lt", "s1_lc"}
	if counted {
		// The fill, from the columns of the algorithm's chain, and the
		// request decided again on it as the algorithm decided it: an
		// Allow as a check, recording nothing; a reservation no earlier
		// than the block's end.
		fill := alg.fill("remaining1")
		steps[1] += `,
		` + overflow + ` AND count_denied AND o_verb <> ` + verbFill + ` AND NOT never AS counts,
		` + fill[0] + ` AS f_time, ` + fill[1] + ` AS f_a, ` + fill[2] + ` AS f_b, ` + fill[3] + ` AS f_lt, ` + fill[4] + ` AS f_lc`
		steps = append(steps, `CASE WHEN o_verb = `+verbAllow+` THEN `+verbCheck+`::int2 ELSE o_verb END AS verb,
		f_time AS t0, f_a AS a0, f_b AS b0, coalesce(f_lt, '{}') AS lt, coalesce(f_lc, '{}') AS lc`)
		steps = append(steps, alg.steps...)
		steps = append(steps, alg.decision("e_", false)...)
		used, remaining = "CASE WHEN counts THEN e_used ELSE used1 END", "CASE WHEN counts THEN e_remaining ELSE remaining1 END"
		// A nanosecond at least (e_retry is never below zero): a meter
		// holding more than its limit may find, decided again from now,
		// that the denied request fits. In a block, until a reservation
		// as long would book.
		retry = "CASE WHEN NOT counts THEN retry1 WHEN until0 <> 0 THEN greatest(e_retry, 1, until0 - now - " + lead + ") ELSE greatest(e_retry, 1) END"
		reset = "CASE WHEN counts THEN e_reset ELSE reset1 END"
		granted = "0::float8" // no partial grant is counted
		for i, col := range []string{"time", "a", "b", "lt", "lc"} {
			state[i] = "CASE WHEN counts THEN f_" + col + " ELSE s1_" + col + " END"
		}
	}
	// Params.Records, the block's end (the one in force, or one this
	// request starts), and ResetAfter covering it, so that no row expires
	// before its block ends.
	records := "o_verb = " + verbFill +
		" OR o_verb IN (" + verbAllow + ", " + verbReserve + ") AND (allowed1 OR until1 <> 0 OR count_denied)" +
		" OR o_verb IN (" + verbCancel + ", " + verbExtend + ") AND allowed1"
	if !counted {
		records += " OR o_verb = " + verbAtMost + " AND allowed1 AND cost > 0"
	}
	// d_lasts is d_reset > 0: a block's end, until1 unless zero, lies
	// after now. A state carried over to the request's parameters is
	// written back too (Params.Carries), keeping the Until it had unless
	// the decision records, as decideStrict does.
	recorded, until := records, "until1"
	if carries {
		recorded, until = records+" OR carries", "CASE WHEN "+records+" THEN until1 ELSE u0 END"
	}
	return append(steps,
		`CASE WHEN starts THEN now + penalty ELSE until0 END AS until1,
		CASE WHEN starts THEN greatest(`+retry+`, penalty - `+lead+`) ELSE `+retry+` END AS d_retry,
		`+reset+` AS reset2, `+used+` AS d_used, `+remaining+` AS d_remaining`,
		`allowed1 AS d_allowed,
		CASE WHEN until1 <> 0 THEN greatest(reset2, until1 - now) ELSE reset2 END AS d_reset,
		k_delay AS d_delay, k_at AS d_at, `+granted+` AS d_granted, until1 <> 0 AS d_blocked, `+recorded+` AS d_recorded,
		until1 <> 0 OR reset2 > 0 AS d_lasts,
		`+state[0]+` AS s_time, `+state[1]+` AS s_a, `+state[2]+` AS s_b, `+state[3]+` AS s_lt, `+state[4]+` AS s_lc, `+until+` AS s_until`)
}

// stateAfter is the step's columns s1_time, s1_a, s1_b, s1_lt and s1_lc:
// the state that the algorithm's decision (k_*) leaves, normalised as
// decideKind does, for the verb it decided (whose denials record under
// CountDenied): the zero State if it records a state fresh again, the
// algorithm's if its step functions recorded it, else the state it
// decided from.
func stateAfter(alg algorithm) string {
	records := "k_recorded OR count_denied AND verb IN (" + verbAllow + ", " + verbReserve + ", " + verbAtMost + ")"
	col := func(name, fresh, recorded, kept string) string {
		return "CASE WHEN k_reset = 0 AND (" + records + ") THEN " + fresh + " WHEN k_recorded THEN " + recorded + " ELSE " + kept + " END AS s1_" + name
	}
	lt, lc := noLog+" AS s1_lt", noCosts+" AS s1_lc"
	if alg.logTimes != noLog {
		lt, lc = col("lt", "'{}'::int8[]", alg.logTimes, "lt"), col("lc", "'{}'::float8[]", alg.logCosts, "lc")
	}
	return strings.Join([]string{
		col("time", "0::int8", alg.time, "t0"),
		col("a", "0::float8", alg.a, "a0"),
		col("b", "0::float8", alg.b, "b0"),
		lt, lc,
	}, ",\n\t\t")
}
