package redisstore

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"net"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluice-go/sluice"
	"github.com/sluice-go/sluice/engine"
	"github.com/sluice-go/sluice/internal/watch"
)

var _ engine.ReleaseWatcher = (*Store)(nil)

// WatchReleases sends on c, without blocking (a full channel has a
// wake-up pending already), after each release of a lease on key made
// through any store that shares the key's Redis name, in any process,
// and after each waiter that leaves the key's line or is served from it
// (engine.Params.Frees), until stop is called. It implements
// [engine.ReleaseWatcher], so that [sluice.Limiter.Acquire] and
// [sluice.Group.Acquire] sleep until a release rather than poll.
//
// The function call that releases a lease, alone or in a group, publishes
// the release (SPUBLISH, Redis 7's sharded pub/sub), as does one that
// takes a waiter out of the line or serves one with room left, on the
// channel named as the key's Redis name ([Store.Key]): the notice goes
// out if and only if the release is made, in the same atomic step, and
// stays in the key's slot, so that it reaches the subscribers of the
// master that serves the key on a single server, behind Sentinel and in a
// Cluster alike. A reset ([Store.Reset]) is published too. WatchReleases
// subscribes (SSUBSCRIBE) and returns once Redis has confirmed the
// subscription, so that a release made after it returns wakes c: the
// first watcher of a key waits one round trip for it.
//
// Watchers share subscriptions: the watchers of one key share its
// channel, which is unsubscribed when the last of them stops, and the
// channels share connections: one for all of the store's channels on a
// single server or behind Sentinel, one per hash slot in a Cluster (on a
// Ring, one per shard), each closed once it has had no channel for 15 to
// 30 s. Per slot, because Redis refuses an SSUBSCRIBE of channels in
// several slots, and go-redis, when it reconnects, subscribes every
// channel of the connection again in one SSUBSCRIBE, sent to the master
// that serves the slot of one of them: a connection per slot follows a
// failover or a resharding by itself. A subscription answered with MOVED
// is made again on the master the reloaded slot layout names.
//
// If a subscription's connection fails, go-redis connects again and
// subscribes its channels again; the store retries after waits that
// double from 50 ms to 2 s (in a Cluster, having the client reload the
// slot layout), and wakes every watcher of a channel once its
// subscription is confirmed again, since releases may have gone untold
// meanwhile. A connection silent for 15 s is checked with PING, and
// replaced if the answer does not come within 5 s. A wake-up that is
// lost all the same (a connection that died unnoticed, a server that
// stays down) costs the waiter its limiter's lease poll at most
// ([sluice.WithLeasePoll], a second by default), or less if the earliest
// lease expires sooner.
//
// If Redis cannot be reached, refuses the subscription (other than with
// MOVED), or the connection fails before the subscription is confirmed,
// WatchReleases returns that error, wrapped, and [sluice.Limiter.Acquire]
// returns it, as the decision it would make next would fail. ctx bounds
// the wait for the confirmation, and WatchReleases returns ctx's error if
// it ends first; connecting takes a second at most, whatever ctx's
// deadline, since the connection is shared and a write cut short would
// drop it for every watcher. After [Store.Close] it returns an error
// wrapping [sluice.ErrStoreClosed].
func (s *Store) WatchReleases(ctx context.Context, key string, c chan<- struct{}) (stop func(), err error) {
	stop, err = s.releases.watch(ctx, s, s.Key(key), c)
	if err != nil {
		return nil, fmt.Errorf("redisstore: watching releases on key %q: %w", key, err)
	}
	return stop, nil
}

// Close stops watching releases: it closes every subscription's
// connection, wakes every watcher once, and ends the subscriptions'
// goroutines before it returns. Later calls of WatchReleases return an
// error wrapping [sluice.ErrStoreClosed]; decisions still run on the
// client, which stays the caller's to close. It is safe to call more than
// once.
func (s *Store) Close() error {
	s.releases.close()
	return nil
}

// The subscriptions' timing (see Store.WatchReleases); the wait before
// another attempt to connect a subscription doubles after each failure,
// as watch.NextBackoff says.
const (
	// idleCheck is how long a subscription's connection may stay silent
	// before it is checked with PING, whose answer must come within
	// pongTimeout; and how long a subscription without channels stays
	// open, at least, for the next watcher.
	idleCheck   = 15 * time.Second
	pongTimeout = 5 * time.Second
	// commandTimeout bounds an SSUBSCRIBE, SUNSUBSCRIBE or PING that the
	// store sends on its own, without a caller's context.
	commandTimeout = time.Second
)

// errClosed is the error of a watch on a closed store.
var errClosed = fmt.Errorf("%w: redisstore", sluice.ErrStoreClosed)

// releases is a store's watching of releases: its subscriptions, by the
// shard their channels live on, and their goroutines.
type releases struct {
	mu     sync.Mutex
	closed bool
	subs   map[string]*subscription // by shardOf
	// changed is closed, and replaced, when a topic's subscription is
	// confirmed or fails, and at close: watches waiting for a
	// confirmation look again.
	changed chan struct{}
	wg      sync.WaitGroup // the subscriptions' goroutines
}

// A subscription is one go-redis PubSub: one connection, to the server
// that serves its channels, and the topics subscribed on it. Its
// goroutine receives what the connection brings.
type subscription struct {
	ps      *redis.PubSub // replaced when the connection is rebuilt
	topics  map[string]*topic
	running bool          // its goroutine has started
	quit    chan struct{} // closed when it is dropped: at close, or idle
	// emptySince is when its last topic left; zero while it has one.
	emptySince time.Time
}

// A topic is one key's channel on a subscription: the channel sent on
// for each release, and the state of its subscription.
type topic struct {
	watchers watch.Channels
	// live says that the server confirmed SSUBSCRIBE on the current
	// connection; lost, that the topic was live on a connection since
	// lost, and its watchers are woken at the next confirmation.
	live, lost bool
	// err is why a subscription failed before it was ever live, for the
	// watches waiting for it; the topic has left its subscription then.
	err error
}

// shardOf returns the identity of the subscription that carries the
// channel name: its hash slot in a Cluster; on a Ring, the address of
// the shard that serves it; otherwise "", the one server's.
func (s *Store) shardOf(name string) (string, error) {
	switch c := s.client.(type) {
	case *redis.ClusterClient:
		return strconv.Itoa(int(slot(name))), nil
	case *redis.Ring:
		shard, err := c.GetShardClientForKey(name)
		if err != nil {
			return "", err
		}
		return shard.Options().Addr, nil
	}
	return "", nil
}

// subscriber returns a PubSub, not yet connected, for the channels of the
// shard that serves the channel name. A Cluster client's PubSub connects
// to the master of the slot of the first channel it subscribes, when it
// subscribes it.
func (s *Store) subscriber(name string) (*redis.PubSub, error) {
	ctx := context.Background() // no channel: nothing is sent
	if c, ok := s.client.(*redis.Ring); ok {
		shard, err := c.GetShardClientForKey(name)
		if err != nil {
			return nil, err
		}
		return shard.SSubscribe(ctx), nil
	}
	return s.client.SSubscribe(ctx), nil
}

// watch registers c for the releases published on the channel name and
// returns once the server has confirmed its subscription, starting the
// subscription's goroutine if it has not started.
func (r *releases) watch(ctx context.Context, s *Store, name string, c chan<- struct{}) (func(), error) {
	id, err := s.shardOf(name)
	if err != nil {
		return nil, err
	}
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return nil, errClosed
	}
	if r.subs == nil {
		r.subs = make(map[string]*subscription)
		r.changed = make(chan struct{})
	}
	sub := r.subs[id]
	if sub == nil {
		ps, err := s.subscriber(name)
		if err != nil {
			r.mu.Unlock()
			return nil, err
		}
		sub = &subscription{ps: ps, topics: make(map[string]*topic), quit: make(chan struct{})}
		r.subs[id] = sub
	}
	t := sub.topics[name]
	if t == nil {
		t = &topic{}
		sub.topics[name] = t
		sub.emptySince = time.Time{}
	}
	// Registered first, so that a release published as soon as the
	// subscription holds finds c.
	t.watchers.Add(c)
	stop := sync.OnceFunc(func() { r.unwatch(id, sub, name, t, c) })
	if t.live {
		r.mu.Unlock()
		return stop, nil
	}
	ps := sub.ps
	r.mu.Unlock()

	// Every watch that finds the topic not live subscribes: SSUBSCRIBE of
	// a channel subscribed already is harmless, and a watch that finds no
	// connection makes one itself. The connection is shared: it is made
	// and written to within commandTimeout, not ctx, since go-redis drops
	// and makes again a connection whose write fails at ctx's deadline,
	// and with it the other topics' subscriptions. A PubSub closed
	// meanwhile was replaced by one that subscribes every topic, c's
	// included, or the store was closed.
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), commandTimeout)
	err = ps.SSubscribe(sctx, name)
	cancel()
	if err == nil || errors.Is(err, redis.ErrClosed) {
		err = ctx.Err()
	} else {
		s.reload.failed(err) // a Cluster's master gone: its layout reloaded
	}
	if err != nil {
		stop()
		return nil, err
	}
	r.mu.Lock()
	if !sub.running && !r.closed && r.subs[id] == sub {
		sub.running = true
		r.wg.Add(1)
		go r.run(s, id, sub)
	}
	for {
		var err error
		switch {
		case r.closed:
			err = errClosed
		case t.err != nil:
			err = t.err
		case t.live:
			r.mu.Unlock()
			return stop, nil
		}
		changed := r.changed
		r.mu.Unlock()
		if err != nil {
			stop()
			return nil, err
		}
		select {
		case <-changed:
		case <-ctx.Done():
			stop()
			return nil, ctx.Err()
		}
		r.mu.Lock()
	}
}

// unwatch removes c from the watchers of the topic t, on the channel
// name of the subscription sub (of shard id). The last watcher to leave
// a topic unsubscribes it; a subscription left without topics before its
// goroutine started is dropped at once, and otherwise by its goroutine
// once idle.
func (r *releases) unwatch(id string, sub *subscription, name string, t *topic, c chan<- struct{}) {
	r.mu.Lock()
	t.watchers.Remove(c)
	if len(t.watchers) > 0 || sub.topics[name] != t {
		r.mu.Unlock()
		return
	}
	delete(sub.topics, name)
	var unsubscribe, drop *redis.PubSub
	if t.live {
		unsubscribe = sub.ps
	}
	if len(sub.topics) == 0 {
		sub.emptySince = time.Now()
		if !sub.running && r.subs[id] == sub {
			r.dropLocked(id, sub)
			drop, unsubscribe = sub.ps, nil
		}
	}
	r.mu.Unlock()
	// A topic that was not live is not unsubscribed here: the connection
	// may be down, and SUNSUBSCRIBE would wait for a new one. go-redis
	// subscribes it again when it reconnects, and the goroutine then
	// unsubscribes what no topic wants (see confirmed).
	if unsubscribe != nil {
		ctx, cancel := context.WithTimeout(context.Background(), commandTimeout)
		_ = unsubscribe.SUnsubscribe(ctx, name)
		cancel()
	}
	if drop != nil {
		_ = drop.Close()
	}
}

// dropLocked removes sub, the subscription of shard id, from the store's
// and tells its goroutine to end; r.mu is held. The caller closes its
// PubSub, after unlocking.
func (r *releases) dropLocked(id string, sub *subscription) {
	delete(r.subs, id)
	close(sub.quit)
}

// close ends every subscription and its goroutine, and makes watches
// fail. It wakes every watcher once, so that none sleeps on a store that
// will not wake it.
func (r *releases) close() {
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return
	}
	r.closed = true
	var closing []*redis.PubSub
	for id, sub := range r.subs {
		for _, t := range sub.topics {
			t.watchers.Wake()
		}
		r.dropLocked(id, sub)
		closing = append(closing, sub.ps)
	}
	if r.changed != nil {
		r.changedLocked()
	}
	r.mu.Unlock()
	for _, ps := range closing {
		_ = ps.Close()
	}
	r.wg.Wait()
}

// changedLocked tells the watches waiting for a confirmation to look
// again; r.mu is held.
func (r *releases) changedLocked() {
	close(r.changed)
	r.changed = make(chan struct{})
}

// run receives what the subscription sub's connection brings until sub is
// dropped: it wakes the watchers of each release, confirms subscriptions,
// checks a silent connection, and recovers from failures.
func (r *releases) run(s *Store, id string, sub *subscription) {
	defer r.wg.Done()
	var backoff time.Duration
	pinged := false // a PING is unanswered
	for {
		r.mu.Lock()
		ps := sub.ps
		idle := len(sub.topics) == 0 && !sub.emptySince.IsZero() && time.Since(sub.emptySince) >= idleCheck &&
			r.subs[id] == sub
		if idle {
			r.dropLocked(id, sub)
		}
		r.mu.Unlock()
		if idle {
			_ = ps.Close()
			return
		}
		wait := idleCheck
		if pinged {
			wait = pongTimeout
		}
		msg, err := ps.ReceiveTimeout(context.Background(), wait)
		select {
		case <-sub.quit:
			return
		default:
		}
		var reply redis.Error
		switch {
		case err == nil:
			backoff, pinged = 0, false
			r.received(sub, ps, msg)
		case timedOut(err) && !pinged:
			pinged = true
			ctx, cancel := context.WithTimeout(context.Background(), commandTimeout)
			_ = ps.Ping(ctx) // a failure shows in the next Receive
			cancel()
		case timedOut(err):
			// No answer to PING: a connection that died without a word.
			pinged = false
			r.rebuild(s, id, sub)
		case errors.As(err, &reply):
			// SSUBSCRIBE refused. MOVED, after a failover or a resharding
			// that the client's layout had not followed: every topic is
			// subscribed again, on a new connection to the master that
			// serves the slot now, as a decision follows MOVED. Another
			// refusal (CLUSTERDOWN during a failover) fails the watches
			// waiting for a confirmation, as a decision would fail, and
			// the live topics are subscribed again after a wait.
			if !r.follow(s, sub, err) {
				r.failPending(sub, err)
				s.reload.ask()
				backoff = watch.NextBackoff(backoff)
				if !pause(sub, backoff) {
					return
				}
			}
			r.rebuild(s, id, sub)
		default:
			// The connection failed, and go-redis has tried to connect
			// again: PING tells whether it has, or tries once more.
			r.dropped(sub)
			ctx, cancel := context.WithTimeout(context.Background(), commandTimeout)
			err = ps.Ping(ctx)
			cancel()
			if err == nil {
				continue // subscribed again: the confirmations follow
			}
			r.failPending(sub, err)
			s.reload.failed(err)
			backoff = watch.NextBackoff(backoff)
			if !pause(sub, backoff) {
				return
			}
		}
	}
}

// received handles a message of the subscription sub's connection ps.
func (r *releases) received(sub *subscription, ps *redis.PubSub, msg any) {
	switch m := msg.(type) {
	case *redis.Message: // a release
		r.mu.Lock()
		if t := sub.topics[m.Channel]; t != nil {
			t.watchers.Wake()
		}
		r.mu.Unlock()
	case *redis.Subscription:
		switch m.Kind {
		case "ssubscribe":
			r.confirmed(sub, ps, m.Channel)
		case "sunsubscribe":
			r.unsubscribed(sub, ps, m.Channel)
		}
	}
}

// confirmed records the server's confirmation of the subscription to the
// channel name on ps: its topic is live, and its watchers are woken if it
// had been lost. A channel that no topic wants any more (its watchers
// left before the confirmation, or a subscription that failed and that
// go-redis made again) is unsubscribed.
func (r *releases) confirmed(sub *subscription, ps *redis.PubSub, name string) {
	r.mu.Lock()
	t := sub.topics[name]
	if t != nil && !t.live {
		t.live = true
		if t.lost {
			t.lost = false
			t.watchers.Wake()
		}
		r.changedLocked()
	}
	r.mu.Unlock()
	if t == nil {
		ctx, cancel := context.WithTimeout(context.Background(), commandTimeout)
		_ = ps.SUnsubscribe(ctx, name)
		cancel()
	}
}

// unsubscribed records the end of the subscription to the channel name on
// ps: the store's own SUNSUBSCRIBE, or the server's when its node lost
// the slot. A channel that a topic still wants (the server's, or a topic
// made again since the SUNSUBSCRIBE was sent) is subscribed again, and
// its watchers are woken when that is confirmed.
func (r *releases) unsubscribed(sub *subscription, ps *redis.PubSub, name string) {
	r.mu.Lock()
	t := sub.topics[name]
	if t != nil && t.live {
		t.live, t.lost = false, true
	}
	r.mu.Unlock()
	if t != nil {
		ctx, cancel := context.WithTimeout(context.Background(), commandTimeout)
		_ = ps.SSubscribe(ctx, name) // a failure shows in the next Receive
		cancel()
	}
}

// follow reports whether err, an error reply on the subscription sub's
// connection, is MOVED, once the client's layout names the master it
// points to (see Store.moved), so that a new connection goes there.
func (r *releases) follow(s *Store, sub *subscription, err error) bool {
	r.mu.Lock()
	var name string
	for name = range sub.topics {
		break
	}
	r.mu.Unlock()
	if name == "" {
		return false
	}
	ctx, cancel := context.WithTimeout(context.Background(), commandTimeout)
	defer cancel()
	return s.moved(ctx, name, err)
}

// dropped records that the subscription's connection failed: each live
// topic is lost, until its subscription is confirmed again.
func (r *releases) dropped(sub *subscription) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, t := range sub.topics {
		if t.live {
			t.live, t.lost = false, true
		}
	}
}

// failPending fails, with err, the topics of sub that were never live:
// their watches return err. The topics that were live stay, to be
// subscribed again.
func (r *releases) failPending(sub *subscription, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	failed := false
	for name, t := range sub.topics {
		if !t.live && !t.lost {
			t.err = err
			delete(sub.topics, name)
			failed = true
		}
	}
	if failed {
		if len(sub.topics) == 0 {
			sub.emptySince = time.Now()
		}
		r.changedLocked()
	}
}

// rebuild replaces the subscription's PubSub by a new one, on a new
// connection to the server that serves its channels now, and subscribes
// every topic on it. Its live topics are lost until confirmed again.
func (r *releases) rebuild(s *Store, id string, sub *subscription) {
	r.mu.Lock()
	if r.subs[id] != sub || len(sub.topics) == 0 {
		r.mu.Unlock()
		return // dropped, or idle: the loop drops it in time
	}
	names := slices.Collect(maps.Keys(sub.topics))
	ps, err := s.subscriber(names[0])
	if err != nil {
		r.mu.Unlock()
		return // a Ring without a shard for it: tried again after the next failure
	}
	for _, t := range sub.topics {
		if t.live {
			t.live, t.lost = false, true
		}
	}
	old := sub.ps
	sub.ps = ps
	r.mu.Unlock()
	_ = old.Close()
	ctx, cancel := context.WithTimeout(context.Background(), commandTimeout)
	_ = ps.SSubscribe(ctx, names...) // a failure shows in the next Receive, which connects again
	cancel()
}

// pause waits for d with jitter, and returns false if sub is dropped
// meanwhile.
func pause(sub *subscription, d time.Duration) bool {
	t := time.NewTimer(d/2 + rand.N(d/2+1))
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-sub.quit:
		return false
	}
}

// timedOut reports whether err is a read that timed out, the connection
// intact.
func timedOut(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}
