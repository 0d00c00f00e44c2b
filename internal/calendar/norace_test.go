//go:build !race

package calendar

// raceEnabled reports whether the tests run under the race detector, which
// makes them many times slower: the brute-force walk takes longer steps then.
const raceEnabled = false
