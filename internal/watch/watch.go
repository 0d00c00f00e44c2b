// Package watch is what the stores' release watchers (sluice.MemStore,
// redisstore, pgstore) share: the channels of the waiters to wake, woken
// without blocking, and the backoff of a store reconnecting its watch.
// None of it is safe for concurrent use: its owner holds its own lock.
package watch

import "time"

// Channels are the channels of the waiters of one key.
type Channels []chan<- struct{}

// Add adds c.
func (cs *Channels) Add(c chan<- struct{}) { *cs = append(*cs, c) }

// Remove removes c, once, if it is there.
func (cs *Channels) Remove(c chan<- struct{}) {
	for i, x := range *cs {
		if x == c {
			*cs = append((*cs)[:i], (*cs)[i+1:]...)
			return
		}
	}
}

// Wake sends on every channel without blocking: a full channel has a
// wake-up pending already.
func (cs Channels) Wake() {
	for _, c := range cs {
		select {
		case c <- struct{}{}:
		default:
		}
	}
}

// Keyed are the channels of the waiters of each key.
type Keyed map[string]Channels

// Add adds c to the waiters of key. k must not be nil.
func (k Keyed) Add(key string, c chan<- struct{}) {
	cs := k[key]
	cs.Add(c)
	k[key] = cs
}

// Remove removes c from the waiters of key, and reports whether key has
// none left.
func (k Keyed) Remove(key string, c chan<- struct{}) (empty bool) {
	cs := k[key]
	cs.Remove(c)
	if len(cs) == 0 {
		delete(k, key)
		return true
	}
	k[key] = cs
	return false
}

// Wake wakes the waiters of key.
func (k Keyed) Wake(key string) { k[key].Wake() }

// WakeAll wakes every waiter once.
func (k Keyed) WakeAll() {
	for _, cs := range k {
		cs.Wake()
	}
}

// The backoff of a watch that reconnects: from FirstBackoff, doubling, to
// MaxBackoff, so that a store that is down is not hammered and one that
// comes back is listened to again within two seconds.
const (
	FirstBackoff = 50 * time.Millisecond
	MaxBackoff   = 2 * time.Second
)

// NextBackoff returns the wait after one of d: FirstBackoff after none.
func NextBackoff(d time.Duration) time.Duration {
	return min(max(2*d, FirstBackoff), MaxBackoff)
}
