package nearcache_test

import (
	"time"

	"github.com/benbjohnson/clock"
)

// newFrozenClock returns a fake clock that does not move.
func newFrozenClock() *clock.Mock {
	m := clock.NewMock()
	m.Set(time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC))
	return m
}
