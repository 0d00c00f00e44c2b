package benchmarks

import (
	"context"
	"fmt"
	"runtime"
	"strconv"
	"testing"
	"time"

	"golang.org/x/time/rate"
)

// A reserver books turns ahead and gives them back: sluice's Reserve and
// Reservation.Cancel, x/time/rate's ReserveN and Reservation.CancelAt.
// The other peers only admit or deny.
type reserver interface {
	// BookAndCancel books a turn of cost one for key, at the first instant
	// it conforms, gives it back at once, and returns how long its caller
	// would have waited. A turn that could not be booked is an error.
	BookAndCancel(ctx context.Context, key string) (time.Duration, error)
}

// bookingWithin is sluice's maxDelay, 30 years: more than any queue this
// benchmark builds (x/time/rate's ReserveN has no such bound).
const bookingWithin = 30 * 365 * 24 * time.Hour

func (s *sluiceGCRA) BookAndCancel(ctx context.Context, key string) (time.Duration, error) {
	r, err := s.lim.Reserve(ctx, key, 1, bookingWithin)
	if err != nil {
		return 0, err
	}
	if !r.Allowed {
		return 0, fmt.Errorf("%q: no turn within %v", key, bookingWithin)
	}
	return r.Delay, r.Cancel(ctx)
}

func (m *rateMap) BookAndCancel(_ context.Context, key string) (time.Duration, error) {
	return bookAndCancel(m.limiter(key), key)
}

func (r rateSingle) BookAndCancel(_ context.Context, key string) (time.Duration, error) {
	return bookAndCancel(r.lim, key)
}

// bookAndCancel books a turn on lim and gives it back. It reads the clock
// once: x/time/rate takes the time from its caller, where sluice reads
// its clock in Reserve and again in Cancel.
func bookAndCancel(lim *rate.Limiter, key string) (time.Duration, error) {
	now := time.Now()
	r := lim.ReserveN(now, 1)
	if !r.OK() {
		return 0, fmt.Errorf("%q: no turn", key)
	}
	d := r.DelayFrom(now)
	r.CancelAt(now)
	return d, nil
}

// booking runs a reserver in the loops BenchmarkAllow runs: its Allow
// books a turn and gives it back, and reports whether the turn lay ahead.
// Its ctx, if not nil, replaces the loop's context.Background().
type booking struct {
	keyed
	r   reserver
	ctx context.Context
}

func (b *booking) Allow(ctx context.Context, key string) (bool, error) {
	if b.ctx != nil {
		ctx = b.ctx
	}
	d, err := b.r.BookAndCancel(ctx, key)
	return d > 0, err
}

// queued is BenchmarkReserve's path: a burst of one coming back every
// minute, which warming spends, so that every turn is booked up to a
// minute ahead as long as a library's run lasts less than a minute (one
// coming back every second did not: x/time/rate's key had a token again
// a second after warming, and its turns were no longer booked ahead).
// From several goroutines on one key, a turn given back after another
// goroutine booked the next one gives nothing back (for sluice as for
// x/time/rate), and the queue grows by a minute: sluice's maxDelay of 30
// years holds more than 15 million of them.
func queued() path {
	return path{name: "queued", admits: true, limit: limit{burst: 1, per: time.Minute}, warm: 1}
}

// reserves reports whether p books turns ahead.
func reserves(p peer) bool {
	lim, err := p.new(limit{burst: 1, per: time.Second})
	if err != nil {
		return false
	}
	defer lim.Close()
	_, ok := lim.(reserver)
	return ok
}

// BenchmarkReserve measures, for each library that books turns ahead, a
// turn of cost one booked ahead on an existing key and given back at
// once: sluice's Reserve and Cancel, x/time/rate's ReserveN and
// CancelAt. On one hot key and 10,000 keys, sequentially and from
// GOMAXPROCS goroutines, and with two contexts: one that can end, as a
// request's (ctx=request), and context.Background() (ctx=background), for
// which sluice's Cancel on a store that could hang sets a timeout of its
// own, and on this in-memory one none (x/time/rate takes no context).
// Names read ctx/keys/lib/mode.
func BenchmarkReserve(b *testing.B) {
	pa := queued()
	request, cancel := context.WithCancel(context.Background())
	defer cancel()
	for _, c := range []struct {
		name string
		ctx  context.Context
	}{{"request", request}, {"background", nil}} {
		b.Run("ctx="+c.name, func(b *testing.B) {
			for _, n := range []int{1, 10_000} {
				ks := keys(n)
				b.Run("keys="+strconv.Itoa(n), func(b *testing.B) {
					for _, p := range peers() {
						if p.keyless && n > 1 || !reserves(p) {
							continue
						}
						b.Run("lib="+p.name, func(b *testing.B) { benchReserve(b, p, pa, ks, c.ctx) })
					}
				})
			}
		})
	}
}

// benchReserve builds p's limiter, spends every key's burst before
// timing, and runs the sequential and parallel loops on it, each call
// booking a turn and giving it back under ctx (nil: the loop's).
func benchReserve(b *testing.B, p peer, pa path, ks []string, ctx context.Context) {
	k := newKeyed(b, p, pa.limit)
	lim := &booking{keyed: k, r: k.(reserver), ctx: ctx}
	warm(b, lim, ks, pa.warm)
	expectTracked(b, k, len(ks))
	runtime.GC()

	b.Run("mode=seq", func(b *testing.B) { runSeq(b, lim, pa, ks) })
	b.Run("mode=par", func(b *testing.B) { runParallel(b, lim, pa, ks, 1) })
	expectTracked(b, k, len(ks))
}
