package pgstore_test

import (
	"testing"

	"github.com/sluice-go/sluice/internal/nearcachetest"
	"github.com/sluice-go/sluice/internal/testserver"
	"github.com/sluice-go/sluice/pgstore"
)

func TestNearCacheChangesNoDecision(t *testing.T) {
	pool := newPool(t, testserver.StartPostgres(t).URL, 4)
	alone, _ := newStore(t, pool, pgstore.WithCallerClock())
	remote, _ := newStore(t, pool, pgstore.WithCallerClock())
	st := nearcachetest.Compare(t, alone, remote, 7, 120)
	t.Logf("%d answered locally, %d by PostgreSQL", st.Local, st.Remote)
}
