package sluice_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"time"

	"github.com/benbjohnson/clock"

	"github.com/sluice-go/sluice"
	"github.com/sluice-go/sluice/sluicehttp"
)

// These examples are the ones docs/shaping.md walks through. Like the
// others, they run on a fake clock so that their output is exact; those
// in which goroutines sleep use watchedClock, which says when a sleep
// begins, so that the example moves time only once everyone sleeps.

// watchedClock is a fake clock that sends on asleep each time someone
// starts to sleep on it.
type watchedClock struct {
	*clock.Mock
	asleep chan time.Duration
}

func newWatchedClock() watchedClock {
	return watchedClock{Mock: newExampleClock(), asleep: make(chan time.Duration)}
}

func (c watchedClock) After(d time.Duration) <-chan time.Time {
	ch := c.Mock.After(d)
	c.asleep <- d
	return ch
}

// Reserve books a turn and says how long to wait for it; past the maximum
// delay nothing is booked.
func ExampleLimiter_Reserve() {
	fake := newExampleClock()
	lim, err := sluice.NewGCRA(sluice.PerSecond(2), 1, sluice.WithClock(fake))
	if err != nil {
		panic(err)
	}
	ctx := context.Background()
	for range 4 {
		r, err := lim.Reserve(ctx, "export", 1, time.Second)
		if err != nil {
			panic(err)
		}
		if r.Allowed {
			fmt.Println("booked: act in", r.Delay)
		} else {
			fmt.Println("not booked: reserve again in", r.RetryAfter)
		}
	}
	// Output:
	// booked: act in 0s
	// booked: act in 500ms
	// booked: act in 1s
	// not booked: reserve again in 500ms
}

// Cancel gives a turn back only while nothing was booked after it.
func ExampleReservation_Cancel() {
	fake := newExampleClock()
	lim, err := sluice.NewGCRA(sluice.PerSecond(1), 1, sluice.WithClock(fake))
	if err != nil {
		panic(err)
	}
	ctx := context.Background()
	reserve := func() *sluice.Reservation {
		r, err := lim.Reserve(ctx, "k", 1, time.Minute)
		if err != nil {
			panic(err)
		}
		return r
	}
	reserve()      // acts now
	a := reserve() // acts in 1s
	reserve()      // b, acts in 2s

	// a is not the last booking: b was placed behind it, and giving a's
	// second back could let a newcomer act beside b. Nothing changes.
	if err := a.Cancel(ctx); err != nil {
		panic(err)
	}
	fmt.Println("after cancelling a, the next turn is in", reserve().Delay)

	// The last booking is given back whole: the next request books its
	// instant, a nanosecond late (a cancel made twice cannot then give back
	// the one who booked the freed turn).
	c := reserve()
	fmt.Println("c books", c.Delay)
	if err := c.Cancel(ctx); err != nil {
		panic(err)
	}
	fmt.Println("after cancelling c, the next turn is in", reserve().Delay)
	// Output:
	// after cancelling a, the next turn is in 3s
	// c books 4s
	// after cancelling c, the next turn is in 4.000000001s
}

// Waiters on a key book their turns in the order they arrive, with one
// store call each, and act at exactly those turns.
func ExampleLimiter_Wait_queue() {
	fake := newWatchedClock()
	start := fake.Now()
	// A third-party API allows 5 calls per second: one every 200ms.
	pace, err := sluice.NewGCRA(sluice.PerSecond(5), 1, sluice.WithClock(fake))
	if err != nil {
		panic(err)
	}
	acted := make(chan string)
	for _, worker := range []string{"a", "b", "c", "d"} {
		go func() {
			if err := pace.Wait(context.Background(), "api.example.com", 1); err != nil {
				panic(err)
			}
			acted <- fmt.Sprintf("%s calls at +%v", worker, fake.Now().Sub(start))
		}()
		// Let each worker book (and act, or sleep) before the next comes.
		select {
		case msg := <-acted:
			fmt.Println(msg)
		case d := <-fake.asleep:
			fmt.Printf("%s sleeps %v\n", worker, d)
		}
	}
	for range 3 {
		fake.Add(200 * time.Millisecond)
		fmt.Println(<-acted)
	}
	// Output:
	// a calls at +0s
	// b sleeps 200ms
	// c sleeps 400ms
	// d sleeps 600ms
	// b calls at +200ms
	// c calls at +400ms
	// d calls at +600ms
}

// A Wait whose turn would come after its context's deadline books nothing
// and returns at once; one whose context ends while it sleeps gives its
// turn back.
func ExampleLimiter_Wait_deadline() {
	fake := newWatchedClock()
	pace, err := sluice.NewGCRA(sluice.PerSecond(1), 1, sluice.WithClock(fake))
	if err != nil {
		panic(err)
	}
	ctx := context.Background()
	if err := pace.Wait(ctx, "api", 1); err != nil { // acts now
		panic(err)
	}

	// The next turn is 1s away: a Wait that may take 500ms fails at once.
	short, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
	defer cancel()
	err = pace.Wait(short, "api", 1)
	fmt.Println(err)
	fmt.Println(errors.Is(err, context.DeadlineExceeded))

	// A Wait that is given up while it sleeps gives its turn back.
	giveUp, stop := context.WithCancel(ctx)
	done := make(chan error)
	go func() { done <- pace.Wait(giveUp, "api", 1) }()
	fmt.Println("sleeps", <-fake.asleep)
	stop()
	fmt.Println(<-done)
	r, err := pace.Reserve(ctx, "api", 1, time.Minute)
	if err != nil {
		panic(err)
	}
	fmt.Println("the next turn is in", r.Delay)
	// Output:
	// sluice: wait would exceed context deadline: "api" needs 1s: context deadline exceeded
	// true
	// sleeps 1s
	// context canceled
	// the next turn is in 1.000000001s
}

// A batch job takes as much of its queue as the limit allows now, and
// comes back for the rest.
func ExampleLimiter_AllowAtMost() {
	fake := newExampleClock()
	// 10 records per second, in bursts of up to 10.
	lim, err := sluice.NewTokenBucket(sluice.PerSecond(10), 10, sluice.WithClock(fake))
	if err != nil {
		panic(err)
	}
	queued := 25.0
	send := func() {
		d, err := lim.AllowAtMost(context.Background(), "import", queued)
		if err != nil {
			panic(err)
		}
		if d.Granted == 0 {
			fmt.Println("sends none; one fits in", d.RetryAfter)
			return
		}
		queued -= d.Granted
		fmt.Printf("sends %v, %v left\n", d.Granted, queued)
	}
	send()
	send()
	fake.Add(time.Second)
	send()
	fake.Add(350 * time.Millisecond)
	send()
	fake.Add(time.Second)
	send()
	// Output:
	// sends 10, 15 left
	// sends none; one fits in 100ms
	// sends 10, 5 left
	// sends 3, 2 left
	// sends 2, 0 left
}

// The window algorithms cannot book a future turn: Reserve fails, and
// Wait asks again when its denial says it may.
func ExampleLimiter_Reserve_windows() {
	fake := newExampleClock()
	lim, err := sluice.NewFixedWindow(100, time.Minute, sluice.WithClock(fake))
	if err != nil {
		panic(err)
	}
	_, err = lim.Reserve(context.Background(), "k", 1, time.Second)
	fmt.Println(err)
	fmt.Println(errors.Is(err, sluice.ErrUnsupported))
	p, _ := lim.Params()
	fmt.Println(p.Reservable())
	// Output:
	// sluice: unsupported: fixed window does not support reservations
	// true
	// false
}

// Delayed admission over HTTP, as nginx's limit_req burst=4 delay=1: two
// requests at once, the next three held until their turns, one a second,
// and the rest refused.
func Example_delayedAdmission() {
	fake := newWatchedClock()
	start := fake.Now()
	lim, err := sluice.NewGCRA(sluice.PerSecond(1), 2, sluice.WithClock(fake))
	if err != nil {
		panic(err)
	}
	limit, err := sluicehttp.New(lim, sluicehttp.WithMaxDelay(3*time.Second))
	if err != nil {
		panic(err)
	}
	handler := limit(http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) {
		fmt.Printf("%s served at +%v\n", r.URL.Path, fake.Now().Sub(start))
	}))

	answered := make(chan *httptest.ResponseRecorder)
	show := func(w *httptest.ResponseRecorder) {
		fmt.Println("   ", w.Code, w.Header().Get("RateLimit"), w.Header().Values("Retry-After"))
	}
	for _, path := range []string{"/1", "/2", "/3", "/4", "/5", "/6"} {
		go func() {
			w := httptest.NewRecorder()
			handler.ServeHTTP(w, httptest.NewRequest(http.MethodGet, path, nil))
			answered <- w
		}()
		select {
		case w := <-answered:
			show(w)
		case d := <-fake.asleep:
			fmt.Println(path, "held for", d)
		}
	}
	for range 3 {
		fake.Add(time.Second)
		show(<-answered)
	}
	// Output:
	// /1 served at +0s
	//     200 "default";r=1;t=1 []
	// /2 served at +0s
	//     200 "default";r=0;t=2 []
	// /3 held for 1s
	// /4 held for 2s
	// /5 held for 3s
	//     429 "default";r=0;t=5 [1]
	// /3 served at +1s
	//     200 "default";r=0;t=2 []
	// /4 served at +2s
	//     200 "default";r=0;t=2 []
	// /5 served at +3s
	//     200 "default";r=0;t=2 []
}
