package pgstore

import (
	"strings"

	"github.com/sluice-go/sluice"
)

// This file translates Params.decideStrict, the algorithm under a penalty
// or with denials counted, into steps around an algorithm's chain: the
// gate in front of it, and after its decision (the columns k_*) the
// block's consequences and the fill of a counted denial, which runs the
// algorithm's steps a second time.

// strictness says which parts of decideStrict a statement runs.
type strictness uint8

const (
	// lenient is the algorithm alone: no penalty, denials not counted.
	lenient strictness = iota
	// blocking is the algorithm behind a penalty's gate (Params.Penalty).
	blocking
	// counting also fills the key on a denial (Params.CountDenied), with
	// or without a penalty.
	counting
)

// strictnessOf returns the strictness of p's statements.
func strictnessOf(p *sluice.Params) strictness {
	switch {
	case p.CountDenied:
		return counting
	case p.Penalty > 0:
		return blocking
	}
	return lenient
}

// gate is the step in front of the algorithm: the block in force, until0
// (zero for none: a block that has ended is none), and the request the
// algorithm decides instead of the op's own, whose verb stays in o_verb:
// during a block an Allow (or a partial grant's candidate) is decided as
// a check, and a reservation is booked no earlier than the block's end.
func gate() string {
	return `verb AS o_verb, CASE WHEN u0 > now THEN u0 ELSE 0::int8 END AS until0,
	CASE WHEN u0 > now AND verb IN (` + verbAllow + `, ` + verbAtMost + `) THEN ` + verbCheck + `::int2 ELSE verb END AS verb,
	CASE WHEN u0 > now AND verb = ` + verbReserve + ` THEN greatest(booked_at, u0) ELSE booked_at END AS booked_at`
}

// strictSteps are the steps after the algorithm's decision, k_*: the
// decision and state decideStrict makes of it, as the columns d_* and
// s_*. With counted, a denial that overflows the key fills it: the
// algorithm decides again, an Allow of the denial's Remaining, from the
// state the first decision left (its columns c_*).
func strictSteps(alg algorithm, counted bool) []string {
	// Verbs a block denies, and those that overflow a key when denied.
	denied := "o_verb IN (" + strings.Join([]string{verbAllow, verbCheck, verbFill, verbAtMost}, ", ") + ")"
	overflow := "NOT allowed1 AND o_verb IN (" + strings.Join([]string{verbAllow, verbReserve, verbFill}, ", ") + ")"
	steps := []string{
		// The state the algorithm's step leaves, normalised as decideKind
		// does (a state fresh again, recorded, is the zero State), for the
		// verb it decided, whose denials record under CountDenied.
		`k_allowed AND NOT (until0 <> 0 AND ` + denied + `) AS allowed1,
		CASE WHEN until0 <> 0 AND ` + denied + ` THEN greatest(k_retry, until0 - now) ELSE k_retry END AS retry1, ` +
			stateAfter(alg, "k_", "s1_", "k_recorded OR count_denied AND verb IN ("+verbAllow+", "+verbReserve+", "+verbAtMost+")"),
		// A block starts on an overflow unless one is in force.
		overflow + ` AND penalty > 0 AND until0 = 0 AS starts`,
		// The block's end, and until a reservation as long would book.
		`CASE WHEN starts THEN now + penalty ELSE until0 END AS until1,
		CASE WHEN starts THEN greatest(retry1, penalty - CASE WHEN o_verb = ` + verbReserve + ` THEN max_delay ELSE 0 END) ELSE retry1 END AS d_retry`,
	}
	used, remaining, reset := "k_used", "k_remaining", "k_reset"
	granted := "CASE WHEN o_verb = " + verbAtMost + " AND allowed1 THEN cost ELSE 0::float8 END"
	state := [5]string{"s1_time", "s1_a", "s1_b", "s1_lt", "s1_lc"}
	if counted {
		// The fill: an Allow of the denial's Remaining, from the state it
		// left, whose cost for the GCRA is Params.gcraNanos's: math.Round,
		// half away from zero, of a number that is not negative.
		steps[1] += `,
		` + overflow + ` AND count_denied AND o_verb <> ` + verbFill + ` AND k_remaining > 0 AS counts`
		cn := "0::int8"
		if alg.nanos {
			steps[1] += ", k_remaining * ivf AS fill_ns"
			cn = "(CASE WHEN fill_ns - floor(fill_ns) >= 0.5 THEN floor(fill_ns) + 1 ELSE floor(fill_ns) END)::int8"
		}
		steps = append(steps, verbAllow+`::int2 AS verb, k_remaining AS cost, `+cn+` AS cn, 0::int8 AS booked_at,
		s1_time AS t0, s1_a AS a0, s1_b AS b0, coalesce(s1_lt, '{}') AS lt, coalesce(s1_lc, '{}') AS lc`)
		steps = append(steps, alg.steps...)
		steps = append(steps, alg.decision("c_")...)
		// An Allow records with denials counted, even when it is denied.
		steps = append(steps, stateAfter(alg, "c_", "s2_", "true"))
		used, remaining = "CASE WHEN counts THEN c_used ELSE k_used END", "CASE WHEN counts THEN c_remaining ELSE k_remaining END"
		reset = "CASE WHEN counts THEN greatest(k_reset, c_reset) ELSE k_reset END"
		granted = "0::float8" // no partial grant is counted
		for i, col := range []string{"time", "a", "b", "lt", "lc"} {
			state[i] = "CASE WHEN counts THEN s2_" + col + " ELSE s1_" + col + " END"
		}
	}
	// Params.records, and a block kept in the state and in ResetAfter, so
	// that no row expires before its block ends.
	records := "o_verb = " + verbFill +
		" OR o_verb IN (" + verbAllow + ", " + verbReserve + ") AND (allowed1 OR until1 <> 0 OR count_denied)" +
		" OR o_verb = " + verbCancel + " AND allowed1 OR o_verb = " + verbAtMost + " AND allowed1 AND cost > 0"
	if counted {
		records = "o_verb = " + verbFill +
			" OR o_verb IN (" + verbAllow + ", " + verbReserve + ") AND (allowed1 OR until1 <> 0 OR count_denied)" +
			" OR o_verb = " + verbCancel + " AND allowed1"
	}
	return append(steps, `allowed1 AS d_allowed, `+used+` AS d_used, `+remaining+` AS d_remaining,
		CASE WHEN until1 <> 0 THEN greatest(`+reset+`, until1 - now) ELSE `+reset+` END AS d_reset,
		k_delay AS d_delay, k_at AS d_at, `+granted+` AS d_granted, until1 <> 0 AS d_blocked, `+records+` AS d_recorded,
		`+state[0]+` AS s_time, `+state[1]+` AS s_a, `+state[2]+` AS s_b, `+state[3]+` AS s_lt, `+state[4]+` AS s_lc, until1 AS s_until`)
}

// stateAfter is the step's columns, named to followed by time, a, b, lt
// and lc, of the state that the algorithm's decision (its columns from,
// followed by reset and recorded) leaves: the zero State if it records
// (by the condition records) a state fresh again, the algorithm's if its
// step functions recorded it, else the state it decided from.
func stateAfter(alg algorithm, from, to, records string) string {
	zero := "CASE WHEN " + from + "reset = 0 AND (" + records + ") THEN "
	col := func(name, fresh, recorded, kept string) string {
		return zero + fresh + " WHEN " + from + "recorded THEN " + recorded + " ELSE " + kept + " END AS " + to + name
	}
	lt, lc := noLog+" AS "+to+"lt", noCosts+" AS "+to+"lc"
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
