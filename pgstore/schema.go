package pgstore

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
)

// ddl is the DDL of the table (%[1]s) and its index (%[2]s). The columns
// added since the table's first release come last, with a default, and
// the ALTER TABLE adds them to a table an earlier release created, as
// they would be in a new one.
const ddl = `CREATE TABLE IF NOT EXISTS %[1]s (
    key              text COLLATE "C" PRIMARY KEY,
    kind             smallint NOT NULL, -- the algorithm (engine.Kind)
    time_ns          bigint NOT NULL,   -- State.Time, ns since the Unix epoch
    a                float8 NOT NULL,   -- State.A
    b                float8 NOT NULL,   -- State.B
    log_times        bigint[],          -- the sliding log: entry times (ns)
    log_costs        float8[],          -- and costs, oldest first
    expires_at       bigint NOT NULL,   -- ns since the epoch when the state is fresh
    last_allowed     boolean NOT NULL,  -- the decision of the row's latest
    last_used        float8 NOT NULL,   -- statement, which its RETURNING
    last_remaining   float8 NOT NULL,   -- clause reads: durations in ns,
    last_retry_after bigint NOT NULL,   -- last_at in ns since the epoch
    last_reset_after bigint NOT NULL,   -- on the store's clock
    last_delay       bigint NOT NULL DEFAULT 0,
    last_at          bigint NOT NULL DEFAULT 0,
    last_granted     float8 NOT NULL DEFAULT 0,
    until_ns         bigint NOT NULL DEFAULT 0, -- State.Until: a penalty's end, ns since the epoch
    last_blocked     boolean NOT NULL DEFAULT false
);
CREATE INDEX IF NOT EXISTS %[2]s ON %[1]s (expires_at);
ALTER TABLE %[1]s
    ADD COLUMN IF NOT EXISTS last_delay bigint NOT NULL DEFAULT 0,
    ADD COLUMN IF NOT EXISTS last_at bigint NOT NULL DEFAULT 0,
    ADD COLUMN IF NOT EXISTS last_granted float8 NOT NULL DEFAULT 0,
    ADD COLUMN IF NOT EXISTS until_ns bigint NOT NULL DEFAULT 0,
    ADD COLUMN IF NOT EXISTS last_blocked boolean NOT NULL DEFAULT false;
`

// added are the columns the ALTER TABLE of ddl adds.
var added = []string{"last_delay", "last_at", "last_granted", "until_ns", "last_blocked"}

// current reports whether the table ($1, quoted), its index ($2, the
// name alone) and the columns $3 exist.
const current = `SELECT to_regclass($1::text) IS NOT NULL
	AND EXISTS (SELECT FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid WHERE i.indrelid = to_regclass($1::text) AND c.relname = $2::text)
	AND (SELECT count(*) FROM pg_attribute WHERE attrelid = to_regclass($1::text) AND attname = ANY($3::text[]) AND NOT attisdropped) = cardinality($3::text[])`

// schema is a store's DDL, and what CreateSchema checks of it.
type schema struct {
	ddl   string
	table string // quoted, perhaps qualified
	index string // its name, in the table's schema
}

// newSchema returns the schema of the table named by the parts of name
// (an optional schema, and the table's name).
func newSchema(name []string) schema {
	s := schema{table: pgx.Identifier(name).Sanitize(), index: name[len(name)-1] + "_expires_at_idx"}
	s.ddl = fmt.Sprintf(ddl, s.table, pgx.Identifier{s.index}.Sanitize())
	return s
}

// Schema returns the DDL that creates the store's table and its index,
// and adds to a table that an earlier release created the columns added
// since, as CreateSchema runs it: for teams that run migrations
// themselves. Running it again changes nothing.
func (st *Store) Schema() string { return st.schema.ddl }

// CreateSchema creates the store's table and its index unless they
// exist, and adds to an existing table the columns that this release's
// statements need and an earlier one did not create: upgrading is calling
// it (or running the DDL of [Store.Schema]) before the statements of this
// release run. When the table is up to date it runs no DDL, and takes no
// lock on the table. Concurrent calls, from any process, are safe.
func (st *Store) CreateSchema(ctx context.Context) error {
	var upToDate bool
	if err := st.pool.QueryRow(ctx, current, st.schema.table, st.schema.index, added).Scan(&upToDate); err != nil {
		return fmt.Errorf("pgstore: reading the schema: %w", err)
	}
	if upToDate {
		// The DDL would change nothing, but CREATE INDEX and ALTER TABLE
		// lock the table even then, holding up every decision behind
		// them.
		return nil
	}
	err := pgx.BeginFunc(ctx, st.pool, func(tx pgx.Tx) error {
		// CREATE ... IF NOT EXISTS is not safe against a concurrent
		// CREATE of the same name: serialize the callers.
		if _, err := tx.Exec(ctx, "SELECT pg_advisory_xact_lock(hashtext('sluice/pgstore schema'))"); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, st.schema.ddl)
		return err
	})
	if err != nil {
		return fmt.Errorf("pgstore: creating the schema: %w", err)
	}
	return nil
}
