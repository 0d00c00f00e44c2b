package requestcost_test

import (
	"errors"
	"math"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/sluice-go/sluice"
	"github.com/sluice-go/sluice/internal/requestcost"
)

func TestOfChargesTheCostRaisedToTheMinimumOrTheMinimumWithAReason(t *testing.T) {
	failed := errors.New("unreadable body")
	for _, tc := range []struct {
		name    string
		cost    float64
		err     error
		want    float64
		wantErr error
	}{
		{name: "a cost above the minimum is charged as is", cost: 3, want: 3},
		{name: "a cost below the minimum is raised to it", cost: 0.5, want: 1},
		{name: "a free request is charged the minimum", cost: 0, want: 1},
		{name: "a failed cost function is charged the minimum", cost: 7, err: failed, want: 1, wantErr: failed},
		{name: "a negative cost is invalid", cost: -1, want: 1, wantErr: sluice.ErrInvalidCost},
		{name: "NaN is invalid", cost: math.NaN(), want: 1, wantErr: sluice.ErrInvalidCost},
		{name: "an infinite cost is invalid", cost: math.Inf(1), want: 1, wantErr: sluice.ErrInvalidCost},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := requestcost.Of(tc.cost, tc.err, 1)
			require.Equal(t, tc.want, got)
			if tc.wantErr == nil {
				require.NoError(t, err)
				return
			}
			require.ErrorIs(t, err, tc.wantErr)
		})
	}
}

func TestCheckMinRefusesWhatNoCostCouldBe(t *testing.T) {
	for _, ok := range []float64{0, 1, 2.5} {
		require.NoError(t, requestcost.CheckMin(ok), ok)
	}
	for _, bad := range []float64{-1, math.NaN(), math.Inf(1)} {
		require.ErrorIs(t, requestcost.CheckMin(bad), sluice.ErrInvalidConfig, bad)
	}
}
