// Command sluicesim drives sluice's limiters with simulated traffic on
// simulated time and draws what they admit: per limiter, the requests
// offered, admitted and denied over time and the limiter's state (bucket
// level, tokens, how far GCRA's TAT is ahead of now, the window's count);
// every limiter side by side on the same traffic; and a summary table of
// what each admitted. docs/simulator.md is its guide.
//
//	go run ./cmd/sluicesim -limiter 'gcra rate=10/s burst=5' -traffic 'uniform rate=20/s'
//
// The figures under docs/figures are regenerated with
//
//	go generate ./cmd/sluicesim
package main

//go:generate go run . -config ../../docs/figures/leakybucket/sim.conf -out ../../docs/figures/leakybucket
//go:generate go run . -config ../../docs/figures/uniform/sim.conf -out ../../docs/figures/uniform
//go:generate go run . -config ../../docs/figures/greedy/sim.conf -out ../../docs/figures/greedy
//go:generate go run . -config ../../docs/figures/edge/sim.conf -out ../../docs/figures/edge

import (
	"context"
	"os"

	"github.com/sluice-go/sluice/cmd/sluicesim/internal/sim"
)

func main() {
	os.Exit(sim.Main(context.Background(), os.Args[1:], os.Stdout, os.Stderr))
}
