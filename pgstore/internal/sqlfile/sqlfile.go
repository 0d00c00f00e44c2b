// Package sqlfile names the SQL statements of package pgstore: the
// variants of the algorithms that have statements of their own, and the
// file under pgstore/sql that holds each statement's committed copy. The
// generator (pgstore/internal/sqlgen) writes the files by these names, and
// the store's tests read them by the same.
package sqlfile

import (
	"strings"

	"github.com/sluice-go/sluice/engine"
)

// Table stands for the store's table in every statement: the store puts
// its table's quoted name in its place. It is a quoted identifier, so
// that a file is valid SQL as it stands.
const Table = `"{table}"`

// Channel stands for the channel on which a statement notifies the
// release of a lease (pg_notify): the store puts its channel's name, as a
// string literal, in its place. It is a string literal, so that a file is
// valid SQL as it stands.
const Channel = `'{channel}'`

// Strictness says which parts of Params.decideStrict a statement runs.
type Strictness uint8

const (
	// Lenient is the algorithm alone: no penalty, denials not counted.
	Lenient Strictness = iota
	// Blocking is the algorithm behind a penalty's gate (Params.Penalty).
	Blocking
	// Counting also fills the key on a denial (Params.CountDenied), with
	// or without a penalty.
	Counting
)

// A Variant is what selects an algorithm's statements: the Kind, the
// options that change its step, and the parts of a penalty's and counted
// denials' step it runs.
type Variant struct {
	Kind           engine.Kind
	IntervalRefill bool
	Anchored       bool
	// Calendar is the fixed window over the calendar's windows
	// (Params.Calendar), whose statements take the windows' boundaries as
	// parameters of their own.
	Calendar bool
	Strict   Strictness
}

// Of returns the variant of p.
func Of(p *engine.Params) Variant {
	v := Variant{Kind: p.Kind, IntervalRefill: p.IntervalRefill, Anchored: p.Anchored, Calendar: p.Calendar()}
	switch {
	case p.CountDenied:
		v.Strict = Counting
	case p.Penalty > 0:
		v.Strict = Blocking
	}
	return v
}

// Variants are all the valid variants: the rate limits' with and without
// a penalty and counted denials (the fixed window's aligned to the epoch,
// anchored, or over the calendar's windows), and the concurrency limit's,
// which takes neither (Params.Validate).
var Variants = func() []Variant {
	var vs []Variant
	for _, v := range []Variant{
		{Kind: engine.KindLeakyBucket},
		{Kind: engine.KindGCRA},
		{Kind: engine.KindTokenBucket},
		{Kind: engine.KindTokenBucket, IntervalRefill: true},
		{Kind: engine.KindFixedWindow},
		{Kind: engine.KindFixedWindow, Anchored: true},
		{Kind: engine.KindFixedWindow, Calendar: true},
		{Kind: engine.KindSlidingLog},
		{Kind: engine.KindSlidingCounter},
	} {
		for _, s := range []Strictness{Lenient, Blocking, Counting} {
			v.Strict = s
			vs = append(vs, v)
		}
	}
	return append(vs, Variant{Kind: engine.KindConcurrency})
}()

// name returns the variant's part of its files' names, such as
// "token-bucket-interval-refill-penalty".
func (v Variant) name() string {
	name := strings.ReplaceAll(strings.ToLower(v.Kind.String()), " ", "-") // "leaky-bucket"
	if v.IntervalRefill {
		name += "-interval-refill"
	}
	if v.Anchored {
		name += "-anchored"
	}
	if v.Calendar {
		name += "-calendar"
	}
	switch v.Strict {
	case Blocking:
		name += "-penalty"
	case Counting:
		name += "-count-denied"
	}
	return name
}

// A Statement is one of a variant's statements.
type Statement uint8

const (
	// Apply decides VerbAllow, VerbFill, VerbReserve, VerbCancel and
	// VerbExtend: an atomic upsert of the key's row.
	Apply Statement = iota
	// AtMost decides VerbAtMost: the same, trying several costs.
	AtMost
	// Check decides VerbCheck: a plain SELECT.
	Check
	// Exhaust decides VerbExhaust: an upsert of the key's row too, full
	// until an instant, decided as a check.
	Exhaust
	// Settle decides VerbCharge and VerbRefund, which its parameter of
	// the verb tells apart: an upsert of the key's row too, with the cost
	// charged or refunded, decided as a check of no cost.
	Settle
)

// Statements returns the statements of v: no AtMost for the concurrency
// limit, which never grants part of a cost (Params.CheckCost refuses
// VerbAtMost before any statement runs), and an Exhaust and a Settle for
// the algorithms that book reservations alone (Params.Reservable: the
// others refuse VerbExhaust, VerbCharge and VerbRefund, as they refuse
// reservations).
func (v Variant) Statements() []Statement {
	switch {
	case v.Kind == engine.KindConcurrency:
		return []Statement{Apply, Check}
	case (&engine.Params{Kind: v.Kind}).Reservable():
		return []Statement{Apply, AtMost, Check, Exhaust, Settle}
	}
	return []Statement{Apply, AtMost, Check}
}

// String returns the statement's part of its file's name.
func (s Statement) String() string {
	return [...]string{Apply: "apply", AtMost: "atmost", Check: "check", Exhaust: "exhaust", Settle: "settle"}[s]
}

// clock returns the directory of the statements that decide by the
// caller's clock, or by the database's.
func clock(callerClock bool) string {
	if callerClock {
		return "caller-clock/"
	}
	return "server-clock/"
}

// Path returns the path, under pgstore/sql, of the file holding the
// statement s of v, deciding by the caller's clock or by the database's:
// "caller-clock/gcra.apply.sql".
func Path(v Variant, s Statement, callerClock bool) string {
	return clock(callerClock) + v.name() + "." + s.String() + ".sql"
}

// Prune returns the path, under pgstore/sql, of Store.Prune's statement
// by the caller's clock or by the database's.
func Prune(callerClock bool) string { return clock(callerClock) + "prune.sql" }

// The paths, under pgstore/sql, of the statements of either clock.
const (
	Reset  = "reset.sql"        // Store.Reset's
	Lock   = "group-lock.sql"   // ApplyGroup's, locking the group's keys
	Unlock = "group-unlock.sql" // ApplyGroup's, deleting the rows Lock inserted
)
