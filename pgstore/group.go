package pgstore

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/sluice-go/sluice"
	"github.com/sluice-go/sluice/engine"
)

// ApplyGroup decides ops as one ([engine.DecideGroup]) in one
// transaction, and fills each with the decision on each limit. It
// implements [engine.GroupStore].
//
// The transaction first locks the rows of every key of the group, in the
// order of the keys (inserting the missing ones), so that groups sharing
// keys, in whatever order they list them, never wait on each other in a
// cycle; and reads the database's clock once, after the locks, unless
// the store decides by the caller's. Then each decision of the group is
// the statement Apply would run for it (at the time read), and the
// transaction commits, or rolls back on any error: nothing is recorded.
// A row inserted only to be locked reads as a fresh key, and is deleted
// before the commit unless the group recorded a decision in it.
//
// The statements are sent in batches, each one round trip, whatever the
// number of limits: the transaction's start, its locks and, by the
// caller's clock, the checks that DecideGroup starts with; by the
// database's clock, those checks; the decisions DecideGroup makes of their
// results; the end of the transaction. So a group of checks or admissions
// costs three round trips by the caller's clock and four by the
// database's, and a group of cancels, of lease releases or of lease
// extensions three.
//
// A calendar window ([engine.Params.Calendar]) decides at a time that
// lies in its windows: by the caller's clock, a group whose time lies
// outside a limit's windows is refused before any round trip; by the
// database's, once the time is read, and the transaction rolled back,
// having written nothing. Either error wraps [sluice.ErrTimeOutOfRange]
// and names the time.
func (st *Store) ApplyGroup(ctx context.Context, ops []engine.GroupOp, each []engine.Decision) (engine.Decision, error) {
	if err := engine.CheckGroup(ops, st.callerClock); err != nil {
		return engine.Decision{}, err
	}
	if st.callerClock {
		for _, g := range ops {
			if err := g.Params.CheckWindows(g.Op.Now); err != nil {
				return engine.Decision{}, err
			}
		}
	}
	if len(each) != len(ops) {
		return engine.Decision{}, fmt.Errorf("%w: pgstore: %d decisions for %d limits", sluice.ErrInvalidConfig, len(each), len(ops))
	}
	keys := make([]string, len(ops))
	for i, g := range ops {
		if err := checkKey(g.Key); err != nil {
			return engine.Decision{}, err
		}
		keys[i] = g.Key
	}
	slices.Sort(keys) // byte by byte, as COLLATE "C" orders them
	return st.applyGroup(ctx, ops, keys, each, engine.DecideGroup)
}

// decideGroup is engine.DecideGroup's signature.
type decideGroup func(ops []engine.GroupOp, decide func(i int, op engine.Op) (engine.Decision, error), each []engine.Decision) (engine.Decision, error)

// applyGroup is ApplyGroup for valid ops, whose keys are sorted in keys,
// deciding them with decideGroup.
func (st *Store) applyGroup(ctx context.Context, ops []engine.GroupOp, keys []string, each []engine.Decision, decideGroup decideGroup) (engine.Decision, error) {
	conn, err := st.pool.Acquire(ctx)
	if err != nil {
		return engine.Decision{}, fmt.Errorf("pgstore: %w", err)
	}
	// A connection released inside a transaction, which could not be
	// rolled back, is closed: the server then rolls it back.
	defer conn.Release()
	g := &group{st: st, conn: conn, ops: slices.Clone(ops), keys: keys, each: each, decideGroup: decideGroup}
	d, err := g.decide(ctx, true)
	if errors.Is(err, errSpeculation) {
		d, err = g.decide(ctx, false)
	}
	if err != nil {
		clear(each)
		return engine.Decision{}, err
	}
	return d, nil
}

// errSpeculation reports that DecideGroup did not ask again for the
// decisions it was answered, in the order they were run: the transaction
// is rolled back, and the group decided again one statement at a time.
var errSpeculation = errors.New("pgstore: the group's decisions were not the ones run")

// A group is one ApplyGroup call.
type group struct {
	st   *Store
	conn *pgxpool.Conn
	ops  []engine.GroupOp // with the time decided at
	keys []string         // sorted
	each []engine.Decision
	// decideGroup is engine.DecideGroup.
	decideGroup decideGroup
	// checks are the checks run with the locks, as DecideGroup makes
	// them first (none for cancels and extensions), with their results.
	checks []call
	// inserted is how many rows the locks inserted.
	inserted int64
}

// A call is one decision of a group, and its result once run.
type call struct {
	i   int
	op  engine.Op
	d   engine.Decision
	err error
}

// decide decides the group in a transaction of its own. With speculate,
// it sends the decisions that DecideGroup asks for, given the checks'
// results, together, and errSpeculation if DecideGroup, answered their
// results, asks for others; without, it runs each as DecideGroup asks for
// it.
func (g *group) decide(ctx context.Context, speculate bool) (d engine.Decision, err error) {
	if err := g.begin(ctx); err != nil {
		g.rollback(ctx)
		return engine.Decision{}, err
	}
	if speculate {
		d, err = g.speculate(ctx)
	} else {
		ran := false // a check's result is the statement's until another runs
		d, err = g.decideGroup(g.ops, func(i int, op engine.Op) (engine.Decision, error) {
			if c, ok := g.checked(i, op); ok && !ran {
				return c.d, c.err
			}
			c := []call{{i: i, op: op}}
			ran = true
			if err := g.run(ctx, c); err != nil {
				return engine.Decision{}, err
			}
			return c[0].d, c[0].err
		}, g.each)
	}
	if err == nil {
		err = g.commit(ctx)
	}
	if err != nil {
		g.rollback(ctx)
		return engine.Decision{}, err
	}
	return d, nil
}

// begin starts the transaction, locks the rows and reads the clock; then
// runs the checks.
func (g *group) begin(ctx context.Context) error {
	g.checks = g.checks[:0]
	// DecideGroup decides cancels (releases) and extensions as they come,
	// each limit by its own rule, and checks nothing first. Its checks
	// keep each op's At, a concurrency limit's ticket in line, but a
	// reservation's earliest instant.
	if first := g.ops[0].Op; first.Verb != engine.VerbCancel && first.Verb != engine.VerbExtend {
		for i, o := range g.ops {
			check := o.Op
			check.Verb, check.MaxDelay = engine.VerbCheck, 0
			if first.Verb == engine.VerbReserve {
				check.At = 0
			}
			g.checks = append(g.checks, call{i: i, op: check})
		}
	}
	b := &pgx.Batch{}
	b.Queue("BEGIN ISOLATION LEVEL READ COMMITTED")
	b.Queue(g.st.lock, g.keys)
	if g.st.callerClock {
		if err := g.queue(b, g.checks); err != nil {
			return err
		}
	}
	br := g.conn.SendBatch(ctx, b)
	_, err := br.Exec()
	var now int64
	if err == nil {
		if err = br.QueryRow().Scan(&now, &g.inserted); err != nil {
			err = fmt.Errorf("pgstore: locking the keys %q: %w", g.keys, err)
		}
	}
	if err == nil && g.st.callerClock {
		g.read(br, g.checks)
	}
	if cerr := br.Close(); err == nil && cerr != nil {
		err = fmt.Errorf("pgstore: locking the keys %q: %w", g.keys, cerr)
	}
	if err != nil || g.st.callerClock {
		return err
	}
	// Every decision at the database's time, read once, which must lie in
	// the windows of every calendar window.
	for i, o := range g.ops {
		if err := o.Params.CheckWindows(now); err != nil {
			return fmt.Errorf("pgstore: group limit %d on key %q, by the database's clock: %w", i, o.Key, err)
		}
		g.ops[i].Op.Now = now
	}
	for i := range g.checks {
		g.checks[i].op.Now = now
	}
	return g.run(ctx, g.checks)
}

// speculate runs DecideGroup twice. The first pass answers it with the
// checks' results, and the decisions it asks for next with nothing, until
// they are run, in one batch; the second answers it with their results,
// and must ask for the very decisions run, in the order run.
func (g *group) speculate(ctx context.Context) (engine.Decision, error) {
	var asked []call // in the order DecideGroup asked for them
	var runs []call  // those to run: every one after the first not checked already
	d, err := g.decideGroup(g.ops, func(i int, op engine.Op) (engine.Decision, error) {
		if c, ok := g.checked(i, op); ok && len(runs) == 0 {
			asked = append(asked, c)
			return c.d, c.err
		}
		c := call{i: i, op: op}
		asked, runs = append(asked, c), append(runs, c)
		return engine.Decision{Limit: g.ops[i].Params.Limit}, nil
	}, g.each)
	if len(runs) == 0 {
		return d, err // every answer was a statement's
	}
	if err := g.run(ctx, runs); err != nil {
		return engine.Decision{}, err
	}
	copy(asked[len(asked)-len(runs):], runs)
	next := 0
	d, err = g.decideGroup(g.ops, func(i int, op engine.Op) (engine.Decision, error) {
		if next == len(asked) || asked[next].i != i || asked[next].op != op {
			return engine.Decision{}, errSpeculation
		}
		next++
		return asked[next-1].d, asked[next-1].err
	}, g.each)
	if err == nil && next < len(asked) {
		err = errSpeculation
	}
	return d, err
}

// checked returns the result of the check run of op on limit i.
func (g *group) checked(i int, op engine.Op) (call, bool) {
	for _, c := range g.checks {
		if c.i == i && c.op == op {
			return c, true
		}
	}
	return call{}, false
}

// run runs the statements of calls, in order, in one batch, and fills in
// their results. Its error is the batch's: the connection failed.
func (g *group) run(ctx context.Context, calls []call) error {
	if len(calls) == 0 {
		return nil
	}
	b := &pgx.Batch{}
	if err := g.queue(b, calls); err != nil {
		return err
	}
	br := g.conn.SendBatch(ctx, b)
	g.read(br, calls)
	if err := br.Close(); err != nil {
		return fmt.Errorf("pgstore: deciding the group: %w", err)
	}
	return nil
}

// queue queues the statements of calls in b.
func (g *group) queue(b *pgx.Batch, calls []call) error {
	for _, c := range calls {
		o := g.ops[c.i]
		sql, args, err := statement(g.st.grouped, true, o.Key, o.Params, c.op)
		if err != nil {
			return err
		}
		b.Queue(sql, args...)
	}
	return nil
}

// read reads the results of calls, queued in that order, from br.
func (g *group) read(br pgx.BatchResults, calls []call) {
	for k := range calls {
		o := g.ops[calls[k].i]
		calls[k].d, calls[k].err = scanDecision(br.QueryRow(), o.Key, o.Params, calls[k].op.Verb)
	}
}

// commit deletes the rows that the lock inserted and no decision wrote,
// if it inserted any, and commits.
func (g *group) commit(ctx context.Context) error {
	b := &pgx.Batch{}
	if g.inserted > 0 {
		b.Queue(g.st.unlock, g.keys)
	}
	b.Queue("COMMIT")
	if err := g.conn.SendBatch(ctx, b).Close(); err != nil {
		return fmt.Errorf("pgstore: committing the group of keys %q: %w", g.keys, err)
	}
	return nil
}

// rollback ends the transaction, if one is open, recording nothing. If it
// cannot, the connection is closed when released.
func (g *group) rollback(ctx context.Context) {
	if g.conn.Conn().PgConn().TxStatus() != 'I' {
		_, _ = g.conn.Exec(ctx, "ROLLBACK")
	}
}
