package sluicehttp_test

import (
	"time"

	"github.com/benbjohnson/clock"
)

// start is where every test clock starts: a whole minute, so that fixed
// windows of a minute or less begin there.
var start = time.Date(2026, 6, 1, 12, 0, 0, 0, time.UTC)

// newClock returns a fake clock at start that moves only when the test
// advances it, so that every decision is exact.
func newClock() *clock.Mock {
	c := clock.NewMock()
	c.Set(start)
	return c
}
