//go:build race

package reference_test

// lineTraces is how many traces TestLeaseLineStepMatchesModel replays per
// concurrency limit: fewer under the race detector, which slows the
// exact arithmetic about fourfold.
const lineTraces = 200
