package sluice

import (
	"fmt"

	"github.com/sluice-go/sluice/engine"
)

// The stores of this package honour the contract of package engine.
var (
	_ engine.GroupStore     = (*MemStore)(nil)
	_ engine.ReleaseWatcher = (*MemStore)(nil)
)

// WithStore makes the limiter keep its state in st, which may be shared
// with other limiters and processes. By default each limiter has its own
// [MemStore]. Limiters that share a store share its key space: give each
// limiter's keys their own prefix (for example "login:" + user). Package
// engine states what a store must do ([engine.Store]).
func WithStore(st engine.Store) Option {
	return optionFunc(func(s *settings) error {
		if st == nil {
			return fmt.Errorf("%w: nil store", ErrInvalidConfig)
		}
		s.store = st
		return nil
	})
}
