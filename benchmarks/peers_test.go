package benchmarks

import (
	"context"
	"io"
	"strconv"
	"sync"
	"time"

	golimiter "github.com/sethvargo/go-limiter"
	"github.com/sethvargo/go-limiter/memorystore"
	"github.com/sluice-go/sluice"
	"github.com/sluice-go/sluice/engine"
	"github.com/throttled/throttled/v2"
	"github.com/throttled/throttled/v2/store/memstore"
	ulule "github.com/ulule/limiter/v3"
	"github.com/ulule/limiter/v3/drivers/store/memory"
	"golang.org/x/time/rate"
)

// A limit is the one configuration every library gets: a burst, and the
// time one unit of it takes to come back. Libraries with fixed windows get
// the burst per the time a whole burst takes to come back.
type limit struct {
	burst int
	per   time.Duration
}

// window returns the fixed window equivalent to l.
func (l limit) window() time.Duration { return time.Duration(l.burst) * l.per }

// A path is the outcome a scenario measures, the limit that gives it on
// every call once each key has been warmed, and the cost each key is
// warmed with before timing.
type path struct {
	name   string
	admits bool
	limit  limit
	warm   int
}

// paths returns the admit path, whose burst of 1e9 no benchmark exhausts,
// and the deny path, whose burst of one the warming spends and which comes
// back only after an hour.
//
// sluice forgets a key as soon as its state is fresh again: on the admit
// path, one second per unit recorded after the key's last request. So
// that every library still holds every key when the timed loop comes back
// to it, however slowly the machine warms 1,000,000 keys, warming records
// ten minutes' worth of units on the admit path. A faster refill would
// not keep keys longer, and a slower one would make burst × interval
// overflow the spans sluice and throttled accept.
func paths() []path {
	return []path{
		{name: "admit", admits: true, limit: limit{burst: 1e9, per: time.Second}, warm: 600},
		{name: "deny", admits: false, limit: limit{burst: 1, per: time.Hour}, warm: 1},
	}
}

// A keyed limiter is one library's per-key limiter behind one signature,
// so that every library runs the same benchmark loop. Every adapter is a
// pointer: a value of more than a word in an interface is called through
// a wrapper the compiler makes, which copies the value, a cost that some
// adapters would pay and the floor not.
type keyed interface {
	// Allow decides one request of cost one for key and reports whether
	// it was admitted.
	Allow(ctx context.Context, key string) (bool, error)
	// Warm makes key exist before timing with a request of cost n, or of
	// cost one for a library that cannot weigh requests.
	Warm(ctx context.Context, key string, n int) error
	// Close releases the library's goroutines and state.
	Close() error
}

// A peer is a library under test.
type peer struct {
	name string
	new  func(limit) (keyed, error)
	// keyless marks the floor: one limiter for all keys, measured on the
	// hot key only.
	keyless bool
}

// peers returns sluice first, as the base the others are compared with.
func peers() []peer {
	return []peer{
		{name: "sluice", new: newSluice},
		{name: "xrate-map", new: newRateMap},
		{name: "xrate-single", new: newRateSingle, keyless: true},
		{name: "floor", new: newFloor},
		{name: "throttled", new: newThrottled},
		{name: "sethvargo", new: newSethvargo},
		{name: "ulule", new: newUlule},
	}
}

// keys returns n distinct keys, built once so that no benchmark times
// their formatting.
func keys(n int) []string {
	ks := make([]string, n)
	for i := range ks {
		ks[i] = "client-" + strconv.Itoa(i)
	}
	return ks
}

// sluiceGCRA is sluice's default choice for per-client limits, a GCRA,
// on a store that it closes with itself.
type sluiceGCRA struct {
	lim   *sluice.Limiter
	store io.Closer
}

func newSluiceGCRA(l limit, store engine.Store, closer io.Closer) (*sluiceGCRA, error) {
	lim, err := sluice.NewGCRA(sluice.Per(1, l.per), float64(l.burst), sluice.WithStore(store))
	if err != nil {
		return nil, err
	}
	return &sluiceGCRA{lim: lim, store: closer}, nil
}

func (s *sluiceGCRA) Allow(ctx context.Context, key string) (bool, error) {
	d, err := s.lim.Allow(ctx, key, 1)
	return d.Allowed, err
}

func (s *sluiceGCRA) Warm(ctx context.Context, key string, n int) error {
	_, err := s.lim.Allow(ctx, key, float64(n))
	return err
}

func (s *sluiceGCRA) Close() error { return s.store.Close() }

// sluiceMem is sluice's GCRA on its default in-memory store, passed
// explicitly so that the benchmarks can count the keys it holds.
type sluiceMem struct {
	*sluiceGCRA
	mem *sluice.MemStore
}

func newSluice(l limit) (keyed, error) {
	mem := sluice.NewMemStore(sluice.MemStoreConfig{})
	s, err := newSluiceGCRA(l, mem, mem)
	if err != nil {
		return nil, err
	}
	return &sluiceMem{sluiceGCRA: s, mem: mem}, nil
}

// Len returns the number of keys the store holds.
func (s *sluiceMem) Len() int { return s.mem.Len() }

// rateMap is how golang.org/x/time/rate is used per key: a map of
// limiters behind a mutex, a limiter made on a key's first request.
type rateMap struct {
	mu       sync.Mutex
	limiters map[string]*rate.Limiter
	limit    rate.Limit
	burst    int
}

func newRateMap(l limit) (keyed, error) {
	return &rateMap{limiters: make(map[string]*rate.Limiter), limit: rate.Every(l.per), burst: l.burst}, nil
}

// limiter returns key's limiter, made on its first request.
func (m *rateMap) limiter(key string) *rate.Limiter {
	m.mu.Lock()
	lim, ok := m.limiters[key]
	if !ok {
		lim = rate.NewLimiter(m.limit, m.burst)
		m.limiters[key] = lim
	}
	m.mu.Unlock()
	return lim
}

func (m *rateMap) Allow(_ context.Context, key string) (bool, error) {
	return m.limiter(key).Allow(), nil
}

func (m *rateMap) Warm(_ context.Context, key string, n int) error {
	m.limiter(key).AllowN(time.Now(), n)
	return nil
}

func (m *rateMap) Close() error { return nil }

// rateSingle is one golang.org/x/time/rate limiter for every key: the
// floor, a decision with no key to look up.
type rateSingle struct{ lim *rate.Limiter }

func newRateSingle(l limit) (keyed, error) {
	return &rateSingle{rate.NewLimiter(rate.Every(l.per), l.burst)}, nil
}

func (r *rateSingle) Allow(context.Context, string) (bool, error) { return r.lim.Allow(), nil }

func (r *rateSingle) Warm(_ context.Context, _ string, n int) error {
	r.lim.AllowN(time.Now(), n)
	return nil
}

func (*rateSingle) Close() error { return nil }

// throttledGCRA is throttled's GCRA on its unbounded in-memory store.
// MaxBurst counts the requests beyond the first.
type throttledGCRA struct{ lim *throttled.GCRARateLimiterCtx }

func newThrottled(l limit) (keyed, error) {
	store, err := memstore.NewCtx(0)
	if err != nil {
		return nil, err
	}
	quota := throttled.RateQuota{MaxRate: throttled.PerDuration(1, l.per), MaxBurst: l.burst - 1}
	lim, err := throttled.NewGCRARateLimiterCtx(store, quota)
	if err != nil {
		return nil, err
	}
	return &throttledGCRA{lim}, nil
}

func (t *throttledGCRA) Allow(ctx context.Context, key string) (bool, error) {
	limited, _, err := t.lim.RateLimitCtx(ctx, key, 1)
	return !limited, err
}

func (t *throttledGCRA) Warm(ctx context.Context, key string, n int) error {
	_, _, err := t.lim.RateLimitCtx(ctx, key, n)
	return err
}

func (*throttledGCRA) Close() error { return nil }

// sethvargoStore is sethvargo/go-limiter's in-memory store: a fixed
// window per key, of the burst per the time a burst takes to come back.
type sethvargoStore struct{ store golimiter.Store }

func newSethvargo(l limit) (keyed, error) {
	store, err := memorystore.New(&memorystore.Config{Tokens: uint64(l.burst), Interval: l.window()})
	if err != nil {
		return nil, err
	}
	return &sethvargoStore{store}, nil
}

func (s *sethvargoStore) Allow(ctx context.Context, key string) (bool, error) {
	_, _, _, ok, err := s.store.Take(ctx, key)
	return ok, err
}

// Warm takes one token whatever n is: the store cannot weigh a request,
// and its windows outlast any run.
func (s *sethvargoStore) Warm(ctx context.Context, key string, _ int) error {
	_, _, _, _, err := s.store.Take(ctx, key)
	return err
}

func (s *sethvargoStore) Close() error { return s.store.Close(context.Background()) }

// ululeLimiter is ulule/limiter's limiter on its in-memory store: a fixed
// window per key, like sethvargo's.
type ululeLimiter struct{ lim *ulule.Limiter }

func newUlule(l limit) (keyed, error) {
	return &ululeLimiter{ulule.New(memory.NewStore(), ulule.Rate{Period: l.window(), Limit: int64(l.burst)})}, nil
}

func (u *ululeLimiter) Allow(ctx context.Context, key string) (bool, error) {
	c, err := u.lim.Get(ctx, key)
	return !c.Reached, err
}

func (u *ululeLimiter) Warm(ctx context.Context, key string, n int) error {
	_, err := u.lim.Increment(ctx, key, int64(n))
	return err
}

func (*ululeLimiter) Close() error { return nil }
