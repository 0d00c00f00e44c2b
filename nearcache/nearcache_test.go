package nearcache_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sluice-go/sluice"
	"github.com/sluice-go/sluice/engine"
	"github.com/sluice-go/sluice/internal/nearcachetest"
	"github.com/sluice-go/sluice/nearcache"
)

func newMem(t *testing.T) *sluice.MemStore {
	t.Helper()
	m := sluice.NewMemStore(sluice.MemStoreConfig{})
	t.Cleanup(func() { m.Close() })
	return m
}

func TestCacheChangesNoDecisionOnRandomTraces(t *testing.T) {
	for seed := range uint64(4) {
		st := nearcachetest.Compare(t, newMem(t), newMem(t), seed, 400)
		t.Logf("seed %d: %d answered locally, %d by the store", seed, st.Local, st.Remote)
	}
}

// gcra is 1 request per second, bursts of 1.
var gcra = engine.Params{Kind: engine.KindGCRA, Limit: 1, Interval: int64(time.Second)}

func op(verb engine.Verb, cost float64, at time.Duration) engine.Op {
	return engine.Op{Verb: verb, Cost: cost, Now: nearcachetest.Start + int64(at)}
}

// counting is a store that counts the calls reaching it.
type counting struct {
	engine.Store
	applies int
}

func (c *counting) Apply(ctx context.Context, key string, p *engine.Params, o engine.Op) (engine.Decision, error) {
	c.applies++
	return c.Store.Apply(ctx, key, p, o)
}

func newCache(t *testing.T, cfg nearcache.Config) (*nearcache.Store, *counting) {
	t.Helper()
	remote := &counting{Store: newMem(t)}
	nc, err := nearcache.New(remote, cfg)
	require.NoError(t, err)
	return nc, remote
}

func TestDenialIsAnsweredLocallyUntilItsRetryAfter(t *testing.T) {
	nc, remote := newCache(t, nearcache.Config{})
	ctx := context.Background()
	d, err := nc.Apply(ctx, "k", &gcra, op(engine.VerbAllow, 1, 0))
	require.NoError(t, err)
	require.True(t, d.Allowed)
	d, err = nc.Apply(ctx, "k", &gcra, op(engine.VerbAllow, 1, 100*time.Millisecond))
	require.NoError(t, err)
	require.False(t, d.Allowed)
	require.Equal(t, 900*time.Millisecond, d.RetryAfter)
	require.Equal(t, 2, remote.applies)

	for _, at := range []time.Duration{100 * time.Millisecond, 500 * time.Millisecond, time.Second - 1} {
		d, err = nc.Apply(ctx, "k", &gcra, op(engine.VerbAllow, 1, at))
		require.NoError(t, err)
		require.False(t, d.Allowed)
		require.Equal(t, time.Second-at, d.RetryAfter, "counts down to the same instant")
		d, err = nc.Apply(ctx, "k", &gcra, op(engine.VerbCheck, 1, at))
		require.NoError(t, err)
		require.False(t, d.Allowed)
	}
	require.Equal(t, 2, remote.applies, "no round trip")

	d, err = nc.Apply(ctx, "k", &gcra, op(engine.VerbAllow, 1, time.Second))
	require.NoError(t, err)
	require.True(t, d.Allowed, "due: the store decides again")
	require.Equal(t, 3, remote.applies)
	require.Equal(t, nearcache.Stats{Local: 6, Remote: 3, Keys: 0}, nc.Stats())
}

func TestSmallerCostsAndOtherParamsGoToTheStore(t *testing.T) {
	nc, remote := newCache(t, nearcache.Config{})
	ctx := context.Background()
	tb := engine.Params{Kind: engine.KindTokenBucket, Limit: 2, Interval: int64(time.Second), Amount: 1}
	_, err := nc.Apply(ctx, "k", &tb, op(engine.VerbAllow, 1.5, 0))
	require.NoError(t, err)
	d, err := nc.Apply(ctx, "k", &tb, op(engine.VerbAllow, 1, 0))
	require.NoError(t, err)
	require.False(t, d.Allowed, "0.5 tokens left")
	require.Equal(t, 2, remote.applies)

	d, err = nc.Apply(ctx, "k", &tb, op(engine.VerbAllow, 0.5, 0))
	require.NoError(t, err)
	require.True(t, d.Allowed, "a denial of 1 says nothing of 0.5")
	require.Equal(t, 3, remote.applies)

	d, err = nc.Apply(ctx, "k", &tb, op(engine.VerbAllow, 2, 10*time.Millisecond))
	require.NoError(t, err)
	require.False(t, d.Allowed, "2 is denied where 1 is")
	require.Equal(t, 3, remote.applies)

	bigger := tb
	bigger.Limit = 10
	d, err = nc.Apply(ctx, "k", &bigger, op(engine.VerbAllow, 1, 10*time.Millisecond))
	require.NoError(t, err)
	require.True(t, d.Allowed, "a limit raised in this process is seen at once")
	require.Equal(t, 4, remote.applies)
}

func TestResetThroughTheCacheClearsItsEntry(t *testing.T) {
	nc, _ := newCache(t, nearcache.Config{})
	ctx := context.Background()
	_, err := nc.Apply(ctx, "k", &gcra, op(engine.VerbAllow, 1, 0))
	require.NoError(t, err)
	d, err := nc.Apply(ctx, "k", &gcra, op(engine.VerbAllow, 1, 0))
	require.NoError(t, err)
	require.False(t, d.Allowed)
	require.NoError(t, nc.Reset(ctx, "k"))
	d, err = nc.Apply(ctx, "k", &gcra, op(engine.VerbAllow, 1, 0))
	require.NoError(t, err)
	require.True(t, d.Allowed)
}

func TestResetElsewhereIsSeenAtTheCachedInstant(t *testing.T) {
	nc, remote := newCache(t, nearcache.Config{})
	ctx := context.Background()
	_, err := nc.Apply(ctx, "k", &gcra, op(engine.VerbAllow, 1, 0))
	require.NoError(t, err)
	_, err = nc.Apply(ctx, "k", &gcra, op(engine.VerbAllow, 1, 0))
	require.NoError(t, err)
	require.NoError(t, remote.Reset(ctx, "k")) // another process resets the key

	d, err := nc.Apply(ctx, "k", &gcra, op(engine.VerbAllow, 1, 999*time.Millisecond))
	require.NoError(t, err)
	require.False(t, d.Allowed, "the cache denies until its instant: the documented limit")
	d, err = nc.Apply(ctx, "k", &gcra, op(engine.VerbAllow, 1, time.Second))
	require.NoError(t, err)
	require.True(t, d.Allowed)
}

func TestFillupsAndErrorsAreNeverCached(t *testing.T) {
	lb := engine.Params{Kind: engine.KindLeakyBucket, Limit: 2, Interval: int64(time.Second), Amount: 1}
	nc, remote := newCache(t, nearcache.Config{})
	ctx := context.Background()
	for i := range 3 {
		d, err := nc.Apply(ctx, "k", &lb, op(engine.VerbFill, 2, 0))
		require.NoError(t, err)
		require.LessOrEqual(t, d.Remaining, 0.0, "full")
		require.Equal(t, i+1, remote.applies, "a fill-up records its cost: always the store's")
	}

	failing, err := nearcache.New(failingStore{}, nearcache.Config{})
	require.NoError(t, err)
	for range 2 {
		_, err = failing.Apply(ctx, "k", &gcra, op(engine.VerbAllow, 1, 0))
		require.ErrorIs(t, err, errDown)
	}
	require.Equal(t, uint64(2), failing.Stats().Remote)
}

var errDown = errors.New("connection refused")

type failingStore struct{}

func (failingStore) Apply(context.Context, string, *engine.Params, engine.Op) (engine.Decision, error) {
	return engine.Decision{}, errDown
}
func (failingStore) Reset(context.Context, string) error { return errDown }

func TestBadInputIsAnErrorEvenForACachedKey(t *testing.T) {
	nc, _ := newCache(t, nearcache.Config{})
	ctx := context.Background()
	_, err := nc.Apply(ctx, "k", &gcra, op(engine.VerbAllow, 1, 0))
	require.NoError(t, err)
	_, err = nc.Apply(ctx, "k", &gcra, op(engine.VerbAllow, 1, 0))
	require.NoError(t, err)
	for name, tc := range map[string]struct {
		op   engine.Op
		want error
	}{
		"infinite cost":      {op(engine.VerbAllow, 1/zero(), 0), sluice.ErrInvalidCost},
		"cost over limit":    {op(engine.VerbAllow, 5, 0), sluice.ErrCostExceedsLimit},
		"time out of range":  {engine.Op{Verb: engine.VerbAllow, Cost: 1, Now: -1}, sluice.ErrTimeOutOfRange},
		"fill-up of a GCRA":  {op(engine.VerbFill, 1, 0), sluice.ErrUnsupported},
		"NaN cost":           {op(engine.VerbCheck, zero()/zero(), 0), sluice.ErrInvalidCost},
		"negative cost":      {op(engine.VerbCheck, -1, 0), sluice.ErrInvalidCost},
		"cost over limit, 2": {op(engine.VerbCheck, 1.5, 0), sluice.ErrCostExceedsLimit},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := nc.Apply(ctx, "k", &gcra, tc.op)
			require.ErrorIs(t, err, tc.want)
		})
	}
	_, err = nc.Apply(ctx, "k", nil, op(engine.VerbAllow, 1, 0))
	require.ErrorIs(t, err, sluice.ErrInvalidConfig)
}

func zero() float64 { return 0 }

func TestNewRefusesBadConfig(t *testing.T) {
	_, err := nearcache.New(nil, nearcache.Config{})
	require.ErrorIs(t, err, sluice.ErrInvalidConfig)
	_, err = nearcache.New(newMem(t), nearcache.Config{MaxKeys: -1})
	require.ErrorIs(t, err, sluice.ErrInvalidConfig)
}

func TestMemoryIsBoundedByMaxKeys(t *testing.T) {
	nc, _ := newCache(t, nearcache.Config{MaxKeys: 64})
	ctx := context.Background()
	for i := range 5000 {
		key := fmt.Sprint("client-", i)
		at := time.Duration(i) * time.Millisecond // earlier keys are due sooner
		_, err := nc.Apply(ctx, key, &gcra, op(engine.VerbAllow, 1, at))
		require.NoError(t, err)
		d, err := nc.Apply(ctx, key, &gcra, op(engine.VerbAllow, 1, at))
		require.NoError(t, err)
		require.False(t, d.Allowed)
		require.LessOrEqual(t, nc.Stats().Keys, 64)
	}
	// The latest denial is held: a full cache makes room for it rather than
	// turning it away.
	before := nc.Stats().Local
	_, err := nc.Apply(ctx, "client-4999", &gcra, op(engine.VerbAllow, 1, 4999*time.Millisecond))
	require.NoError(t, err)
	require.Equal(t, before+1, nc.Stats().Local)
}

func TestDueEntriesAreRemovedWhenTouched(t *testing.T) {
	nc, _ := newCache(t, nearcache.Config{})
	ctx := context.Background()
	_, err := nc.Apply(ctx, "k", &gcra, op(engine.VerbAllow, 1, 0))
	require.NoError(t, err)
	_, err = nc.Apply(ctx, "k", &gcra, op(engine.VerbAllow, 1, 0))
	require.NoError(t, err)
	require.Equal(t, 1, nc.Stats().Keys)
	_, err = nc.Apply(ctx, "k", &gcra, op(engine.VerbCheck, 1, 2*time.Second))
	require.NoError(t, err)
	require.Zero(t, nc.Stats().Keys)
}

func TestFullCacheEvictsTheEntryDueSoonest(t *testing.T) {
	nc, _ := newCache(t, nearcache.Config{MaxKeys: 64}) // two per shard: a sample sees them all
	ctx := context.Background()
	hourly := engine.Params{Kind: engine.KindGCRA, Limit: 1, Interval: int64(time.Hour)}
	for range 2 { // admitted, then denied for an hour
		_, err := nc.Apply(ctx, "long", &hourly, op(engine.VerbAllow, 1, 0))
		require.NoError(t, err)
	}
	for i := range 5000 { // denials due within a second, each added to a full shard in turn
		key := fmt.Sprint("client-", i)
		at := time.Duration(i) * time.Millisecond
		for range 2 {
			_, err := nc.Apply(ctx, key, &gcra, op(engine.VerbAllow, 1, at))
			require.NoError(t, err)
		}
	}
	before := nc.Stats().Local
	d, err := nc.Apply(ctx, "long", &hourly, op(engine.VerbAllow, 1, 5*time.Second))
	require.NoError(t, err)
	require.False(t, d.Allowed)
	require.Equal(t, before+1, nc.Stats().Local, "the denial due last outlived the flood")
}

func TestCachedDenialCarriesTheAllowanceLeftByAFillup(t *testing.T) {
	lb := engine.Params{Kind: engine.KindLeakyBucket, Limit: 4, Interval: int64(time.Second), Amount: 1}
	nc, remote := newCache(t, nearcache.Config{})
	ctx := context.Background()
	d, err := nc.Apply(ctx, "k", &lb, op(engine.VerbAllow, 3, 0))
	require.NoError(t, err)
	require.True(t, d.Allowed)
	d, err = nc.Apply(ctx, "k", &lb, op(engine.VerbAllow, 2, 0))
	require.NoError(t, err)
	require.False(t, d.Allowed, "1 left of 4")
	_, err = nc.Apply(ctx, "k", &lb, op(engine.VerbFill, 0.5, 0))
	require.NoError(t, err)

	before := nc.Stats().Local
	got, err := nc.Apply(ctx, "k", &lb, op(engine.VerbAllow, 2, 0))
	require.NoError(t, err)
	require.Equal(t, before+1, nc.Stats().Local, "answered by the cache")
	want, err := remote.Store.Apply(ctx, "k", &lb, op(engine.VerbCheck, 2, 0))
	require.NoError(t, err)
	require.False(t, got.Allowed)
	require.Equal(t, want.Used, got.Used, "the fill-up's level, not the denial's")
	require.Equal(t, want.Remaining, got.Remaining)
	require.Equal(t, want.ResetAfter, got.ResetAfter)
	require.LessOrEqual(t, got.RetryAfter, want.RetryAfter, "a lower bound after a fill-up")
}

func TestHugeMaxKeysIsNoTighterBound(t *testing.T) {
	nc, _ := newCache(t, nearcache.Config{MaxKeys: math.MaxInt})
	ctx := context.Background()
	for i := range 1000 {
		for range 2 { // admitted, then denied
			_, err := nc.Apply(ctx, fmt.Sprint("client-", i), &gcra, op(engine.VerbAllow, 1, 0))
			require.NoError(t, err)
		}
	}
	require.Equal(t, 1000, nc.Stats().Keys, "no denial evicted")
}

func TestCancelThroughTheCacheClearsItsEntry(t *testing.T) {
	nc, _ := newCache(t, nearcache.Config{})
	ctx := context.Background()
	d, err := nc.Apply(ctx, "k", &gcra, op(engine.VerbAllow, 1, 0))
	require.NoError(t, err)
	require.True(t, d.Allowed)
	reserve := op(engine.VerbReserve, 1, 0)
	reserve.MaxDelay = int64(2 * time.Second)
	booked, err := nc.Apply(ctx, "k", &gcra, reserve)
	require.NoError(t, err)
	require.Equal(t, time.Second, booked.Delay)
	d, err = nc.Apply(ctx, "k", &gcra, op(engine.VerbAllow, 1, 500*time.Millisecond))
	require.NoError(t, err)
	require.False(t, d.Allowed, "denied behind the booking, and cached until 2s")
	cancel := op(engine.VerbCancel, 1, 600*time.Millisecond)
	cancel.At = booked.At
	d, err = nc.Apply(ctx, "k", &gcra, cancel)
	require.NoError(t, err)
	require.True(t, d.Allowed, "given back")
	d, err = nc.Apply(ctx, "k", &gcra, op(engine.VerbAllow, 1, 1100*time.Millisecond))
	require.NoError(t, err)
	require.True(t, d.Allowed, "the freed turn is not hidden by the denial cached before the cancel")
}

func TestRefundThroughTheCacheClearsItsEntry(t *testing.T) {
	nc, _ := newCache(t, nearcache.Config{})
	ctx := context.Background()
	d, err := nc.Apply(ctx, "k", &gcra, op(engine.VerbAllow, 1, 0))
	require.NoError(t, err)
	require.True(t, d.Allowed)
	d, err = nc.Apply(ctx, "k", &gcra, op(engine.VerbAllow, 1, 100*time.Millisecond))
	require.NoError(t, err)
	require.False(t, d.Allowed, "denied, and cached until 1s")
	d, err = nc.Apply(ctx, "k", &gcra, op(engine.VerbRefund, 1, 200*time.Millisecond))
	require.NoError(t, err)
	require.Positive(t, d.Granted, "given back")
	d, err = nc.Apply(ctx, "k", &gcra, op(engine.VerbAllow, 1, 300*time.Millisecond))
	require.NoError(t, err)
	require.True(t, d.Allowed, "the cost given back is not hidden by the denial cached before the refund")
}
