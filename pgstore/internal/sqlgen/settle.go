package sqlgen

import (
	"slices"

	"github.com/sluice-go/sluice/engine"
	"github.com/sluice-go/sluice/pgstore/internal/sqlfile"
)

// This file translates Params.stepSettle, VerbCharge and VerbRefund, into
// the steps of one statement for both verbs, which the parameter of the
// verb tells apart: the op's cost moved at the key's latest point, charged
// or refunded (the algorithm's settle: settleGCRA, settleMeter or
// settleRefill), and then the key described as the check statement
// describes it, by the check's chain, with the cost moved as
// Decision.Granted.

// settler is the decider of VerbCharge and VerbRefund for alg, a
// reservable algorithm, under strictness checking, a check's (a check is
// never a counted denial): stepSettle.
//
// The state it decides from is carried over to the request's parameters
// already, as carryOnce carries it (the statement reads the row's state
// as alg.carry gives it). Its first steps, alg.settle, move that state by
// the op's cost. They read the op's verb and cost from the parameters,
// op_verb and op_cost, which every row of the chain holds: under a
// penalty, the chain decides a check of no cost as a row of its own
// beside the request's (see strict.go), and both rows settle the op, and
// then are the same check. They define the cost moved, the column moved,
// which the statement returns as Decision.Granted in the place of the
// check's d_granted; and the state moved, which the next step names t0,
// a0 and b0 again, or the zero State if it is fresh again at now
// (Params.emptied: forgotten, even under a penalty's block), with the
// request's verb a check of no cost (Go's Op{Verb: VerbCheck, Now:
// op.Now}); the block's end, u0, stays as it was. The check's chain
// follows, the zero-cost check of a penalty's gate included; it records
// nothing and changes no state, so the state moved, which every charge
// and refund records, is still its t0, a0, b0 and u0 at the end: the
// state written, with the expiry of the check's ResetAfter (a block's end
// covered), or the zero State if that is zero (settle).
//
// Times: a charge moves a GCRA's TAT to maxSpan past now at most (no
// further than a booking may), or keeps it where it lies already; a
// bucket's point moves to now at the latest, and a refund moves no point
// later. The check of no cost adds nothing to them.
func settler(alg algorithm, checking sqlfile.Strictness) decider {
	steps, state, emptied := alg.settle()
	step := verbCheck + "::int2 AS verb, 0::float8 AS cost, 0::int8 AS cn"
	for i, col := range []string{"t0", "a0", "b0"} {
		// Kept, a column is the GCRA's b0: zero in every state.
		switch zero := [...]string{"0::int8", "0::float8", "0::float8"}[i]; state[i] {
		case col:
		case zero:
			step += ", " + zero + " AS " + col
		default:
			step += ", CASE WHEN " + emptied + " THEN " + zero + " ELSE " + state[i] + " END AS " + col
		}
	}
	check := deciderFor(alg, checking, true, false)
	return decider{
		steps:   slices.Concat(steps, []string{step}, check.steps),
		state:   [6]string{"t0", "a0", "b0", noLog, noCosts, "u0"},
		blocked: check.blocked,
		always:  true,
	}
}

// settleSource names, for the files' headers, the function of v's
// algorithm that settles a cost, and the one of package engine it
// translates.
func settleSource(v sqlfile.Variant) (sqlName, goName string) {
	switch {
	case v.Kind == engine.KindGCRA:
		return "gcraSettle", "settleGCRA"
	case v.IntervalRefill:
		return "intervalRefillSettle", "settleRefill"
	}
	return "meterSettle", "settleMeter"
}

// gcraSettle is settleGCRA: the TAT moved by the cost's nanoseconds,
// later for a charge, to maxSpan past now at most (room, from tat, Go's
// max(s.Time, op.Now): settle_tat); earlier for a refund, to now at the
// earliest (held, the TAT's lead on now). Its interval is iv; B is no
// part of a GCRA's state.
//
// The state moved is fresh again (emptied) when its TAT is not after
// now.
//
// cost_span is Go's op.Cost*float64(p.Interval), which a charge compares
// with room and a refund with held, as doubles, before any rounding. Its
// cost is capped at 2^63 first: a float8 product that overflows is an
// error in PostgreSQL, and infinite in Go, and the product of a cost of
// 2^63 or more is 2^63 or more either way (the interval is a nanosecond
// at least), above room and held alike, so that it takes the same
// branch. Below room or held, both below 2^63, cost_span is rounded to
// the cost's nanoseconds, Params.gcraNanos, as roundNanos rounds.
func gcraSettle() ([]string, [3]string, string) {
	refund := "op_verb = " + verbRefund
	nanos := roundNanos("cost_span")
	return []string{
			`greatest(t0, now) AS settle_tat, t0 - now AS held, now + ` + maxSpan + ` - greatest(t0, now) AS room,
			least(op_cost, '9223372036854775808'::float8) * ivf AS cost_span`,
			// The TAT moved, and the cost moved: a refund's is what the
			// TAT held if the cost was as much, a charge's the room if
			// the cost was as much.
			`CASE WHEN ` + refund + ` THEN CASE WHEN held <= 0 THEN t0 WHEN cost_span >= held::float8 THEN now ELSE t0 - ` + nanos + ` END
				WHEN room <= 0 THEN t0 WHEN cost_span >= room::float8 THEN settle_tat + room ELSE settle_tat + ` + nanos + ` END AS settle_to,
			CASE WHEN ` + refund + ` THEN CASE WHEN held <= 0 THEN 0::float8 WHEN cost_span >= held::float8 THEN held::float8 / ivf ELSE op_cost END
				WHEN room <= 0 THEN 0::float8 WHEN cost_span >= room::float8 THEN room::float8 / ivf ELSE op_cost END AS moved`,
		},
		[3]string{"settle_to", "ivf", "b0"}, "settle_to <= now"
}

// meterSettle is settleMeter: the level at the key's latest point,
// settle_at (the point's, or now), moved by the cost, up for a charge, to
// what leaks in maxSpan at most, float64(maxSpan)*p.Amount/float64(p.Interval);
// down for a refund, to zero at the least: settled_level. The point moves
// there; B, which Go replaces with the whole State, is zero. It is fresh
// again (emptied) when the point is not after now and holds no more than
// the slack.
func meterSettle() ([]string, [3]string, string) {
	charge := "op_verb = " + verbCharge
	return []string{
			"greatest(t0, now) AS settle_at",
			levelAt("t0", "a0", "settle_at", drain("a0")) + " AS settle_level",
			"CASE WHEN " + charge + " THEN least(op_cost, greatest(" + maxSpan + "::float8 * am / ivf - settle_level, 0))" +
				" ELSE least(op_cost, settle_level) END AS moved",
			"CASE WHEN " + charge + " THEN settle_level + moved ELSE settle_level - moved END AS settled_level",
		},
		[3]string{"settle_at", "settled_level", "0::float8"}, "settle_at <= now AND settled_level <= slack"
}

// intervalRefillSettle is settleRefill: the tokens in use at the key's
// point as seen now (refillPoint, as the columns settle_used and
// settle_last), moved by the cost, up for a charge, to what the refills
// of maxSpan bring at most, float64(maxSpan/p.Interval)*p.Amount (a
// division of integers); down for a refund, to none at the least:
// settled_used. The point is kept as seen; B, which Go replaces with the
// whole State, is zero. It is fresh again (emptied) when the point is not
// after now and holds no more than the slack.
func intervalRefillSettle() ([]string, [3]string, string) {
	charge := "op_verb = " + verbCharge
	return append(refillPoint("settle", "t0", "a0", "now"),
			"CASE WHEN "+charge+" THEN least(op_cost, greatest(("+maxSpan+" / iv)::float8 * am - settle_used, 0))"+
				" ELSE least(op_cost, settle_used) END AS moved",
			"CASE WHEN "+charge+" THEN settle_used + moved ELSE settle_used - moved END AS settled_used"),
		[3]string{"settle_last", "settled_used", "0::float8"}, "settle_last <= now AND settled_used <= slack"
}
