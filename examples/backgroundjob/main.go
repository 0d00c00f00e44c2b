// Command backgroundjob drains a queue of calls to a slow third-party API
// (simulated in-process) without exceeding the API's published limit of 5
// calls per second. Its workers share a sluice GCRA limiter (5 per 1.05
// seconds, burst 1, so calls are spread evenly): before each call a worker
// books its turn with Reserve, one store call, and sleeps exactly until
// it, so workers call in the order they booked, 210 ms apart.
//
// With -redis ADDR the limiter keeps its state in that Redis server, so
// that several worker processes share one pace:
//
//	go run ./examples/backgroundjob
//	go run ./examples/backgroundjob -redis 127.0.0.1:6379 -jobs 10
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"os"
	"os/signal"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluice-go/sluice"
)

// The third-party API's published limit and its latency.
const (
	apiLimit   = 5
	apiWindow  = time.Second
	apiLatency = 300 * time.Millisecond
)

// paceKey is the limiter key of the API: every worker of every process
// calling it shares this one pace.
const paceKey = "api.example.com"

func main() {
	jobs := flag.Int("jobs", 20, "number of API calls to make")
	workers := flag.Int("workers", 4, "number of concurrent workers")
	redisAddr := flag.String("redis", "", "share the pace with other processes through the Redis server at `ADDR`")
	flag.Parse()
	if *jobs < 0 || *workers < 1 {
		log.Fatal("need -jobs >= 0 and -workers >= 1")
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx, *jobs, *workers, *redisAddr, os.Stdout); err != nil {
		log.Fatal(err)
	}
}

func run(ctx context.Context, jobs, workers int, redisAddr string, out io.Writer) error {
	var opts []sluice.Option
	if redisAddr != "" {
		client := redis.NewClient(&redis.Options{Addr: redisAddr, ContextTimeoutEnabled: true})
		defer client.Close()
		if err := client.Ping(ctx).Err(); err != nil {
			return fmt.Errorf("redis at %s: %w", redisAddr, err)
		}
		st, err := sharedStore(client)
		if err != nil {
			return err
		}
		opts = append(opts, sluice.WithStore(st))
		fmt.Fprintf(out, "sharing the pace through Redis at %s\n", redisAddr)
	}
	pace, err := newPace(opts...)
	if err != nil {
		return err
	}
	defer pace.Close()

	api := newAPI()
	p := &pool{pace: pace, api: api, workers: workers, out: out}
	if err := p.drain(ctx, jobs); err != nil {
		return err
	}
	calls, refused, busiest := api.stats()
	fmt.Fprintf(out, "%d jobs in %v: %d calls, %d refused, at most %d in any %v (the API allows %d)\n",
		jobs, p.elapsed().Round(time.Millisecond), calls, refused, busiest, apiWindow, apiLimit)
	return nil
}

// paceWindow is the time in which the workers make apiLimit calls: 5%
// longer than the API's window, so that the turns are 210 ms apart rather
// than 200. A worker wakes for its turn a little late (the scheduler, a
// loaded machine, the network). With turns exactly 200 ms apart, a call
// made 1 ms late and the call 5 turns after it, made on time, would be 6
// calls within the API's second; at 210 ms a call may be up to 50 ms late.
const paceWindow = apiWindow + apiWindow/20

// newPace returns the limiter that keeps calls within the API's published
// limit: GCRA at apiLimit per paceWindow with a burst of 1, which spaces
// calls evenly, so no window of apiWindow ever holds more than apiLimit.
func newPace(opts ...sluice.Option) (*sluice.Limiter, error) {
	return sluice.NewGCRA(sluice.Per(apiLimit, paceWindow), 1, opts...)
}

// maxWait bounds how far ahead a worker books its turn. At 5 calls a
// second a minute holds 300 turns, far more than the workers of a few
// processes ever queue: a turn further away means the pace is shared by
// more callers than the API can serve, and the worker stops with an error
// rather than queue without end.
const maxWait = time.Minute

// newAPI returns the simulated third-party API.
func newAPI() *thirdPartyAPI {
	return &thirdPartyAPI{limit: apiLimit, window: apiWindow, latency: apiLatency}
}

// pool is a set of workers draining a queue of API calls at the pace of
// a limiter.
type pool struct {
	pace    *sluice.Limiter
	api     *thirdPartyAPI
	workers int
	start   time.Time // when drain began: the times reported count from it

	mu    sync.Mutex // guards out and calls
	out   io.Writer
	calls []call // in the order they were made
}

// call is one API call a worker made: the turn it booked and when it made
// it, counted from the start of the drain.
type call struct {
	job, worker   int
	booked, acted time.Duration
}

// drain makes jobs API calls with the pool's workers and returns once all
// are done, or with the first error.
func (p *pool) drain(ctx context.Context, jobs int) error {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	queue := make(chan int)
	go func() {
		defer close(queue)
		for job := 1; job <= jobs; job++ {
			select {
			case queue <- job:
			case <-ctx.Done():
				return
			}
		}
	}()
	p.start = time.Now()
	var wg sync.WaitGroup
	for worker := 1; worker <= p.workers; worker++ {
		wg.Go(func() {
			for job := range queue {
				if err := p.call(ctx, job, worker); err != nil {
					cancel(fmt.Errorf("job %d: %w", job, err))
					return
				}
			}
		})
	}
	wg.Wait()
	return context.Cause(ctx)
}

// call makes job's API call at its turn: it books the next turn of the
// pace, sleeps until it and calls. If ctx ends first, the turn is given
// back. A turn missed (woken too late) or a call the API refuses anyway
// (pacing prevents that, barring clock trouble between hosts) books a new
// turn.
//
// pace.Wait(ctx, paceKey, 1) books and sleeps in one call; the worker
// books with Reserve to tell which turn it got.
func (p *pool) call(ctx context.Context, job, worker int) error {
	for {
		turn, err := p.pace.Reserve(ctx, paceKey, 1, maxWait)
		if err != nil {
			return err
		}
		if !turn.Allowed {
			return fmt.Errorf("the next turn is more than %v away: more callers share the pace than the API serves", maxWait)
		}
		booked := p.elapsed() + turn.Delay
		p.report("%8v  worker %d books the turn at %v for job %d\n", p.elapsed().Round(time.Millisecond), worker, booked.Round(time.Millisecond), job)
		if err := turn.Wait(ctx); errors.Is(err, sluice.ErrStaleTurn) {
			// Woken too late (the process was paused past the turn):
			// calling now could crowd the API's window, so book again.
			p.report("%8v  worker %d missed its turn for job %d: %v\n", p.elapsed().Round(time.Millisecond), worker, job, err)
			continue
		} else if err != nil {
			return err
		}
		p.made(call{job: job, worker: worker, booked: booked, acted: p.elapsed()})
		if err := p.api.Call(ctx); !errors.Is(err, errTooManyCalls) {
			return err
		}
	}
}

// elapsed returns the time since the drain began.
func (p *pool) elapsed() time.Duration { return time.Since(p.start) }

// made records and reports c, a call just made.
func (p *pool) made(c call) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.calls = append(p.calls, c)
	fmt.Fprintf(p.out, "%8v  worker %d calls for job %d\n", c.acted.Round(time.Millisecond), c.worker, c.job)
}

func (p *pool) report(format string, args ...any) {
	p.mu.Lock()
	defer p.mu.Unlock()
	fmt.Fprintf(p.out, format, args...)
}
