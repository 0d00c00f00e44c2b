package main

import (
	"context"
	"errors"
	"sync"
	"time"
)

// errTooManyCalls is the simulated API's answer to a call over its limit,
// a 429 Too Many Requests.
var errTooManyCalls = errors.New("third-party API: 429 Too Many Requests")

// thirdPartyAPI stands in for a slow remote API that publishes a limit: at
// most limit calls in any window. It answers each call after latency, and
// refuses (without waiting) a call that arrives when it already accepted
// limit calls within the last window, as a strict real one would.
type thirdPartyAPI struct {
	limit   int
	window  time.Duration
	latency time.Duration

	mu       sync.Mutex
	arrivals []time.Time // every call, in order of arrival
	accepted []time.Time // the calls it answered, in order of arrival
	refused  int
}

// Call makes one call, which takes the API's latency.
func (a *thirdPartyAPI) Call(ctx context.Context) error {
	if err := a.arrive(); err != nil {
		return err
	}
	select {
	case <-time.After(a.latency):
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (a *thirdPartyAPI) arrive() error {
	a.mu.Lock()
	defer a.mu.Unlock()
	now := time.Now() // under the lock, so that arrivals stay in order
	a.arrivals = append(a.arrivals, now)
	recent := 0
	for i := len(a.accepted) - 1; i >= 0 && now.Sub(a.accepted[i]) < a.window; i-- {
		recent++
	}
	if recent >= a.limit {
		a.refused++
		return errTooManyCalls
	}
	a.accepted = append(a.accepted, now)
	return nil
}

// stats returns how many calls arrived, how many were refused, and the
// most that arrived within any one window.
func (a *thirdPartyAPI) stats() (calls, refused, busiest int) {
	a.mu.Lock()
	defer a.mu.Unlock()
	first := 0
	for last, t := range a.arrivals {
		for t.Sub(a.arrivals[first]) >= a.window {
			first++
		}
		busiest = max(busiest, last-first+1)
	}
	return len(a.arrivals), a.refused, busiest
}
