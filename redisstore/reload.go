package redisstore

import (
	"context"
	"errors"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// reloadEvery bounds how often a store asks a Cluster client to reload
// the cluster's slot layout: a flood of failing decisions asks at most
// ten times a second.
const reloadEvery = 100 * time.Millisecond

// layoutReloader is the method of [redis.ClusterClient] that reloads the
// slot layout (CLUSTER SLOTS from a reachable node) in the background.
type layoutReloader interface {
	ReloadState(ctx context.Context)
}

// A reloader asks a Cluster client to reload its slot layout when a
// decision could not reach its node.
//
// go-redis reloads the layout when a node answers MOVED or ASK, and
// otherwise only every ClusterStateReloadInterval (60 s by default), as
// the next command finds it stale. A master that dies answers neither: its
// replica takes over within the cluster's failover time, but the client
// keeps sending that master's slots to the dead address until its next
// periodic reload. Asking for a reload on every failure to connect, until
// the layout names the new master, ends the outage with the failover.
type reloader struct {
	client layoutReloader
	born   time.Time    // the origin of next, read on the monotonic clock
	next   atomic.Int64 // nanoseconds since born before which no reload is asked
}

// newReloader returns a reloader for client, or nil if client has no slot
// layout to reload.
func newReloader(client redis.UniversalClient) *reloader {
	c, ok := client.(layoutReloader)
	if !ok {
		return nil
	}
	return &reloader{client: c, born: time.Now()}
}

// failed asks for a reload if err is a failure to reach a node and no
// reload was asked in the last reloadEvery.
func (r *reloader) failed(err error) {
	if unreachable(err) {
		r.ask()
	}
}

// ask asks for a reload unless one was asked in the last reloadEvery, as
// after a node's answer that its slot has moved. A nil reloader, which
// has no layout to reload, asks nothing.
func (r *reloader) ask() {
	if r == nil {
		return
	}
	now := int64(time.Since(r.born))
	next := r.next.Load()
	if now < next || !r.next.CompareAndSwap(next, now+int64(reloadEvery)) {
		return
	}
	r.client.ReloadState(context.Background())
}

// unreachable reports whether err is a failure to reach Redis or of the
// connection (refused, reset, timed out), rather than an error reply, the
// caller's cancellation or a closed client.
func unreachable(err error) bool {
	if err == nil {
		return false // the usual call: reply, below, escapes and would be allocated
	}
	var reply redis.Error
	return !errors.As(err, &reply) && !errors.Is(err, context.Canceled) && !errors.Is(err, redis.ErrClosed)
}
