package main

import (
	"log"
	"os"
)

// The output is exact: time, and the watcher's polling, are simulated.
func Example() {
	if err := run(os.Stdout); err != nil {
		log.Fatal(err)
	}
	// Output:
	// acme (free):        3 admitted, then retry in 500ms
	// acme upgraded:      7 admitted, then retry in 50ms
	// 500 ms later:      10 admitted, then retry in 50ms
	// pro raised to 50/s: reloaded
	// acme, 1 s later:   10 admitted, then retry in 20ms
	// a typo: rejected: sluice: configuration, line 8, policy "api", tier "pro", burst: want a number, not string
	// acme, 1 s later:   10 admitted, then retry in 20ms
}
