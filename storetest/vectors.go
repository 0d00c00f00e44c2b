package storetest

import (
	"context"
	_ "embed"
	"fmt"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/sluice-go/sluice/engine"
	"github.com/sluice-go/sluice/storetest/internal/vectors"
)

//go:generate go run ./internal/genvectors -o testdata/vectors.json

// vectorsJSON is the committed vectors file, generated from Params.Step.
//
//go:embed testdata/vectors.json
var vectorsJSON []byte

var loadVectors = sync.OnceValues(func() ([]vectors.Case, error) { return vectors.Unmarshal(vectorsJSON) })

// RunVectors replays the suite's named edge-case vectors against st and
// requires Step's outcome of every op: the same error (compared with
// errors.Is to the sentinel it names) and the same decision, bit for bit
// with [Exact], otherwise within the tolerances of [SameDecision]. Each
// vector is a subtest named for the algorithm, the verb and the rule it
// pins, as "gcra/reserve/booking-a-nanosecond-late": a handful of ops on
// a fresh key of its own, at the boundaries of each algorithm and verb,
// with and without a penalty or counted denials (an exact fit, one ulp
// over, a window's edge, a block's end, a booking a nanosecond late), from
// a realistic time, the epoch, and up to the latest time a step accepts
// and past it. Some change the key's limit between ops, running an op
// under other Params of the same algorithm (see "Limits that change" in
// package engine): st must carry the key's state over as the
// specification does, and write it back after any decision that records
// or carries it ([engine.Params.Records], [engine.Params.Carries]). Every
// Params spans less than 2^53 ns, so that a store that computes in
// doubles runs them all.
//
// The vectors are testdata/vectors.json, which `go generate ./storetest`
// writes from [engine.Params.Step]; the suite's own tests require it to be
// up to date. Other options than Exact are ignored.
func RunVectors(t *testing.T, st engine.Store, opts ...Option) {
	c := configure(opts)
	cases, err := loadVectors()
	require.NoError(t, err)
	ctx := context.Background()
	prefix := uniquePrefix()
	for _, vc := range cases {
		t.Run(vc.Name, func(t *testing.T) {
			key := prefix + vc.Name
			for i, s := range vc.Steps {
				p := &vc.Params
				if s.Params != nil {
					p = s.Params // the key's limit changed
				}
				got, err := st.Apply(ctx, key, p, s.Op)
				where := fmt.Sprintf("op %d %+v of %v", i, s.Op, *p)
				if s.Err == "" {
					require.NoError(t, err, where)
				} else {
					require.ErrorIs(t, err, vectors.Sentinel(s.Err), where)
				}
				switch {
				case s.Want == nil: // refused undecided: nothing to compare
				case c.exact:
					RequireIdenticalDecision(t, *s.Want, got, where)
				default:
					RequireSameDecision(t, *p, *s.Want, got, where)
				}
			}
		})
	}
}
