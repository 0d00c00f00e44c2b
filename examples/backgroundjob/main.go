// Command backgroundjob drains a queue of calls to a slow third-party API
// (simulated in-process) without exceeding the API's published limit of 5
// calls per second. Its workers pace themselves with a sluice GCRA limiter
// (5 per second, burst 1, so calls are spread evenly) and lim.Wait.
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

	clock := sluice.SystemClock()
	api := newAPI(clock)
	p := &pool{pace: pace, api: api, clock: clock, workers: workers, out: out}
	start := clock.Now()
	if err := p.drain(ctx, jobs); err != nil {
		return err
	}
	calls, refused, busiest := api.stats()
	fmt.Fprintf(out, "%d jobs in %v: %d calls, %d refused, at most %d in any %v (the API allows %d)\n",
		jobs, clock.Now().Sub(start).Round(time.Millisecond), calls, refused, busiest, apiWindow, apiLimit)
	return nil
}

// newPace returns the limiter that keeps calls within the API's published
// limit: GCRA at apiLimit per apiWindow with a burst of 1, which spaces
// calls evenly, so no window of apiWindow ever holds more than apiLimit.
func newPace(opts ...sluice.Option) (*sluice.GCRA, error) {
	return sluice.NewGCRA(sluice.Per(apiLimit, apiWindow), 1, opts...)
}

// newAPI returns the simulated third-party API, on clock.
func newAPI(clock sluice.Clock) *thirdPartyAPI {
	return &thirdPartyAPI{clock: clock, limit: apiLimit, window: apiWindow, latency: apiLatency}
}

// pool is a set of workers draining a queue of API calls at the pace of
// a limiter.
type pool struct {
	pace    sluice.Limiter
	api     *thirdPartyAPI
	clock   sluice.Clock // for the progress report
	workers int

	mu  sync.Mutex // serializes writes to out
	out io.Writer
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
	start := p.clock.Now()
	var wg sync.WaitGroup
	for worker := 1; worker <= p.workers; worker++ {
		wg.Go(func() {
			for job := range queue {
				if err := p.call(ctx); err != nil {
					cancel(fmt.Errorf("job %d: %w", job, err))
					return
				}
				p.report("job %2d done by worker %d at %v\n", job, worker, p.clock.Now().Sub(start).Round(time.Millisecond))
			}
		})
	}
	wg.Wait()
	return context.Cause(ctx)
}

// call makes one API call at the pool's pace. A call the API refuses
// anyway (pacing prevents that, barring clock trouble between hosts) waits
// for the pace again and is retried.
func (p *pool) call(ctx context.Context) error {
	for {
		if err := p.pace.Wait(ctx, paceKey, 1); err != nil {
			return err
		}
		if err := p.api.Call(ctx); !errors.Is(err, errTooManyCalls) {
			return err
		}
	}
}

func (p *pool) report(format string, args ...any) {
	p.mu.Lock()
	defer p.mu.Unlock()
	fmt.Fprintf(p.out, format, args...)
}
