package pgstore

import (
	"context"
	"fmt"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/sluice-go/sluice"
	"github.com/sluice-go/sluice/internal/leaseproc"
	"github.com/sluice-go/sluice/internal/testserver"
)

// testDeadline bounds each test of the listener: what it waits for comes
// at once, or the test fails at it.
const testDeadline = 30 * time.Second

func TestChannelIsTheTableNameWithinAnIdentifier(t *testing.T) {
	long := func(c byte, n int) string { return strings.Repeat(string(c), n) }
	for _, tc := range []struct {
		name  string
		table []string
		want  string
	}{
		{"default table", []string{DefaultTable}, "sluice_buckets:released"},
		{"qualified by a schema", []string{"limits", "buckets"}, "limits.buckets:released"},
		{"63 bytes, the longest kept whole", []string{long('s', 6), long('t', 47)}, long('s', 6) + "." + long('t', 47) + ":released"},
		{"64 bytes, shortened", []string{long('s', 7), long('t', 47)},
			long('s', 7) + "." + long('t', 29) + "~" + digest16(long('s', 7)+"."+long('t', 47)) + ":released"},
		{"the longest name", []string{long('s', 63), long('t', 48)}, long('s', 37) + "~" + digest16(long('s', 63)+"."+long('t', 48)) + ":released"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := channelOf(tc.table)
			require.Equal(t, tc.want, got)
			require.LessOrEqual(t, len(got), maxIdentifier)
		})
	}
}

// digest16 is the first 16 hexadecimal digits of name's SHA-256.
func digest16(name string) string { return releasePayload(name)[:16] }

// newTestStore returns a store on pool, on a table that the test creates
// and drops, and closes it when t ends.
func newTestStore(t *testing.T, pool *pgxpool.Pool) (*Store, string) {
	t.Helper()
	table := fmt.Sprintf("sluice_test_watch_%d", time.Now().UnixNano())
	st, err := New(pool, WithTable(table))
	require.NoError(t, err)
	require.NoError(t, st.CreateSchema(context.Background()))
	t.Cleanup(func() {
		require.NoError(t, st.Close())
		_, err := pool.Exec(context.Background(), "DROP TABLE "+pgx.Identifier{table}.Sanitize())
		require.NoError(t, err)
	})
	return st, table
}

// listening returns the process ID and the start of the latest statement
// of the backend listening for the releases of table, polling until one
// does.
func listening(t *testing.T, ctx context.Context, conn *pgx.Conn, table string) (int32, time.Time) {
	t.Helper()
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for {
		var pid int32
		var at time.Time
		err := conn.QueryRow(ctx, "SELECT pid, query_start FROM pg_stat_activity WHERE query = $1",
			"LISTEN "+pgx.Identifier{table + ":released"}.Sanitize()).Scan(&pid, &at)
		if err == nil {
			return pid, at
		}
		require.ErrorIs(t, err, pgx.ErrNoRows)
		leaseproc.Receive(t, ctx, tick.C, "listening backend")
	}
}

// requireEnded requires the listener's goroutine to have ended.
func requireEnded(t *testing.T, l *listener) {
	t.Helper()
	select {
	case <-l.done:
	default:
		t.Fatal("the listener's goroutine is still running")
	}
}

// release takes a lease of key through st and releases it.
func release(t *testing.T, ctx context.Context, st *Store, key string) {
	t.Helper()
	lim, err := sluice.NewConcurrencyLimit(1, time.Hour, sluice.WithStore(st))
	require.NoError(t, err)
	lease, err := lim.TryAcquire(ctx, key, 1)
	require.NoError(t, err)
	require.True(t, lease.Allowed)
	require.NoError(t, lease.Release(ctx))
}

// TestCloseEndsTheListenerAndItsConnection pins Close: the listener's
// goroutine has ended when it returns (no goroutine left behind), and its
// connection is closed.
func TestCloseEndsTheListenerAndItsConnection(t *testing.T) {
	url := testserver.StartPostgres(t).URL
	pool, err := pgxpool.New(context.Background(), url)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	st, table := newTestStore(t, pool)
	ctx, cancel := context.WithTimeout(context.Background(), testDeadline)
	defer cancel()
	stop, err := st.WatchReleases(ctx, "k", make(chan struct{}, 1))
	require.NoError(t, err)
	defer stop()
	conn, err := pgx.Connect(ctx, url)
	require.NoError(t, err)
	defer conn.Close(ctx)
	pid, _ := listening(t, ctx, conn, table)

	require.NoError(t, st.Close())
	requireEnded(t, st.releases)
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for {
		var n int
		require.NoError(t, conn.QueryRow(ctx, "SELECT count(*) FROM pg_stat_activity WHERE pid = $1", pid).Scan(&n))
		if n == 0 {
			break // the backend ended with its connection
		}
		leaseproc.Receive(t, ctx, tick.C, "end of the listening backend")
	}
}

// blackHole is a server that accepts connections and never answers, as a
// host that went away behind a firewall that still completes handshakes:
// an attempt to connect through it waits until its context ends.
type blackHole struct {
	ln       net.Listener
	accepted chan struct{} // one value per connection
}

func newBlackHole(t *testing.T) *blackHole {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	h := &blackHole{ln: ln, accepted: make(chan struct{}, 16)}
	var conns []net.Conn
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			conns = append(conns, c)
			h.accepted <- struct{}{}
		}
	}()
	t.Cleanup(func() {
		_ = ln.Close()
		<-done
		for _, c := range conns {
			_ = c.Close()
		}
	})
	return h
}

// store returns a store whose pool connects to the black hole.
func (h *blackHole) store(t *testing.T) *Store {
	t.Helper()
	pool, err := pgxpool.New(context.Background(), "postgres://sluice@"+h.ln.Addr().String()+"/sluice?sslmode=disable")
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	st, err := New(pool)
	require.NoError(t, err)
	return st
}

// TestWatchThatEndsWhileConnectingLeavesNoWatcher pins a waiter whose
// context ends while the store tries to listen: WatchReleases returns the
// context's error and leaves no watcher behind; Close then ends the
// attempt and the goroutine.
func TestWatchThatEndsWhileConnectingLeavesNoWatcher(t *testing.T) {
	for _, tc := range []struct {
		name string
		end  func(t *testing.T, st *Store, cancel context.CancelFunc)
		want error
	}{
		{"context canceled", func(_ *testing.T, _ *Store, cancel context.CancelFunc) { cancel() }, context.Canceled},
		{"store closed", func(t *testing.T, st *Store, _ context.CancelFunc) { require.NoError(t, st.Close()) }, sluice.ErrStoreClosed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newBlackHole(t)
			st := h.store(t)
			deadline, cancelDeadline := context.WithTimeout(context.Background(), testDeadline)
			defer cancelDeadline()
			ctx, cancel := context.WithCancel(deadline)
			defer cancel()
			errc := make(chan error, 1)
			go func() {
				_, err := st.WatchReleases(ctx, "k", make(chan struct{}, 1))
				errc <- err
			}()
			leaseproc.Receive(t, deadline, h.accepted, "attempt to connect")
			tc.end(t, st, cancel)
			require.ErrorIs(t, leaseproc.Receive(t, deadline, errc, "end of the watch"), tc.want)
			st.releases.mu.Lock()
			require.Empty(t, st.releases.watchers)
			st.releases.mu.Unlock()
			require.NoError(t, st.Close())
			requireEnded(t, st.releases)
		})
	}
}

// TestListenerChecksASilentConnectionAndKeepsIt pins the check of a
// connection without notifications: LISTEN again after each silence,
// on the same backend, which still delivers the releases, and wakes no
// one by itself.
func TestListenerChecksASilentConnectionAndKeepsIt(t *testing.T) {
	url := testserver.StartPostgres(t).URL
	pool, err := pgxpool.New(context.Background(), url)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	st, table := newTestStore(t, pool)
	st.releases.check = 20 * time.Millisecond
	ctx, cancel := context.WithTimeout(context.Background(), testDeadline)
	defer cancel()
	c := make(chan struct{}, 1)
	stop, err := st.WatchReleases(ctx, "k", c)
	require.NoError(t, err)
	defer stop()
	conn, err := pgx.Connect(ctx, url)
	require.NoError(t, err)
	defer conn.Close(ctx)

	pid, first := listening(t, ctx, conn, table)
	checks := 0
	for last := first; checks < 3; {
		again, at := listening(t, ctx, conn, table)
		require.Equal(t, pid, again, "the same connection")
		if at.After(last) {
			checks, last = checks+1, at
		}
	}
	require.Empty(t, c, "a check wakes no one")
	release(t, ctx, st, "k")
	leaseproc.Receive(t, ctx, c, "wake-up by the release")
}

// proxy forwards TCP connections to a server, and can go silent on the
// connections it holds, as a network cut would, while it forwards new
// ones.
type proxy struct {
	ln     net.Listener
	target string
	mu     sync.Mutex
	held   []*held
	wg     sync.WaitGroup
}

// held is one connection through the proxy, both ways.
type held struct {
	client, server net.Conn
	silent         atomic.Bool
}

func newProxy(t *testing.T, target string) *proxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	p := &proxy{ln: ln, target: target}
	p.wg.Go(p.serve)
	t.Cleanup(func() {
		_ = ln.Close()
		p.mu.Lock()
		for _, h := range p.held {
			_ = h.client.Close()
			_ = h.server.Close()
		}
		p.mu.Unlock()
		p.wg.Wait()
	})
	return p
}

func (p *proxy) serve() {
	for {
		client, err := p.ln.Accept()
		if err != nil {
			return
		}
		server, err := net.Dial("tcp", p.target)
		if err != nil {
			_ = client.Close()
			continue
		}
		h := &held{client: client, server: server}
		p.mu.Lock()
		p.held = append(p.held, h)
		p.mu.Unlock()
		p.wg.Go(func() { h.forward(server, client) })
		p.wg.Go(func() { h.forward(client, server) })
	}
}

// forward copies from src to dst until either fails, dropping what it
// reads once the connection is silent.
func (h *held) forward(dst, src net.Conn) {
	defer dst.Close()
	defer src.Close()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if err != nil {
			return
		}
		if h.silent.Load() {
			continue
		}
		if _, err := dst.Write(buf[:n]); err != nil {
			return
		}
	}
}

// silence makes every connection the proxy holds now silent.
func (p *proxy) silence() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, h := range p.held {
		h.silent.Store(true)
	}
}

// TestListenerReplacesAConnectionThatGoesSilent pins the check's purpose:
// a listening connection that goes silent without closing (a network
// cut) fails its check, and the store listens on another, waking every
// watcher once; a release then wakes them through it.
func TestListenerReplacesAConnectionThatGoesSilent(t *testing.T) {
	url := testserver.StartPostgres(t).URL
	direct, err := pgxpool.New(context.Background(), url)
	require.NoError(t, err)
	t.Cleanup(direct.Close)
	other, table := newTestStore(t, direct)

	cfg, err := pgxpool.ParseConfig(url)
	require.NoError(t, err)
	p := newProxy(t, net.JoinHostPort(cfg.ConnConfig.Host, fmt.Sprint(cfg.ConnConfig.Port)))
	host, port, err := net.SplitHostPort(p.ln.Addr().String())
	require.NoError(t, err)
	cfg.ConnConfig.Host = host
	_, err = fmt.Sscan(port, &cfg.ConnConfig.Port)
	require.NoError(t, err)
	proxied, err := pgxpool.NewWithConfig(context.Background(), cfg)
	require.NoError(t, err)
	t.Cleanup(proxied.Close)
	st, err := New(proxied, WithTable(table))
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, st.Close()) })
	st.releases.check, st.releases.checkTimeout = 20*time.Millisecond, 100*time.Millisecond

	ctx, cancel := context.WithTimeout(context.Background(), testDeadline)
	defer cancel()
	c := make(chan struct{}, 1)
	stop, err := st.WatchReleases(ctx, "k", c)
	require.NoError(t, err)
	defer stop()
	p.silence()
	leaseproc.Receive(t, ctx, c, "wake-up by the new listener")
	release(t, ctx, other, "k")
	leaseproc.Receive(t, ctx, c, "wake-up by the release")
}
