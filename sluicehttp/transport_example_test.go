package sluicehttp_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"net/http"
	"net/http/httptest"
	"time"

	"github.com/sluice-go/sluice"
	"github.com/sluice-go/sluice/sluicehttp"
)

// A job calling a third party's API paces itself to the API's limit, 2
// requests per second with a burst of 2: requests within the burst go at
// once, and one whose deadline comes before its turn fails without being
// sent.
func ExampleNewTransport() {
	apiServer := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprintln(w, `{"ok":true}`)
	}))
	defer apiServer.Close()

	// Simulated time makes the output exact; a job leaves sluice.WithClock
	// out, and shares the pace across processes with sluice.WithStore.
	lim, err := sluice.NewGCRA(sluice.PerSecond(2), 2, sluice.WithClock(newClock()))
	if err != nil {
		log.Fatal(err)
	}
	paced, err := sluicehttp.NewTransport(http.DefaultTransport, lim)
	if err != nil {
		log.Fatal(err)
	}
	client := &http.Client{Transport: paced}

	for range 2 {
		resp, err := client.Get(apiServer.URL)
		if err != nil {
			log.Fatal(err)
		}
		resp.Body.Close()
		fmt.Println(resp.Status)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond) // the next turn is 500 ms away
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, apiServer.URL, nil)
	_, err = client.Do(req)
	fmt.Println("not sent:", errors.Is(err, context.DeadlineExceeded))
	// Output:
	// 200 OK
	// 200 OK
	// not sent: true
}

// A job learns from the API it calls: the API answers 429 with a
// Retry-After of 30 seconds, and from then no request on the host is sent
// before those 30 seconds, from any worker or process sharing the store;
// one whose deadline comes first fails at once, unsent.
func ExampleLearn() {
	apiServer := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Retry-After", "30")
		w.WriteHeader(http.StatusTooManyRequests)
	}))
	defer apiServer.Close()

	lim, err := sluice.NewGCRA(sluice.PerSecond(2), 2, sluice.WithClock(newClock()))
	if err != nil {
		log.Fatal(err)
	}
	paced, err := sluicehttp.NewTransport(http.DefaultTransport, lim, sluicehttp.Learn())
	if err != nil {
		log.Fatal(err)
	}
	client := &http.Client{Transport: paced}

	resp, err := client.Get(apiServer.URL)
	if err != nil {
		log.Fatal(err)
	}
	resp.Body.Close()
	fmt.Println(resp.Status)

	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, apiServer.URL, nil)
	_, err = client.Do(req)
	fmt.Println("held back, not sent:", errors.Is(err, context.DeadlineExceeded))
	// Output:
	// 429 Too Many Requests
	// held back, not sent: true
}
