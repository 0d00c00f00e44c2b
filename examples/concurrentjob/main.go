// Command concurrentjob drains a queue of calls to a slow third-party API
// (simulated in-process) whose plan allows at most 2 calls at once and 5
// calls per second. Its workers share one sluice group of two limits, "at
// most 2 at once and 5 per 1.05 s", decided as one: before each call a
// worker waits for a lease of the group (Acquire), which takes one of the
// two slots and one turn of the rate together, or neither; after the call
// it releases the lease, which frees the slot at once and wakes the next
// worker in line.
//
//	go run ./examples/concurrentjob
//	go run ./examples/concurrentjob -jobs 40 -workers 16
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log"
	"os"
	"os/signal"
	"sync"
	"time"

	"github.com/sluice-go/sluice"
)

// The third-party API's plan and its latency: slow enough that the
// concurrency limit, not the rate, is what binds.
const (
	apiConcurrent = 2
	apiRate       = 5
	apiWindow     = time.Second
	apiLatency    = 700 * time.Millisecond
)

// leaseTTL bounds how long a worker that died holds its slot: longer than
// any call takes.
const leaseTTL = 30 * time.Second

// The group's keys: every worker of every process calling the API shares
// them (with a shared store, sluice.WithStore).
var keys = []string{"slots:api.example.com", "rate:api.example.com"}

func main() {
	jobs := flag.Int("jobs", 12, "number of API calls to make")
	workers := flag.Int("workers", 6, "number of concurrent workers")
	flag.Parse()
	if *jobs < 0 || *workers < 1 {
		log.Fatal("need -jobs >= 0 and -workers >= 1")
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx, *jobs, *workers, os.Stdout); err != nil {
		log.Fatal(err)
	}
}

// newLimits returns the group that keeps the workers within the API's
// plan: a concurrency limit of apiConcurrent, and GCRA at apiRate per
// 1.05 windows with a burst of 1, which spaces calls evenly and leaves a
// worker 50 ms to be late (see examples/backgroundjob).
func newLimits(opts ...sluice.Option) (*sluice.Group, error) {
	store := sluice.NewMemStore(sluice.MemStoreConfig{})
	opts = append(opts, sluice.WithStore(store))
	slots, err := sluice.NewConcurrencyLimit(apiConcurrent, leaseTTL, opts...)
	if err != nil {
		return nil, err
	}
	rate, err := sluice.NewGCRA(sluice.Per(apiRate, apiWindow+apiWindow/20), 1, opts...)
	if err != nil {
		return nil, err
	}
	return sluice.NewGroup(slots, rate)
}

func run(ctx context.Context, jobs, workers int, out io.Writer) error {
	limits, err := newLimits()
	if err != nil {
		return err
	}
	api := &thirdPartyAPI{concurrent: apiConcurrent, rate: apiRate, window: apiWindow, latency: apiLatency}
	start := time.Now()
	if err := drain(ctx, limits, api, jobs, workers, out, start); err != nil {
		return err
	}
	calls, refused, busiest, most := api.stats()
	fmt.Fprintf(out, "%d jobs in %v: %d calls, %d refused, at most %d at once (the API allows %d) and %d in any %v (it allows %d)\n",
		jobs, time.Since(start).Round(time.Millisecond), calls, refused, busiest, apiConcurrent, most, apiWindow, apiRate)
	return nil
}

// drain makes jobs API calls with workers workers, each holding a lease
// of limits for the length of its call, and returns once all are done,
// or with the first error.
func drain(ctx context.Context, limits *sluice.Group, api *thirdPartyAPI, jobs, workers int, out io.Writer, start time.Time) error {
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
	var mu sync.Mutex // serializes the report's lines
	report := func(format string, args ...any) {
		mu.Lock()
		defer mu.Unlock()
		fmt.Fprintf(out, "%8v  "+format+"\n", append([]any{time.Since(start).Round(time.Millisecond)}, args...)...)
	}
	var wg sync.WaitGroup
	for worker := 1; worker <= workers; worker++ {
		wg.Go(func() {
			for job := range queue {
				if err := call(ctx, limits, api, job, worker, report); err != nil {
					cancel(fmt.Errorf("job %d: %w", job, err))
					return
				}
			}
		})
	}
	wg.Wait()
	return context.Cause(ctx)
}

// call makes job's API call holding a lease of limits: it waits for one,
// calls, and releases it, even if the call failed.
func call(ctx context.Context, limits *sluice.Group, api *thirdPartyAPI, job, worker int, report func(string, ...any)) error {
	lease, err := limits.Acquire(ctx, keys, 1)
	if err != nil {
		return err
	}
	defer lease.Release(ctx)
	report("worker %d calls for job %d", worker, job)
	return api.Call(ctx)
}
