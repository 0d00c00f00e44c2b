//go:build !race

package reference_test

// lineTraces is how many traces TestLeaseLineStepMatchesModel replays per
// concurrency limit.
const lineTraces = 300
