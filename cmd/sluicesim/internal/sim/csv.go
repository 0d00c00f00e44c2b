package sim

import (
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"
)

// readCSV reads requests from a CSV file of rows timestamp,key,cost: a
// real access log reduced to three columns. A timestamp is either a time
// (RFC 3339, as in 2026-11-22T10:00:00.25Z), measured from the whole
// second of the earliest one, or a time since the start of the
// simulation (seconds, as in 0.25, or a duration, as in 250ms). An empty
// key is "client" and an empty or missing cost is 1. A first row whose
// timestamp is not one is a header, and skipped. Rows may be out of order:
// they are sorted by time, keeping the order of equal times.
func readCSV(name, dir string) ([]Request, error) {
	if dir != "" && !filepath.IsAbs(name) {
		name = filepath.Join(dir, name)
	}
	f, err := os.Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	rows, err := parseCSV(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	return rows, nil
}

// parseCSV reads the rows of readCSV from r.
func parseCSV(r io.Reader) ([]Request, error) {
	cr := csv.NewReader(r)
	cr.FieldsPerRecord = -1
	cr.TrimLeadingSpace = true
	cr.Comment = '#'
	var (
		rows     []Request
		absolute []time.Time
		kind     string // "time" or "offset", from the first row
	)
	for {
		rec, err := cr.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, err
		}
		line, _ := cr.FieldPos(0)
		if len(rec) > 3 {
			return nil, fmt.Errorf("line %d: %d columns, want timestamp,key,cost", line, len(rec))
		}
		ts := strings.TrimSpace(rec[0])
		at, off, k, err := parseTimestamp(ts)
		if err != nil {
			if len(rows) == 0 && kind == "" {
				kind = "header"
				continue // a header
			}
			return nil, fmt.Errorf("line %d: %w", line, err)
		}
		if kind == "" || kind == "header" {
			kind = k
		} else if k != kind {
			return nil, fmt.Errorf("line %d: timestamp %q mixes %s with the earlier rows' %ss", line, ts, aKind[k], kind)
		}
		req := Request{At: off, Key: "client", Cost: 1}
		if len(rec) > 1 && strings.TrimSpace(rec[1]) != "" {
			req.Key = strings.TrimSpace(rec[1])
		}
		if len(rec) > 2 && strings.TrimSpace(rec[2]) != "" {
			c, err := strconv.ParseFloat(strings.TrimSpace(rec[2]), 64)
			if err != nil || !(c >= 0) || math.IsInf(c, 0) {
				return nil, fmt.Errorf("line %d: cost %q is not a finite number of at least 0", line, rec[2])
			}
			req.Cost = c
		}
		if k == "time" {
			absolute = append(absolute, at)
		} else if off < 0 {
			return nil, fmt.Errorf("line %d: timestamp %q is before the start", line, ts)
		}
		rows = append(rows, req)
	}
	if len(rows) == 0 {
		return nil, errors.New("no rows of timestamp,key,cost")
	}
	if len(absolute) > 0 {
		first := absolute[0]
		for _, t := range absolute {
			if t.Before(first) {
				first = t
			}
		}
		first = first.Truncate(time.Second)
		for i, t := range absolute {
			rows[i].At = t.Sub(first)
		}
	}
	sort.SliceStable(rows, func(i, j int) bool { return rows[i].At < rows[j].At })
	return rows, nil
}

// aKind names a kind of timestamp with its article, for messages.
var aKind = map[string]string{"time": "a time", "offset": "an offset"}

// parseTimestamp reads a CSV timestamp: a time, or an offset from the start.
func parseTimestamp(ts string) (at time.Time, off time.Duration, kind string, err error) {
	if t, err := time.Parse(time.RFC3339Nano, ts); err == nil {
		return t, 0, "time", nil
	}
	if d, err := parseDuration(ts); err == nil {
		return time.Time{}, d, "offset", nil
	}
	return time.Time{}, 0, "", fmt.Errorf("timestamp %q is neither an RFC 3339 time nor seconds since the start", ts)
}
