// Package pgstore keeps sluice limiters' state in PostgreSQL, through a
// pgx connection pool, so that processes sharing a database share their
// limits.
//
// A [Store] runs every decision as one SQL statement that computes the
// key's new state from its locked row inside the database, with the
// algorithm translated exactly from [engine.Params.Step]. Create its table
// with [Store.CreateSchema] (or the DDL of [Store.Schema]), pass the store
// to a limiter with [sluice.WithStore], and call [Store.Prune] periodically
// to delete expired rows:
//
//	st, err := pgstore.New(pool)
//	if err != nil {
//		return err
//	}
//	if err := st.CreateSchema(ctx); err != nil {
//		return err
//	}
//	lim, err := sluice.NewGCRA(sluice.PerSecond(10), 5, sluice.WithStore(st))
//
// Reservations, their cancels, partial grants, exhausts
// ([engine.VerbExhaust]) and the charges and refunds that settle a cost
// ([engine.VerbCharge], [engine.VerbRefund]) are one statement each too,
// and so are the concurrency limit's acquisitions, releases and
// extensions of leases, and its waiters' places in line. A release (or a
// waiter leaving the line, or served with room left) notifies the waiters
// of every process sharing the table (NOTIFY, with the decision's
// commit), so that [sluice.Limiter.Acquire] sleeps until one rather than
// poll; close the store ([Store.Close]) to close the connection it
// listens on. The guide, docs/postgresql.md in the repository, describes
// the schema, the clock, pruning, performance, and when to choose
// PostgreSQL over Redis.
package pgstore
