package redisstore_test

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/sluice-go/sluice"
	"github.com/sluice-go/sluice/engine"
	"github.com/sluice-go/sluice/internal/testserver"
	"github.com/sluice-go/sluice/redisstore"
	"github.com/sluice-go/sluice/storetest"
)

// newClient returns a client of the server at addr whose calls end at
// their context's deadline.
func newClient(t testing.TB, addr string) *redis.Client {
	t.Helper()
	c := redis.NewClient(&redis.Options{Addr: addr, ContextTimeoutEnabled: true})
	t.Cleanup(func() { c.Close() })
	return c
}

// newStore returns a store on c whose keys no other test uses.
func newStore(t testing.TB, c redis.UniversalClient, opts ...redisstore.Option) *redisstore.Store {
	t.Helper()
	prefix := fmt.Sprintf("test:%s:%d:", t.Name(), rand.Uint64())
	st, err := redisstore.New(c, append([]redisstore.Option{redisstore.WithPrefix(prefix)}, opts...)...)
	require.NoError(t, err)
	t.Cleanup(func() { st.Close() }) // its subscriptions end with the test
	return st
}

// testSkew is the clock skew tolerated by stores in caller-clock mode: so
// large that no key expires during a test while the simulated time lags
// behind real time.
const testSkew = time.Hour

// base is a realistic time since the epoch, far above 2^53 ns.
var base = time.Date(2026, 11, 21, 12, 0, 0, 123456789, time.UTC).UnixNano()

// TestConformance runs the suite with exact replay: every decision is
// Params.Step's bit for bit, also for Params at the edges of what the
// script computes.
func TestConformance(t *testing.T) {
	c := newClient(t, testserver.StartRedis(t).Addr)
	storetest.Run(t, func(t *testing.T) engine.Store {
		return newStore(t, c, redisstore.WithCallerClock(testSkew))
	}, storetest.Exact(), storetest.WithAlgorithms(extremes...))
}

// TestConformanceOnCluster runs the suite through a Cluster client, which
// routes each script call by its key's slot: the keys of a group share a
// hash tag, as a Cluster needs.
func TestConformanceOnCluster(t *testing.T) {
	srv := testserver.StartRedisCluster(t)
	c := redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{srv.Addr}, ContextTimeoutEnabled: true})
	t.Cleanup(func() { c.Close() })
	storetest.Run(t, func(t *testing.T) engine.Store {
		return newStore(t, c, redisstore.WithCallerClock(testSkew))
	}, storetest.Exact(), storetest.GroupHashTags())
}

// extremes are Params at the edges of what the script computes: intervals
// that do not divide a second, of a few nanoseconds, or close to 2^53 ns.
var extremes = []engine.Params{
	{Kind: engine.KindLeakyBucket, Limit: 1e6, Interval: 3 * int64(time.Second), Amount: 0.37},
	{Kind: engine.KindGCRA, Limit: 3, Interval: 1<<50 + 1},
	{Kind: engine.KindGCRA, Limit: 0.5, Interval: 1<<53 - 1},
	{Kind: engine.KindTokenBucket, Limit: 3, Interval: 1<<51 + 7, Amount: 1, IntervalRefill: true},
	{Kind: engine.KindTokenBucket, Limit: 2, Interval: 7, Amount: 0.3, IntervalRefill: true},
	{Kind: engine.KindFixedWindow, Limit: 3, Interval: 333333333},
	{Kind: engine.KindFixedWindow, Limit: 2, Interval: 1<<52 + 12345},
	{Kind: engine.KindFixedWindow, Limit: 2, Interval: 1<<53 - 1, Anchored: true},
	{Kind: engine.KindSlidingLog, Limit: 10, Interval: 1<<52 + 1, MaxEntries: 2},
	{Kind: engine.KindSlidingCounter, Limit: 4, Interval: 1<<52 - 3},
	{Kind: engine.KindSlidingCounter, Limit: 3.5, Interval: 7},
}

// TestLongSlidingLogIsBitIdenticalToStep fills a sliding log to a thousand
// entries, which then leave the window one by one.
func TestLongSlidingLogIsBitIdenticalToStep(t *testing.T) {
	c := newClient(t, testserver.StartRedis(t).Addr)
	st := newStore(t, c, redisstore.WithCallerClock(testSkew))
	p := engine.Params{Kind: engine.KindSlidingLog, Limit: 1000, Interval: int64(time.Second), MaxEntries: 1000}
	var s engine.State
	for i := range 3000 {
		op := allow(1, base+int64(i)*int64(700*time.Microsecond))
		if i%7 == 0 {
			op.Cost = 0.25
		}
		next, want, err := p.Step(s, op)
		require.NoError(t, err)
		got, err := st.Apply(t.Context(), "log", &p, op)
		require.NoError(t, err)
		require.Equal(t, want, got, "request %d", i)
		s = next
	}
	require.Len(t, s.Log, 1000, "the log was full")
}

// allow is the op of a request of cost at now.
func allow(cost float64, now int64) engine.Op {
	return engine.Op{Verb: engine.VerbAllow, Cost: cost, Now: now}
}

// TestTTLIsTimeUntilFresh pins each key's expiry to the decision's
// ResetAfter, rounded up to milliseconds, plus the tolerated skew in
// caller-clock mode. The expiry is bracketed by the server's clock read before and after
// the decision, so the check is exact without timing assumptions; the
// algorithms' intervals are hours, so that no key expires before it is
// checked.
func TestTTLIsTimeUntilFresh(t *testing.T) {
	c := newClient(t, testserver.StartRedis(t).Addr)
	for _, mode := range []struct {
		name   string
		opts   []redisstore.Option
		margin time.Duration
	}{
		{"ServerClock", nil, 0},
		{"CallerClock", []redisstore.Option{redisstore.WithCallerClock(1500 * time.Microsecond)}, 2 * time.Millisecond},
	} {
		st := newStore(t, c, mode.opts...)
		for ai, p := range storetest.Algorithms() {
			p.Interval *= 3600
			t.Run(fmt.Sprintf("%s/%d_%v", mode.name, ai, p.Kind), func(t *testing.T) {
				ctx := t.Context()
				key := fmt.Sprintf("ttl%d", ai)
				before, err := c.Time(ctx).Result()
				require.NoError(t, err)
				d, err := st.Apply(ctx, key, &p, allow(1, base))
				require.NoError(t, err)
				require.True(t, d.Allowed)
				after, err := c.Time(ctx).Result()
				require.NoError(t, err)

				require.Positive(t, d.ResetAfter)
				ttl := (d.ResetAfter + time.Millisecond - 1).Truncate(time.Millisecond) + mode.margin
				expiry, err := c.PExpireTime(ctx, st.Key(key)).Result()
				require.NoError(t, err)
				require.GreaterOrEqual(t, expiry, time.Duration(before.UnixMilli())*time.Millisecond+ttl)
				require.LessOrEqual(t, expiry, time.Duration(after.UnixMilli())*time.Millisecond+ttl)
			})
		}
	}
}

func TestFreshStateLeavesNoKey(t *testing.T) {
	c := newClient(t, testserver.StartRedis(t).Addr)
	st := newStore(t, c, redisstore.WithCallerClock(testSkew))
	gcra := engine.Params{Kind: engine.KindGCRA, Limit: 5, Interval: int64(time.Second)}
	leaky := engine.Params{Kind: engine.KindLeakyBucket, Limit: 5, Interval: int64(time.Second), Amount: 1}
	tests := []struct {
		name string
		p    engine.Params
		ops  []engine.Op
	}{
		{"FreeRequestOnFreshKey", gcra, []engine.Op{allow(0, base)}},
		{"StateDecayedBackToFresh", gcra, []engine.Op{allow(1, base), allow(0, base+int64(time.Second))}},
		{"EmptyFillup", leaky, []engine.Op{{Verb: engine.VerbFill, Cost: 0, Now: base}}},
		{"LeakedDryFillup", leaky, []engine.Op{
			{Verb: engine.VerbFill, Cost: 2, Now: base},
			{Verb: engine.VerbFill, Cost: 0, Now: base + 2*int64(time.Second)},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for _, op := range tt.ops {
				d, err := st.Apply(t.Context(), tt.name, &tt.p, op)
				require.NoError(t, err)
				require.True(t, d.Allowed)
			}
			n, err := c.Exists(t.Context(), st.Key(tt.name)).Result()
			require.NoError(t, err)
			require.Zero(t, n, "a fresh state is no key")
		})
	}
}

func TestKeyExpiresAfterItsTTL(t *testing.T) {
	c := newClient(t, testserver.StartRedis(t).Addr)
	st := newStore(t, c)
	p := engine.Params{Kind: engine.KindGCRA, Limit: 1, Interval: int64(time.Millisecond)}
	_, err := st.Apply(t.Context(), "brief", &p, allow(1, 0))
	require.NoError(t, err)
	// Redis expires the key on its own clock: wait for it, boundedly.
	require.Eventually(t, func() bool {
		return c.Exists(t.Context(), st.Key("brief")).Val() == 0
	}, 10*time.Second, time.Millisecond)
}

func TestResetDeletesKey(t *testing.T) {
	c := newClient(t, testserver.StartRedis(t).Addr)
	st := newStore(t, c)
	p := engine.Params{Kind: engine.KindFixedWindow, Limit: 1, Interval: int64(time.Hour), Anchored: true}
	ctx := t.Context()
	d, err := st.Apply(ctx, "k", &p, allow(1, 0))
	require.NoError(t, err)
	require.True(t, d.Allowed)
	require.EqualValues(t, 1, c.Exists(ctx, st.Key("k")).Val())

	require.NoError(t, st.Reset(ctx, "k"))
	require.Zero(t, c.Exists(ctx, st.Key("k")).Val())
	d, err = st.Apply(ctx, "k", &p, allow(1, 0))
	require.NoError(t, err)
	require.True(t, d.Allowed, "a reset key is fresh")
}

// TestServerClockDecides builds limiters on a store using the server's
// clock, with rates slow enough that the test's own duration cannot refill
// them, and requires the burst from rest and then a denial.
func TestServerClockDecides(t *testing.T) {
	c := newClient(t, testserver.StartRedis(t).Addr)
	st := newStore(t, c)
	const period = time.Hour
	tests := []struct {
		name  string
		build func() (*sluice.Limiter, error)
		burst int
		retry time.Duration // the longest RetryAfter of the next request
	}{
		{"GCRA", func() (*sluice.Limiter, error) {
			return sluice.NewGCRA(sluice.Per(1, period), 5, sluice.WithStore(st))
		}, 5, period},
		{"LeakyBucket", func() (*sluice.Limiter, error) {
			return sluice.NewLeakyBucket(3, sluice.Per(1, period), sluice.WithStore(st))
		}, 3, period},
		{"TokenBucket", func() (*sluice.Limiter, error) {
			return sluice.NewTokenBucket(sluice.Per(4, period), 4, sluice.WithStore(st))
		}, 4, period / 4},
		{"IntervalRefill", func() (*sluice.Limiter, error) {
			return sluice.NewTokenBucket(sluice.Per(4, period), 4, sluice.WithIntervalRefill(), sluice.WithStore(st))
		}, 4, period},
		{"AnchoredWindow", func() (*sluice.Limiter, error) {
			return sluice.NewFixedWindow(2, period, sluice.WithAnchoredWindows(), sluice.WithStore(st))
		}, 2, period},
		{"SlidingLog", func() (*sluice.Limiter, error) {
			return sluice.NewSlidingLog(3, period, sluice.WithStore(st))
		}, 3, period},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			lim, err := tt.build()
			require.NoError(t, err)
			ctx := t.Context()
			for i := range tt.burst {
				d, err := lim.Allow(ctx, tt.name, 1)
				require.NoError(t, err)
				require.True(t, d.Allowed, "request %d of the burst", i)
			}
			d, err := lim.Allow(ctx, tt.name, 1)
			require.NoError(t, err)
			require.False(t, d.Allowed, "the request after the burst")
			require.Positive(t, d.RetryAfter)
			require.LessOrEqual(t, d.RetryAfter, tt.retry)
			require.Less(t, d.Remaining, 1.0, "less than a unit is left")
		})
	}
}

// TestServerClockIgnoresCallerTime stores the server's time, whatever
// Op.Now says.
func TestServerClockIgnoresCallerTime(t *testing.T) {
	c := newClient(t, testserver.StartRedis(t).Addr)
	st := newStore(t, c)
	ctx := t.Context()
	p := engine.Params{Kind: engine.KindGCRA, Limit: 4, Interval: int64(time.Minute)}
	before, err := c.Time(ctx).Result()
	require.NoError(t, err)
	for _, now := range []int64{-1, 0, 1 << 62, math.MaxInt64} {
		d, err := st.Apply(ctx, "k", &p, allow(1, now))
		require.NoError(t, err)
		require.True(t, d.Allowed)
	}
	after, err := c.Time(ctx).Result()
	require.NoError(t, err)
	// The theoretical arrival time is four minutes after the server's now.
	// The stored value starts with the kind (a byte) and the expiry (two
	// doubles), then the State's time in seconds (a double).
	v, err := c.Get(ctx, st.Key("k")).Bytes()
	require.NoError(t, err)
	require.Greater(t, len(v), 25)
	sec := int64(math.Float64frombits(binary.LittleEndian.Uint64(v[17:25])))
	require.GreaterOrEqual(t, sec, before.Add(4*time.Minute).Unix())
	require.LessOrEqual(t, sec, after.Add(4*time.Minute).Unix())
}

// TestServerClockExhaustIsRelative exhausts a key on the server's clock:
// Op.Now is ignored, and Op.MaxDelay counts from the server's time, so
// that the theoretical arrival time is the server's now plus the delay
// and the burst's tolerance.
func TestServerClockExhaustIsRelative(t *testing.T) {
	c := newClient(t, testserver.StartRedis(t).Addr)
	st := newStore(t, c)
	ctx := t.Context()
	p := engine.Params{Kind: engine.KindGCRA, Limit: 4, Interval: int64(time.Minute)}
	before, err := c.Time(ctx).Result()
	require.NoError(t, err)
	d, err := st.Apply(ctx, "k", &p, engine.Op{Verb: engine.VerbExhaust, Cost: 1, Now: math.MaxInt64, MaxDelay: int64(time.Hour)})
	require.NoError(t, err)
	after, err := c.Time(ctx).Result()
	require.NoError(t, err)
	want := engine.Decision{Limit: 4, Used: 4, RetryAfter: time.Hour + time.Minute, ResetAfter: time.Hour + 4*time.Minute}
	require.Equal(t, want, d, "described as a check of one unit, from the server's now")
	v, err := c.Get(ctx, st.Key("k")).Bytes()
	require.NoError(t, err)
	require.Greater(t, len(v), 25)
	sec := int64(math.Float64frombits(binary.LittleEndian.Uint64(v[17:25])))
	require.GreaterOrEqual(t, sec, before.Add(time.Hour+4*time.Minute).Unix())
	require.LessOrEqual(t, sec, after.Add(time.Hour+4*time.Minute).Unix())
	d, err = st.Apply(ctx, "k", &p, allow(1, 0))
	require.NoError(t, err)
	require.False(t, d.Allowed, "nothing fits before the instant")
}

func TestKeysArePrefixedAndHashTagged(t *testing.T) {
	c := newClient(t, testserver.StartRedis(t).Addr)
	prefix := fmt.Sprintf("app%d:", rand.Uint64())
	st, err := redisstore.New(c, redisstore.WithPrefix(prefix))
	require.NoError(t, err)
	require.Equal(t, prefix+"{user:42}", st.Key("user:42"))

	p := engine.Params{Kind: engine.KindSlidingCounter, Limit: 5, Interval: int64(time.Minute)}
	_, err = st.Apply(t.Context(), "user:42", &p, allow(1, 0))
	require.NoError(t, err)
	keys, err := c.Keys(t.Context(), prefix+"*").Result()
	require.NoError(t, err)
	require.Equal(t, []string{prefix + "{user:42}"}, keys)
}

// TestApplySurvivesFunctionFlush empties the server's functions between
// decisions: each decision loads the library again.
func TestApplySurvivesFunctionFlush(t *testing.T) {
	c := newClient(t, testserver.StartRedis(t).Addr)
	st := newStore(t, c)
	p := engine.Params{Kind: engine.KindGCRA, Limit: 5, Interval: int64(time.Minute)}
	for range 2 {
		_, err := st.Apply(t.Context(), "k", &p, allow(1, 0))
		require.NoError(t, err)
		require.NoError(t, c.FunctionFlush(t.Context()).Err())
	}
}

// TestStoreRecoversWhenRedisComesBack stops the server under a store:
// calls fail within their context's deadline, and the same store and
// client work again once the server is back.
func TestStoreRecoversWhenRedisComesBack(t *testing.T) {
	srv := testserver.StartRedis(t)
	c := newClient(t, srv.Addr)
	st := newStore(t, c)
	p := engine.Params{Kind: engine.KindGCRA, Limit: 5, Interval: int64(time.Minute)}
	apply := func(timeout time.Duration) error {
		ctx, cancel := context.WithTimeout(t.Context(), timeout)
		defer cancel()
		_, err := st.Apply(ctx, "k", &p, allow(1, 0))
		return err
	}
	require.NoError(t, apply(10*time.Second))

	srv.Stop(t)
	require.Error(t, apply(2*time.Second))
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Second)
	defer cancel()
	require.Error(t, st.Reset(ctx, "k"))

	srv.Start(t)
	require.NoError(t, apply(10*time.Second))
}

func TestKeyConflict(t *testing.T) {
	c := newClient(t, testserver.StartRedis(t).Addr)
	st := newStore(t, c, redisstore.WithCallerClock(testSkew))
	ctx := t.Context()
	gcra := engine.Params{Kind: engine.KindGCRA, Limit: 2, Interval: int64(time.Second)}
	window := engine.Params{Kind: engine.KindFixedWindow, Limit: 2, Interval: int64(time.Second)}
	_, err := st.Apply(ctx, "shared", &gcra, allow(2, base))
	require.NoError(t, err)

	for _, verb := range []engine.Verb{engine.VerbAllow, engine.VerbCheck} {
		d, err := st.Apply(ctx, "shared", &window, engine.Op{Verb: verb, Cost: 1, Now: base + 1})
		require.ErrorIs(t, err, sluice.ErrKeyConflict)
		require.ErrorContains(t, err, "GCRA")
		require.Equal(t, engine.Decision{Limit: 2}, d)
	}

	// Once the GCRA state is fresh again, the key is free to reuse.
	d, err := st.Apply(ctx, "shared", &window, allow(1, base+int64(2*time.Second)))
	require.NoError(t, err)
	require.True(t, d.Allowed)
	d, err = st.Apply(ctx, "shared", &window, allow(1, base+int64(2*time.Second)))
	require.NoError(t, err)
	require.True(t, d.Allowed)
	d, err = st.Apply(ctx, "shared", &window, allow(1, base+int64(2*time.Second)))
	require.NoError(t, err)
	require.False(t, d.Allowed, "the window's state replaced the GCRA's")
}

func TestKeyOfAnotherTypeIsAnError(t *testing.T) {
	c := newClient(t, testserver.StartRedis(t).Addr)
	st := newStore(t, c)
	require.NoError(t, c.RPush(t.Context(), st.Key("k"), "not a string").Err())
	p := engine.Params{Kind: engine.KindGCRA, Limit: 2, Interval: int64(time.Second)}
	_, err := st.Apply(t.Context(), "k", &p, allow(1, 0))
	require.ErrorContains(t, err, "WRONGTYPE")
}

// TestInvalidInputFailsBeforeRedis uses a client of a port where no server
// listens: every error here comes from validation.
func TestInvalidInputFailsBeforeRedis(t *testing.T) {
	c := newClient(t, fmt.Sprintf("127.0.0.1:%d", testserver.FreePort(t)))
	st := newStore(t, c, redisstore.WithCallerClock(testSkew))
	const s = int64(time.Second)
	gcra := engine.Params{Kind: engine.KindGCRA, Limit: 2, Interval: s}
	leases := engine.Params{Kind: engine.KindConcurrency, Limit: 2, Interval: s, MaxEntries: 2}
	tests := []struct {
		name string
		p    engine.Params
		op   engine.Op
		want error
	}{
		{"ZeroLimit", engine.Params{Kind: engine.KindGCRA, Interval: s}, allow(1, base), sluice.ErrInvalidConfig},
		{"NegativeCost", gcra, allow(-1, base), sluice.ErrInvalidCost},
		{"NaNCost", gcra, allow(math.NaN(), base), sluice.ErrInvalidCost},
		{"InfiniteCost", gcra, engine.Op{Verb: engine.VerbFill, Cost: math.Inf(1), Now: base}, sluice.ErrInvalidCost},
		{"CostAboveLimit", gcra, allow(3, base), sluice.ErrCostExceedsLimit},
		{"FillupOfGCRA", gcra, engine.Op{Verb: engine.VerbFill, Cost: 1, Now: base}, sluice.ErrUnsupported},
		{"UnknownVerb", gcra, engine.Op{Verb: engine.VerbRefund + 1, Cost: 1, Now: base}, sluice.ErrUnsupported},
		{"TimeBeforeEpoch", gcra, allow(1, -1), sluice.ErrTimeOutOfRange},
		{"TimeAfter2116", gcra, allow(1, 1<<62+1), sluice.ErrTimeOutOfRange},
		{"WindowOf2To53", engine.Params{Kind: engine.KindFixedWindow, Limit: 1, Interval: 1 << 53}, allow(1, base), sluice.ErrUnsupported},
		{"CounterOf2To52", engine.Params{Kind: engine.KindSlidingCounter, Limit: 1, Interval: 1 << 52}, allow(1, base), sluice.ErrUnsupported},
		{"LongGCRABurst", engine.Params{Kind: engine.KindGCRA, Limit: 4, Interval: 1 << 51}, allow(1, base), sluice.ErrUnsupported},
		{"SlowLeak", engine.Params{Kind: engine.KindLeakyBucket, Limit: 1e7, Interval: s, Amount: 1}, allow(1, base), sluice.ErrUnsupported},
		{"ExtensionOfGCRA", gcra, engine.Op{Verb: engine.VerbExtend, Cost: 1, Now: base, At: base}, sluice.ErrUnsupported},
		{"LeasesWithoutEntries", engine.Params{Kind: engine.KindConcurrency, Limit: 2, Interval: s}, allow(1, base), sluice.ErrInvalidConfig},
		{"LeasesUnderAPenalty", engine.Params{Kind: engine.KindConcurrency, Limit: 2, Interval: s, MaxEntries: 2, Penalty: s}, allow(1, base), sluice.ErrInvalidConfig},
		{"PartialGrantOfLeases", leases, engine.Op{Verb: engine.VerbAtMost, Cost: 1, Now: base}, sluice.ErrUnsupported},
		{"ReservationOfLeases", leases, engine.Op{Verb: engine.VerbReserve, Cost: 1, Now: base}, sluice.ErrUnsupported},
		{"ExhaustOfLeases", leases, engine.Op{Verb: engine.VerbExhaust, Cost: 1, Now: base}, sluice.ErrUnsupported},
		{"ExhaustOfAWindow", engine.Params{Kind: engine.KindFixedWindow, Limit: 2, Interval: s}, engine.Op{Verb: engine.VerbExhaust, Cost: 1, Now: base}, sluice.ErrUnsupported},
		{"ExhaustBeyond2To60", gcra, engine.Op{Verb: engine.VerbExhaust, Cost: 1, Now: base, MaxDelay: 1<<60 + 1}, sluice.ErrInvalidDelay},
		{"ExhaustOfNegativeDelay", gcra, engine.Op{Verb: engine.VerbExhaust, Cost: 1, Now: base, MaxDelay: -1}, sluice.ErrInvalidDelay},
		{"ExhaustAboveTheLimit", gcra, engine.Op{Verb: engine.VerbExhaust, Cost: 3, Now: base}, sluice.ErrCostExceedsLimit},
		{"ReleaseBeforeEpoch", leases, engine.Op{Verb: engine.VerbCancel, Cost: 1, Now: base, At: -1}, sluice.ErrTimeOutOfRange},
		{"ExtensionAfterTheEnd", leases, engine.Op{Verb: engine.VerbExtend, Cost: 1, Now: base, At: math.MaxInt64}, sluice.ErrTimeOutOfRange},
		{"LeaseOfTwoTo53", engine.Params{Kind: engine.KindConcurrency, Limit: 1, Interval: 1 << 53, MaxEntries: 1}, allow(1, base), sluice.ErrUnsupported},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := st.Apply(t.Context(), "k", &tt.p, tt.op)
			require.ErrorIs(t, err, tt.want)
			_, _, specErr := tt.p.Step(engine.State{}, tt.op)
			if !errors.Is(tt.want, sluice.ErrUnsupported) || specErr != nil {
				require.ErrorIs(t, specErr, tt.want, "the specification agrees")
			}
		})
	}
}

func TestNewRejectsInvalidConfig(t *testing.T) {
	c := newClient(t, fmt.Sprintf("127.0.0.1:%d", testserver.FreePort(t)))
	for name, build := range map[string]func() (*redisstore.Store, error){
		"NilClient":     func() (*redisstore.Store, error) { return redisstore.New(nil) },
		"BraceInPrefix": func() (*redisstore.Store, error) { return redisstore.New(c, redisstore.WithPrefix("{app}:")) },
		"ClosingBrace":  func() (*redisstore.Store, error) { return redisstore.New(c, redisstore.WithPrefix("app}")) },
		"NegativeSkew":  func() (*redisstore.Store, error) { return redisstore.New(c, redisstore.WithCallerClock(-time.Second)) },
	} {
		t.Run(name, func(t *testing.T) {
			_, err := build()
			require.ErrorIs(t, err, sluice.ErrInvalidConfig)
		})
	}
}
