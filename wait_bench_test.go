package sluice_test

import (
	"testing"

	"github.com/sluice-go/sluice"
	"github.com/sluice-go/sluice/internal/waitbench"
)

// BenchmarkWait measures Wait on one hot key of a MemStore, called through
// the Store interface as any other store is: see waitbench.Run.
func BenchmarkWait(b *testing.B) {
	st := sluice.NewMemStore(sluice.MemStoreConfig{})
	b.Cleanup(func() { st.Close() })
	waitbench.Run(b, st)
}
