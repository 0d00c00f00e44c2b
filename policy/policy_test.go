package policy_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/benbjohnson/clock"
	"github.com/stretchr/testify/require"

	"github.com/sluice-go/sluice"
	"github.com/sluice-go/sluice/internal/plantest"
	"github.com/sluice-go/sluice/policy"
)

const tiersDoc = `{
  "policies": {
    "api": {
      "algorithm": "gcra",
      "rate": "10/s",
      "burst": 5,
      "tiers": {
        "free": {"rate": "1/s", "burst": 2},
        "pro":  {"rate": "100/s"}
      }
    },
    "uploads": {"algorithm": "concurrency", "limit": 2, "ttl": "5m"},
    "search": {"algorithm": "fixed-window", "limit": 3, "window": "1m", "anchored": true, "penalty": "10m"},
    "spend": {"algorithm": "leaky-bucket", "capacity": 1000.5, "rate": "1000/720h", "count_denied": true}
  }
}`

// newMock returns a fake clock at a realistic time, a whole number of
// hours since the epoch.
func newMock() *clock.Mock {
	m := clock.NewMock()
	m.Set(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	return m
}

// planOf reads a key's plan from its prefix, "free:..." or "pro:...".
func planOf(_ context.Context, key string) (string, error) {
	plan, _, _ := strings.Cut(key, ":")
	if plan == "none" {
		return "", errors.New("no such customer")
	}
	if plan == "default" {
		return "", nil
	}
	return plan, nil
}

func TestLimiterHoldsEachKeyToItsPolicyAndTier(t *testing.T) {
	c, err := policy.Parse([]byte(tiersDoc))
	require.NoError(t, err)
	require.Equal(t, []string{"api", "search", "spend", "uploads"}, c.Names())
	mock := newMock()
	api, err := c.Limiter("api", planOf, sluice.WithClock(mock))
	require.NoError(t, err)
	defer api.Close()
	for _, want := range []struct {
		key   string
		burst int
		rate  time.Duration // one unit's interval
	}{
		{"free:a", 2, time.Second},
		{"pro:b", 5, 10 * time.Millisecond}, // the policy's burst, the tier's rate
		{"default:c", 5, 100 * time.Millisecond},
	} {
		require.Equal(t, want.burst, plantest.Admitted(t, api, want.key), want.key)
		d, err := api.CanAccept(context.Background(), want.key, 1)
		require.NoError(t, err)
		require.Equal(t, want.rate, d.RetryAfter, want.key)
	}
	for name, params := range map[string]string{
		"uploads": "concurrency{limit=2 interval=5m0s amount=0}",
		"search":  "fixed window{limit=3 interval=1m0s amount=0 penalty=10m0s}",
		"spend":   "leaky bucket{limit=1000.5 interval=720h0m0s amount=1000 count-denied}",
	} {
		lim, err := c.Limiter(name, nil)
		require.NoError(t, err)
		p, err := lim.ParamsFor(context.Background(), "any")
		require.NoError(t, err)
		require.Equal(t, params, p.String(), name)
		lim.Close()
	}
}

func TestLimiterTierThatFailsOrIsUnknownFailsTheRequest(t *testing.T) {
	c, err := policy.Parse([]byte(tiersDoc))
	require.NoError(t, err)
	api, err := c.Limiter("api", planOf)
	require.NoError(t, err)
	defer api.Close()
	ctx := context.Background()
	_, err = api.Allow(ctx, "gold:a", 1)
	require.ErrorIs(t, err, policy.ErrUnknownTier)
	_, err = api.Allow(ctx, "none:a", 1)
	require.ErrorContains(t, err, "no such customer")
	_, err = c.Limiter("nope", planOf)
	require.ErrorIs(t, err, sluice.ErrInvalidConfig)
}

func TestParseRejectsAMistakeWithItsLineAndReason(t *testing.T) {
	for _, c := range []struct {
		name   string
		doc    string
		line   int
		reason string
	}{
		{"syntax", "{\n  \"policies\": {\n    \"api\": {\"algorithm\": \"gcra\",,}\n  }\n}", 3, "invalid character"},
		{"ends early", "{\n  \"policies\": {", 2, "ends too early"},
		{"not an object", `{"policies": []}`, 1, "want an object"},
		{"no policies", `{"policies": {}}`, 1, "no policies"},
		{"unknown top field", "{\n\"limits\": {}}", 2, "unknown field"},
		{"unknown algorithm", "{\"policies\": {\n\"api\": {\n\"algorithm\": \"gcrab\", \"rate\": \"1/s\", \"burst\": 1}}}", 3, `"gcrab" is not an algorithm`},
		{"unknown field", "{\"policies\": {\"api\": {\"algorithm\": \"gcra\",\n\"rate\": \"1/s\",\n\"burst\": 1,\n\"brust\": 2}}}", 4, "unknown field"},
		{"field of another algorithm", "{\"policies\": {\"api\": {\"algorithm\": \"gcra\",\n\"rate\": \"1/s\", \"burst\": 1,\n\"window\": \"1m\"}}}", 3, "not a field of gcra"},
		{"missing", "{\"policies\": {\n\"api\": {\"algorithm\": \"gcra\", \"rate\": \"1/s\"}}}", 2, "missing"},
		{"missing from a tier", "{\"policies\": {\"api\": {\"algorithm\": \"gcra\", \"rate\": \"1/s\", \"tiers\": {\n\"pro\": {\"rate\": \"2/s\"}}}}}", 2, "missing from the tier"},
		{"not a rate", "{\"policies\": {\"api\": {\"algorithm\": \"gcra\",\n\"rate\": \"10 per second\", \"burst\": 1}}}", 2, "not a rate"},
		{"not a duration", "{\"policies\": {\"api\": {\"algorithm\": \"fixed-window\", \"limit\": 1,\n\n\"window\": \"a minute\"}}}", 3, "not a duration"},
		{"wrong type", "{\"policies\": {\"api\": {\"algorithm\": \"gcra\", \"rate\": \"1/s\",\n\"burst\": \"five\"}}}", 2, "want a number, not string"},
		{"refused by the constructor", "{\"policies\": {\n\"api\": {\"algorithm\": \"gcra\", \"rate\": \"1/s\", \"burst\": -1}}}", 2, "limit must be positive"},
		{"tier refused by the constructor", "{\"policies\": {\"api\": {\"algorithm\": \"gcra\", \"rate\": \"1/s\", \"burst\": 1, \"tiers\": {\n\n\"pro\": {\"rate\": \"0/s\"}}}}}", 3, "amount must be positive"},
		{"tier with an algorithm", "{\"policies\": {\"api\": {\"algorithm\": \"gcra\", \"rate\": \"1/s\", \"burst\": 1, \"tiers\": {\"pro\": {\n\"algorithm\": \"concurrency\"}}}}}", 2, "a tier takes its policy's"},
		{"given twice", "{\"policies\": {\"api\": {\"algorithm\": \"gcra\", \"rate\": \"1/s\",\n\"burst\": 1,\n\"burst\": 2}}}", 3, "given twice"},
		{"more after the end", "{\"policies\": {\"api\": {\"algorithm\": \"gcra\", \"rate\": \"1/s\", \"burst\": 1}}}\n{}", 2, "more after"},
		{"nameless policy", "{\"policies\": {\n\"\": {}}}", 2, "needs a name"},
		{"not a period", "{\"policies\": {\"q\": {\"algorithm\": \"calendar-window\", \"limit\": 1,\n\"period\": \"fortnight\", \"zone\": \"UTC\"}}}", 2, "want a calendar period"},
		{"not a zone", "{\"policies\": {\"q\": {\"algorithm\": \"calendar-window\", \"limit\": 1, \"period\": \"day\",\n\"zone\": \"Europe/Atlantis\"}}}", 2, "no time zone \"Europe/Atlantis\""},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := policy.Parse([]byte(c.doc))
			require.ErrorIs(t, err, sluice.ErrInvalidConfig)
			var ce *policy.Error
			require.ErrorAs(t, err, &ce)
			require.Equal(t, c.line, ce.Line, "%v", err)
			require.Contains(t, ce.Reason, c.reason)
		})
	}
}

func TestReloadTakesEffectAtTheNextRequestAndKeepsWhatWasUsed(t *testing.T) {
	c, err := policy.Parse([]byte(tiersDoc))
	require.NoError(t, err)
	mock := newMock()
	api, err := c.Limiter("api", planOf, sluice.WithClock(mock))
	require.NoError(t, err)
	defer api.Close()
	require.Equal(t, 2, plantest.Admitted(t, api, "free:a"))
	require.NoError(t, c.Reload([]byte(strings.Replace(tiersDoc, `"free": {"rate": "1/s", "burst": 2}`, `"free": {"rate": "10/s", "burst": 4}`, 1))))
	require.Equal(t, 2, plantest.Admitted(t, api, "free:a"), "the larger burst, less what was used")
	mock.Add(100 * time.Millisecond)
	require.Equal(t, 1, plantest.Admitted(t, api, "free:a"), "at the new rate")
}

func TestReloadThatFailsKeepsThePoliciesInForce(t *testing.T) {
	c, err := policy.Parse([]byte(tiersDoc))
	require.NoError(t, err)
	api, err := c.Limiter("api", planOf, sluice.WithClock(newMock()))
	require.NoError(t, err)
	defer api.Close()
	var ce *policy.Error
	require.ErrorAs(t, c.Reload([]byte(`{"policies": {"api": {"algorithm": "gcra", "rate": "1/s"}}}`)), &ce)
	err = c.Reload([]byte(`{"policies": {"search": {"algorithm": "fixed-window", "limit": 3, "window": "1m"}}}`))
	require.ErrorIs(t, err, sluice.ErrInvalidConfig)
	require.ErrorContains(t, err, `"api"`, "a policy in use is not dropped")
	require.Equal(t, 2, plantest.Admitted(t, api, "free:a"), "the old configuration")
}

func TestCalendarWindowPolicyIsAQuotaPerCalendarMonthInItsZone(t *testing.T) {
	c, err := policy.Parse([]byte(`{"policies": {"monthly": {
	  "algorithm": "calendar-window", "limit": 2, "period": "month", "zone": "Europe/Paris",
	  "tiers": {"pro": {"limit": 5}}
	}}}`))
	require.NoError(t, err)
	paris, err := time.LoadLocation("Europe/Paris")
	require.NoError(t, err)
	mock := clock.NewMock()
	mock.Set(time.Date(2026, time.June, 30, 23, 0, 0, 0, paris))
	quota, err := c.Limiter("monthly", planOf, sluice.WithClock(mock))
	require.NoError(t, err)
	defer quota.Close()
	require.Equal(t, 2, plantest.Admitted(t, quota, "default:a"))
	require.Equal(t, 5, plantest.Admitted(t, quota, "pro:b"))
	d, err := quota.CanAccept(context.Background(), "pro:b", 1)
	require.NoError(t, err)
	require.Equal(t, time.Hour, d.RetryAfter, "July starts at midnight in Paris")
	mock.Add(time.Hour)
	require.Equal(t, 5, plantest.Admitted(t, quota, "pro:b"), "a new month")
}
