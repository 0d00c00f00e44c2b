package allowance_test

import (
	"context"
	"errors"
	"math"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sluice-go/sluice"
	"github.com/sluice-go/sluice/allowance"
	"github.com/sluice-go/sluice/engine"
	"github.com/sluice-go/sluice/internal/allowancetest"
	"github.com/sluice-go/sluice/nearcache"
)

// start and leaseTime are the checks': a realistic instant, and the
// Stores' lease time.
var (
	start     = allowancetest.Start
	leaseTime = allowancetest.LeaseTime
	ms        = int64(time.Millisecond)
	ctx       = context.Background()
	gcra      = engine.Params{Kind: engine.KindGCRA, Limit: 40, Interval: int64(10 * time.Millisecond)} // 100/s, bursts of 40
)

// counted is a remote store that counts, and can fail, the calls that
// reach it.
type counted struct {
	engine.Store
	calls [engine.VerbRefund + 1]atomic.Int64
	fail  atomic.Bool
}

var errDown = errors.New("remote store down")

func (c *counted) Apply(ctx context.Context, key string, p *engine.Params, op engine.Op) (engine.Decision, error) {
	c.calls[op.Verb].Add(1)
	if c.fail.Load() {
		return engine.Decision{}, errDown
	}
	return c.Store.Apply(ctx, key, p, op)
}

func (c *counted) ApplyGroup(ctx context.Context, ops []engine.GroupOp, each []engine.Decision) (engine.Decision, error) {
	return c.Store.(engine.GroupStore).ApplyGroup(ctx, ops, each)
}

// newStore returns a Store over a counted MemStore, with a lease time of
// 50 ms and blocks of at most a quarter of the limit.
func newStore(t *testing.T) (*allowance.Store, *counted) {
	t.Helper()
	mem := sluice.NewMemStore(sluice.MemStoreConfig{})
	t.Cleanup(func() { mem.Close() })
	remote := &counted{Store: mem}
	s, err := allowance.New(remote, allowance.Config{LeaseTime: leaseTime, MaxShare: 0.25})
	require.NoError(t, err)
	return s, remote
}

func apply(t *testing.T, s engine.Store, p engine.Params, verb engine.Verb, cost float64, at int64) engine.Decision {
	t.Helper()
	d, err := s.Apply(ctx, "k", &p, engine.Op{Verb: verb, Cost: cost, Now: start + at})
	require.NoError(t, err)
	return d
}

// warm offers n requests of one unit on "k" at at, and returns how many
// were admitted.
func warm(t *testing.T, s engine.Store, p engine.Params, n int, at int64) int {
	admitted := 0
	for range n {
		if apply(t, s, p, engine.VerbAllow, 1, at).Allowed {
			admitted++
		}
	}
	return admitted
}

func TestNewRejectsAConfigItCannotKeep(t *testing.T) {
	mem := sluice.NewMemStore(sluice.MemStoreConfig{})
	defer mem.Close()
	for name, tc := range map[string]struct {
		remote engine.Store
		cfg    allowance.Config
	}{
		"no remote store":        {nil, allowance.Config{}},
		"negative lease time":    {mem, allowance.Config{LeaseTime: -time.Second}},
		"lease time over a min":  {mem, allowance.Config{LeaseTime: time.Minute + 1}},
		"negative share":         {mem, allowance.Config{MaxShare: -0.1}},
		"share above the limit":  {mem, allowance.Config{MaxShare: 1.5}},
		"share that is not real": {mem, allowance.Config{MaxShare: math.NaN()}},
		"negative MaxKeys":       {mem, allowance.Config{MaxKeys: -1}},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := allowance.New(tc.remote, tc.cfg)
			require.ErrorIs(t, err, sluice.ErrInvalidConfig)
		})
	}
}

func TestAColdKeyGoesToTheStoreOnEveryRequest(t *testing.T) {
	s, remote := newStore(t)
	for i := range int64(20) {
		require.True(t, apply(t, s, gcra, engine.VerbAllow, 1, i*int64(leaseTime)).Allowed)
	}
	require.EqualValues(t, 20, remote.calls[engine.VerbAllow].Load())
	require.Zero(t, s.Stats().Leases)
}

func TestAHotKeyIsAnsweredInProcessFromBlocksOfAtMostItsShare(t *testing.T) {
	s, remote := newStore(t)
	p := engine.Params{Kind: engine.KindGCRA, Limit: 400, Interval: int64(time.Millisecond)} // 1000/s
	admitted := 0
	for i := range int64(4000) {
		if apply(t, s, p, engine.VerbAllow, 1, i*ms/2).Allowed { // 2000/s offered
			admitted++
		}
	}
	st := s.Stats()
	require.Greater(t, st.Leases, uint64(0))
	require.LessOrEqual(t, st.Leased/float64(st.Leases), p.Limit/4, "a block beyond the share")
	calls := remote.calls[engine.VerbAllow].Load() + remote.calls[engine.VerbAtMost].Load() + remote.calls[engine.VerbRefund].Load()
	require.EqualValues(t, st.Remote, calls)
	require.Less(t, float64(calls)/float64(admitted), 0.05, "round trips per admission")
	require.Greater(t, float64(admitted), 0.9*(p.Limit+2000), "admitted of the %v the limit allows", p.Limit+2000)
	require.LessOrEqual(t, float64(admitted), p.Limit+2000)
}

func TestAKeyAtItsLimitIsHeldInProcessUntilABlockFits(t *testing.T) {
	s, remote := newStore(t)
	warm(t, s, gcra, 100, 0) // the burst, and the demand for blocks of 10
	calls := remote.calls[engine.VerbAtMost].Load()
	d := apply(t, s, gcra, engine.VerbAllow, 1, ms)
	require.False(t, d.Allowed)
	hold := d.RetryAfter
	require.Greater(t, hold, 10*time.Millisecond, "a block of 10 units at 100/s takes about 100 ms")
	for at := 2 * ms; at < ms+int64(hold); at += 5 * ms {
		d := apply(t, s, gcra, engine.VerbAllow, 1, at)
		require.False(t, d.Allowed)
		require.Equal(t, ms+int64(hold)-at, int64(d.RetryAfter), "RetryAfter counts down")
	}
	require.Equal(t, calls, remote.calls[engine.VerbAtMost].Load(), "asked again while held")
	require.True(t, apply(t, s, gcra, engine.VerbAllow, 1, ms+int64(hold)).Allowed)
	require.Equal(t, calls+1, remote.calls[engine.VerbAtMost].Load())
}

func TestUnspentUnitsGoBackAndTheRestOfACostIsDecidedByTheStore(t *testing.T) {
	s, remote := newStore(t)
	p := engine.Params{Kind: engine.KindLeakyBucket, Limit: 40, Interval: int64(time.Second), Amount: 10}
	apply(t, remote.Store, p, engine.VerbFill, 34.3, 0)
	// Three requests go to the store, the fourth takes a block of 2: the
	// level is 39.3, one unit of the block unspent.
	require.Equal(t, 4, warm(t, s, p, 4, 0))
	require.EqualValues(t, 1, s.Stats().Leases)
	// 1.5 is more than the block holds: the unit goes back (38.3), a block
	// of 2 gets one whole unit (39.3), and 0.5 more is asked for as an
	// Allow, which fits.
	require.True(t, apply(t, s, p, engine.VerbAllow, 1.5, 0).Allowed)
	require.EqualValues(t, 1, remote.calls[engine.VerbRefund].Load())
	require.EqualValues(t, 4, remote.calls[engine.VerbAllow].Load())
	require.InDelta(t, 39.8, apply(t, remote.Store, p, engine.VerbCheck, 0, 0).Used, 1e-9)
	st := s.Stats()
	require.Equal(t, allowance.Stats{Local: 0, Remote: 7, Leases: 2, Leased: 3, Spent: 2, Refunded: 1, Keys: 1}, st)
}

func TestAWindowKeepsWhatItCannotGiveBack(t *testing.T) {
	s, remote := newStore(t)
	p := engine.Params{Kind: engine.KindFixedWindow, Limit: 40, Interval: int64(time.Second)}
	warm(t, s, p, 4, 0) // a block of 2, one unit unspent
	require.True(t, apply(t, s, p, engine.VerbAllow, 1.5, 0).Allowed)
	require.Zero(t, remote.calls[engine.VerbRefund].Load())
	require.Zero(t, s.Stats().Refunded)
}

func TestAPenaltyBlocksTheKeyInTheStoreAndTheBlockedKeyIsNotLeased(t *testing.T) {
	s, remote := newStore(t)
	p := gcra
	p.Penalty = int64(time.Second)
	warm(t, s, p, 100, 0) // the burst, then an overflow the store sees
	blocked := apply(t, remote.Store, p, engine.VerbCheck, 0, ms)
	require.True(t, blocked.Blocked, "the overflow reached the store")
	calls := remote.calls[engine.VerbAllow].Load() + remote.calls[engine.VerbAtMost].Load()
	d := apply(t, s, p, engine.VerbAllow, 1, 500*ms)
	require.True(t, d.Blocked)
	require.Equal(t, time.Duration(500*ms), d.RetryAfter)
	require.Equal(t, calls, remote.calls[engine.VerbAllow].Load()+remote.calls[engine.VerbAtMost].Load(), "asked while blocked")
	require.True(t, apply(t, s, p, engine.VerbAllow, 1, 1000*ms).Allowed)
}

func TestCountedDenialsReachTheStore(t *testing.T) {
	s, remote := newStore(t)
	p := gcra
	p.CountDenied = true
	warm(t, s, p, 100, 0)
	allows := remote.calls[engine.VerbAllow].Load()
	apply(t, s, p, engine.VerbAllow, 3, ms) // more than a counted denial's 1
	require.Equal(t, allows+1, remote.calls[engine.VerbAllow].Load())
}

func TestACheckIsAnsweredFromTheBlockAndSpendsNothing(t *testing.T) {
	s, remote := newStore(t)
	warm(t, s, gcra, 9, 0) // a block of 4, three units unspent
	left := s.Stats()
	d := apply(t, s, gcra, engine.VerbCheck, 1, 0)
	require.True(t, d.Allowed)
	st := s.Stats()
	require.Equal(t, left.Spent, st.Spent)
	require.Equal(t, left.Local+1, st.Local)
	require.Zero(t, remote.calls[engine.VerbCheck].Load())
}

func TestVerbsThatAreNotAllowOrCheckGoToTheStore(t *testing.T) {
	for _, tc := range []struct {
		verb engine.Verb
		p    engine.Params
		cost float64
	}{
		{engine.VerbAtMost, gcra, 5},
		{engine.VerbReserve, gcra, 1},
		{engine.VerbFill, engine.Params{Kind: engine.KindLeakyBucket, Limit: 40, Interval: int64(time.Second), Amount: 10}, 1},
		{engine.VerbCharge, gcra, 1},
		{engine.VerbAllow, gcra, 41}, // above the limit
		{engine.VerbAllow, engine.Params{Kind: engine.KindConcurrency, Limit: 4, Interval: int64(time.Second), MaxEntries: 4}, 1},
	} {
		t.Run(tc.verb.String()+"/"+tc.p.Kind.String(), func(t *testing.T) {
			s, remote := newStore(t)
			warm(t, s, tc.p, 8, 0)
			before := remote.calls[tc.verb].Load()
			want, wantErr := remote.Store.Apply(ctx, "other", &tc.p, engine.Op{Verb: tc.verb, Cost: tc.cost, Now: start, MaxDelay: int64(time.Second)})
			got, err := s.Apply(ctx, "k2", &tc.p, engine.Op{Verb: tc.verb, Cost: tc.cost, Now: start, MaxDelay: int64(time.Second)})
			require.Equal(t, wantErr, err)
			require.Equal(t, want.Allowed, got.Allowed)
			require.Equal(t, before+1, remote.calls[tc.verb].Load())
		})
	}
}

func TestResetAndANewLimitDropTheBlock(t *testing.T) {
	for name, change := range map[string]func(*testing.T, *allowance.Store){
		"reset": func(t *testing.T, s *allowance.Store) { require.NoError(t, s.Reset(ctx, "k")) },
		"new limit": func(t *testing.T, s *allowance.Store) {
			p := gcra
			p.Limit++
			apply(t, s, p, engine.VerbAllow, 1, 0)
		},
	} {
		t.Run(name, func(t *testing.T) {
			s, _ := newStore(t)
			warm(t, s, gcra, 8, 0) // a block held
			local := s.Stats().Local
			change(t, s)
			apply(t, s, gcra, engine.VerbAllow, 1, 0)
			require.Equal(t, local, s.Stats().Local, "answered from the dropped block")
		})
	}
}

func TestAGroupIsDecidedByTheStore(t *testing.T) {
	s, _ := newStore(t)
	per, err := sluice.NewGCRA(sluice.PerSecond(100), 40, sluice.WithStore(s))
	require.NoError(t, err)
	day, err := sluice.NewFixedWindow(1000, 24*time.Hour, sluice.WithStore(s))
	require.NoError(t, err)
	g, err := sluice.NewGroup(per, day)
	require.NoError(t, err)
	d, err := g.Allow(ctx, []string{"k", "k:day"}, 1)
	require.NoError(t, err)
	require.True(t, d.Allowed)
	require.EqualValues(t, 1, s.Stats().Remote)

	nc, err := nearcache.New(sluice.NewMemStore(sluice.MemStoreConfig{}), nearcache.Config{})
	require.NoError(t, err)
	over, err := allowance.New(nc, allowance.Config{})
	require.NoError(t, err)
	_, err = over.ApplyGroup(ctx, nil, nil)
	require.ErrorIs(t, err, sluice.ErrUnsupported)
}

func TestABlockOutlivesTheStoreForItsLeaseTimeAndNoLonger(t *testing.T) {
	s, remote := newStore(t)
	warm(t, s, gcra, 9, 0) // a block of 4, three units unspent
	remote.fail.Store(true)
	d := apply(t, s, gcra, engine.VerbAllow, 1, ms)
	require.True(t, d.Allowed, "the block covers it")
	_, err := s.Apply(ctx, "k", &gcra, engine.Op{Verb: engine.VerbAllow, Cost: 1, Now: start + int64(leaseTime)})
	require.ErrorIs(t, err, errDown)
	remote.fail.Store(false)
	require.True(t, apply(t, s, gcra, engine.VerbAllow, 1, int64(leaseTime)+ms).Allowed, "recovered by itself")
}

// stalled is a remote store whose AtMost calls, once it stalls, wait
// until released.
type stalled struct {
	engine.Store
	stalls  atomic.Bool
	asked   chan struct{}
	release chan struct{}
}

func (s *stalled) Apply(ctx context.Context, key string, p *engine.Params, op engine.Op) (engine.Decision, error) {
	if op.Verb == engine.VerbAtMost && s.stalls.Load() {
		s.asked <- struct{}{}
		<-s.release
	}
	return s.Store.Apply(ctx, key, p, op)
}

func TestCallersWaitForOneRenewalWithinTheirDeadline(t *testing.T) {
	mem := sluice.NewMemStore(sluice.MemStoreConfig{})
	t.Cleanup(func() { mem.Close() })
	remote := &stalled{Store: mem, asked: make(chan struct{}, 1), release: make(chan struct{})}
	s, err := allowance.New(remote, allowance.Config{LeaseTime: leaseTime, MaxShare: 0.25})
	require.NoError(t, err)
	// Three requests go to the store, the next takes a block of 2, then
	// one of 3, then one of 4: demand for blocks of 6, and all spent.
	warm(t, s, gcra, 12, 0)
	remote.stalls.Store(true)
	var wg sync.WaitGroup
	wg.Go(func() { require.True(t, apply(t, s, gcra, engine.VerbAllow, 1, 0).Allowed) }) // asks for a block of 6
	<-remote.asked
	late, cancel := context.WithCancel(ctx)
	cancel()
	_, err = s.Apply(late, "k", &gcra, engine.Op{Verb: engine.VerbAllow, Cost: 1, Now: start})
	require.ErrorIs(t, err, context.Canceled, "waited past its deadline")
	for range 4 {
		wg.Go(func() { require.True(t, apply(t, s, gcra, engine.VerbAllow, 1, 0).Allowed) })
	}
	close(remote.release)
	wg.Wait()
	require.EqualValues(t, 4, s.Stats().Leases, "one renewal for every waiting caller")
}

func TestADecisionFromABlockAllocatesNothing(t *testing.T) {
	s, _ := newStore(t)
	p := engine.Params{Kind: engine.KindGCRA, Limit: 1e9, Interval: 1}
	warm(t, s, p, 100, 0)
	op := engine.Op{Verb: engine.VerbAllow, Cost: 1, Now: start}
	allocs := testing.AllocsPerRun(1000, func() {
		if d, _ := s.Apply(ctx, "k", &p, op); !d.Allowed {
			t.Fatal("denied")
		}
	})
	require.Zero(t, allocs)
	require.Greater(t, s.Stats().Local, uint64(1000))
}

func TestTheStoreFollowsAtMostMaxKeys(t *testing.T) {
	mem := sluice.NewMemStore(sluice.MemStoreConfig{})
	t.Cleanup(func() { mem.Close() })
	s, err := allowance.New(mem, allowance.Config{LeaseTime: leaseTime, MaxShare: 0.25, MaxKeys: 256})
	require.NoError(t, err)
	admitted := 0
	for i := range 2000 {
		key := "k" + strconv.Itoa(i%500)
		d, err := s.Apply(ctx, key, &gcra, engine.Op{Verb: engine.VerbAllow, Cost: 1, Now: start + int64(i)*ms/10})
		require.NoError(t, err)
		if d.Allowed {
			admitted++
		}
	}
	require.Equal(t, 2000, admitted, "500 keys, 4 requests each, within their bursts")
	require.LessOrEqual(t, s.Stats().Keys, 256)
}

func TestALimitBeyondAnInt64IsLeasedToo(t *testing.T) {
	s, _ := newStore(t)
	p := engine.Params{Kind: engine.KindLeakyBucket, Limit: 1e200, Interval: int64(time.Second), Amount: 1e200}
	for i := range int64(100) {
		require.True(t, apply(t, s, p, engine.VerbAllow, 1e150, i).Allowed)
	}
	st := s.Stats()
	require.Greater(t, st.Leases, uint64(0))
	require.Greater(t, st.Local, uint64(50))
}
