package policy_test

import (
	"context"
	"fmt"
	"strings"

	"github.com/benbjohnson/clock"

	"github.com/sluice-go/sluice"
	"github.com/sluice-go/sluice/policy"
)

func ExampleParse() {
	policies, err := policy.Parse([]byte(`{
	  "policies": {
	    "api": {
	      "algorithm": "gcra", "rate": "10/s", "burst": 2,
	      "tiers": {"pro": {"rate": "100/s", "burst": 5}}
	    }
	  }
	}`))
	if err != nil {
		fmt.Println(err)
		return
	}
	// A key's tier is its prefix here; a service would look its customer up.
	planOf := func(_ context.Context, key string) (string, error) {
		plan, _, _ := strings.Cut(key, ":")
		return plan, nil
	}
	// A fake clock keeps the output the same on a slow machine.
	api, err := policies.Limiter("api", planOf, sluice.WithClock(clock.NewMock()))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer api.Close()
	for _, key := range []string{":alice", "pro:bob"} {
		n := 0
		for {
			d, err := api.Allow(context.Background(), key, 1)
			if err != nil || !d.Allowed {
				break
			}
			n++
		}
		fmt.Printf("%s: a burst of %d\n", key, n)
	}
	// Output:
	// :alice: a burst of 2
	// pro:bob: a burst of 5
}

func ExampleParse_mistake() {
	_, err := policy.Parse([]byte(`{"policies": {
	  "api": {"algorithm": "gcra", "rate": "10/s", "burst": "twenty"}
	}}`))
	fmt.Println(err)
	// Output:
	// sluice: configuration, line 2, policy "api", burst: want a number, not string
}
