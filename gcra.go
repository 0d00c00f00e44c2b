package sluice

import "github.com/sluice-go/sluice/engine"

// NewGCRA returns a GCRA limiter admitting rate in the long run and bursts
// of up to burst units from rest: NewGCRA(sluice.PerSecond(10), 5). The
// generic cell rate algorithm keeps one time per key, the theoretical
// arrival time (TAT) at which the key would be fresh again. With emission
// interval T = period/amount, a request of cost c at now is admitted iff
// now >= max(TAT, now) + c*T - burst*T, and TAT then becomes max(TAT, now)
// + c*T: exactly burst units from rest, and one unit per T steadily. T, c*T
// and burst*T are rounded to the nearest nanosecond (T once, when the
// limiter is built), so the TAT never drifts and RetryAfter and ResetAfter
// are exact.
//
// Guarantee: in any interval of length d, at most burst + d/T is admitted.
func NewGCRA(rate Rate, burst float64, opts ...Option) (*Limiter, error) {
	t, err := rate.interval()
	if err != nil {
		return nil, err
	}
	return newLimiter(engine.Params{Kind: engine.KindGCRA, Limit: burst, Interval: t}, opts)
}
