package pgstore

import (
	"io/fs"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/sluice-go/sluice"
	"github.com/sluice-go/sluice/engine"
	"github.com/sluice-go/sluice/pgstore/internal/sqlfile"
	"github.com/sluice-go/sluice/pgstore/internal/sqlgen"
)

const regenerate = "regenerate them with `go generate ./pgstore`"

// committed holds the committed copy of the statements, under sql.
var committed = os.DirFS(".")

// readCommitted returns the committed file at path, under sql.
func readCommitted(path string) ([]byte, error) { return fs.ReadFile(committed, "sql/"+path) }

// statementOf returns the statement of a committed file: its text past
// the header of comments it opens with.
func statementOf(file []byte) string {
	text := string(file)
	for strings.HasPrefix(text, "--") {
		_, text, _ = strings.Cut(text, "\n")
	}
	return strings.TrimSuffix(text, "\n")
}

// TestStatementFilesAreUpToDate writes every statement again from the
// generator and requires the committed files under sql to be the same,
// byte for byte, and no others, so that they never go stale when the
// generator changes.
func TestStatementFilesAreUpToDate(t *testing.T) {
	generated := make(map[string]bool)
	for _, f := range sqlgen.Files() {
		generated["sql/"+f.Path] = true
		got, err := readCommitted(f.Path)
		require.NoError(t, err, "sql/%s is missing: %s", f.Path, regenerate)
		if string(got) == f.Text {
			continue
		}
		wantLines, gotLines := strings.Split(f.Text, "\n"), strings.Split(string(got), "\n")
		for i := range max(len(wantLines), len(gotLines)) {
			if w, g := line(wantLines, i), line(gotLines, i); w != g {
				t.Fatalf("sql/%s is stale at line %d: %s\nwant %s\ngot  %s", f.Path, i+1, regenerate, w, g)
			}
		}
	}
	err := fs.WalkDir(committed, "sql", func(path string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.HasSuffix(path, ".sql") && !generated[path] {
			t.Errorf("%s is no statement's: %s", path, regenerate)
		}
		return err
	})
	require.NoError(t, err)
}

func line(lines []string, i int) string {
	if i < len(lines) {
		return lines[i]
	}
	return "(end of file)"
}

// TestEveryVariantHasItsStatements requires every combination of the
// options that select a statement (a calendar window's Windows among
// them), valid, to have its variant's
// statements on either clock (all three, but the concurrency limit's
// partial grant, which it refuses; and the exhaust and the settle of the
// algorithms that book reservations), and the statements that decide
// nothing to be there too.
func TestEveryVariantHasItsStatements(t *testing.T) {
	seen := make(map[sqlfile.Variant]bool)
	for kind := engine.KindLeakyBucket; kind <= engine.KindConcurrency; kind++ {
		for _, intervalRefill := range []bool{false, true} {
			for _, anchored := range []bool{false, true} {
				for _, windows := range [][4]int64{{}, {-1e9, 0, 1e9, 3e9}} {
					for _, penalty := range []int64{0, 1} {
						for _, countDenied := range []bool{false, true} {
							p := engine.Params{Kind: kind, Limit: 10, Interval: 1e9, IntervalRefill: intervalRefill,
								Anchored: anchored, Windows: windows, Penalty: penalty, CountDenied: countDenied}
							switch kind {
							case engine.KindLeakyBucket, engine.KindTokenBucket:
								p.Amount = 1
							case engine.KindSlidingLog, engine.KindConcurrency:
								p.MaxEntries = 10
							}
							if p.Validate() != nil {
								continue
							}
							v := sqlfile.Of(&p)
							_, ok := variantIndex[v]
							require.True(t, ok, "%+v: no variant", p)
							seen[v] = true
						}
					}
				}
			}
		}
	}
	require.Len(t, seen, len(sqlfile.Variants), "a variant no valid Params has")
	require.True(t, seen[sqlfile.Variant{Kind: engine.KindConcurrency}], "the concurrency limit has its statements")
	for _, s := range []sqlfile.Strictness{sqlfile.Lenient, sqlfile.Blocking, sqlfile.Counting} {
		require.True(t, seen[sqlfile.Variant{Kind: engine.KindFixedWindow, Calendar: true, Strict: s}], "the calendar window has its statements")
	}
	for _, callerClock := range []bool{false, true} {
		for _, v := range sqlfile.Variants {
			for _, s := range v.Statements() {
				_, err := readCommitted(sqlfile.Path(v, s, callerClock))
				require.NoError(t, err)
			}
			if v.Kind == engine.KindConcurrency {
				require.Equal(t, []sqlfile.Statement{sqlfile.Apply, sqlfile.Check}, v.Statements(), "a lease is taken whole: no partial grant")
				_, err := readCommitted(sqlfile.Path(v, sqlfile.AtMost, callerClock))
				require.ErrorIs(t, err, fs.ErrNotExist, "no partial grant's statement for the concurrency limit")
			}
			// An exhaust, and a charge's and refund's statement, for the
			// algorithms that book reservations alone.
			p := engine.Params{Kind: v.Kind}
			for _, s := range []sqlfile.Statement{sqlfile.Exhaust, sqlfile.Settle} {
				require.Equal(t, p.Reservable(), slices.Contains(v.Statements(), s), "%+v %v", v, s)
				if !p.Reservable() {
					_, err := readCommitted(sqlfile.Path(v, s, callerClock))
					require.ErrorIs(t, err, fs.ErrNotExist, "%+v: no %v statement for an algorithm that books nothing", v, s)
				}
			}
		}
		_, err := readCommitted(sqlfile.Prune(callerClock))
		require.NoError(t, err)
	}
	for _, path := range []string{sqlfile.Reset, sqlfile.Lock, sqlfile.Unlock} {
		_, err := readCommitted(path)
		require.NoError(t, err)
	}
}

// TestStatementsAreBuiltOnceWhenFirstNeeded requires a store's statements
// of each variant to be built on the first decision that needs them, once,
// and to be the statements of the variant's committed files with the
// store's table and channel in place.
func TestStatementsAreBuiltOnceWhenFirstNeeded(t *testing.T) {
	const table, channel = `"limits"."buckets"`, `'limits.buckets:released'`
	for _, callerClock := range []bool{false, true} {
		set := newStatementSet(table, channel, callerClock)
		for i, v := range sqlfile.Variants {
			require.Nil(t, set.built[i].Load(), "%+v: built before it was needed", v)
			first, err := set.of(v)
			require.NoError(t, err)
			again, err := set.of(v)
			require.NoError(t, err)
			require.Same(t, first, again, "%+v: built twice", v)
			texts := map[sqlfile.Statement]string{sqlfile.Apply: first.Apply, sqlfile.AtMost: first.AtMost, sqlfile.Check: first.Check,
				sqlfile.Exhaust: first.Exhaust, sqlfile.Settle: first.Settle}
			for s, text := range texts {
				if !slices.Contains(v.Statements(), s) {
					require.Empty(t, text, "%+v: a statement it does not have, %v", v, s)
					delete(texts, s)
				}
			}
			for s, text := range texts {
				file, err := readCommitted(sqlfile.Path(v, s, callerClock))
				require.NoError(t, err)
				want := strings.NewReplacer(sqlfile.Table, table, sqlfile.Channel, channel).Replace(statementOf(file))
				require.Equal(t, want, text)
				require.Contains(t, text, table)
				require.NotContains(t, text, sqlfile.Table)
				require.NotContains(t, text, sqlfile.Channel)
				// Only a release notifies: the concurrency limit's upsert.
				notifies := v.Kind == engine.KindConcurrency && s == sqlfile.Apply
				require.Equal(t, notifies, strings.Contains(text, "pg_notify("+channel+", "), "%+v %v", v, s)
			}
		}
	}
}

// TestStatementsOfAnUnknownVariantAreAnError requires a variant no valid
// Params has to give an error rather than an empty statement.
func TestStatementsOfAnUnknownVariantAreAnError(t *testing.T) {
	set := newStatementSet(`"sluice_buckets"`, `'sluice_buckets:released'`, true)
	_, err := set.of(sqlfile.Variant{Kind: engine.KindGCRA, IntervalRefill: true})
	require.ErrorIs(t, err, sluice.ErrInvalidConfig)
}
