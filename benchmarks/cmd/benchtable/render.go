package main

import (
	"fmt"
	"io"
	"math"
	"regexp"
	"slices"
	"strings"
)

// A section is how the rows of one benchmark are shown.
type section struct {
	bench string   // the benchmark's name without "Benchmark"
	title string   // the heading of its tables
	units []string // the units shown, in order; those not measured are left out
	per   string   // what one op is, in the units' titles: "decision" if empty
}

func sections() []section {
	return []section{
		{bench: "Allow", title: "In memory: one decision on an existing key", units: []string{"sec/op", "B/op", "allocs/op", "errors/op"}},
		{bench: "Memory", title: "In memory: heap retained per tracked key, 1,000,000 keys", units: []string{"bytes/key", "allocs/new-key", "ns/new-key"}},
		{bench: "Reserve", title: "In memory: a turn booked ahead on an existing key, and given back", units: []string{"sec/op", "B/op", "allocs/op", "errors/op"}, per: "turn"},
		{bench: "Redis", title: "Redis: one decision on one of 10,000 existing keys", units: []string{"sec/op", "server-µs/op", "B/op", "allocs/op", "errors/op"}},
	}
}

// procsSuffix is the GOMAXPROCS suffix of a benchmark name.
var procsSuffix = regexp.MustCompile(`-\d+$`)

func render(w io.Writer, tables []table, base string, floors []string) error {
	var b strings.Builder
	for _, s := range sections() {
		first := true
		for _, unit := range s.units {
			i := slices.IndexFunc(tables, func(t table) bool { return t.unit == unit })
			if i < 0 {
				continue
			}
			t := tables[i].only(s.bench)
			if len(t.rows) == 0 {
				continue
			}
			if first {
				fmt.Fprintf(&b, "### %s\n\n", s.title)
				first = false
			}
			t.write(&b, s, base, floors)
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// only returns t with only bench's rows, and only the libraries that ran
// one of them.
func (t table) only(bench string) table {
	var rows []row
	for _, r := range t.rows {
		name := procsSuffix.ReplaceAllString(r.name, "")
		if name == bench || strings.HasPrefix(name, bench+"/") {
			rows = append(rows, row{name: name, values: r.values})
		}
	}
	var keep []int
	for i := range t.libs {
		if slices.ContainsFunc(rows, func(r row) bool { return !math.IsNaN(r.values[i]) }) {
			keep = append(keep, i)
		}
	}
	out := table{unit: t.unit}
	for _, i := range keep {
		out.libs = append(out.libs, t.libs[i])
	}
	for _, r := range rows {
		values := make([]float64, len(keep))
		for j, i := range keep {
			values[j] = r.values[i]
		}
		out.rows = append(out.rows, row{name: r.name, values: values})
	}
	return out
}

// write writes t as a Markdown table: a row per scenario, a column per
// library with each peer's ratio to base, and the best peer's ratio.
func (t table) write(b *strings.Builder, s section, base string, floors []string) {
	bi := slices.Index(t.libs, base)
	scenario, _ := label(t.rows[0].name, s.bench)
	if scenario == "" {
		scenario = "scenario"
	}
	fmt.Fprintf(b, "%s (%s)\n\n| %s |", unitTitle(t.unit, s.per), t.unit, scenario)
	for _, lib := range t.libs {
		fmt.Fprintf(b, " %s |", lib)
	}
	if bi >= 0 {
		fmt.Fprintf(b, " best peer ÷ %s |", base)
	}
	b.WriteString("\n|---|")
	for range t.libs {
		b.WriteString("---:|")
	}
	if bi >= 0 {
		b.WriteString("---:|")
	}
	b.WriteString("\n")
	for _, r := range t.rows {
		_, name := label(r.name, s.bench)
		fmt.Fprintf(b, "| %s |", name)
		best := math.NaN()
		for i, v := range r.values {
			cell := format(v, t.unit)
			if bi >= 0 && i != bi {
				cell += ratio(v, r.values[bi])
				if !slices.Contains(floors, t.libs[i]) && !math.IsNaN(v) && !(v >= best) {
					best = v
				}
			}
			fmt.Fprintf(b, " %s |", cell)
		}
		if bi >= 0 {
			fmt.Fprintf(b, " %s |", strings.Trim(ratio(best, r.values[bi]), " ()"))
		}
		b.WriteString("\n")
	}
	b.WriteString("\n")
}

// label splits a benchmark name, bench/k1=v1/k2=v2, into the heading of
// its keys, "k1 / k2", and its scenario, "v1 / v2".
func label(name, bench string) (keys, values string) {
	rest := strings.TrimPrefix(strings.TrimPrefix(name, bench), "/")
	if rest == "" {
		return "", "all"
	}
	var ks, vs []string
	for part := range strings.SplitSeq(rest, "/") {
		k, v, ok := strings.Cut(part, "=")
		if !ok {
			k, v = "", part
		}
		ks, vs = append(ks, k), append(vs, v)
	}
	return strings.Join(ks, " / "), strings.Join(vs, " / ")
}

// unitTitle names what a unit measures, an op being per ("decision" if
// empty).
func unitTitle(unit, per string) string {
	if per == "" {
		per = "decision"
	}
	switch unit {
	case "sec/op":
		return "Time per " + per
	case "B/op":
		return "Bytes allocated per " + per
	case "allocs/op":
		return "Allocations per " + per
	case "errors/op":
		return "Failed " + per + "s per " + per
	case "server-µs/op":
		return "The server's time per " + per + " (µs running Lua, by INFO commandstats)"
	case "bytes/key":
		return "Live heap per key"
	case "allocs/new-key":
		return "Allocations per new key"
	case "ns/new-key":
		return "Time to add a key"
	}
	return unit
}

// format formats a median: times in ns, µs or ms, counts whole when they
// are, other amounts to three significant digits.
func format(v float64, unit string) string {
	switch {
	case math.IsNaN(v):
		return ""
	case unit == "sec/op":
		return duration(v * 1e9)
	case unit == "ns/new-key":
		return duration(v)
	case v == math.Trunc(v):
		return fmt.Sprintf("%.0f", v)
	}
	return significant(v)
}

func duration(ns float64) string {
	switch {
	case ns >= 1e6:
		return significant(ns/1e6) + " ms"
	case ns >= 1e3:
		return significant(ns/1e3) + " µs"
	}
	return significant(ns) + " ns"
}

// significant formats v to three significant digits, or as an integer
// from 100 up.
func significant(v float64) string {
	switch a := math.Abs(v); {
	case a >= 100:
		return fmt.Sprintf("%.0f", v)
	case a >= 10:
		return fmt.Sprintf("%.1f", v)
	case a >= 1:
		return fmt.Sprintf("%.2f", v)
	}
	return fmt.Sprintf("%.3g", v)
}

// ratio formats peer ÷ base, when both are measured and base is not zero.
func ratio(peer, base float64) string {
	if math.IsNaN(peer) || math.IsNaN(base) || base == 0 {
		return ""
	}
	return fmt.Sprintf(" (%.2f×)", peer/base)
}
