package sluice_test

import (
	"testing"

	"github.com/sluice-go/sluice"
	"github.com/sluice-go/sluice/storetest"
)

func TestMemStoreConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T) sluice.Store {
		st := sluice.NewMemStore(sluice.MemStoreConfig{})
		t.Cleanup(func() { _ = st.Close() })
		return st
	})
}
