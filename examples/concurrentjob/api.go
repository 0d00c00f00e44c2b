package main

import (
	"context"
	"errors"
	"sync"
	"time"
)

// errRefused is the simulated API's answer to a call beyond its plan's
// limits: a 429 Too Many Requests.
var errRefused = errors.New("third-party API: 429 Too Many Requests")

// thirdPartyAPI stands in for a slow remote API whose plan allows at most
// concurrent calls at once and at most rate calls in any window: it
// answers each call after latency, and refuses at once a call beyond
// either limit, as a strict real one would.
type thirdPartyAPI struct {
	concurrent int
	rate       int
	window     time.Duration
	latency    time.Duration

	mu       sync.Mutex
	inFlight int
	starts   []time.Time // of the calls accepted, in order
	busiest  int         // the most calls in flight at once
	refused  int
}

// Call makes one call, which takes the API's latency.
func (a *thirdPartyAPI) Call(ctx context.Context) error {
	if err := a.arrive(); err != nil {
		return err
	}
	defer a.leave()
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
	now := time.Now()
	recent := 0
	for i := len(a.starts) - 1; i >= 0 && now.Sub(a.starts[i]) < a.window; i-- {
		recent++
	}
	if a.inFlight >= a.concurrent || recent >= a.rate {
		a.refused++
		return errRefused
	}
	a.inFlight++
	a.busiest = max(a.busiest, a.inFlight)
	a.starts = append(a.starts, now)
	return nil
}

func (a *thirdPartyAPI) leave() {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.inFlight--
}

// stats returns the calls accepted, the calls refused, the most in flight
// at once and the most started in any window.
func (a *thirdPartyAPI) stats() (calls, refused, busiest, mostInWindow int) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for i := range a.starts {
		n := 0
		for j := i; j < len(a.starts) && a.starts[j].Sub(a.starts[i]) < a.window; j++ {
			n++
		}
		mostInWindow = max(mostInWindow, n)
	}
	return len(a.starts), a.refused, a.busiest, mostInWindow
}
