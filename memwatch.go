package sluice

import (
	"context"
	"sync"

	"github.com/sluice-go/sluice/internal/watch"
)

// releaseWatch holds the channels that watch a MemStore's releases of
// leases, per key.
type releaseWatch struct {
	mu       sync.Mutex
	watchers watch.Keyed
}

// WatchReleases sends on c after each release of a lease on key in m,
// until stop is called. It implements [engine.ReleaseWatcher].
func (m *MemStore) WatchReleases(_ context.Context, key string, c chan<- struct{}) (stop func(), err error) {
	if m.closed.Load() {
		return nil, ErrStoreClosed
	}
	w := &m.watch
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.watchers == nil {
		w.watchers = watch.Keyed{}
	}
	w.watchers.Add(key, c)
	return func() {
		w.mu.Lock()
		defer w.mu.Unlock()
		w.watchers.Remove(key, c)
	}, nil
}

// released wakes the watchers of key: a lease on it was released, or the
// key was reset.
func (m *MemStore) released(key string) {
	w := &m.watch
	w.mu.Lock()
	defer w.mu.Unlock()
	w.watchers.Wake(key)
}
