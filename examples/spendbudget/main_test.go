package main

import (
	"log"
	"os"
)

// The output is exact: time is simulated, and the racing spenders are
// reported by counts, not by which one won.
func Example() {
	if err := run(os.Stdout); err != nil {
		log.Fatal(err)
	}
	// Output:
	// Budget: 1000 units per 30 days, regained continuously.
	//
	// day  0  CanAccept(300): yes, would leave 700; nothing recorded
	// day  0  Allow(300):     admitted; 700 left
	// day  0  Fillup(250):    recorded; 450 left
	// day  0  Allow(600):     denied; 450 left, retry in 4.5 days
	// day  6  Allow(600):     admitted; 50 left, whole again in 28.5 days
	//
	// Two spenders of 300, 400 left, CanAccept then Fillup:
	//   both CanAccept(300): yes and yes, so both spend
	//   spent 600 of the 400 left: 200 over budget
	//   Fillup reported 1 of 2 over capacity, after the money was gone
	//
	// Two spenders of 300, 400 left, Allow:
	//   admitted 1 of 2: spent 300 of the 400 left, never more
	//
	// Quota: 1000 units per calendar month in Europe/Paris.
	//   Jun 30 22:00  Allow(900): admitted; 100 left until Jul  1 00:00 CEST
	//   Jun 30 22:00  Allow(300): denied; 100 left, whole again at Jul  1 00:00 CEST
	//   Jul  1 00:00  Allow(300): admitted; 700 left until Aug  1 00:00 CEST
}
