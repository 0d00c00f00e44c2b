// Command tiers limits an API per customer plan, with the limits read from
// a configuration file that the running process reloads when it changes:
// a free customer upgraded to pro gets the pro rate at once, keeping what
// it used; a file saved with a mistake is rejected with its line, and the
// limits in force stay.
//
// Time is simulated, and so is the file watcher's polling, so the output is
// the same on every run.
package main

import (
	"context"
	"fmt"
	"io"
	"log"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/benbjohnson/clock"

	"github.com/sluice-go/sluice"
	"github.com/sluice-go/sluice/policy"
)

const limits = `{
  "policies": {
    "api": {
      "algorithm": "gcra",
      "rate": "2/s",
      "burst": 3,
      "tiers": {
        "pro": {"rate": "20/s", "burst": 10}
      }
    }
  }
}`

func main() {
	if err := run(os.Stdout); err != nil {
		log.Fatal(err)
	}
}

// plans says each customer's plan; the billing system would.
type plans struct {
	mu   sync.Mutex
	plan map[string]string
}

func (p *plans) tier(_ context.Context, key string) (string, error) {
	customer, _, _ := strings.Cut(key, "/")
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.plan[customer], nil // "" is the policy's own limit: free
}

func (p *plans) set(customer, plan string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.plan[customer] = plan
}

func run(w io.Writer) error {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "tiers")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "limits.json")
	if err := os.WriteFile(path, []byte(limits), 0o600); err != nil {
		return err
	}
	fake := clock.NewMock()
	fake.Set(time.Date(2026, 6, 1, 9, 0, 0, 0, time.UTC))

	doc, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	policies, err := policy.Parse(doc)
	if err != nil {
		return err
	}
	customers := &plans{plan: map[string]string{}}
	api, err := policies.Limiter("api", customers.tier, sluice.WithClock(fake))
	if err != nil {
		return err
	}
	defer api.Close()
	watcher := watch(ctx, path, policies, fake, time.Second)
	defer watcher.stop()

	burst := func(key string) string {
		n := 0
		for {
			d, err := api.Allow(ctx, key, 1)
			if err != nil {
				return err.Error()
			}
			if !d.Allowed {
				return fmt.Sprintf("%2d admitted, then retry in %v", n, d.RetryAfter)
			}
			n++
		}
	}
	fmt.Fprintln(w, "acme (free):      ", burst("acme/orders"))
	customers.set("acme", "pro")
	fmt.Fprintln(w, "acme upgraded:    ", burst("acme/orders"))
	fake.Add(500 * time.Millisecond)
	fmt.Fprintln(w, "500 ms later:     ", burst("acme/orders"))

	edit := func(what, doc string) error {
		if err := os.WriteFile(path, []byte(doc), 0o600); err != nil {
			return err
		}
		fake.Add(time.Second) // the watcher's next look
		if err := <-watcher.reloaded; err != nil {
			fmt.Fprintf(w, "%s: rejected: %v\n", what, err)
		} else {
			fmt.Fprintf(w, "%s: reloaded\n", what)
		}
		return nil
	}
	if err := edit("pro raised to 50/s", strings.Replace(limits, `"20/s"`, `"50/s"`, 1)); err != nil {
		return err
	}
	fmt.Fprintln(w, "acme, 1 s later:  ", burst("acme/orders"))
	if err := edit("a typo", strings.Replace(limits, `"burst": 10`, `"burst": "ten"`, 1)); err != nil {
		return err
	}
	fake.Add(time.Second)
	fmt.Fprintln(w, "acme, 1 s later:  ", burst("acme/orders"))
	return nil
}

// watcher reloads a configuration file when it changes, looking every
// interval on a clock; each reload's outcome is sent on reloaded.
type watcher struct {
	reloaded chan error
	stop     func()
}

func watch(ctx context.Context, path string, policies *policy.Set, c clock.Clock, every time.Duration) *watcher {
	ctx, cancel := context.WithCancel(ctx)
	w := &watcher{reloaded: make(chan error), stop: cancel}
	last, _ := os.ReadFile(path)
	ticker := c.Ticker(every)
	go func() {
		defer ticker.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-ticker.C:
			}
			doc, err := os.ReadFile(path)
			if err != nil || string(doc) == string(last) {
				continue // unreadable for now, or unchanged: the limits in force stay
			}
			last = doc
			select {
			case w.reloaded <- policies.Reload(doc):
			case <-ctx.Done():
				return
			}
		}
	}()
	return w
}
