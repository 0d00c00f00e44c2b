package pgstore

import (
	"fmt"
	"strings"
	"sync/atomic"

	"github.com/sluice-go/sluice"
	"github.com/sluice-go/sluice/pgstore/internal/sqlfile"
	"github.com/sluice-go/sluice/pgstore/internal/sqlgen"
)

// The committed copy of every statement, for reviewers; the tests require
// it to be what the store builds.
//
//go:generate go run ./internal/gensql -o sql

// statementSet holds a table's statements on one clock, each variant's
// built when a decision first needs it: building them all takes tens of
// milliseconds of CPU and makes megabytes of text, which New should not
// cost a process that decides with one algorithm or two.
type statementSet struct {
	table       string // quoted
	channel     string // quoted, as a string literal
	callerClock bool
	built       []atomic.Pointer[sqlgen.Statements] // by variantIndex
}

func newStatementSet(table, channel string, callerClock bool) *statementSet {
	return &statementSet{table: table, channel: channel, callerClock: callerClock,
		built: make([]atomic.Pointer[sqlgen.Statements], len(sqlfile.Variants))}
}

// variantIndex numbers the valid variants.
var variantIndex = func() map[sqlfile.Variant]int {
	index := make(map[sqlfile.Variant]int, len(sqlfile.Variants))
	for i, v := range sqlfile.Variants {
		index[v] = i
	}
	return index
}()

// of returns the statements of v.
func (s *statementSet) of(v sqlfile.Variant) (*sqlgen.Statements, error) {
	i, ok := variantIndex[v]
	if !ok {
		return nil, fmt.Errorf("%w: pgstore: no statements for %+v", sluice.ErrInvalidConfig, v)
	}
	if built := s.built[i].Load(); built != nil {
		return built, nil
	}
	texts := sqlgen.Build(v, s.callerClock)
	on := func(text string) string {
		return strings.NewReplacer(sqlfile.Table, s.table, sqlfile.Channel, s.channel).Replace(text)
	}
	built := &sqlgen.Statements{Apply: on(texts.Apply), AtMost: on(texts.AtMost), Check: on(texts.Check), Exhaust: on(texts.Exhaust),
		Settle: on(texts.Settle)}
	// Callers racing here build the same text: the first stored is kept.
	if !s.built[i].CompareAndSwap(nil, built) {
		return s.built[i].Load(), nil
	}
	return built, nil
}
