//go:build race

package sluice_test

// raceEnabled reports whether the tests run under the race detector, which
// makes them many times slower: long loops run fewer iterations then.
const raceEnabled = true
