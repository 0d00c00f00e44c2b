package sluicehttp

import (
	"fmt"
	"net/http"
	"time"

	"github.com/sluice-go/sluice"
	"github.com/sluice-go/sluice/internal/answers"
	"github.com/sluice-go/sluice/internal/learn"
)

// DefaultMaxHold is the longest an answer can make a learning transport
// hold its requests back, unless [WithMaxHold] says otherwise.
const DefaultMaxHold = learn.DefaultMaxHold

// Learn makes the transport follow what the service it calls answers, for
// every worker and every process whose limiters share a store:
//
//   - A refusal (429 or 503) with a Retry-After, in seconds or as an
//     HTTP-date, holds every request on the key back until then.
//   - A remaining count and reset that the service reports, in the IETF
//     RateLimit (and RateLimit-Policy) fields, the older RateLimit-* or
//     the common X-RateLimit-* fields (a reset in seconds or as an epoch
//     instant), or an LLM API's x-ratelimit-remaining-requests and
//     -reset-requests ("6m0s"), paces the key so that the count, less
//     what this transport has in flight, lasts until the reset: at that
//     share of the limiter's rate when it is lower, until the reset. A
//     count of zero holds every request back until the reset.
//   - A refusal that says nothing holds the key back for a second,
//     doubling with each such refusal in a row (the answers to requests
//     sent before the hold count as one), and cuts the transport's pace
//     on the key to half each time (additive increase, multiplicative decrease:
//     down to 2^-20 of the configured rate), from which it regains 1/64
//     of the configured rate each second, up to the whole.
//
// A hold is the limiter's [sluice.Limiter.Exhaust], which every limiter
// on the store sees at once; a request that waited for its turn when the
// transport learned of a hold waits again, after it. A pace below the
// limiter's is [sluice.Limiter.Slowed] on the same key, rounded down to a
// power of 2^(-1/32): each process paces by the answers it receives. An
// answer can only slow requests down, never raise their pace above the
// limiter's, and holds them back at most [DefaultMaxHold]
// ([WithMaxHold]). A hold that the store fails to record is reported to
// the limiter's observer, and the answer is returned all the same.
//
// The transport reads the system clock for what it learns (an HTTP-date,
// a share's regain); a hold is measured on the store's clock.
//
// The limiter must be a GCRA, a leaky bucket or a token bucket; a per-key
// limiter ([sluice.NewPerKey]) is held back but its pace is not cut. A
// group transport does not learn: wrap a learning transport around it.
// With [LearnTokens], the transport follows the service's token counts
// instead of its request counts.
func Learn() TransportOption {
	return learning(answers.Requests)
}

// LearnTokens is [Learn] for a transport whose limiter counts an LLM
// API's tokens ([WithPaceCost]): it follows the service's token quotas
// (x-ratelimit-remaining-tokens, anthropic-ratelimit-tokens-remaining,
// and its input and output tokens) instead of its request counts. Chain
// two transports to follow both: one pacing requests with Learn around
// one pacing tokens with LearnTokens.
func LearnTokens() TransportOption {
	return learning(answers.Tokens)
}

func learning(unit answers.Unit) TransportOption {
	return func(t *Transport) error {
		if t.group {
			return fmt.Errorf("%w: sluicehttp: a group transport does not learn: wrap a learning transport around it", sluice.ErrInvalidConfig)
		}
		lr, err := learn.New("sluicehttp: a transport", t.lim, unit)
		t.learner = lr
		return err
	}
}

// WithMaxHold bounds how long an answer can hold a learning transport's
// requests back ([Learn]); it must be positive. A daily quota's reset,
// say, needs a day.
func WithMaxHold(d time.Duration) TransportOption {
	return func(t *Transport) error {
		if d <= 0 {
			return fmt.Errorf("%w: sluicehttp: max hold %v is not positive", sluice.ErrInvalidConfig, d)
		}
		t.maxHold = d
		return nil
	}
}

// heed learns from the answer to a request of cost on key, or from its
// failure (resp nil).
func (t *Transport) heed(r *http.Request, key string, cost float64, resp *http.Response) {
	now := time.Now()
	var a answers.Answer
	refused := false
	if resp != nil {
		a = answers.Read(resp.Header.Values, now)
		refused = resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode == http.StatusServiceUnavailable
	}
	t.learner.Heed(r.Context(), key, cost, a, now, refused, resp != nil)
}
