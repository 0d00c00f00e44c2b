package redisstore

import (
	"fmt"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/sluice-go/sluice"
	"github.com/sluice-go/sluice/engine"
	"github.com/sluice-go/sluice/internal/testserver"
)

// TestScriptRefusesWhatItDoesNotKnow sends the library's functions, past
// the Go side's checks, verbs they do not decide and algorithms they do
// not know: each is refused with an error wrapping sluice.ErrUnsupported,
// and nothing is recorded, never decided as some other verb. An extension
// and a leaving of the line are verbs of the concurrency limit alone,
// which in turn takes no fill-up, reservation or partial grant; an
// exhaust, a charge and a refund are verbs of the algorithms that take
// reservations alone, and of no group.
func TestScriptRefusesWhatItDoesNotKnow(t *testing.T) {
	c := redis.NewClient(&redis.Options{Addr: testserver.StartRedis(t).Addr})
	t.Cleanup(func() { c.Close() })
	st := &Store{client: c, callerClock: true}
	ctx := t.Context()
	gcra := &engine.Params{Kind: engine.KindGCRA, Limit: 5, Interval: int64(time.Second)}
	unknown := &engine.Params{Kind: 9, Limit: 5, Interval: int64(time.Second)}
	leases := &engine.Params{Kind: engine.KindConcurrency, Limit: 5, Interval: int64(time.Second), MaxEntries: 5}
	fixed := &engine.Params{Kind: engine.KindFixedWindow, Limit: 5, Interval: int64(time.Second)}
	counter := &engine.Params{Kind: engine.KindSlidingCounter, Limit: 5, Interval: int64(time.Second)}
	log := &engine.Params{Kind: engine.KindSlidingLog, Limit: 5, Interval: int64(time.Second), MaxEntries: 5}
	const now = int64(1e18)

	for _, tt := range []struct {
		name string
		p    *engine.Params
		verb engine.Verb
	}{
		{"VerbZero", gcra, 0},
		{"VerbTwelve", gcra, engine.VerbRefund + 1},
		{"VerbTwelveOfLeases", leases, engine.VerbRefund + 1},
		{"VerbTwoHundred", gcra, 200},
		{"UnknownAlgorithm", unknown, engine.VerbAllow},
		{"ExtensionOfAGCRA", gcra, engine.VerbExtend},
		{"LeavingOfAGCRA", gcra, engine.VerbLeave},
		{"FillUpOfLeases", leases, engine.VerbFill},
		{"ReservationOfLeases", leases, engine.VerbReserve},
		{"PartialGrantOfLeases", leases, engine.VerbAtMost},
		{"ExhaustOfLeases", leases, engine.VerbExhaust},
		{"ExhaustOfAFixedWindow", fixed, engine.VerbExhaust},
		{"ExhaustOfASlidingCounter", counter, engine.VerbExhaust},
		{"ExhaustOfASlidingLog", log, engine.VerbExhaust},
		{"ChargeOfLeases", leases, engine.VerbCharge},
		{"RefundOfLeases", leases, engine.VerbRefund},
		{"ChargeOfAFixedWindow", fixed, engine.VerbCharge},
		{"RefundOfASlidingCounter", counter, engine.VerbRefund},
		{"ChargeOfASlidingLog", log, engine.VerbCharge},
	} {
		t.Run(tt.name, func(t *testing.T) {
			key := "refused:" + tt.name
			op := engine.Op{Verb: tt.verb, Cost: 1, Now: now, MaxDelay: int64(time.Second)}
			reply, err := st.call(ctx, lib.apply, []string{key}, st.args(tt.p, op))
			_, err = outcome(key, tt.p, tt.verb, reply, err)
			require.ErrorIs(t, err, sluice.ErrUnsupported)
			require.Zero(t, c.Exists(ctx, key).Val(), "nothing recorded")
		})
	}

	for _, verb := range []engine.Verb{0, engine.VerbFill, engine.VerbAtMost, engine.VerbExtend, engine.VerbLeave, engine.VerbExhaust,
		engine.VerbCharge, engine.VerbRefund, engine.VerbRefund + 1} {
		t.Run(fmt.Sprintf("GroupOfVerb%d", verb), func(t *testing.T) {
			ops := []engine.GroupOp{
				{Key: "g1", Params: gcra, Op: engine.Op{Verb: verb, Cost: 1, Now: now}},
				{Key: "g2", Params: gcra, Op: engine.Op{Verb: verb, Cost: 1, Now: now}},
			}
			_, err := st.call(ctx, lib.group, []string{"g1", "g2"}, st.groupArgs(ops))
			require.Error(t, err)
			require.ErrorIs(t, scriptError(verb, groupName(ops), err), sluice.ErrUnsupported)
			require.Zero(t, c.Exists(ctx, "g1", "g2").Val(), "nothing recorded")
		})
	}
	t.Run("GroupReservationOfLeases", func(t *testing.T) {
		ops := []engine.GroupOp{
			{Key: "l1", Params: gcra, Op: engine.Op{Verb: engine.VerbReserve, Cost: 1, Now: now}},
			{Key: "l2", Params: leases, Op: engine.Op{Verb: engine.VerbReserve, Cost: 1, Now: now}},
		}
		_, err := st.call(ctx, lib.group, []string{"l1", "l2"}, st.groupArgs(ops))
		require.ErrorIs(t, scriptError(engine.VerbReserve, groupName(ops), err), sluice.ErrUnsupported)
		require.Zero(t, c.Exists(ctx, "l1", "l2").Val(), "nothing recorded, not even the first limit's")
	})
	t.Run("GroupLeavingOfLeases", func(t *testing.T) {
		ops := []engine.GroupOp{
			{Key: "m1", Params: leases, Op: engine.Op{Verb: engine.VerbLeave, Now: now, At: 1}},
			{Key: "m2", Params: leases, Op: engine.Op{Verb: engine.VerbLeave, Now: now, At: 1}},
		}
		_, err := st.call(ctx, lib.group, []string{"m1", "m2"}, st.groupArgs(ops))
		require.ErrorIs(t, scriptError(engine.VerbLeave, groupName(ops), err), sluice.ErrUnsupported)
		require.Zero(t, c.Exists(ctx, "m1", "m2").Val(), "nothing recorded")
	})
	t.Run("GroupWithAnUnknownAlgorithm", func(t *testing.T) {
		ops := []engine.GroupOp{
			{Key: "h1", Params: gcra, Op: engine.Op{Verb: engine.VerbAllow, Cost: 1, Now: now}},
			{Key: "h2", Params: unknown, Op: engine.Op{Verb: engine.VerbAllow, Cost: 1, Now: now}},
		}
		_, err := st.call(ctx, lib.group, []string{"h1", "h2"}, st.groupArgs(ops))
		require.ErrorIs(t, scriptError(engine.VerbAllow, groupName(ops), err), sluice.ErrUnsupported)
		require.Zero(t, c.Exists(ctx, "h1", "h2").Val(), "nothing recorded, not even the first limit's")
	})
	t.Run("InputOfAnotherLength", func(t *testing.T) {
		_, err := st.call(ctx, lib.apply, []string{"i1", "i2"}, st.args(gcra, engine.Op{Verb: engine.VerbAllow, Cost: 1, Now: now}))
		require.ErrorContains(t, err, "bytes of input for 2 keys")
		require.Zero(t, c.Exists(ctx, "i1", "i2").Val(), "nothing recorded")
	})
	t.Run("InputKeptForOneKeyGivenTwo", func(t *testing.T) {
		server := &Store{client: c} // whose inputs the library keeps
		args := server.args(gcra, engine.Op{Verb: engine.VerbAllow, Cost: 1})
		_, err := server.call(ctx, lib.apply, []string{"j1"}, args)
		require.NoError(t, err)
		_, err = server.call(ctx, lib.apply, []string{"j2", "j3"}, args)
		require.ErrorContains(t, err, "bytes of input for 2 keys")
		require.Zero(t, c.Exists(ctx, "j2", "j3").Val(), "nothing recorded")
	})
}
