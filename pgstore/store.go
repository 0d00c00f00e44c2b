package pgstore

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/sluice-go/sluice"
	"github.com/sluice-go/sluice/engine"
	"github.com/sluice-go/sluice/internal/arith"
	"github.com/sluice-go/sluice/pgstore/internal/sqlfile"
	"github.com/sluice-go/sluice/pgstore/internal/sqlgen"
)

// Store is an [engine.Store] that keeps limiters' state in one PostgreSQL
// table, one row per key. It is safe for concurrent use, by any number of
// processes sharing the table.
//
// Every decision is one SQL statement, one round trip: an INSERT ... ON
// CONFLICT ... DO UPDATE that computes the key's new state from its
// current row, locked, inside the database, with the algorithm translated
// to SQL from [engine.Params.Step]. Concurrent decisions on one key are
// serialized by the row lock, never retried. A reservation (Reserve,
// Wait), its cancel, a partial grant (AllowAtMost), an exhaust
// (VerbExhaust: the key full until MaxDelay from the store's time) and a
// settled cost's charge or refund (VerbCharge, VerbRefund: one statement
// for both, at the store's time) are one such statement each too, and so
// are the concurrency limit's acquisition,
// release (VerbCancel) and extension (VerbExtend) of a lease, whose
// identity (Decision.At) the statement returns, and a waiter's place in
// the key's line (its ticket, Decision.At of a denied acquisition with a
// patience) and its leaving (VerbLeave). CanAccept (VerbCheck) is
// a plain SELECT and writes nothing. Every algorithm and verb is
// supported, as Step supports them: a verb an algorithm does not run
// gives an error wrapping [sluice.ErrUnsupported] before any round trip.
//
// A decision that may let a waiter in ([engine.Params.Frees]: a release
// that frees a lease, a waiter leaving the line or served with room left)
// notifies the table's channel (NOTIFY) in the same statement, sent with
// its commit, and the store implements [engine.ReleaseWatcher], so that
// waiters in Acquire, in every process that shares the table, are woken
// by it: see [Store.WatchReleases]. The store then listens on a
// connection of its own, which [Store.Close] closes.
//
// Statements run outside transactions, at the server's default isolation
// level, which must be READ COMMITTED (PostgreSQL's default): under
// REPEATABLE READ or SERIALIZABLE, decisions on a hot key fail with
// serialization errors.
//
// Rows are not deleted when their state decays to fresh; [Store.Prune]
// deletes them. Keys must be valid UTF-8 without NUL bytes, as PostgreSQL
// text requires.
type Store struct {
	pool        *pgxpool.Pool
	callerClock bool
	batch       int
	// statements decide by the store's clock; grouped by the caller's,
	// which a group (ApplyGroup) sets to the store's, read once.
	statements *statementSet
	grouped    *statementSet
	schema     schema
	reset      string
	prune      string
	lock       string // ApplyGroup's
	unlock     string
	// releases tells waiters of the releases of leases (WatchReleases).
	releases *listener
}

// DefaultTable is the table a Store uses unless [WithTable] names another.
const DefaultTable = "sluice_buckets"

// DefaultPruneBatch is how many rows one of Prune's statements deletes at
// most, unless [WithPruneBatch] sets another bound.
const DefaultPruneBatch = 1000

// An Option configures a [Store].
type Option func(*config) error

type config struct {
	table       []string // optional schema, and name
	callerClock bool
	batch       int
}

// identifier is what WithTable accepts of each part of a table name.
var identifier = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// WithTable makes the store use the table name, optionally qualified by a
// schema ("limits.buckets"), instead of [DefaultTable]. Each part must be
// letters, digits and underscores, not starting with a digit, and the
// table's own name at most 48 bytes, so that its index's name fits
// PostgreSQL's 63. Names are quoted, so they are case-sensitive.
func WithTable(name string) Option {
	return func(c *config) error {
		parts := strings.Split(name, ".")
		if len(parts) > 2 || len(parts[len(parts)-1]) > 48 {
			return fmt.Errorf("%w: pgstore: table name %q: want [schema.]name with a name of at most 48 bytes", sluice.ErrInvalidConfig, name)
		}
		for _, part := range parts {
			if len(part) > 63 || !identifier.MatchString(part) {
				return fmt.Errorf("%w: pgstore: table name %q: want letters, digits and underscores", sluice.ErrInvalidConfig, name)
			}
		}
		c.table = parts
		return nil
	}
}

// WithCallerClock makes the store decide at the caller's time, Op.Now (the
// limiter's clock), instead of the database's clock_timestamp(). Use it
// when all the processes sharing the table have synchronized clocks, or
// in tests, which drive it with simulated time; the database's clock
// needs neither.
func WithCallerClock() Option {
	return func(c *config) error {
		c.callerClock = true
		return nil
	}
}

// WithPruneBatch sets how many rows one of Prune's statements deletes at
// most: smaller batches hold fewer locks for a shorter time. The default
// is [DefaultPruneBatch].
func WithPruneBatch(n int) Option {
	return func(c *config) error {
		if n < 1 {
			return fmt.Errorf("%w: pgstore: prune batch %d is not positive", sluice.ErrInvalidConfig, n)
		}
		c.batch = n
		return nil
	}
}

// New returns a store keeping its state in pool's database. It does not
// touch the database: create the table with [Store.CreateSchema], or with
// the DDL of [Store.Schema] in a migration.
func New(pool *pgxpool.Pool, opts ...Option) (*Store, error) {
	if pool == nil {
		return nil, fmt.Errorf("%w: pgstore: nil pool", sluice.ErrInvalidConfig)
	}
	c := config{table: []string{DefaultTable}, batch: DefaultPruneBatch}
	for _, o := range opts {
		if err := o(&c); err != nil {
			return nil, err
		}
	}
	// Each part of the name is an identifier, which WithTable checked:
	// quoted, it puts nothing but the name in a statement.
	table := pgx.Identifier(c.table).Sanitize()
	channel := channelOf(c.table)
	st := &Store{
		pool:        pool,
		callerClock: c.callerClock,
		batch:       c.batch,
		statements:  newStatementSet(table, quoteLiteral(channel), c.callerClock),
		schema:      newSchema(c.table),
		reset:       strings.ReplaceAll(sqlgen.Reset(table), sqlfile.Channel, quoteLiteral(channel)),
		prune:       sqlgen.Prune(table, c.callerClock),
		lock:        sqlgen.Lock(table),
		unlock:      sqlgen.Unlock(table),
		releases:    newListener(pool, channel),
	}
	st.grouped = st.statements
	if !c.callerClock {
		st.grouped = newStatementSet(table, quoteLiteral(channel), true)
	}
	return st, nil
}

// Apply runs op against key's state in one statement, atomically. It
// implements [engine.Store]. A key holding the live state of another
// algorithm gives an error wrapping [sluice.ErrKeyConflict].
//
// A calendar window ([engine.Params.Calendar]) counts in the window, of
// the three that p.Windows gives, that holds the time: by the caller's
// clock, op.Now, which must lie in them; by the database's, its time,
// which the statement finds its window for. A time outside the windows
// gives an error wrapping [sluice.ErrTimeOutOfRange] that names it, and
// the statement writes nothing: by the database's clock, it returns the
// time it read, and no decision, as it returns none for a key holding
// another algorithm's live state.
func (st *Store) Apply(ctx context.Context, key string, p *engine.Params, op engine.Op) (engine.Decision, error) {
	if err := p.Validate(); err != nil {
		return engine.Decision{}, err
	}
	d := engine.Decision{Limit: p.Limit}
	refused := st.checkOp(p, op)
	if refused != nil && !p.Overflows(op, refused) {
		return d, refused
	}
	if err := checkKey(key); err != nil {
		return d, err
	}
	sql, args, err := statement(st.statements, st.callerClock, key, p, op)
	if err != nil {
		return d, err
	}
	row := st.pool.QueryRow(ctx, sql, args...)
	if !st.callerClock && p.Calendar() {
		d, err = scanOnDatabaseClock(row, key, p)
	} else {
		d, err = scanDecision(row, key, p, op.Verb)
	}
	if err != nil {
		return d, err
	}
	return d, refused
}

// statement returns the SQL of op under p among stmts, and its arguments
// on key. It passes op.Now as the time with callerClock.
func statement(stmts *statementSet, callerClock bool, key string, p *engine.Params, op engine.Op) (string, []any, error) {
	v, err := stmts.of(sqlfile.Of(p))
	if err != nil {
		return "", nil, err
	}
	sql := v.Apply
	switch op.Verb {
	case engine.VerbCheck:
		sql = v.Check
	case engine.VerbAtMost:
		sql = v.AtMost
	case engine.VerbExhaust:
		sql = v.Exhaust
	case engine.VerbCharge, engine.VerbRefund:
		sql = v.Settle
	}
	if sql == "" {
		// A variant without the statement (the concurrency limit's partial
		// grant, a window's or the concurrency limit's exhaust, charge or
		// refund), which Params.CheckOp refuses first.
		return "", nil, fmt.Errorf("%w: pgstore: %v does not %v", sluice.ErrUnsupported, p.Kind, op.Verb)
	}
	return sql, args(key, p, op, callerClock), nil
}

// scanDecision reads the decision that the statement of verb on key under
// p returned. The concurrency limit's upsert returns one column more,
// which notifies a release or a waiter's leaving or serving (sqlgen's
// released), and is skipped.
func scanDecision(row pgx.Row, key string, p *engine.Params, verb engine.Verb) (engine.Decision, error) {
	d := engine.Decision{Limit: p.Limit}
	var retry, reset, delay int64
	var err error
	if p.Kind == engine.KindConcurrency && verb != engine.VerbCheck {
		err = row.Scan(&d.Allowed, &d.Used, &d.Remaining, &retry, &reset, &delay, &d.At, &d.Granted, &d.Blocked, nil)
	} else {
		err = row.Scan(&d.Allowed, &d.Used, &d.Remaining, &retry, &reset, &delay, &d.At, &d.Granted, &d.Blocked)
	}
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return engine.Decision{Limit: p.Limit}, conflict(key, p)
	case err != nil:
		return engine.Decision{Limit: p.Limit}, fmt.Errorf("pgstore: %v on key %q: %w", p.Kind, key, err)
	}
	d.RetryAfter, d.ResetAfter, d.Delay = time.Duration(retry), time.Duration(reset), time.Duration(delay)
	return d, nil
}

// scanOnDatabaseClock reads the decision that a calendar window's
// statement by the database's clock returned on key under p: the
// database's time, then the decision's columns, NULL when the statement
// decided nothing, and wrote nothing. Then the time lies outside p's
// windows, an error wrapping [sluice.ErrTimeOutOfRange] that names it,
// or the key holds another algorithm's live state.
func scanOnDatabaseClock(row pgx.Row, key string, p *engine.Params) (engine.Decision, error) {
	var now int64
	var allowed, blocked *bool
	var used, remaining, granted *float64
	var retry, reset, delay, at *int64
	if err := row.Scan(&now, &allowed, &used, &remaining, &retry, &reset, &delay, &at, &granted, &blocked); err != nil {
		return engine.Decision{Limit: p.Limit}, fmt.Errorf("pgstore: %v on key %q: %w", p.Kind, key, err)
	}
	if allowed == nil {
		if err := p.CheckWindows(now); err != nil {
			return engine.Decision{Limit: p.Limit}, fmt.Errorf("pgstore: %v on key %q, by the database's clock: %w", p.Kind, key, err)
		}
		return engine.Decision{Limit: p.Limit}, conflict(key, p)
	}
	return engine.Decision{Allowed: *allowed, Limit: p.Limit, Used: *used, Remaining: *remaining, RetryAfter: time.Duration(*retry),
		ResetAfter: time.Duration(*reset), Delay: time.Duration(*delay), At: *at, Granted: *granted, Blocked: *blocked}, nil
}

// conflict is the error of a statement on key under p that found the key
// holding another algorithm's live state.
func conflict(key string, p *engine.Params) error {
	return fmt.Errorf("%w: key %q (wanted for %v)", sluice.ErrKeyConflict, key, p.Kind)
}

// args returns the parameters of the decisions' statements, in the order
// of the CTE p they open with (sqlgen's params), which their headers list:
// the fourteen of every statement; op.Now with callerClock ($15); then
// the four boundaries of a calendar window's Windows, which only its
// statements take ($16 to $19 by the caller's clock, $15 to $18 by the
// database's).
func args(key string, p *engine.Params, op engine.Op, callerClock bool) []any {
	var tau, costNanos int64
	if p.Kind == engine.KindGCRA {
		tau = arith.Nanos(p.Limit, p.Interval)
		// A cost above the limit (VerbAtMost's) is never tried whole.
		if op.Cost <= p.Limit {
			costNanos = arith.Nanos(op.Cost, p.Interval)
		}
	}
	args := []any{key, int16(op.Verb), op.Cost, p.Limit, p.Interval, p.Limit * arith.Tolerance, p.Amount, tau, costNanos,
		int32(p.MaxEntries), op.MaxDelay, op.At, p.Penalty, p.CountDenied}
	if callerClock {
		args = append(args, op.Now)
	}
	if p.Calendar() {
		args = append(args, p.Windows[0], p.Windows[1], p.Windows[2], p.Windows[3])
	}
	return args
}

// checkOp validates op as [engine.Params.Step] does; the caller's time only
// when the store uses it: in range, and in a calendar window's windows.
// By the database's clock, a calendar window's statement checks its time.
func (st *Store) checkOp(p *engine.Params, op engine.Op) error {
	if st.callerClock {
		if err := engine.CheckTime(op.Now); err != nil {
			return err
		}
		if err := p.CheckWindows(op.Now); err != nil {
			return err
		}
	}
	return p.CheckOp(op)
}

// checkKey reports a key that PostgreSQL text cannot hold, before a round
// trip.
func checkKey(key string) error {
	if !utf8.ValidString(key) || strings.IndexByte(key, 0) >= 0 {
		return fmt.Errorf("%w: pgstore: key %q is not valid UTF-8 without NUL bytes", sluice.ErrInvalidKey, key)
	}
	return nil
}

// Reset deletes key's row. It implements [engine.Store].
func (st *Store) Reset(ctx context.Context, key string) error {
	if err := checkKey(key); err != nil {
		return err
	}
	if _, err := st.pool.Exec(ctx, st.reset, key); err != nil {
		return fmt.Errorf("pgstore: resetting key %q: %w", key, err)
	}
	return nil
}

// Prune deletes the rows whose state is fresh again by now, and returns
// how many it deleted. Now is the database's clock or, with
// [WithCallerClock], this process's clock. It deletes in batches of at
// most [WithPruneBatch] rows, one statement each, along the expires_at
// index, skipping rows that decisions hold locked, until a batch comes
// out short or ctx ends. Deleting an expired row never changes a decision,
// so Prune may run at any time, from any process: call it periodically.
func (st *Store) Prune(ctx context.Context) (int64, error) {
	var total int64
	for {
		args := []any{st.batch}
		if st.callerClock {
			args = append(args, time.Now().UnixNano())
		}
		tag, err := st.pool.Exec(ctx, st.prune, args...)
		if err != nil {
			return total, fmt.Errorf("pgstore: pruning: %w", err)
		}
		total += tag.RowsAffected()
		if tag.RowsAffected() < int64(st.batch) {
			return total, nil
		}
	}
}
