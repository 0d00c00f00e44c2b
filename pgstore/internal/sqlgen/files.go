// Package sqlgen writes the SQL statements of package pgstore: the
// algorithms of package engine (Params.Step, the specification)
// translated to SQL, and the statements that decide nothing. The store
// builds each variant's statements with it when a decision first needs
// them; `go generate ./pgstore` commits every statement under pgstore/sql,
// one file each with a header, for reviewers to read and diff, and the
// store's tests require the committed files to be what Files returns.
package sqlgen

import (
	"fmt"
	"slices"
	"strings"

	"github.com/sluice-go/sluice/engine"
	"github.com/sluice-go/sluice/pgstore/internal/sqlfile"
)

// A File is one statement's file.
type File struct {
	Path string // under pgstore/sql, as package sqlfile names it
	Text string // a header of comments, then the statement
}

// Files returns the file of every statement the store runs, each variant's
// in the order of sqlfile.Variants.
func Files() []File {
	var files []File
	for _, callerClock := range []bool{false, true} {
		for _, v := range sqlfile.Variants {
			texts := Build(v, callerClock)
			for _, s := range v.Statements() {
				path := sqlfile.Path(v, s, callerClock)
				text := [...]string{sqlfile.Apply: texts.Apply, sqlfile.AtMost: texts.AtMost, sqlfile.Check: texts.Check, sqlfile.Exhaust: texts.Exhaust,
					sqlfile.Settle: texts.Settle}[s]
				files = append(files, File{Path: path, Text: decisionHeader(path, v, s, callerClock) + text + "\n"})
			}
		}
		path := sqlfile.Prune(callerClock)
		params := []string{"$1 int8: how many rows to delete at most (WithPruneBatch)"}
		if callerClock {
			params = append(params, "$2 int8: the time, ns since the epoch (the process's clock)")
		}
		files = append(files, File{Path: path, Text: header(path, "Prune (upkeep.go)",
			"Store.Prune: deletes one batch of the rows expired by "+clockName(callerClock)+".", params) +
			Prune(sqlfile.Table, callerClock) + "\n"})
	}
	for _, f := range []struct {
		path, from, does string
		build            func(table string) string
		param            string
	}{
		{sqlfile.Reset, "Reset (upkeep.go)", "Store.Reset: deletes the key's row, notifying the waiters of a concurrency limit's key.", Reset, "$1 text: the key"},
		{sqlfile.Lock, "Lock (upkeep.go)",
			"ApplyGroup: locks the rows of the group's keys, inserting the missing ones, and returns the database's time and how many rows it inserted.",
			Lock, "$1 text[]: the group's keys, sorted byte by byte"},
		{sqlfile.Unlock, "Unlock (upkeep.go)",
			"ApplyGroup: deletes the rows that the lock inserted and no decision wrote.",
			Unlock, "$1 text[]: the group's keys"},
	} {
		files = append(files, File{Path: f.path, Text: header(f.path, f.from, f.does, []string{f.param}) + f.build(sqlfile.Table) + "\n"})
	}
	return files
}

// parameters describe the parameters of a decision's statement, in the
// order of the CTE params, for the files' headers.
var parameters = []string{
	"$1 text: the key",
	"$2 int2: Op.Verb (engine.Verb)",
	"$3 float8: Op.Cost",
	"$4 float8: Params.Limit",
	"$5 int8: Params.Interval, ns",
	"$6 float8: the slack, Params.Limit * arith.Tolerance",
	"$7 float8: Params.Amount",
	"$8 int8: the GCRA's burst in ns, Params.Limit intervals rounded (else 0)",
	"$9 int8: the GCRA's cost in ns, Op.Cost intervals rounded (else 0, and 0 above the limit)",
	"$10 int4: Params.MaxEntries",
	"$11 int8: Op.MaxDelay, ns",
	"$12 int8: Op.At, ns since the epoch: a reservation's instant, or a lease's (its expiry)",
	"$13 int8: Params.Penalty, ns",
	"$14 bool: Params.CountDenied",
}

// decisionHeader is the header of the file at path, holding the statement
// s of v.
func decisionHeader(path string, v sqlfile.Variant, s sqlfile.Statement, callerClock bool) string {
	from := "Build (statements.go), around " + algorithmFor(v).source
	if v.Strict != sqlfile.Lenient {
		from += "; the penalty's gate and the steps after the decision from gate and strictSteps (strict.go), from engine.Params.decideStrict (engine/strict.go)"
	}
	if s == sqlfile.AtMost {
		from += "; the costs tried from Build's atMost, from engine.Params.stepAtMost (engine/atmost.go)"
	}
	if s == sqlfile.Exhaust {
		from += "; the key full first, from exhauster (exhaust.go) and the algorithm's full (sql.go), from" +
			" engine.Params.stepExhaust (engine/params.go) and engine.Params.fullAt (engine/strict.go)"
	}
	if s == sqlfile.Settle {
		sqlName, goName := settleSource(v)
		from += "; the cost charged or refunded first, from settler and " + sqlName + " (settle.go), from" +
			" engine.Params.stepSettle and engine.Params." + goName + " (engine/settle.go)"
	}
	apply := "VerbAllow, VerbFill, VerbReserve and VerbCancel: an upsert of the key's row, returning the decision"
	if v.Kind == engine.KindConcurrency {
		apply = "VerbAllow (an acquisition, or a waiter's try), VerbCancel (a release), VerbExtend and VerbLeave (a waiter" +
			" leaving the line): an upsert of the key's row, returning the decision and one column more, released, which" +
			" notifies a release of a lease, a waiter's leaving or a waiter served (pg_notify, sent at the commit) on" +
			" sqlfile.Channel, which the store replaces with its table's channel, quoted, with the hexadecimal SHA-256 of the key" +
			" as the payload"
	}
	does := [...]string{
		sqlfile.Apply:  apply + " (no row for a key holding another algorithm's live state).",
		sqlfile.AtMost: "VerbAtMost: an upsert of the key's row granting the most of the cost that fits, returning the decision (no row for a key holding another algorithm's live state).",
		sqlfile.Check:  "VerbCheck: a SELECT, writing nothing.",
		sqlfile.Exhaust: "VerbExhaust: an upsert of the key's row with its whole limit in use at Op.MaxDelay from now," +
			" never lower than it was, returning the decision of a check of Op.Cost on it (no row for a key holding" +
			" another algorithm's live state).",
		sqlfile.Settle: "VerbCharge and VerbRefund, as $2 says: an upsert of the key's row with Op.Cost charged, beyond" +
			" the limit if need be (up to what the rate frees in 2^60 ns), or refunded (down to nothing), at the key's" +
			" latest point, returning the decision of a check of no cost on it, with the cost moved as" +
			" Decision.Granted (no row for a key holding another algorithm's live state).",
	}[s]
	params := parameters
	if s == sqlfile.Exhaust {
		params = slices.Clone(parameters)
		params[10] = "$11 int8: Op.MaxDelay, ns: how long from now the key is full"
	}
	if s == sqlfile.Settle {
		params = slices.Clone(parameters)
		params[1] = "$2 int2: Op.Verb (engine.Verb): " + verbCharge + " (VerbCharge) or " + verbRefund + " (VerbRefund)"
		params[2] = "$3 float8: Op.Cost, any finite cost from 0, above the limit too"
		params[8] = "$9 int8: unused (the statement rounds the cost's nanoseconds itself: a cost settled has no bound)"
	}
	if v.Kind == engine.KindConcurrency {
		params = slices.Clone(parameters)
		params[10] = "$11 int8: Op.MaxDelay, ns: a VerbAllow's patience in line"
		params[11] = "$12 int8: Op.At: a lease's expiry (VerbCancel, VerbExtend), or a waiter's ticket (0 for none)"
	}
	if callerClock {
		params = append(params[:len(params):len(params)], "$15 int8: Op.Now, ns since the epoch")
	}
	kind := v.Kind.String()
	if v.Calendar {
		kind = "a calendar window (" + kind + " over Params.Windows)"
		n := len(params) + 1
		for i, what := range []string{"the first window's start", "the first window's end, the second's start",
			"the second window's end, the third's start", "the third window's end"} {
			params = append(params[:len(params):len(params)], fmt.Sprintf("$%d int8: Params.Windows[%d], ns since the epoch: %s", n+i, i, what))
		}
		if !callerClock {
			does = strings.Replace(does, " (no row for a key holding another algorithm's live state)", "", 1) +
				" Its time is the database's, read once, in the CTE n: it decides in the window holding that time among the" +
				" three, and decides nothing, writing nothing, when that time lies outside them. It returns the time first," +
				" db_now, then the decision, the CTE d, whose columns are NULL when there is none: for a time outside the" +
				" windows, and for a key holding another algorithm's live state."
		}
	}
	return header(path, from, fmt.Sprintf("Decides %s by %s, with %s: %s", kind, clockName(callerClock), strictName(v.Strict), does), params)
}

// header is the comments a file opens with: that it is generated, its
// path, the Go that writes it (from), what it does, and its parameters.
func header(path, from, does string, params []string) string {
	var b strings.Builder
	// comment writes text in lines of at most 100 bytes, the later ones
	// indented.
	comment := func(text string) {
		line := "--"
		for word := range strings.FieldsSeq(text) {
			if len(line)+1+len(word) > 100 && len(line) > len("--  ") {
				b.WriteString(line + "\n")
				line = "--  "
			}
			line += " " + word
		}
		b.WriteString(line + "\n")
	}
	comment("pgstore/sql/" + path + ", generated by `go generate ./pgstore` from pgstore/internal/sqlgen: do not edit.")
	comment("Written by " + from + ".")
	comment(does)
	comment("The table is sqlfile.Table, which the store replaces with its own name, quoted.")
	b.WriteString("-- Parameters:\n")
	for _, p := range params {
		b.WriteString("--   " + p + "\n")
	}
	return b.String()
}

// clockName names the clock a statement decides by.
func clockName(callerClock bool) string {
	if callerClock {
		return "the caller's clock"
	}
	return "the database's clock, clock_timestamp()"
}

// strictName names what of a penalty and counted denials a variant runs.
func strictName(s sqlfile.Strictness) string {
	return [...]string{
		sqlfile.Lenient:  "no penalty and denials not counted",
		sqlfile.Blocking: "a penalty (Params.Penalty)",
		sqlfile.Counting: "denials counted (Params.CountDenied), with or without a penalty",
	}[s]
}
