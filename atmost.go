package sluice

import (
	"context"

	"github.com/sluice-go/sluice/engine"
)

// AllowAtMost admits as much of cost as fits now for key, and records it:
// the whole cost if it fits, otherwise the most whole units of it that do.
// Decision.Granted is the amount admitted, and Allowed reports whether it
// is more than zero. When nothing fits, RetryAfter says when one unit would
// (or the whole cost, if it is less than one). Any finite cost that is not
// negative is accepted, also one above the limit.
func (l *Limiter) AllowAtMost(ctx context.Context, key string, cost float64) (d Decision, err error) {
	err = l.now(ctx, key, engine.VerbAtMost, cost, decided(&d))
	return d, err
}
