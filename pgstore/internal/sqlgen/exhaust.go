package sqlgen

import (
	"slices"

	"github.com/sluice-go/sluice/pgstore/internal/sqlfile"
)

// This file translates Params.stepExhaust, VerbExhaust, into the steps of
// its own statement: the key full at max_delay from now (Params.fullAt,
// the algorithm's full, which a counted denial's fill runs at now), and
// then the key described as the check statement describes it, by the
// check's chain.

// exhauster is the decider of VerbExhaust for alg, a reservable
// algorithm, under strictness checking, a check's (a check is never a
// counted denial): stepExhaust.
//
// The state it decides from is carried over to the request's parameters
// already, as carryOnce carries it (the statement reads the row's state
// as alg.carry gives it). Its first steps then make that state the key's
// full at ex_at, Op.Now + Op.MaxDelay: the instant, the columns that full
// reads besides the state (seen at ex_at), and the full state itself, as
// the columns t0, a0 and b0 again, with the request's verb a check of its
// cost; the block's end, u0, stays as it was. The check's chain follows,
// from the full state, the zero-cost check of a penalty's gate included;
// it records nothing and changes no state, so the full state, which every
// exhaust records, is still its t0, a0, b0 and u0 at the end: the state
// written, with the expiry of the check's ResetAfter (a block's end
// covered), or the zero State if that is zero (settle).
//
// Times: now is at most 2^62 and max_delay 2^60, so ex_at is at most 2^62
// + 2^60, and a GCRA's TAT a burst (at most 2^60) after it, no later than
// a booking's can be; the check adds at most a cost's nanoseconds (at
// most the burst) to it, below 2^63, as it does to a booking's.
func exhauster(alg algorithm, checking sqlfile.Strictness) decider {
	seen, full := alg.full("ex_at")
	// The full state, as the columns of the state again: those it
	// changes.
	step := verbCheck + "::int2 AS verb"
	for i, col := range []string{"t0", "a0", "b0"} {
		if full[i] != col {
			step += ", " + full[i] + " AS " + col
		}
	}
	check := deciderFor(alg, checking, true, false)
	return decider{
		steps:   slices.Concat([]string{"now + max_delay AS ex_at"}, seen, []string{step}, check.steps),
		state:   [6]string{"t0", "a0", "b0", noLog, noCosts, "u0"},
		blocked: check.blocked,
		always:  true,
	}
}
