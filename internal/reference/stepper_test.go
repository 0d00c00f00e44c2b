package reference_test

import (
	"testing"

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
