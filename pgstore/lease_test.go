package pgstore_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sluice-go/sluice/engine"
	"github.com/sluice-go/sluice/internal/testserver"
	"github.com/sluice-go/sluice/pgstore"
	"github.com/sluice-go/sluice/storetest"
)

// TestLeaseReleasedOnOneConnectionFreesTheSlotForAnother runs the
// concurrency limit through two stores on one table, each with a pool of
// its own, as two processes would: a lease's identity, the Decision.At of
// its acquisition or extension, is the key's, so that either process
// releases or extends a lease the other took, and what one frees the
// other takes. Every decision, single or grouped, is Step's bit for bit.
func TestLeaseReleasedOnOneConnectionFreesTheSlotForAnother(t *testing.T) {
	url := testserver.StartPostgres(t).URL
	first, table := newStore(t, newPool(t, url, 2), pgstore.WithCallerClock())
	second, err := pgstore.New(newPool(t, url, 2), pgstore.WithTable(table), pgstore.WithCallerClock())
	require.NoError(t, err)
	stores := [2]*pgstore.Store{first, second}
	ctx := context.Background()
	const s = int64(time.Second)
	p := engine.Params{Kind: engine.KindConcurrency, Limit: 2, Interval: 10 * s, MaxEntries: 2}

	// A step is an op on one of the stores, at a time after the case's
	// start; a release or an extension names the lease that step lease
	// took or extended.
	type step struct {
		on      int
		verb    engine.Verb
		cost    float64
		after   int64
		lease   int
		allowed bool
	}
	acquire := func(on int, cost float64, after int64, allowed bool) step {
		return step{on: on, verb: engine.VerbAllow, cost: cost, after: after, allowed: allowed}
	}
	release := func(on, lease int, after int64, allowed bool) step {
		return step{on: on, verb: engine.VerbCancel, cost: 1, after: after, lease: lease, allowed: allowed}
	}
	extend := func(on, lease int, after int64, allowed bool) step {
		return step{on: on, verb: engine.VerbExtend, cost: 1, after: after, lease: lease, allowed: allowed}
	}
	for _, tc := range []struct {
		name  string
		steps []step
	}{
		{"ReleasedByTheHolderFreesTheSlotForTheOther", []step{
			acquire(0, 2, 0, true),
			acquire(1, 1, 1, false),
			release(0, 0, 2, true),
			acquire(1, 1, 3, true),
		}},
		{"ReleasedByTheOtherFreesTheSlotForTheHolder", []step{
			acquire(0, 1, 0, true),
			acquire(0, 1, 1, true),
			acquire(0, 1, 2, false), // full, and MaxEntries leases live
			release(1, 1, 3, true),
			release(1, 1, 4, false), // released already
			acquire(0, 1, 5, true),
		}},
		{"ExtendedByTheOtherOutlivesItsExpiry", []step{
			acquire(0, 2, 0, true),
			extend(1, 0, 5*s, true),
			extend(0, 0, 6*s, false), // its identity moved
			acquire(0, 1, 10*s, false),
			release(0, 1, 11*s, true),
			acquire(1, 2, 12*s, true),
		}},
		{"ExpiredCannotBeReleasedOrExtended", []step{
			acquire(1, 2, 0, true),
			release(0, 0, 10*s, false),
			extend(0, 0, 10*s, false),
			acquire(0, 2, 10*s, true),
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			key := "lease." + tc.name
			var state engine.State
			leases := make([]int64, len(tc.steps)) // each step's Decision.At
			for i, st := range tc.steps {
				op := engine.Op{Verb: st.verb, Cost: st.cost, Now: base + st.after}
				if st.verb == engine.VerbCancel || st.verb == engine.VerbExtend {
					op.At = leases[st.lease]
				}
				next, want, err := p.Step(state, op)
				require.NoError(t, err)
				got, err := stores[st.on].Apply(ctx, key, &p, op)
				require.NoError(t, err)
				where := fmt.Sprintf("step %d on store %d: %+v", i, st.on, op)
				storetest.RequireIdenticalDecision(t, want, got, where)
				require.Equal(t, st.allowed, got.Allowed, where)
				if p.Records(op.Verb, &want) {
					state = next
				}
				leases[i] = got.At
			}
		})
	}

	// A group's leases, taken through one store and released or
	// extended through the other.
	t.Run("GroupLeasesReleasedThroughTheOther", func(t *testing.T) {
		spec := groupSpec{}
		q := engine.Params{Kind: engine.KindConcurrency, Limit: 3, Interval: 10 * s, MaxEntries: 3}
		group := func(on int, verb engine.Verb, now int64, ats [2]int64) (engine.Decision, []engine.Decision) {
			ops := []engine.GroupOp{
				{Key: "group.a", Params: &p, Op: engine.Op{Verb: verb, Cost: 1, Now: now, At: ats[0]}},
				{Key: "group.b", Params: &q, Op: engine.Op{Verb: verb, Cost: 1, Now: now, At: ats[1]}},
			}
			wantD, want := spec.decide(t, ops)
			got := make([]engine.Decision, len(ops))
			gotD, err := stores[on].ApplyGroup(ctx, ops, got)
			require.NoError(t, err)
			requireGroup(t, wantD, gotD, want, got, fmt.Sprintf("%v on store %d", verb, on))
			return gotD, got
		}
		d, taken := group(0, engine.VerbAllow, base, [2]int64{})
		require.True(t, d.Allowed)
		d, extended := group(1, engine.VerbExtend, base+s, [2]int64{taken[0].At, taken[1].At})
		require.True(t, d.Allowed)
		require.Equal(t, base+11*s, extended[0].At, "a time to live from the extension")
		group(0, engine.VerbAllow, base+2*s, [2]int64{})
		d, _ = group(0, engine.VerbAllow, base+3*s, [2]int64{})
		require.False(t, d.Allowed, "group.a holds its limit")
		d, _ = group(1, engine.VerbCancel, base+4*s, [2]int64{extended[0].At, extended[1].At})
		require.True(t, d.Allowed)
		d, _ = group(0, engine.VerbAllow, base+5*s, [2]int64{})
		require.True(t, d.Allowed, "the released leases freed the slot")
	})
}
