// Package requestcost prices a request from its cost function's answer,
// for the HTTP middleware and the gRPC interceptors alike, so that both
// charge and validate costs by the same rules.
package requestcost

import (
	"fmt"
	"math"

	"github.com/sluice-go/sluice"
)

// CheckMin reports, with an error wrapping [sluice.ErrInvalidConfig], a
// minimum cost that is not a finite non-negative number.
func CheckMin(minCost float64) error {
	if !valid(minCost) {
		return fmt.Errorf("%w: minimum cost %v is not a finite non-negative number", sluice.ErrInvalidConfig, minCost)
	}
	return nil
}

// Of returns what a request is charged when its cost function answered
// cost and err: cost, raised to minCost. When err is not nil, or cost is
// negative, NaN or infinite, the request is charged minCost and the error
// says why (wrapping [sluice.ErrInvalidCost] for a bad cost).
func Of(cost float64, err error, minCost float64) (float64, error) {
	switch {
	case err != nil:
		return minCost, err
	case !valid(cost):
		return minCost, fmt.Errorf("%w: %v", sluice.ErrInvalidCost, cost)
	}
	return max(cost, minCost), nil
}

func valid(cost float64) bool { return cost >= 0 && !math.IsInf(cost, 0) }
