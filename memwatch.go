package sluice

import (
	"context"
	"slices"
	"sync"
)

// releaseWatch holds the channels that watch a MemStore's releases of
// leases, per key.
type releaseWatch struct {
	mu       sync.Mutex
	watchers map[string][]chan<- struct{}
}

// WatchReleases sends on c after each release of a lease on key in m,
// until stop is called. It implements [ReleaseWatcher].
func (m *MemStore) WatchReleases(_ context.Context, key string, c chan<- struct{}) (stop func(), err error) {
	if m.closed.Load() {
		return nil, ErrStoreClosed
	}
	w := &m.watch
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.watchers == nil {
		w.watchers = make(map[string][]chan<- struct{})
	}
	w.watchers[key] = append(w.watchers[key], c)
	return func() {
		w.mu.Lock()
		defer w.mu.Unlock()
		cs := w.watchers[key]
		if i := slices.Index(cs, c); i >= 0 {
			cs = slices.Delete(cs, i, i+1)
		}
		if len(cs) == 0 {
			delete(w.watchers, key)
		} else {
			w.watchers[key] = cs
		}
	}, nil
}

// released wakes the watchers of key: a lease on it was released, or the
// key was reset.
func (m *MemStore) released(key string) {
	w := &m.watch
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, c := range w.watchers[key] {
		select {
		case c <- struct{}{}:
		default: // a wake-up is pending already
		}
	}
}
