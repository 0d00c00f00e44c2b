// Command spendbudget keeps a monthly spending budget with a sluice leaky
// bucket: 1000 units per 30 days, regained continuously as the bucket
// leaks. It shows the three verbs of a leaky bucket (CanAccept, Allow,
// Fillup) and why checking with CanAccept and then recording with Fillup
// overspends when two spenders race, while Allow never does. Then it keeps
// a quota by the calendar instead: 1000 units per calendar month in
// Europe/Paris, which starts again at midnight on the 1st there.
//
// Time is simulated, so the output is the same on every run.
package main

import (
	"context"
	"fmt"
	"io"
	"log"
	"os"
	"sync"
	"time"
	_ "time/tzdata" // Europe/Paris, on a machine without a zone database

	"github.com/benbjohnson/clock"

	"github.com/sluice-go/sluice"
)

const (
	capacity = 1000
	month    = 30 * 24 * time.Hour
	day      = 24 * time.Hour
)

func main() {
	if err := run(os.Stdout); err != nil {
		log.Fatal(err)
	}
}

func run(w io.Writer) error {
	ctx := context.Background()
	clock := clock.NewMock()
	clock.Set(time.Date(2026, 6, 1, 0, 0, 0, 0, time.UTC))
	budget, err := sluice.NewLeakyBucket(capacity, sluice.Per(capacity, month), sluice.WithClock(clock))
	if err != nil {
		return err
	}
	defer budget.Close()

	fmt.Fprintf(w, "Budget: %d units per 30 days, regained continuously.\n\n", capacity)
	if err := spend(ctx, w, budget, clock); err != nil {
		return err
	}
	fmt.Fprintln(w)
	if err := checkThenFill(ctx, w, budget); err != nil {
		return err
	}
	fmt.Fprintln(w)
	if err := allow(ctx, w, budget); err != nil {
		return err
	}
	fmt.Fprintln(w)
	return quota(ctx, w)
}

// quota spends from 1000 units per calendar month in Paris across the end
// of June: it starts again, whole, at midnight on July 1 there.
func quota(ctx context.Context, w io.Writer) error {
	paris, err := time.LoadLocation("Europe/Paris")
	if err != nil {
		return err
	}
	clock := clock.NewMock()
	clock.Set(time.Date(2026, 6, 30, 22, 0, 0, 0, paris))
	monthly, err := sluice.NewCalendarWindow(capacity, sluice.Month, paris, sluice.WithClock(clock))
	if err != nil {
		return err
	}
	defer monthly.Close()
	fmt.Fprintf(w, "Quota: %d units per calendar month in Europe/Paris.\n", capacity)
	const team = "team-d"
	for _, step := range []struct {
		wait time.Duration
		cost float64
	}{{0, 900}, {0, 300}, {2 * time.Hour, 300}} {
		clock.Add(step.wait)
		d, err := monthly.Allow(ctx, team, step.cost)
		if err != nil {
			return err
		}
		now := clock.Now().In(paris)
		if d.Allowed {
			fmt.Fprintf(w, "  %s  Allow(%.0f): admitted; %.0f left until %s\n",
				now.Format("Jan _2 15:04"), step.cost, d.Remaining, now.Add(d.ResetAfter).Format("Jan _2 15:04 MST"))
		} else {
			fmt.Fprintf(w, "  %s  Allow(%.0f): denied; %.0f left, whole again at %s\n",
				now.Format("Jan _2 15:04"), step.cost, d.Remaining, now.Add(d.RetryAfter).Format("Jan _2 15:04 MST"))
		}
	}
	return nil
}

// spend walks one team through the three verbs.
func spend(ctx context.Context, w io.Writer, budget *sluice.Limiter, clock *clock.Mock) error {
	const team = "team-a"
	d, err := budget.CanAccept(ctx, team, 300)
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "day  0  CanAccept(300): %s, would leave %.0f; nothing recorded\n", yesNo(d.Allowed), d.Remaining)

	d, err = budget.Allow(ctx, team, 300)
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "day  0  Allow(300):     %s; %.0f left\n", admitted(d), d.Remaining)

	// A bill for work that already happened: it is recorded whatever the
	// budget says.
	d, err = budget.Fillup(ctx, team, 250)
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "day  0  Fillup(250):    recorded; %.0f left\n", d.Remaining)

	d, err = budget.Allow(ctx, team, 600)
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "day  0  Allow(600):     %s; %.0f left, retry in %.1f days\n", admitted(d), d.Remaining, d.RetryAfter.Hours()/24)

	clock.Add(6 * day) // 6/30 of the budget leaks away: 200 units
	d, err = budget.Allow(ctx, team, 600)
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "day  6  Allow(600):     %s; %.0f left, whole again in %.1f days\n", admitted(d), d.Remaining, d.ResetAfter.Hours()/24)
	return nil
}

// checkThenFill has two spenders of 300 each check the budget with
// CanAccept and then record with Fillup, on a budget with 400 left. Both
// checks happen before either fill-up, as they can in production: both
// pass, and together they spend 600.
func checkThenFill(ctx context.Context, w io.Writer, budget *sluice.Limiter) error {
	const team, cost = "team-b", 300
	if _, err := budget.Fillup(ctx, team, 600); err != nil {
		return err
	}
	fmt.Fprintf(w, "Two spenders of %d, 400 left, CanAccept then Fillup:\n", cost)
	var checked, done sync.WaitGroup
	checked.Add(2)
	passed := make([]bool, 2)
	fitted := make([]bool, 2)
	errs := make([]error, 2)
	for i := range 2 {
		done.Go(func() {
			d, err := budget.CanAccept(ctx, team, cost)
			passed[i], errs[i] = d.Allowed, err
			checked.Done()
			checked.Wait() // both have checked: the window of the race
			if err == nil && d.Allowed {
				d, errs[i] = budget.Fillup(ctx, team, cost)
				fitted[i] = d.Allowed
			}
		})
	}
	done.Wait()
	spent, late := 0, 0
	for i := range 2 {
		if errs[i] != nil {
			return errs[i]
		}
		if passed[i] {
			spent += cost
		}
		if !fitted[i] {
			late++
		}
	}
	fmt.Fprintf(w, "  both CanAccept(%d): %s and %s, so both spend\n", cost, yesNo(passed[0]), yesNo(passed[1]))
	fmt.Fprintf(w, "  spent %d of the 400 left: %d over budget\n", spent, spent-400)
	fmt.Fprintf(w, "  Fillup reported %d of 2 over capacity, after the money was gone\n", late)
	return nil
}

// allow has the same two spenders use Allow, which checks and records in
// one atomic step.
func allow(ctx context.Context, w io.Writer, budget *sluice.Limiter) error {
	const team, cost = "team-c", 300
	if _, err := budget.Fillup(ctx, team, 600); err != nil {
		return err
	}
	fmt.Fprintf(w, "Two spenders of %d, 400 left, Allow:\n", cost)
	var done sync.WaitGroup
	decisions := make([]sluice.Decision, 2)
	errs := make([]error, 2)
	for i := range 2 {
		done.Go(func() { decisions[i], errs[i] = budget.Allow(ctx, team, cost) })
	}
	done.Wait()
	spent := 0
	for i := range 2 {
		if errs[i] != nil {
			return errs[i]
		}
		if decisions[i].Allowed {
			spent += cost
		}
	}
	// Which spender wins is up to the scheduler; that one wins is not.
	fmt.Fprintf(w, "  admitted %d of 2: spent %d of the 400 left, never more\n", spent/cost, spent)
	return nil
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

func admitted(d sluice.Decision) string {
	if d.Allowed {
		return "admitted"
	}
	return "denied"
}
