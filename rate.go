package sluice

import (
	"fmt"
	"math"
	"strconv"
	"time"

	"github.com/sluice-go/sluice/internal/arith"
)

// Rate is an amount per period: 10 requests per second, 1000 units per 30
// days. Build one with [PerSecond], [PerMinute] or [Per].
type Rate struct {
	// Amount is how much cost the rate allows per Period: finite and
	// positive. It may be fractional.
	Amount float64
	// Period is the length of time Amount is spread over: positive.
	Period time.Duration
}

// Per returns the rate of amount per period.
func Per(amount float64, period time.Duration) Rate { return Rate{Amount: amount, Period: period} }

// PerSecond returns the rate of amount per second.
func PerSecond(amount float64) Rate { return Per(amount, time.Second) }

// PerMinute returns the rate of amount per minute.
func PerMinute(amount float64) Rate { return Per(amount, time.Minute) }

// String formats the rate for logs, as in "10/1s".
func (r Rate) String() string {
	return strconv.FormatFloat(r.Amount, 'g', -1, 64) + "/" + r.Period.String()
}

// validate reports whether the rate is positive and finite.
func (r Rate) validate() error {
	if !(r.Amount > 0) || math.IsInf(r.Amount, 0) {
		return fmt.Errorf("%w: rate %v: amount must be positive and finite", ErrInvalidConfig, r)
	}
	if r.Period <= 0 {
		return fmt.Errorf("%w: rate %v: period must be positive", ErrInvalidConfig, r)
	}
	return nil
}

// interval returns the time one unit of cost takes at this rate, rounded to
// the nearest nanosecond (half away from zero).
func (r Rate) interval() (int64, error) {
	if err := r.validate(); err != nil {
		return 0, err
	}
	exact := float64(r.Period) / r.Amount
	if exact < 0.5 {
		return 0, fmt.Errorf("%w: rate %v: faster than one unit per nanosecond", ErrInvalidConfig, r)
	}
	if exact > arith.MaxSpan {
		return 0, fmt.Errorf("%w: rate %v: slower than one unit per %v", ErrInvalidConfig, r, time.Duration(arith.MaxSpan))
	}
	t := int64(math.Round(exact))
	if n := r.Amount; n == math.Trunc(n) && n <= 1<<53 {
		// An integer amount: divide exactly, since float64 cannot hold a
		// period above 2^53 ns.
		q, rem := int64(r.Period)/int64(n), int64(r.Period)%int64(n)
		if rem >= int64(n)-rem {
			q++
		}
		t = q
	}
	if math.Abs(float64(t)-exact) > exact*1e-6 {
		// A rounded interval would change the rate by more than 1 ppm.
		return 0, fmt.Errorf("%w: rate %v: %g ns per unit is not within 1 ppm of a whole nanosecond", ErrInvalidConfig, r, exact)
	}
	return t, nil
}
