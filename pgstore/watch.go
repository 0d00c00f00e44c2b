package pgstore

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/sluice-go/sluice"
	"github.com/sluice-go/sluice/engine"
	"github.com/sluice-go/sluice/internal/watch"
)

var _ engine.ReleaseWatcher = (*Store)(nil)

// WatchReleases sends on c, without blocking (a full channel has a
// wake-up pending already), after each decision on key that may let a
// waiter in ([engine.Params.Frees]: a release of a lease, a waiter
// leaving the key's line or served with room left) made through any store
// on the same table, in any process, until stop is called. It implements
// [engine.ReleaseWatcher], so that [sluice.Limiter.Acquire] and
// [sluice.Group.Acquire] sleep until a release rather than poll.
//
// Such a decision (a release that frees a lease, an allowed VerbLeave, an
// admitted VerbAllow with a ticket) notifies the table's channel
// (PostgreSQL's NOTIFY) from its own statement, so that the notification
// is sent when the decision commits, and only then, alone or with the
// group's transaction: a process killed just after its release committed
// has sent the notification with it. The store listens on one connection
// of its own, which the first call takes from the pool for good (a store
// that never waits costs nothing), and which Close closes. WatchReleases
// returns once LISTEN is in effect on it, so that a release made after it
// returns wakes c.
//
// If the listening connection fails, the store opens another by itself,
// retrying after waits that double from 50 ms to 2 s, and then wakes
// every watcher once, since releases may have gone untold meanwhile (a
// spurious wake-up costs the waiter a round trip). A connection that has
// been silent for 15 s is checked with a round trip (LISTEN again), and
// replaced if that does not come back within 5 s, so that one that died
// without a word (a host gone, a network cut) is replaced within 20 s.
// A release told while the connection is down wakes its waiters when the
// store listens again, or their lease poll does ([sluice.WithLeasePoll],
// a second by default), whichever comes first: what a lost wake-up
// costs, at most.
//
// If the store is not listening and cannot listen now (the database is
// down), WatchReleases returns the error of an attempt begun after it was
// called, and Acquire fails with it, as the statement it would run next
// would fail; ctx bounds the wait for LISTEN. After Close it returns an
// error wrapping [sluice.ErrStoreClosed].
//
// The listening connection must be a session of its own: through a
// pooler in transaction mode (PgBouncer's), LISTEN does not last, and
// waiters are woken by their lease poll alone. PostgreSQL commits the
// transactions that notify one at a time, across the server (a lock held
// until each has committed): releases that free a lease commit one after
// the other, each waiting for its own commit's flush.
func (st *Store) WatchReleases(ctx context.Context, key string, c chan<- struct{}) (stop func(), err error) {
	return st.releases.watch(ctx, releasePayload(key), c)
}

// Close stops listening for releases: it closes the listening connection,
// if WatchReleases opened one, and ends its goroutine before it returns.
// Later calls of WatchReleases return an error wrapping
// [sluice.ErrStoreClosed]; the decisions still run on the pool, which
// stays the caller's to close. It is safe to call more than once.
func (st *Store) Close() error {
	st.releases.close()
	return nil
}

// The listening connection's timing (see Store.WatchReleases); the wait
// before another attempt to listen doubles after each failure, as
// watch.NextBackoff says.
const (
	// listenCheck is how long the connection may go without a
	// notification before it is checked with a round trip, which must
	// come back within listenCheckTimeout.
	listenCheck        = 15 * time.Second
	listenCheckTimeout = 5 * time.Second
	// listenConnectTimeout bounds one attempt to open the connection and
	// LISTEN on it.
	listenConnectTimeout = 10 * time.Second
)

// maxIdentifier is PostgreSQL's longest identifier, in bytes: a channel's
// name is one.
const maxIdentifier = 63

// channelOf returns the channel on which the releases of leases in the
// table named parts (optionally a schema, then the table) are notified:
// the name, parts joined by a dot, followed by ":released", as
// "limits.buckets:released". A name too long for PostgreSQL's 63 bytes
// keeps its first 37 bytes, then "~" and the first 16 hexadecimal digits
// of the name's SHA-256.
func channelOf(parts []string) string {
	const suffix = ":released"
	name := strings.Join(parts, ".")
	if len(name)+len(suffix) <= maxIdentifier {
		return name + suffix
	}
	sum := sha256.Sum256([]byte(name))
	digest := hex.EncodeToString(sum[:8])
	return name[:maxIdentifier-len(suffix)-len(digest)-1] + "~" + digest + suffix
}

// quoteLiteral returns s as an SQL string literal.
func quoteLiteral(s string) string {
	return "'" + strings.ReplaceAll(s, "'", "''") + "'"
}

// releasePayload is the payload of the notification of a release on key:
// the hexadecimal SHA-256 of its bytes, as the statements compute it
// (sqlgen's released).
func releasePayload(key string) string {
	sum := sha256.Sum256([]byte(key))
	return hex.EncodeToString(sum[:])
}

// A listener is a store's listening connection, which its goroutine opens
// on the first watch, and the watchers it wakes.
type listener struct {
	pool    *pgxpool.Pool
	channel string
	listen  string // the LISTEN statement
	// check and checkTimeout are listenCheck and listenCheckTimeout,
	// which tests shorten.
	check, checkTimeout time.Duration

	mu       sync.Mutex
	watchers watch.Keyed // by payload
	started  bool        // the goroutine
	closed   bool
	up       bool // LISTEN is in effect on the connection
	// begun numbers the attempts to connect and LISTEN; failed is the
	// number of the latest that ended, if it failed, with err.
	begun, failed uint64
	err           error
	// changed is closed, and replaced, when up, failed or closed changes.
	changed chan struct{}
	// retry asks the goroutine to try again now rather than after its
	// backoff.
	retry  chan struct{}
	cancel context.CancelFunc
	done   chan struct{} // closed when the goroutine ends
}

func newListener(pool *pgxpool.Pool, channel string) *listener {
	return &listener{
		pool:         pool,
		channel:      channel,
		listen:       "LISTEN " + pgx.Identifier{channel}.Sanitize(),
		check:        listenCheck,
		checkTimeout: listenCheckTimeout,
		watchers:     watch.Keyed{},
		changed:      make(chan struct{}),
		retry:        make(chan struct{}, 1),
		done:         make(chan struct{}),
	}
}

// errClosed is the error of a watch on a closed store.
var errClosed = fmt.Errorf("%w: pgstore: watching releases", sluice.ErrStoreClosed)

// watch registers c for the notifications of payload and returns once
// LISTEN is in effect, starting the goroutine if it has not started.
func (l *listener) watch(ctx context.Context, payload string, c chan<- struct{}) (stop func(), err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return nil, errClosed
	}
	// Registered first, so that a notification that comes as soon as
	// LISTEN is in effect finds c.
	l.watchers.Add(payload, c)
	stop = func() {
		l.mu.Lock()
		defer l.mu.Unlock()
		l.unwatch(payload, c)
	}
	if !l.started {
		l.started = true
		var run context.Context
		run, l.cancel = context.WithCancel(context.Background())
		go l.run(run)
	}
	// The error of an attempt begun before c was registered may be stale
	// (the database back meanwhile): only a later attempt's counts.
	begun := l.begun
	for !l.up {
		switch {
		case l.closed:
			l.unwatch(payload, c)
			return nil, errClosed
		case l.failed > begun:
			l.unwatch(payload, c)
			return nil, l.err
		}
		select {
		case l.retry <- struct{}{}:
		default: // asked already
		}
		changed := l.changed
		l.mu.Unlock()
		select {
		case <-changed:
			l.mu.Lock()
		case <-ctx.Done():
			l.mu.Lock()
			l.unwatch(payload, c)
			return nil, ctx.Err()
		}
	}
	return stop, nil
}

// unwatch removes c from the watchers of payload; l.mu is held.
func (l *listener) unwatch(payload string, c chan<- struct{}) {
	l.watchers.Remove(payload, c)
}

// close ends the goroutine, if it started, and makes watches fail. It
// wakes every watcher once, so that none sleeps on a store that will not
// wake it.
func (l *listener) close() {
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return
	}
	l.closed = true
	l.changedLocked()
	l.wakeAllLocked()
	started := l.started
	l.mu.Unlock()
	if started {
		l.cancel()
		<-l.done
	}
}

// run opens the listening connection, receives its notifications until
// it fails, and opens another, until ctx ends.
func (l *listener) run(ctx context.Context) {
	defer close(l.done)
	var backoff time.Duration
	listened := false // LISTEN was in effect before: the next wakes every watcher
	for {
		n := l.begin()
		conn, err := l.connect(ctx)
		if ctx.Err() != nil {
			closeConn(conn)
			return
		}
		l.attempted(n, err, listened)
		if err != nil {
			backoff = watch.NextBackoff(backoff)
			if !l.pause(ctx, backoff) {
				return
			}
			continue
		}
		listened, backoff = true, 0
		l.receive(ctx, conn)
		closeConn(conn)
		if ctx.Err() != nil {
			return
		}
		l.lost()
	}
}

// connect takes a connection from the pool for good and listens on it.
func (l *listener) connect(ctx context.Context) (*pgx.Conn, error) {
	ctx, cancel := context.WithTimeout(ctx, listenConnectTimeout)
	defer cancel()
	pc, err := l.pool.Acquire(ctx)
	if err != nil {
		return nil, fmt.Errorf("pgstore: listening for releases on %q: connecting: %w", l.channel, err)
	}
	conn := pc.Hijack()
	if _, err := conn.Exec(ctx, l.listen); err != nil {
		closeConn(conn)
		return nil, fmt.Errorf("pgstore: listening for releases on %q: %w", l.channel, err)
	}
	return conn, nil
}

// closeConn closes conn, if any, waiting a second at most for the
// server to be told.
func closeConn(conn *pgx.Conn) {
	if conn == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	_ = conn.Close(ctx)
}

// pause waits for d with jitter, or until a watch asks for an attempt
// now. It returns false if ctx ended.
func (l *listener) pause(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d/2 + rand.N(d/2+1))
	defer t.Stop()
	select {
	case <-t.C:
	case <-l.retry:
	case <-ctx.Done():
		return false
	}
	return true
}

// receive wakes the watchers of each notification conn receives, and
// checks conn after each l.check without one, until conn fails or ctx
// ends.
func (l *listener) receive(ctx context.Context, conn *pgx.Conn) {
	for {
		wait, cancel := context.WithTimeout(ctx, l.check)
		n, err := conn.WaitForNotification(wait)
		silent := errors.Is(wait.Err(), context.DeadlineExceeded)
		cancel()
		if n != nil && n.Channel == l.channel {
			l.wake(n.Payload)
		}
		switch {
		case err == nil:
			continue
		case !silent || ctx.Err() != nil:
			return
		}
		// LISTEN again, as the check: idempotent, and it leaves the
		// statement that pg_stat_activity shows as it was.
		check, cancel := context.WithTimeout(ctx, l.checkTimeout)
		_, err = conn.Exec(check, l.listen)
		cancel()
		if err != nil {
			return
		}
	}
}

// begin numbers an attempt to listen.
func (l *listener) begin() uint64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.begun++
	return l.begun
}

// attempted records that the attempt to listen numbered n failed with
// err or, if err is nil, put LISTEN in effect; again says that LISTEN was
// in effect before, on a connection since lost, so that every watcher is
// woken.
func (l *listener) attempted(n uint64, err error, again bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.up, l.failed, l.err = err == nil, 0, err
	if err != nil {
		l.failed = n
	}
	l.changedLocked()
	if err == nil && again {
		l.wakeAllLocked()
	}
}

// lost records that the listening connection failed.
func (l *listener) lost() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.up = false
	l.changedLocked()
}

// changedLocked tells the watches waiting that the state changed; l.mu is
// held.
func (l *listener) changedLocked() {
	close(l.changed)
	l.changed = make(chan struct{})
}

// wake wakes the watchers of payload.
func (l *listener) wake(payload string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.watchers.Wake(payload)
}

// wakeAllLocked wakes every watcher; l.mu is held.
func (l *listener) wakeAllLocked() { l.watchers.WakeAll() }
