// Command benchtable turns benchstat's CSV output for results split into
// columns by library into the Markdown tables of results/table.md:
//
//	benchstat -col /lib -format csv results.raw | benchtable -base sluice -floor xrate-single
//
// For each benchmark (Allow, Memory, Reserve, Redis) and each unit it reports, it
// writes one table with a row per scenario and a column per library, each
// peer's median followed by its ratio to the base library's: above 1 the
// base uses less (time, bytes, allocations) than the peer. A last column
// gives the ratio of the best keyed peer, leaving out the floor libraries.
package main

import (
	"flag"
	"fmt"
	"io"
	"os"
)

func main() {
	base := flag.String("base", "sluice", "the library the others are compared with")
	floor := flag.String("floor", "xrate-single", "comma-separated libraries left out of the best peer: floors, not peers")
	flag.Parse()
	if err := run(os.Stdin, os.Stdout, *base, splitList(*floor)); err != nil {
		fmt.Fprintln(os.Stderr, "benchtable:", err)
		os.Exit(1)
	}
}

func run(r io.Reader, w io.Writer, base string, floors []string) error {
	tables, err := parse(r)
	if err != nil {
		return err
	}
	if len(tables) == 0 {
		return fmt.Errorf("no tables in the input")
	}
	return render(w, tables, base, floors)
}
