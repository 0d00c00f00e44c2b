package main

import (
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
)

// A table is one of benchstat's tables: one unit, one column per library.
type table struct {
	unit string
	libs []string
	rows []row
}

// A row is one benchmark's medians, one per library of its table, NaN
// where a library did not run it.
type row struct {
	name   string
	values []float64
}

// parse reads benchstat's CSV output. Each table starts with two header
// records whose first field is empty: the libraries, each naming a group
// of columns, then the unit and statistics of each column; its rows
// follow, named by benchmark. (The CSV reader drops the blank lines
// between tables.) Lines outside tables (goos:, pkg:, ...) and
// the geomean rows are skipped.
func parse(r io.Reader) ([]table, error) {
	cr := csv.NewReader(r)
	cr.FieldsPerRecord = -1
	var (
		tables []table
		groups []int // the first column of each library's group
		t      *table
	)
	for {
		rec, err := cr.Read()
		if errors.Is(err, io.EOF) {
			return tables, nil
		}
		if err != nil {
			return nil, fmt.Errorf("reading benchstat CSV: %w", err)
		}
		switch {
		case len(rec) < 2:
			t = nil // a configuration line between tables
		case rec[0] == "" && (t == nil || t.unit != ""):
			tables = append(tables, table{})
			t = &tables[len(tables)-1]
			groups = groups[:0]
			for i, f := range rec[1:] {
				if f != "" {
					groups = append(groups, i+1)
					t.libs = append(t.libs, f)
				}
			}
		case rec[0] == "":
			if len(groups) == 0 || groups[0] >= len(rec) {
				return nil, fmt.Errorf("benchstat CSV: units record %q does not match its libraries", rec)
			}
			t.unit = rec[groups[0]]
		case t == nil || t.unit == "":
			return nil, fmt.Errorf("benchstat CSV: record %q outside a table", rec)
		case rec[0] == "geomean":
		default:
			values := make([]float64, len(groups))
			for i, col := range groups {
				values[i] = math.NaN()
				if col < len(rec) && rec[col] != "" {
					v, err := strconv.ParseFloat(rec[col], 64)
					if err != nil {
						return nil, fmt.Errorf("benchstat CSV: %s, %s: %w", rec[0], t.libs[i], err)
					}
					values[i] = v
				}
			}
			t.rows = append(t.rows, row{name: rec[0], values: values})
		}
	}
}

// splitList splits a comma-separated list, dropping empty items.
func splitList(s string) []string {
	var items []string
	for item := range strings.SplitSeq(s, ",") {
		if item = strings.TrimSpace(item); item != "" {
			items = append(items, item)
		}
	}
	return items
}
