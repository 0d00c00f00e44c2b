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

// TestGCRACarriedOverAsStepCarriesIt pins the arithmetic of a GCRA's TAT
// carried over to another emission interval (engine.Params.Carries) where
// random traces rarely go: a backlog of a whole number of nanoseconds and
// a half, which Go's math.Round rounds away from zero and PostgreSQL's
// round(float8) to even (intervals of 2^20 and 2^19 ns make the backlog
// half the TAT's distance, exactly), and one beyond 2^60 ns, which is
// capped. Each verb decides from the state carried, and each but a check
// records it; under a penalty and with denials counted too. And a block
// that ended, which a decision that records nothing but the state carried
// keeps, as the specification does.
func TestGCRACarriedOverAsStepCarriesIt(t *testing.T) {
	pool := newPool(t, testserver.StartPostgres(t).URL, 4)
	st, _ := newStore(t, pool, pgstore.WithCallerClock())
	ctx := context.Background()
	type step struct {
		p  engine.Params
		op engine.Op
	}
	gcra := func(limit float64, interval int64) engine.Params {
		return engine.Params{Kind: engine.KindGCRA, Limit: limit, Interval: interval}
	}
	slow, fast := gcra(4, 1<<20), gcra(4, 1<<19)
	year := gcra(1, int64(365*24*time.Hour))
	ns := gcra(1e6, 1)
	// at is an op of verb: a reservation that waits as long as it takes,
	// a cancel of a booking that is not the key's latest.
	at := func(verb engine.Verb, cost float64, now int64) engine.Op {
		op := engine.Op{Verb: verb, Cost: cost, Now: now}
		switch verb {
		case engine.VerbReserve:
			op.MaxDelay = int64(time.Hour)
		case engine.VerbCancel:
			op.At = now + 1<<18
		}
		return op
	}
	var cases [][]step
	for _, after := range []int64{1, 3, 5, 7} { // backlogs of 2^19 - after/2: halves, rounded up and down to even
		for _, v := range []engine.Verb{engine.VerbCheck, engine.VerbAllow, engine.VerbAtMost, engine.VerbReserve, engine.VerbCancel} {
			for _, strict := range []func(p engine.Params) engine.Params{
				func(p engine.Params) engine.Params { return p },
				func(p engine.Params) engine.Params { p.Penalty = int64(time.Second); return p },
				func(p engine.Params) engine.Params { p.CountDenied = true; return p },
			} {
				cases = append(cases, []step{
					{strict(slow), at(engine.VerbAllow, 1, base)},
					{strict(fast), at(v, 1, base+after)},
					{strict(fast), at(engine.VerbCheck, 1, base+after)},
					{strict(slow), at(engine.VerbAllow, 4, base+after+1)},
					{strict(fast), at(engine.VerbCheck, 0, base+after+1)},
				})
			}
		}
	}
	cases = append(cases, []step{
		{ns, at(engine.VerbAllow, 1e6, base)},
		{year, at(engine.VerbAllow, 1, base)},
		{year, at(engine.VerbCheck, 1, base+1)},
	})
	// A block that ended stays in a state carried by a decision that
	// records nothing (a cancel that gives nothing back), as the
	// specification keeps it: a clock that steps back finds it.
	second := int64(time.Second)
	slowBlocking, fastBlocking := gcra(4, 1<<30), gcra(4, 1<<29)
	slowBlocking.Penalty, fastBlocking.Penalty = second, second
	cases = append(cases, []step{
		{slowBlocking, at(engine.VerbAllow, 4, base)},
		{slowBlocking, at(engine.VerbAllow, 1, base)}, // blocked until base + 1 s
		{fastBlocking, at(engine.VerbCancel, 1, base+2*second)},
		{fastBlocking, at(engine.VerbCheck, 1, base+second/2)},
	})
	for ci, steps := range cases {
		key := fmt.Sprintf("carried%d", ci)
		var s engine.State
		var expires int64 // when s is fresh again, whatever the Params then
		for i, c := range steps {
			where := fmt.Sprintf("case %d step %d: %v %+v", ci, i, c.p, c.op)
			got, err := st.Apply(ctx, key, &c.p, c.op)
			from := s
			if c.op.Now >= expires {
				from = engine.State{} // fresh again
			}
			carried := c.p.Carries(&from, &c.op)
			next, want, wantErr := c.p.Step(from, c.op)
			require.NoError(t, wantErr, where)
			require.NoError(t, err, where)
			storetest.RequireIdenticalDecision(t, want, got, where)
			if c.p.Records(c.op.Verb, &want) || carried {
				s, expires = next, c.op.Now+int64(want.ResetAfter)
			}
		}
	}
}
