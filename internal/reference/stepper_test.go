package reference_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sluice-go/sluice/engine"
	"github.com/sluice-go/sluice/internal/reference"
)

// A stepper runs the ops of a table test on one key of a model: the
// strict one, which reports blocks, when the Params have a penalty or
// count denials.
type stepper struct {
	m      reference.Model
	strict *reference.Strict
}

func newStepper(t *testing.T, p engine.Params) stepper {
	t.Helper()
	if p.Penalty > 0 || p.CountDenied {
		strict, err := reference.NewStrict(p)
		require.NoError(t, err)
		return stepper{m: strict, strict: strict}
	}
	m, err := reference.New(p)
	require.NoError(t, err)
	return stepper{m: m}
}

// decide runs op, and returns its decision and whether a block was in
// force (false for a model without penalties).
func (s stepper) decide(op engine.Op) (reference.Decision, bool) {
	if s.strict != nil {
		sd := s.strict.Decide(op)
		return sd.Decision, sd.Blocked
	}
	return s.m.Apply(op), false
}

// tableLimits returns the limits the exhaust and settle tables decide
// under: a GCRA of 5 at 100 ms (bT = 500 ms), a leaky bucket of 3 at
// 1.5/s, a token bucket of 10 at 4/s, with continuous and with interval
// refill, the GCRA under a 30 s penalty, and the leaky bucket counting
// denials under a 10 s penalty.
func tableLimits() (gcra, leaky, token, refill, penalized, counted engine.Params) {
	const s, ms = int64(time.Second), int64(time.Millisecond)
	gcra = engine.Params{Kind: engine.KindGCRA, Limit: 5, Interval: 100 * ms}
	leaky = engine.Params{Kind: engine.KindLeakyBucket, Limit: 3, Interval: s, Amount: 1.5}
	token = engine.Params{Kind: engine.KindTokenBucket, Limit: 10, Interval: s, Amount: 4}
	refill, penalized, counted = token, gcra, leaky
	refill.IntervalRefill = true
	penalized.Penalty = 30 * s
	counted.CountDenied, counted.Penalty = true, 10*s
	return gcra, leaky, token, refill, penalized, counted
}
