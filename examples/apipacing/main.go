// Command apipacing calls a stand-in for a third-party API from eight
// workers through one sluicehttp.Transport that learns the API's limit from
// its answers. The API admits 30 requests every 3 seconds and does not say
// so in advance; the client is configured for 20 a second, twice too many.
// From the first answer on, the X-RateLimit-Remaining and -Reset-After fields
// pace the workers so that what is left lasts until the reset: the API
// serves its whole limit and refuses next to nothing.
//
//	go run ./examples/apipacing
//	go run ./examples/apipacing -learn=false   # the guess alone: refusals
//
// Every worker and process whose limiter shares a store (Redis or
// PostgreSQL) follows the same answers; see docs/pacing.md.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"net/http"
	"os"
	"sync"
	"time"

	"github.com/sluice-go/sluice"
	"github.com/sluice-go/sluice/sluicehttp"
)

func main() {
	learn := flag.Bool("learn", true, "learn the API's limit from its answers")
	flag.Parse()
	ctx, cancel := context.WithTimeout(context.Background(), 12*time.Second)
	defer cancel()
	if err := run(ctx, os.Stdout, newAPI(), 8, *learn); err != nil {
		log.Fatal(err)
	}
}

// newAPI returns the stand-in API: 30 requests every 3 seconds, 40 ms
// away.
func newAPI() *thirdPartyAPI {
	return &thirdPartyAPI{limit: 30, window: 3 * time.Second, latency: 40 * time.Millisecond}
}

// run sends requests to api from workers until ctx ends, learning from
// its answers if learn, and reports what the API answered each second.
func run(ctx context.Context, out io.Writer, api *thirdPartyAPI, workers int, learn bool) error {
	// The guess: 20 requests a second, spread evenly (a burst of 1).
	lim, err := sluice.NewGCRA(sluice.PerSecond(20), 1)
	if err != nil {
		return err
	}
	defer lim.Close()
	var opts []sluicehttp.TransportOption
	if learn {
		opts = append(opts, sluicehttp.Learn())
	}
	paced, err := sluicehttp.NewTransport(api, lim, opts...)
	if err != nil {
		return err
	}
	client := &http.Client{Transport: paced}

	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for range workers {
		wg.Go(func() { errs <- work(ctx, client) })
	}
	report(ctx, out, api)
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			return err
		}
	}
	served, refused := api.tally()
	fmt.Fprintf(out, "in all: %d served, %d refused\n", served, refused)
	return nil
}

// work calls the API until ctx ends.
func work(ctx context.Context, client *http.Client) error {
	for {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, "https://api.example.com/v1/items", nil)
		if err != nil {
			return err
		}
		resp, err := client.Do(req)
		if ctx.Err() != nil || errors.Is(err, context.DeadlineExceeded) {
			return nil // the run is over, or a turn would come after its end
		}
		if err != nil {
			return err
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
}

// report prints what the API served and refused in each second until ctx
// ends.
func report(ctx context.Context, out io.Writer, api *thirdPartyAPI) {
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	var lastServed, lastRefused int
	for s := 1; ; s++ {
		select {
		case <-ctx.Done():
			select {
			case <-tick.C: // the second that ends with the run is reported too
			default:
				return
			}
		case <-tick.C:
		}
		served, refused := api.tally()
		fmt.Fprintf(out, "second %2d: %2d served, %d refused\n", s, served-lastServed, refused-lastRefused)
		lastServed, lastRefused = served, refused
	}
}
