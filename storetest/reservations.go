package storetest

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sluice-go/sluice"

	"github.com/sluice-go/sluice/engine"
	"github.com/sluice-go/sluice/internal/simclock"
)

// paced returns, for each algorithm that books reservations, Params that
// admit one unit at a time, one per interval t: every waiter on a key then
// has an instant of its own.
func paced(t time.Duration) []engine.Params {
	return []engine.Params{
		{Kind: engine.KindGCRA, Limit: 1, Interval: int64(t)},
		{Kind: engine.KindLeakyBucket, Limit: 1, Interval: int64(t), Amount: 1},
		{Kind: engine.KindTokenBucket, Limit: 1, Interval: int64(t), Amount: 1},
		{Kind: engine.KindTokenBucket, Limit: 1, Interval: int64(t), Amount: 1, IntervalRefill: true},
	}
}

// RunReservations books turns on a key and gives them back in every order
// the cancel rule distinguishes (the latest, one followed by others, one
// whose instant has passed, the same one twice), requiring Step's decisions
// bit for bit, for every algorithm that books reservations and its
// variants; and it requires the window algorithms to refuse them with
// [sluice.ErrUnsupported].
func RunReservations(t *testing.T, st engine.Store) {
	ctx := context.Background()
	prefix := uniquePrefix()
	second := int64(time.Second)
	for ai, p := range Algorithms() {
		t.Run(fmt.Sprintf("%d_%v", ai, p.Kind), func(t *testing.T) {
			key := fmt.Sprintf("%sv%d", prefix, ai)
			var spec engine.State
			step := func(op engine.Op, what string) engine.Decision {
				t.Helper()
				var want engine.Decision
				var wantErr error
				next, want, wantErr := p.Step(cloneState(spec), op)
				got, err := st.Apply(ctx, key, &p, op)
				if wantErr != nil {
					require.ErrorIs(t, err, unwrapSentinel(wantErr), what)
					return got
				}
				require.NoError(t, err, what)
				RequireIdenticalDecision(t, want, got, what)
				if p.Records(op.Verb, &want) {
					spec = next
				}
				return got
			}
			now := base
			reserve := func(maxDelay int64) engine.Decision {
				return step(engine.Op{Verb: engine.VerbReserve, Cost: 1, Now: now, MaxDelay: maxDelay}, "reserve")
			}
			if !p.Reservable() {
				_, err := st.Apply(ctx, key, &p, engine.Op{Verb: engine.VerbReserve, Cost: 1, Now: now, MaxDelay: second})
				require.ErrorIs(t, err, sluice.ErrUnsupported)
				if p.Kind != engine.KindConcurrency { // whose cancel is a release
					_, err = st.Apply(ctx, key, &p, engine.Op{Verb: engine.VerbCancel, Cost: 1, Now: now, At: now + second})
					require.ErrorIs(t, err, sluice.ErrUnsupported)
				}
				return
			}
			horizon := 10 * p.Interval * int64(p.Limit+1)
			var booked []engine.Decision
			// Book until three instants are taken by bookings that wait
			// (the interval-refill bucket books several per refill).
			for instants := 0; instants < 3; {
				d := reserve(horizon)
				require.True(t, d.Allowed, "booked within the horizon")
				if d.At != 0 {
					if len(booked) == 0 || booked[len(booked)-1].At != d.At {
						instants++
					}
					booked = append(booked, d)
				}
				require.Less(t, len(booked), 100)
			}
			cancel := func(d engine.Decision, what string) engine.Decision {
				return step(engine.Op{Verb: engine.VerbCancel, Cost: 1, Now: now, At: d.At}, what)
			}
			last := booked[len(booked)-1]
			require.Less(t, booked[0].At, last.At)
			require.False(t, cancel(booked[0], "a booking followed by a later one").Allowed)
			require.True(t, cancel(last, "the latest booking").Allowed)
			require.False(t, cancel(last, "the latest booking again").Allowed, "a cancel gives back once")
			rebooked := reserve(horizon)
			require.Equal(t, last.At+1, rebooked.At, "the freed turn is booked again, a nanosecond late")
			require.False(t, cancel(last, "the latest booking's cancel, once its turn was booked again").Allowed,
				"a cancel made again never gives back the booking of the turn it freed")
			now = booked[0].At
			require.False(t, cancel(booked[0], "a booking whose instant has come").Allowed)
			step(engine.Op{Verb: engine.VerbAllow, Cost: 1, Now: now}, "an allow behind bookings")
			step(engine.Op{Verb: engine.VerbAtMost, Cost: 3, Now: now}, "a partial grant behind bookings")
			step(engine.Op{Verb: engine.VerbCheck, Cost: 0, Now: now - second}, "a check from a clock that stepped back")
			denied := reserve(0)
			require.False(t, denied.Allowed, "maxDelay 0 books only what fits now")
			require.Positive(t, denied.RetryAfter)
		})
	}
}

// RunWaiters has callers goroutines Wait for one unit on one key through a
// limiter on st, on a simulated clock, for every algorithm that books
// reservations, and requires that they act at distinct instants exactly
// one interval apart, in the order the store booked them: one store call
// each.
func RunWaiters(t *testing.T, st engine.Store, callers int) {
	prefix := uniquePrefix()
	const interval = 100 * time.Millisecond
	for ai, p := range paced(interval) {
		t.Run(fmt.Sprintf("%d_%v", ai, p.Kind), func(t *testing.T) {
			start := time.Unix(0, base)
			clock := simclock.New(start)
			booking := &bookingStore{Store: st}
			lim, err := limiterFor(p, sluice.WithStore(booking), sluice.WithClock(clock))
			require.NoError(t, err)
			key := fmt.Sprintf("%sw%d", prefix, ai)
			acted := make(chan int, callers)
			errs := make(chan error, callers)
			var wg sync.WaitGroup
			for i := range callers {
				wg.Go(func() {
					ctx := context.WithValue(context.Background(), waiterKey{}, i)
					if err := lim.Wait(ctx, key, 1); err != nil {
						errs <- err
						return
					}
					acted <- i
				})
			}
			// Every waiter has booked, and all but the first (which acts at
			// once) sleep on the clock: then time moves one interval at a
			// time, waking exactly one waiter each.
			clock.WaitForSleepers(callers - 1)
			order := []int{<-acted}
			for range callers - 1 {
				clock.Add(interval)
				order = append(order, <-acted)
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				require.NoError(t, err)
			}
			require.Equal(t, booking.order(), order, "waiters act in the order they booked")
			require.Equal(t, callers, booking.calls(), "one store call per Wait")
			require.Equal(t, time.Duration(callers-1)*interval, clock.Now().Sub(start), "one interval apart")
		})
	}
}

// waiterKey carries a waiter's number in its context to bookingStore.
type waiterKey struct{}

// bookingStore records the order in which its store booked the waiters.
type bookingStore struct {
	engine.Store
	mu     sync.Mutex
	booked []int // waiter numbers, by instant booked
	at     []int64
	n      int
}

func (b *bookingStore) Apply(ctx context.Context, key string, p *engine.Params, op engine.Op) (engine.Decision, error) {
	d, err := b.Store.Apply(ctx, key, p, op)
	b.mu.Lock()
	defer b.mu.Unlock()
	b.n++
	if err == nil && op.Verb == engine.VerbReserve && d.Allowed {
		i, _ := ctx.Value(waiterKey{}).(int)
		b.booked = append(b.booked, i)
		b.at = append(b.at, op.Now+int64(d.Delay))
	}
	return d, err
}

// order returns the waiters sorted by the instants they booked, which are
// distinct: the order the store served their reservations in.
func (b *bookingStore) order() []int {
	b.mu.Lock()
	defer b.mu.Unlock()
	idx := make([]int, len(b.booked))
	for i := range idx {
		idx[i] = i
	}
	sort.Slice(idx, func(x, y int) bool { return b.at[idx[x]] < b.at[idx[y]] })
	out := make([]int, len(idx))
	for i, j := range idx {
		out[i] = b.booked[j]
	}
	at := slices.Clone(b.at)
	slices.Sort(at)
	if len(slices.Compact(at)) != len(b.at) {
		return nil // two waiters booked one instant
	}
	return out
}

func (b *bookingStore) calls() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.n
}

// limiterFor builds the limiter of p's algorithm with opts.
func limiterFor(p engine.Params, opts ...sluice.Option) (*sluice.Limiter, error) {
	rate := sluice.Per(p.Amount, time.Duration(p.Interval))
	switch p.Kind {
	case engine.KindGCRA:
		return sluice.NewGCRA(sluice.Per(1, time.Duration(p.Interval)), p.Limit, opts...)
	case engine.KindLeakyBucket:
		return sluice.NewLeakyBucket(p.Limit, rate, opts...)
	case engine.KindTokenBucket:
		if p.IntervalRefill {
			opts = append(opts, sluice.WithIntervalRefill())
		}
		return sluice.NewTokenBucket(rate, p.Limit, opts...)
	}
	return nil, fmt.Errorf("%w: %v", sluice.ErrUnsupported, p.Kind)
}
