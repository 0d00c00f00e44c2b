package redisstore_test

import (
	"fmt"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/benbjohnson/clock"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/sluice-go/sluice"
	"github.com/sluice-go/sluice/engine"
	"github.com/sluice-go/sluice/internal/testserver"
	"github.com/sluice-go/sluice/redisstore"
	"github.com/sluice-go/sluice/storetest"
)

// commandCalls returns how many times the server at addr has run each of
// commands, by INFO commandstats.
func commandCalls(t *testing.T, addr string, commands ...string) int {
	t.Helper()
	reply, err := testserver.Do(addr, "INFO", "commandstats")
	require.NoError(t, err)
	n := 0
	for _, name := range commands {
		m := regexp.MustCompile(`cmdstat_` + name + `:calls=(\d+)`).FindStringSubmatch(fmt.Sprint(reply))
		if m != nil {
			calls, _ := strconv.Atoi(m[1])
			n += calls
		}
	}
	return n
}

// scriptCalls returns how many calls of functions (FCALL) the server at
// addr has run.
func scriptCalls(t *testing.T, addr string) int {
	return commandCalls(t, addr, "fcall")
}

// group returns the ops of a group deciding verb of cost at now on each
// of keys, under p.
func group(p *engine.Params, verb engine.Verb, cost float64, now int64, keys ...string) []engine.GroupOp {
	ops := make([]engine.GroupOp, len(keys))
	for i, key := range keys {
		ops[i] = engine.GroupOp{Key: key, Params: p, Op: engine.Op{Verb: verb, Cost: cost, Now: now}}
	}
	return ops
}

// TestGroupAcrossSlotsIsRefused decides groups through a Cluster client:
// keys in different slots are refused with ErrCrossSlot before any script
// runs, so that nothing is recorded anywhere, while keys sharing a hash
// tag (inside the caller's key, under the store's prefix) are decided as
// one.
func TestGroupAcrossSlotsIsRefused(t *testing.T) {
	srv := testserver.StartRedisCluster(t)
	c := redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{srv.Addr}, ContextTimeoutEnabled: true})
	t.Cleanup(func() { c.Close() })
	st := newStore(t, c, redisstore.WithCallerClock(testSkew))
	ctx := t.Context()
	p := engine.Params{Kind: engine.KindGCRA, Limit: 5, Interval: int64(time.Second)}
	for _, keys := range [][]string{
		{"api:acme:second", "api:acme:day"},
		{"{api:acme}:second", "global"},
		{"{api:acme}:second", "{api:acme}:day", "{api:other}:day"},
	} {
		t.Run(fmt.Sprint(keys), func(t *testing.T) {
			scripts := scriptCalls(t, srv.Addr)
			_, err := st.ApplyGroup(ctx, group(&p, engine.VerbAllow, 1, base, keys...), make([]engine.Decision, len(keys)))
			require.ErrorIs(t, err, redisstore.ErrCrossSlot)
			require.ErrorIs(t, err, sluice.ErrUnsupported)
			require.Equal(t, scripts, scriptCalls(t, srv.Addr), "no script ran")
			for _, key := range keys {
				require.Zero(t, c.Exists(ctx, st.Key(key)).Val(), "nothing recorded on %s", key)
			}
		})
	}

	keys := []string{"{api:acme}:second", "{api:acme}:day"}
	for i := range 6 {
		each := make([]engine.Decision, 2)
		d, err := st.ApplyGroup(ctx, group(&p, engine.VerbAllow, 1, base, keys...), each)
		require.NoError(t, err)
		require.Equal(t, i < 5, d.Allowed, "request %d", i)
	}
	for _, key := range keys {
		d, err := st.Apply(ctx, key, &p, engine.Op{Verb: engine.VerbCheck, Now: base})
		require.NoError(t, err)
		require.Equal(t, 5.0, d.Used, "both keys recorded the five admitted")
	}
}

// TestGroupOnARingNeedsOneHashTag decides groups through a Ring client,
// which shards keys by hash tag: keys with different tags, which it may
// keep on different shards, are refused; keys with one tag are decided on
// the shard that holds them all.
func TestGroupOnARingNeedsOneHashTag(t *testing.T) {
	shards := map[string]string{"one": testserver.StartRedis(t).Addr, "two": testserver.StartRedis(t).Addr}
	c := redis.NewRing(&redis.RingOptions{Addrs: shards, ContextTimeoutEnabled: true})
	t.Cleanup(func() { c.Close() })
	st := newStore(t, c, redisstore.WithCallerClock(testSkew))
	ctx := t.Context()
	p := engine.Params{Kind: engine.KindFixedWindow, Limit: 3, Interval: int64(time.Hour)}

	_, err := st.ApplyGroup(ctx, group(&p, engine.VerbAllow, 1, base, "acme:second", "acme:day"), make([]engine.Decision, 2))
	require.ErrorIs(t, err, redisstore.ErrCrossSlot)

	keys := []string{"{acme}:second", "{acme}:day"}
	d, err := st.ApplyGroup(ctx, group(&p, engine.VerbAllow, 1, base, keys...), make([]engine.Decision, 2))
	require.NoError(t, err)
	require.True(t, d.Allowed)
	holders := 0
	for _, addr := range shards {
		n, err := testserver.Do(addr, "EXISTS", st.Key(keys[0]), st.Key(keys[1]))
		require.NoError(t, err)
		switch n {
		case int64(2):
			holders++
		case int64(1):
			t.Fatalf("the shard at %s holds one key of the group", addr)
		}
	}
	require.Equal(t, 1, holders, "one shard holds both keys")
}

// TestGroupKeyConflictRecordsNothing decides a group one of whose keys
// holds another algorithm's state: the whole group is refused with
// ErrKeyConflict, naming that key, and the other keys are untouched.
func TestGroupKeyConflictRecordsNothing(t *testing.T) {
	c := newClient(t, testserver.StartRedis(t).Addr)
	st := newStore(t, c, redisstore.WithCallerClock(testSkew))
	ctx := t.Context()
	log := engine.Params{Kind: engine.KindSlidingLog, Limit: 5, Interval: int64(time.Hour), MaxEntries: 5}
	_, err := st.Apply(ctx, "b", &log, allow(1, base))
	require.NoError(t, err)

	gcra := engine.Params{Kind: engine.KindGCRA, Limit: 5, Interval: int64(time.Second)}
	window := engine.Params{Kind: engine.KindFixedWindow, Limit: 5, Interval: int64(time.Hour)}
	ops := []engine.GroupOp{
		{Key: "a", Params: &gcra, Op: allow(1, base)},
		{Key: "b", Params: &window, Op: allow(1, base)},
	}
	_, err = st.ApplyGroup(ctx, ops, make([]engine.Decision, 2))
	require.ErrorIs(t, err, sluice.ErrKeyConflict)
	require.ErrorContains(t, err, `key "b" holds sliding log state, not fixed window`)
	require.Zero(t, c.Exists(ctx, st.Key("a")).Val(), "nothing recorded on the other key")
}

// TestGroupRefusesInvalidOpsBeforeRedis uses a client of a port where no
// server listens: every error here comes from validation.
func TestGroupRefusesInvalidOpsBeforeRedis(t *testing.T) {
	c := newClient(t, fmt.Sprintf("127.0.0.1:%d", testserver.FreePort(t)))
	st := newStore(t, c, redisstore.WithCallerClock(testSkew))
	gcra := engine.Params{Kind: engine.KindGCRA, Limit: 2, Interval: int64(time.Second)}
	window := engine.Params{Kind: engine.KindFixedWindow, Limit: 2, Interval: int64(time.Second)}
	long := engine.Params{Kind: engine.KindFixedWindow, Limit: 2, Interval: 1 << 53}
	tests := []struct {
		name string
		ops  []engine.GroupOp
		want error
	}{
		{"NoLimits", nil, sluice.ErrInvalidConfig},
		{"FillUps", group(&gcra, engine.VerbFill, 1, base, "a", "b"), sluice.ErrUnsupported},
		{"KeyTwice", group(&gcra, engine.VerbAllow, 1, base, "a", "a"), sluice.ErrInvalidKey},
		{"TimesApart", append(group(&gcra, engine.VerbAllow, 1, base, "a"), group(&gcra, engine.VerbAllow, 1, base+1, "b")...), sluice.ErrInvalidConfig},
		{"ReservationOfAWindow", append(group(&gcra, engine.VerbReserve, 1, base, "a"), group(&window, engine.VerbReserve, 1, base, "b")...), sluice.ErrUnsupported},
		{"CostAboveALimit", group(&gcra, engine.VerbAllow, 3, base, "a", "b"), sluice.ErrCostExceedsLimit},
		{"TimeOutOfRange", group(&gcra, engine.VerbAllow, 1, -1, "a", "b"), sluice.ErrTimeOutOfRange},
		{"SpanBeyondTheScript", append(group(&gcra, engine.VerbAllow, 1, base, "a"), group(&long, engine.VerbAllow, 1, base, "b")...), sluice.ErrUnsupported},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := st.ApplyGroup(t.Context(), tt.ops, make([]engine.Decision, len(tt.ops)))
			require.ErrorIs(t, err, tt.want)
		})
	}
	_, err := st.ApplyGroup(t.Context(), group(&gcra, engine.VerbAllow, 1, base, "a", "b"), make([]engine.Decision, 1))
	require.ErrorIs(t, err, sluice.ErrInvalidConfig, "one decision for two limits")
}

// TestGroupWaitsForReplicas decides groups with WithReplicaAcks: one WAIT
// follows each group that may record, none a check; acknowledged, the
// replica holds every key's state; unacknowledged, the group's decisions
// come with ErrNotReplicated and stand on the master.
func TestGroupWaitsForReplicas(t *testing.T) {
	nodes := testserver.StartRedisWithReplicas(t, 1)
	c := newClient(t, nodes[0].Addr)
	st := newStore(t, c, redisstore.WithReplicaAcks(1, ackTimeout))
	ctx := t.Context()
	// On the server's clock: the day's window starts at the group's first
	// request, so that no day ends between the decisions whatever the hour.
	second := engine.Params{Kind: engine.KindGCRA, Limit: 5, Interval: int64(time.Second)}
	day := engine.Params{Kind: engine.KindFixedWindow, Limit: 1000, Interval: int64(24 * time.Hour), Anchored: true}
	ops := func(verb engine.Verb) []engine.GroupOp {
		return []engine.GroupOp{
			{Key: "{k}:second", Params: &second, Op: engine.Op{Verb: verb, Cost: 1}},
			{Key: "{k}:day", Params: &day, Op: engine.Op{Verb: verb, Cost: 1}},
		}
	}
	replicated := func() {
		t.Helper()
		for _, key := range []string{"{k}:second", "{k}:day"} {
			want, err := c.Get(ctx, st.Key(key)).Result()
			require.NoError(t, err)
			got, err := testserver.Do(nodes[1].Addr, "GET", st.Key(key))
			require.NoError(t, err)
			require.Equal(t, want, got, "the replica holds the master's state of %s", key)
		}
	}

	// A check loads the group's script, without a WAIT.
	_, err := st.ApplyGroup(ctx, ops(engine.VerbCheck), make([]engine.Decision, 2))
	require.NoError(t, err)
	waits := commandCalls(t, nodes[0].Addr, "wait")
	d, err := st.ApplyGroup(ctx, ops(engine.VerbAllow), make([]engine.Decision, 2))
	require.NoError(t, err)
	require.True(t, d.Allowed)
	require.Equal(t, waits+1, commandCalls(t, nodes[0].Addr, "wait"), "one WAIT for the group")
	replicated()
	_, err = st.ApplyGroup(ctx, ops(engine.VerbCheck), make([]engine.Decision, 2))
	require.NoError(t, err)
	require.Equal(t, waits+1, commandCalls(t, nodes[0].Addr, "wait"), "none for a check")

	nodes[1].Pause(t)
	each := make([]engine.Decision, 2)
	d, err = st.ApplyGroup(ctx, ops(engine.VerbAllow), each)
	require.ErrorIs(t, err, redisstore.ErrNotReplicated)
	require.True(t, d.Allowed, "admitted on the master all the same")
	require.Equal(t, 2.0, each[1].Used, "each limit's decision comes with the error")
	nodes[1].Resume(t)
	d, err = st.ApplyGroup(ctx, ops(engine.VerbAllow), make([]engine.Decision, 2))
	require.NoError(t, err, "the replica is back")
	require.True(t, d.Allowed)
	replicated()
}

// TestServerClockGroupsAreBitIdenticalToDecideGroup decides groups on the
// server's clock, which the script reads once for the whole group: every
// decision, each limit's and the group's, and every key's stored state are
// DecideGroup's over Step at one of the microseconds the call lasted.
func TestServerClockGroupsAreBitIdenticalToDecideGroup(t *testing.T) {
	c := newClient(t, testserver.StartRedis(t).Addr)
	st := newStore(t, c)
	ctx := t.Context()
	const hour = int64(time.Hour)
	limits := []engine.Params{
		{Kind: engine.KindGCRA, Limit: 3, Interval: hour},
		{Kind: engine.KindTokenBucket, Limit: 2, Interval: hour, Amount: 1, IntervalRefill: true, Penalty: 2 * hour},
		{Kind: engine.KindLeakyBucket, Limit: 5, Interval: hour, Amount: 1, CountDenied: true},
	}
	keys := []string{"{c}:gcra", "{c}:refill", "{c}:leaky"}
	spec := make([]engine.State, len(limits))
	var booked []engine.Decision
	decideOnServerClock := func(verb engine.Verb, cost float64, maxDelay int64, what string) engine.Decision {
		t.Helper()
		ops := make([]engine.GroupOp, len(limits))
		for i := range limits {
			ops[i] = engine.GroupOp{Key: keys[i], Params: &limits[i], Op: engine.Op{Verb: verb, Cost: cost, MaxDelay: maxDelay}}
			if verb == engine.VerbCancel {
				ops[i].Op.At = booked[i].At
			}
		}
		before, err := c.Time(ctx).Result()
		require.NoError(t, err)
		got := make([]engine.Decision, len(ops))
		gotD, err := st.ApplyGroup(ctx, ops, got)
		require.NoError(t, err, what)
		after, err := c.Time(ctx).Result()
		require.NoError(t, err)
		stored := make([]engine.State, len(keys))
		for i, key := range keys {
			stored[i] = storedState(t, c, st, key)
		}
		if decidedAtAnInstant(t, limits, spec, ops, gotD, got, stored, before.UnixNano(), after.UnixNano()) {
			if verb == engine.VerbReserve {
				booked = got
			}
			return gotD
		}
		t.Fatalf("%s: no instant between %v and %v gives DecideGroup's decisions and states\ngot %+v %+v", what, before, after, gotD, got)
		return gotD
	}
	for i := 0; ; i++ {
		require.Less(t, i, 10)
		if d := decideOnServerClock(engine.VerbAllow, 1, 0, "an allow"); !d.Allowed {
			require.True(t, d.Blocked, "the interval refill's overflow blocks it")
			break
		}
	}
	decideOnServerClock(engine.VerbCheck, 1, 0, "a check")
	d := decideOnServerClock(engine.VerbReserve, 1, 10*hour, "a reservation")
	require.True(t, d.Allowed)
	require.Positive(t, d.Delay)
	decideOnServerClock(engine.VerbCancel, 1, 0, "its cancel")
}

// decidedAtAnInstant reports whether DecideGroup over Step, from the
// states spec, gives the group's decision gotD, each limit's got and the
// states stored at one of the microseconds from before to after, a call's
// on the server's clock; spec is then the states it gives.
func decidedAtAnInstant(t *testing.T, limits []engine.Params, spec []engine.State, ops []engine.GroupOp,
	gotD engine.Decision, got []engine.Decision, stored []engine.State, before, after int64) bool {
	t.Helper()
	for now := before; now <= after; now += int64(time.Microsecond) {
		next := append([]engine.State(nil), spec...)
		for i := range ops {
			ops[i].Op.Now = now
		}
		want := make([]engine.Decision, len(ops))
		wantD, err := engine.DecideGroup(ops, func(i int, op engine.Op) (engine.Decision, error) {
			s, d, err := limits[i].Step(cloneState(next[i]), op)
			if limits[i].Records(op.Verb, &d) {
				next[i] = s
			}
			return d, err
		}, want)
		require.NoError(t, err)
		same := storetest.IdenticalDecision(wantD, gotD)
		for i := range want {
			same = same && storetest.IdenticalDecision(want[i], got[i]) && sameState(next[i], stored[i])
		}
		if same {
			copy(spec, next)
			return true
		}
	}
	return false
}

// TestRepeatedInputIsDecidedAsStep decides one op again and again on the
// server's clock, as a limiter's calls are: the library keeps what it read
// from the inputs it decoded lately, and the seconds of the server's
// clock it read last, which other limits, a group, a group of that op
// alone (whose input is the op's), a call on the caller's clock and more
// inputs than the library keeps, between them, must not mislead.
func TestRepeatedInputIsDecidedAsStep(t *testing.T) {
	c := newClient(t, testserver.StartRedis(t).Addr)
	server, caller := newStore(t, c), newStore(t, c, redisstore.WithCallerClock(testSkew))
	ctx := t.Context()
	const hour = int64(time.Hour)
	allow := engine.Op{Verb: engine.VerbAllow, Cost: 1}
	gcra := engine.Params{Kind: engine.KindGCRA, Limit: 3, Interval: hour}
	a := newTwin(t, c, server, gcra, "{r}:a")
	others := []*twin{
		newTwin(t, c, server, engine.Params{Kind: engine.KindLeakyBucket, Limit: 1, Interval: hour, Amount: 1, CountDenied: true}, "{r}:b"),
		newTwin(t, c, server, engine.Params{Kind: engine.KindFixedWindow, Limit: 2, Interval: hour, Penalty: hour}, "{r}:p"),
		newTwin(t, c, server, engine.Params{Kind: engine.KindSlidingLog, Limit: 3, Interval: hour, MaxEntries: 4}, "{r}:l"),
	}
	early := newTwin(t, c, caller, engine.Params{Kind: engine.KindGCRA, Limit: 5, Interval: hour}, "{r}:e")
	many := newTwin(t, c, server, engine.Params{Kind: engine.KindLeakyBucket, Limit: 1e6, Interval: hour, Amount: 1e6}, "{r}:m")
	group := func(what string) {
		t.Helper()
		limits := []engine.Params{gcra, {Kind: engine.KindSlidingLog, Limit: 3, Interval: hour, MaxEntries: 4}}
		ops := []engine.GroupOp{{Key: "{r}:g1", Params: &limits[0], Op: allow}, {Key: "{r}:g2", Params: &limits[1], Op: allow}}
		_, err := server.ApplyGroup(ctx, ops, make([]engine.Decision, len(ops)))
		require.NoError(t, err, what)
	}
	for i := range 3 {
		a.applyOnServerClock(allow, "the op")
		a.applyOnServerClock(allow, "the op again")
		for _, o := range others {
			o.applyOnServerClock(allow, "another limit")
			a.applyOnServerClock(allow, "the op after another limit")
		}
		group("a group")
		a.applyOnServerClock(allow, "the op after a group")
		_, err := server.ApplyGroup(ctx, []engine.GroupOp{{Key: "{r}:g3", Params: &gcra, Op: allow}}, make([]engine.Decision, 1))
		require.NoError(t, err, "a group of the op alone")
		a.applyOnServerClock(allow, "the op after a group of it alone")
		early.apply(engine.Op{Verb: engine.VerbAllow, Cost: 1, Now: base}, "on the caller's clock, at an earlier instant")
		a.applyOnServerClock(allow, "the op after a call on the caller's clock")
		// 300 inputs of other costs: the library forgets what it kept
		// at its 256th, and keeps these.
		for j := range 300 {
			many.applyOnServerClock(engine.Op{Verb: engine.VerbAllow, Cost: float64(1000*i + j + 1)}, "another input")
		}
		a.applyOnServerClock(allow, "the op after more inputs than the library keeps")
	}
}

// TestGroupOfLimitersIsChargedOnce is the stacked-limits mistake, tried as
// a new user would with sluice.NewGroup on a Redis Cluster: 5 per second
// and 1,000 a day per API key (a leaky bucket, which books reservations),
// on keys that share the key's hash tag.
// Eight quick requests admit five, and the daily allowance falls by five,
// not eight. A global cap's key cannot share every client's slot: in the
// same group on a Cluster it is refused, and decided as its own call it
// works.
func TestGroupOfLimitersIsChargedOnce(t *testing.T) {
	srv := testserver.StartRedisCluster(t)
	c := redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{srv.Addr}, ContextTimeoutEnabled: true})
	t.Cleanup(func() { c.Close() })
	st := newStore(t, c, redisstore.WithCallerClock(testSkew))
	fake := clock.NewMock()
	fake.Set(time.Unix(0, base))
	opts := []sluice.Option{sluice.WithStore(st), sluice.WithClock(fake)}
	perSecond, err := sluice.NewGCRA(sluice.PerSecond(5), 5, opts...)
	require.NoError(t, err)
	perDay, err := sluice.NewLeakyBucket(1000, sluice.Per(1000, 24*time.Hour), opts...)
	require.NoError(t, err)
	global, err := sluice.NewTokenBucket(sluice.PerSecond(50), 50, opts...)
	require.NoError(t, err)
	api, err := sluice.NewGroup(perSecond, perDay)
	require.NoError(t, err)
	ctx := t.Context()
	keys := []string{"{api:k-123}:second", "{api:k-123}:day"}

	admitted := 0
	for range 8 {
		d, err := api.Allow(ctx, keys, 1)
		require.NoError(t, err)
		if d.Allowed {
			admitted++
		}
	}
	require.Equal(t, 5, admitted)
	d, err := api.CanAccept(ctx, keys, 1)
	require.NoError(t, err)
	require.False(t, d.Allowed)
	require.Equal(t, 200*time.Millisecond, d.RetryAfter)
	require.Equal(t, 995.0, d.Limits()[1].Remaining, "the day is charged for the five admitted only")

	r, err := api.Reserve(ctx, keys, 1, time.Second)
	require.NoError(t, err)
	require.True(t, r.Allowed)
	require.Equal(t, 200*time.Millisecond, r.Delay)
	require.NoError(t, r.Cancel(ctx))
	d, err = api.CanAccept(ctx, keys, 1)
	require.NoError(t, err)
	require.InDelta(t, 995.0, d.Limits()[1].Remaining, 1e-9, "the cancel gave the day its unit back (a nanosecond late)")

	withGlobal, err := sluice.NewGroup(perSecond, perDay, global)
	require.NoError(t, err)
	_, err = withGlobal.Allow(ctx, append(keys, "global"), 1)
	require.ErrorIs(t, err, redisstore.ErrCrossSlot, "a global key is in another slot")
	g, err := global.Allow(ctx, "global", 1)
	require.NoError(t, err)
	require.True(t, g.Allowed, "decided as its own call")
}
