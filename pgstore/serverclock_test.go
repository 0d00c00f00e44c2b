package pgstore_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/sluice-go/sluice"
	"github.com/sluice-go/sluice/engine"
	"github.com/sluice-go/sluice/internal/testserver"
	"github.com/sluice-go/sluice/pgstore"
	"github.com/sluice-go/sluice/storetest"
)

// dbClock is the database's clock as a test drives it: a schema holding a
// function clock_timestamp() that returns a time the test sets, and counts
// its calls. Connections whose search_path names the schema before
// pg_catalog call it instead of the built-in one, so that a store using
// the database's clock runs its statements, unchanged, at simulated times.
type dbClock struct {
	pool   *pgxpool.Pool // connections that see the simulated clock
	schema string
}

// newDBClock creates the clock's schema on the server at url and returns
// it with a pool of connections that use it, set to start.
func newDBClock(t *testing.T, url string, start int64) *dbClock {
	t.Helper()
	ctx := context.Background()
	admin := newPool(t, url, 1)
	c := &dbClock{schema: fmt.Sprintf("sluice_clock_%x", rand.Uint32())}
	schema := pgx.Identifier{c.schema}.Sanitize()
	_, err := admin.Exec(ctx, fmt.Sprintf(`CREATE SCHEMA %[1]s;
CREATE TABLE %[1]s.clock (ns bigint NOT NULL);
INSERT INTO %[1]s.clock VALUES (0);
CREATE SEQUENCE %[1]s.reads;
CREATE FUNCTION %[1]s.clock_timestamp() RETURNS timestamptz LANGUAGE sql VOLATILE AS
	$$ SELECT 'epoch'::timestamptz + (ns / 1000) * interval '1 microsecond' FROM %[1]s.clock WHERE nextval('%[1]s.reads') > 0 $$`, schema))
	require.NoError(t, err)
	dropAfter(t, admin, "SCHEMA "+schema+" CASCADE")

	cfg, err := pgxpool.ParseConfig(url)
	require.NoError(t, err)
	cfg.MaxConns = 4
	cfg.ConnConfig.RuntimeParams["search_path"] = c.schema + ", pg_catalog, public"
	c.pool, err = pgxpool.NewWithConfig(ctx, cfg)
	require.NoError(t, err)
	t.Cleanup(c.pool.Close)
	c.set(t, start)
	return c
}

// set moves the clock to ns, which timestamps hold only to the
// microsecond.
func (c *dbClock) set(t *testing.T, ns int64) {
	t.Helper()
	require.Zero(t, ns%1000, "the database's clock counts microseconds")
	_, err := c.pool.Exec(context.Background(), "UPDATE "+pgx.Identifier{c.schema, "clock"}.Sanitize()+" SET ns = $1", ns)
	require.NoError(t, err)
}

// reads returns how many times statements have read the clock.
func (c *dbClock) reads(t *testing.T) int64 {
	t.Helper()
	var n int64
	err := c.pool.QueryRow(context.Background(), "SELECT CASE WHEN is_called THEN last_value ELSE 0 END FROM "+pgx.Identifier{c.schema, "reads"}.Sanitize()).Scan(&n)
	require.NoError(t, err)
	return n
}

// TestServerClockDecisionsAreBitIdenticalToStep replays random traces of
// every verb through a store deciding by the database's clock, which the
// test moves (forwards and back): each decision must be Step's at the
// database's time bit for bit, a reservation's At is an instant on that
// clock, and a cancel compares its At with it, and so does a
// reservation's earliest instant; a lease's identity is its expiry on
// that clock, which its release and extension name. Penalties and counted
// denials are replayed too, and so are limits that change: in every other
// trace, a key's limit changes now and then to another of its algorithm
// (storetest.Variants), the state carries over as the specification
// carries it, and a key is fresh from its expiry on, whatever its limit
// then. (The conformance suite drives stores by the caller's clock.)
func TestServerClockDecisionsAreBitIdenticalToStep(t *testing.T) {
	clock := newDBClock(t, testserver.StartPostgres(t).URL, 0)
	st, _ := newStore(t, clock.pool)
	for ai, limit := range append(storetest.Algorithms(), storetest.Strict()...) {
		t.Run(fmt.Sprintf("%d_%v", ai, limit.Kind), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(uint64(ai), 0xc10c))
			changes := rand.New(rand.NewPCG(uint64(ai), 0xc4a9))
			variants := storetest.Variants(limit)
			for trace := range 4 {
				p := limit
				key := fmt.Sprintf("trace%d.%d", ai, trace)
				var k replayed
				now := base / 1000 * 1000
				for step := range 50 {
					if trace%2 == 1 && changes.IntN(6) == 0 {
						p = variants[changes.IntN(len(variants))] // the key's limit changes
					}
					if n := len(k.booked); n > 0 && k.booked[n-1].At-now > 1000 && rng.IntN(2) == 0 {
						now += rng.Int64N(k.booked[n-1].At-now) / 1000 * 1000 // before the latest booking
					} else {
						now = max(now+microGap(rng, p), 0)
					}
					op := serverClockOp(rng, p, now, k.booked)
					clock.set(t, now)
					// The database's clock decides: the op's own time is
					// ignored.
					sent := op
					sent.Now = rng.Int64()
					where := fmt.Sprintf("trace %d step %d params %+v op %+v", trace, step, p, op)
					want, ok := k.step(t, st, key, p, op, sent, where, sluice.ErrUnsupported)
					if ok && (op.Verb == engine.VerbCancel || op.Verb == engine.VerbExtend) && want.Allowed && rng.IntN(2) == 0 {
						// Then the booking before it, mostly: the key's
						// latest again, for the GCRA. An extended lease
						// has a new identity.
						k.booked = slices.DeleteFunc(k.booked, func(b engine.Op) bool { return b.At == op.At })
					}
					if ok && want.At != 0 {
						// A booking, or a lease taken or extended.
						k.booked = append(k.booked, engine.Op{Verb: engine.VerbCancel, Cost: op.Cost, At: want.At})
					}
				}
			}
		})
	}
}

// replayed is a key whose decisions a test replays through Step: the
// state Step keeps, when it is fresh again whatever the Params then, and
// the cancels of its bookings (releases of its leases), latest last.
type replayed struct {
	s       engine.State
	expires int64
	booked  []engine.Op
}

// step requires st's decision on key for sent, which is op as the store
// receives it, to be Step's on the key's state at op.Now, bit for bit, and
// follows it. A refused op must be refused alike: with
// sluice.ErrCostExceedsLimit, and sentinel, when Step refuses it so. It
// returns Step's decision, and whether it was decided.
func (k *replayed) step(t *testing.T, st engine.Store, key string, p engine.Params, op, sent engine.Op, where string, sentinel error) (engine.Decision, bool) {
	t.Helper()
	got, err := st.Apply(context.Background(), key, &p, sent)
	from := k.s
	if op.Now >= k.expires {
		from = engine.State{} // fresh again
	}
	carried := p.Carries(&from, &op)
	next, want, wantErr := p.Step(from, op)
	switch {
	case wantErr == nil:
		require.NoError(t, err, where)
	case p.Overflows(op, wantErr):
		// Refused, and decided all the same (a cost above a limit changed
		// to a lower one, under a penalty).
		require.ErrorIs(t, err, sluice.ErrCostExceedsLimit, where)
	default:
		require.Error(t, err, where)
		for _, s := range []error{sentinel, sluice.ErrCostExceedsLimit} {
			require.Equal(t, errors.Is(wantErr, s), errors.Is(err, s), "%s: %v", where, err)
		}
		return want, false
	}
	storetest.RequireIdenticalDecision(t, want, got, where)
	switch {
	case (p.Records(op.Verb, &want) || carried) && want.ResetAfter == 0:
		// Fresh again: the store writes the zero State (for a carried
		// state too, which Step keeps as it is).
		k.s, k.expires = engine.State{}, 0
	case p.Records(op.Verb, &want) || carried:
		k.s, k.expires = next, op.Now+int64(want.ResetAfter)
	}
	return want, true
}

// microGap draws the time to the next request in whole microseconds, as
// the database's clock has them: often none, around the algorithm's time
// scale, long idles, and a clock stepping back.
func microGap(rng *rand.Rand, p engine.Params) int64 {
	scale := p.Interval * int64(math.Ceil(p.Limit))
	var gap int64
	switch r := rng.IntN(20); {
	case r < 4:
		return 0
	case r < 14:
		gap = rng.Int64N(scale)
	case r < 16:
		gap = rng.Int64N(int64(6 * time.Hour))
	default:
		gap = -rng.Int64N(scale)
	}
	return gap / 1000 * 1000
}

// serverClockOp draws a request of any verb p supports (and some it
// refuses): admissions of every cost, checks, fill-ups, partial grants of
// up to three times the limit, reservations of any maximum delay (some
// no earlier than an instant), exhausts of as long, and
// cancels of the bookings, mostly the latest, sometimes of an instant
// nothing was booked for; for the concurrency limit, releases and
// extensions of its leases, live or not.
func serverClockOp(rng *rand.Rand, p engine.Params, now int64, booked []engine.Op) engine.Op {
	cost := []float64{0, 1, 1, math.Ceil(p.Limit), math.Round(rng.Float64()*p.Limit*100) / 100}[rng.IntN(5)]
	op := engine.Op{Verb: engine.VerbAllow, Cost: cost, Now: now}
	switch r := rng.IntN(10); {
	case r == 0:
		op.Verb = engine.VerbCheck
	case r == 1 && p.Kind == engine.KindLeakyBucket:
		op.Verb = engine.VerbFill
	case r == 2:
		op.Verb, op.Cost = engine.VerbAtMost, math.Round(rng.Float64()*3*p.Limit*100)/100
	case r < 6:
		op.Verb, op.MaxDelay = engine.VerbReserve, rng.Int64N(2*p.Interval*int64(math.Ceil(p.Limit)))
		if rng.IntN(4) == 0 {
			// Full for as long, from the database's time.
			op.Verb = engine.VerbExhaust
			break
		}
		if rng.IntN(3) == 0 {
			// No earlier than an instant, as a group books: in the past,
			// soon, or beyond the maximum delay.
			op.At = max(now+rng.Int64N(4*op.MaxDelay+2)-op.MaxDelay, 0)
		}
	case r < 9 && len(booked) > 0:
		op = booked[len(booked)-1-rng.IntN(min(len(booked), 2))]
		op.Now = now
		if rng.IntN(8) == 0 {
			op.At++
		}
		if p.Kind == engine.KindConcurrency && rng.IntN(3) == 0 {
			op.Verb = engine.VerbExtend
		}
	}
	return op
}

// TestServerClockIsReadOnceForAllOfAtMostsCosts pins that a partial grant
// decides every candidate cost at one instant: its statement reads the
// database's clock as often as an admission's does, on a new key (once)
// and on an existing one; so does an exhaust's, whose instant is relative
// to the time read.
func TestServerClockIsReadOnceForAllOfAtMostsCosts(t *testing.T) {
	clock := newDBClock(t, testserver.StartPostgres(t).URL, base/1000*1000)
	st, _ := newStore(t, clock.pool)
	ctx := context.Background()
	for ai, p := range storetest.Algorithms() {
		t.Run(fmt.Sprintf("%d_%v", ai, p.Kind), func(t *testing.T) {
			// reads returns how often two decisions, on a new key and
			// then on the same key, read the clock.
			reads := func(key string, op engine.Op) (onNew, onExisting int64) {
				counts := [2]int64{}
				for i := range counts {
					before := clock.reads(t)
					_, err := st.Apply(ctx, key, &p, op)
					require.NoError(t, err)
					counts[i] = clock.reads(t) - before
				}
				return counts[0], counts[1]
			}
			allowNew, allowExisting := reads(fmt.Sprintf("allow%d", ai), engine.Op{Verb: engine.VerbAllow, Cost: 1})
			require.Equal(t, int64(1), allowNew)
			if p.Kind == engine.KindConcurrency {
				// A lease is taken whole: its partial grant is refused
				// before any round trip.
				before := clock.reads(t)
				_, err := st.Apply(ctx, fmt.Sprintf("atmost%d", ai), &p, engine.Op{Verb: engine.VerbAtMost, Cost: 3 * p.Limit})
				require.ErrorIs(t, err, sluice.ErrUnsupported)
				require.Equal(t, before, clock.reads(t))
				return
			}
			atMostNew, atMostExisting := reads(fmt.Sprintf("atmost%d", ai), engine.Op{Verb: engine.VerbAtMost, Cost: 3 * p.Limit})
			require.Equal(t, allowNew, atMostNew)
			require.Equal(t, allowExisting, atMostExisting)
			if p.Reservable() {
				// An exhaust's instant is MaxDelay after the time read.
				exhaustNew, exhaustExisting := reads(fmt.Sprintf("exhaust%d", ai), engine.Op{Verb: engine.VerbExhaust, Cost: 1, MaxDelay: p.Interval})
				require.Equal(t, allowNew, exhaustNew)
				require.Equal(t, allowExisting, exhaustExisting)
			}
		})
	}
}

// TestServerClockReservationsAreOnItsClock books and gives back turns by
// the database's real clock, as a limiter without WithCallerClock does.
func TestServerClockReservationsAreOnItsClock(t *testing.T) {
	pool := newPool(t, testserver.StartPostgres(t).URL, 4)
	st, _ := newStore(t, pool)
	ctx := context.Background()
	// An hour per unit: the test's own duration is noise.
	p := engine.Params{Kind: engine.KindGCRA, Limit: 1, Interval: int64(time.Hour)}
	reserve := engine.Op{Verb: engine.VerbReserve, Cost: 1, MaxDelay: int64(24 * time.Hour)}
	first, err := st.Apply(ctx, "k", &p, reserve)
	require.NoError(t, err)
	require.True(t, first.Allowed)
	require.Zero(t, first.Delay, "the first turn is now")
	second, err := st.Apply(ctx, "k", &p, reserve)
	require.NoError(t, err)
	require.True(t, second.Allowed)
	require.InDelta(t, time.Hour, second.Delay, float64(time.Minute))
	require.InDelta(t, time.Now().Add(second.Delay).UnixNano(), second.At, float64(time.Minute),
		"At is an instant on the database's clock, which is this machine's")

	cancel := engine.Op{Verb: engine.VerbCancel, Cost: 1, At: second.At}
	d, err := st.Apply(ctx, "k", &p, cancel)
	require.NoError(t, err)
	require.True(t, d.Allowed, "the latest booking is given back")
	d, err = st.Apply(ctx, "k", &p, cancel)
	require.NoError(t, err)
	require.False(t, d.Allowed, "once")
	again, err := st.Apply(ctx, "k", &p, reserve)
	require.NoError(t, err)
	require.Equal(t, second.At+1, again.At, "the turn given back is booked again, given back a nanosecond late")
}

// TestPruneKeepsBookedKeysUntilTheirReset books turns far ahead, and
// exhausts keys as far: the key's state then lies in the future, and Prune
// must keep its row until the key is fresh again, for every algorithm that
// books.
func TestPruneKeepsBookedKeysUntilTheirReset(t *testing.T) {
	pool := newPool(t, testserver.StartPostgres(t).URL, 4)
	st, table := newStore(t, pool, pgstore.WithCallerClock())
	ctx := context.Background()
	// Prune expires rows by this process's clock: an hour ago is far from
	// the edge either way.
	then := time.Now().Add(-time.Hour).UnixNano()
	day := int64(24 * time.Hour)
	var keys []string
	for ai, p := range storetest.Algorithms() {
		if !p.Reservable() {
			continue
		}
		// A day per unit: a turn booked behind a full key comes a day
		// or more after then, well after now.
		p.Interval = day
		if p.Kind == engine.KindGCRA {
			p.Interval = day / int64(p.Limit)
		}
		key := fmt.Sprintf("booked%d", ai)
		var last engine.Decision
		for range int(math.Ceil(p.Limit)) + 1 {
			d, err := st.Apply(ctx, key, &p, engine.Op{Verb: engine.VerbReserve, Cost: 1, Now: then, MaxDelay: 2 * day})
			require.NoError(t, err)
			require.True(t, d.Allowed)
			last = d
		}
		require.Greater(t, last.At, time.Now().UnixNano(), "%v: booked in the future", p)
		keys = append(keys, key)
		// Exhausted a day after then: full after now.
		key = fmt.Sprintf("exhausted%d", ai)
		d, err := st.Apply(ctx, key, &p, engine.Op{Verb: engine.VerbExhaust, Cost: 1, Now: then, MaxDelay: day})
		require.NoError(t, err)
		require.Greater(t, then+int64(d.ResetAfter), time.Now().UnixNano(), "%v: full in the future", p)
		keys = append(keys, key)
	}
	n, err := st.Prune(ctx)
	require.NoError(t, err)
	require.Zero(t, n, "no booked key is pruned")
	var rows int
	require.NoError(t, pool.QueryRow(ctx, "SELECT count(*) FROM "+pgx.Identifier{table}.Sanitize()).Scan(&rows))
	require.Equal(t, len(keys), rows)
}

// TestServerClockCalendarWindows runs the suite's calendar windows by the
// database's real clock: windows that hold its time count in the one that
// does, and those that do not are refused, for a key and for a group,
// recording nothing.
func TestServerClockCalendarWindows(t *testing.T) {
	pool := newPool(t, testserver.StartPostgres(t).URL, 4)
	st, _ := newStore(t, pool)
	storetest.RunServerClockCalendar(t, st)
}
