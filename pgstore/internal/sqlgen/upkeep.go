package sqlgen

import (
	"fmt"
	"strconv"

	"github.com/sluice-go/sluice/engine"
)

// This file writes the statements that decide nothing: Store.Reset's,
// Store.Prune's, and the locks of ApplyGroup.

// Reset deletes the row of the key $1, and, if it held a concurrency
// limit's leases, notifies sqlfile.Channel as a release does (see
// released): the slots it frees wake their waiters.
func Reset(table string) string {
	return "WITH gone AS (DELETE FROM " + table + " WHERE key = $1 RETURNING kind)\n" +
		"SELECT " + notifyRelease("$1") + " FROM gone WHERE kind = " + strconv.Itoa(int(engine.KindConcurrency))
}

// Prune deletes one batch ($1 rows) of expired rows. The outer
// condition on expires_at is checked again on the row as it is when
// deleted, in case a decision renewed it meanwhile.
func Prune(table string, callerClock bool) string {
	now := serverNow
	if callerClock {
		now = "$2::int8"
	}
	return fmt.Sprintf(`WITH n AS (SELECT %[2]s AS now)
DELETE FROM %[1]s WHERE expires_at <= (SELECT now FROM n) AND key IN (
	SELECT key FROM %[1]s WHERE expires_at <= (SELECT now FROM n)
	ORDER BY expires_at LIMIT $1 FOR UPDATE SKIP LOCKED)`, table, now)
}

// Lock inserts a row for each of the keys $1, sorted, that has
// none, and locks the others, in the order of the keys, and then returns
// the database's time and how many rows it inserted (RETURNING lists the
// inserted rows only: the update's WHERE false leaves the others out).
// ON CONFLICT DO UPDATE locks a row even when its WHERE leaves it
// unchanged. A row inserted here is of no algorithm (kind 0) and expired,
// as good as absent: the statements decide from a fresh state on it.
func Lock(table string) string {
	return fmt.Sprintf(`WITH locked AS (
	INSERT INTO %[1]s AS s (key, kind, time_ns, a, b, until_ns, expires_at, %[2]s)
	SELECT k, 0, 0, 0, 0, 0, %[3]s, false, 0, 0, 0, 0, 0, 0, 0, false FROM unnest($1::text[]) AS k ORDER BY k COLLATE "C"
	ON CONFLICT (key) DO UPDATE SET kind = s.kind WHERE false
	RETURNING 1)
SELECT %[4]s, n FROM (SELECT count(*) AS n FROM locked) AS l`, table, decisionColumns, minTime, serverNow)
}

// Unlock deletes the rows of the keys $1 that Lock
// inserted and no decision wrote.
func Unlock(table string) string {
	return "DELETE FROM " + table + " WHERE key = ANY($1) AND kind = 0"
}
