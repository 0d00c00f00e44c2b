// Command table prints the table of guarantees of sluice's algorithms as
// Markdown, measured by package guarantees. With -update it writes the
// table into the README instead, between the lines
// <!-- guarantees:begin --> and <!-- guarantees:end --> (adding them at
// the end if they are missing), leaving the rest of the file alone.
//
// Run it from the repository root:
//
//	go run ./internal/guarantees/cmd/table [-update] [-readme README.md]
package main

import (
	"flag"
	"fmt"
	"os"

	"github.com/sluice-go/sluice/internal/guarantees"
)

func main() {
	update := flag.Bool("update", false, "write the table into the README instead of printing it")
	readme := flag.String("readme", "README.md", "the README to update")
	flag.Parse()
	if err := run(*update, *readme); err != nil {
		fmt.Fprintln(os.Stderr, "table:", err)
		os.Exit(1)
	}
}

func run(update bool, readme string) error {
	rows, err := guarantees.Table()
	if err != nil {
		return err
	}
	table := guarantees.Markdown(rows)
	if !update {
		_, err := fmt.Print(table)
		return err
	}
	old, err := os.ReadFile(readme)
	if err != nil {
		return err
	}
	return os.WriteFile(readme, guarantees.Replace(old, table), 0o644)
}
