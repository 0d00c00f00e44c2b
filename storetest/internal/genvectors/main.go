// Command genvectors writes storetest's named edge-case vectors, generated
// from engine.Params.Step, to the file its -o flag names. go generate runs
// it from package storetest:
//
//	go generate ./storetest
package main

import (
	"flag"
	"fmt"
	"os"

	"github.com/sluice-go/sluice/storetest/internal/vectors"
)

func main() {
	out := flag.String("o", "", "the `file` to write the vectors to")
	flag.Parse()
	if *out == "" || flag.NArg() > 0 {
		flag.Usage()
		os.Exit(2)
	}
	data, err := vectors.Marshal(vectors.Generate())
	if err == nil {
		err = os.WriteFile(*out, data, 0o644)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "genvectors:", err)
		os.Exit(1)
	}
}
