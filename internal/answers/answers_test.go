package answers

import (
	"math"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

var now = time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)

func header(kv ...string) Fields {
	h := http.Header{}
	for i := 0; i < len(kv); i += 2 {
		h.Add(kv[i], kv[i+1])
	}
	return h.Values
}

func TestReadFindsWhatEachKindOfServiceSays(t *testing.T) {
	for _, tc := range []struct {
		name   string
		fields Fields
		want   Answer
	}{
		{"nothing", header(), Answer{}},
		{"retry-after in seconds", header("Retry-After", "120"),
			Answer{RetryAfter: 2 * time.Minute, HasRetryAfter: true}},
		{"retry-after as an HTTP-date", header("Retry-After", "Sat, 28 Nov 2026 12:00:30 GMT"),
			Answer{RetryAfter: 30 * time.Second, HasRetryAfter: true}},
		{"retry-after in the past waits nothing", header("Retry-After", "Sat, 28 Nov 2026 11:00:00 GMT"),
			Answer{HasRetryAfter: true}},
		{"retry-after that is neither is ignored", header("Retry-After", "soon"), Answer{}},
		{"retry-after of negative seconds is ignored", header("Retry-After", "-5"), Answer{}},
		{"IETF list with the policy's unit", header(
			"RateLimit-Policy", `"hour";q=1000;w=3600, "day";q=5000;w=86400`,
			"RateLimit", `"day";r=0;t=20`),
			Answer{Quotas: []Quota{{Requests, 0, 20 * time.Second}}}},
		{"IETF list over two field lines", header("RateLimit", `"a";r=5;t=10`, "RateLimit", `"b";r=1;t=2`),
			Answer{Quotas: []Quota{{Requests, 5, 10 * time.Second}, {Requests, 1, 2 * time.Second}}}},
		{"IETF item of content bytes is left out", header(
			"RateLimit-Policy", `"peruser";q=65535;qu="content-bytes";w=10;pk=:sdfjLJUOUH==:`,
			"RateLimit", `"peruser";r=300;t=10;pk=:sdfjLJUOUH==:`), Answer{}},
		{"IETF item without t is left out", header("RateLimit", `"default";r=3`), Answer{}},
		{"IETF dictionary of draft 07", header("RateLimit", "limit=100, remaining=50, reset=30"),
			Answer{Quotas: []Quota{{Requests, 50, 30 * time.Second}}}},
		{"malformed IETF field is ignored whole", header("RateLimit", `"a";r=5;t=10, ("inner")`), Answer{}},
		{"IETF fields of drafts up to 06", header("RateLimit-Limit", "100", "RateLimit-Remaining", "7", "RateLimit-Reset", "9"),
			Answer{Quotas: []Quota{{Requests, 7, 9 * time.Second}}}},
		{"x-ratelimit reset in seconds", header("X-RateLimit-Limit", "60", "X-RateLimit-Remaining", "0", "X-RateLimit-Reset", "42"),
			Answer{Quotas: []Quota{{Requests, 0, 42 * time.Second}}}},
		{"x-ratelimit reset as epoch seconds", header("X-RateLimit-Remaining", "3", "X-RateLimit-Reset", "1795867260"),
			Answer{Quotas: []Quota{{Requests, 3, 60 * time.Second}}}},
		{"x-ratelimit reset as epoch milliseconds", header("X-RateLimit-Remaining", "3", "X-RateLimit-Reset", "1795867200500"),
			Answer{Quotas: []Quota{{Requests, 3, 500 * time.Millisecond}}}},
		{"x-ratelimit reset-after in fractional seconds", header("X-RateLimit-Remaining", "1", "X-RateLimit-Reset-After", "1.25"),
			Answer{Quotas: []Quota{{Requests, 1, 1250 * time.Millisecond}}}},
		{"x-ratelimit remaining without a reset is left out", header("X-RateLimit-Remaining", "1"), Answer{}},
		{"LLM requests and tokens", header(
			"x-ratelimit-limit-requests", "500", "x-ratelimit-remaining-requests", "499", "x-ratelimit-reset-requests", "120ms",
			"x-ratelimit-limit-tokens", "30000", "x-ratelimit-remaining-tokens", "29000", "x-ratelimit-reset-tokens", "6m0s"),
			Answer{Quotas: []Quota{{Requests, 499, 120 * time.Millisecond}, {Tokens, 29000, 6 * time.Minute}}}},
		{"anthropic instants", header(
			"anthropic-ratelimit-requests-remaining", "4", "anthropic-ratelimit-requests-reset", "2026-11-28T12:00:10Z",
			"anthropic-ratelimit-output-tokens-remaining", "100", "anthropic-ratelimit-output-tokens-reset", "2026-11-28T12:01:00Z"),
			Answer{Quotas: []Quota{{Requests, 4, 10 * time.Second}, {Tokens, 100, time.Minute}}}},
		{"hostile numbers are ignored", header(
			"X-RateLimit-Remaining", "NaN", "X-RateLimit-Reset", "1",
			"RateLimit-Remaining", "Inf", "RateLimit-Reset", "1",
			"x-ratelimit-remaining-requests", "0x10", "x-ratelimit-reset-requests", "1s",
			"x-ratelimit-remaining-tokens", "1", "x-ratelimit-reset-tokens", "-1s"), Answer{}},
		{"huge delays saturate", header("Retry-After", "99999999999999999999999", "X-RateLimit-Remaining", "0", "X-RateLimit-Reset-After", "1e300"),
			Answer{RetryAfter: MaxWait, HasRetryAfter: true, Quotas: []Quota{{Requests, 0, MaxWait}}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.want, Read(tc.fields, now))
		})
	}
}

func FuzzReadKeepsEveryValueInRange(f *testing.F) {
	f.Add("120", `"day";r=0;t=20`, `"day";q=5000;w=86400`, "7", "1795867260", "6m0s")
	f.Add("Sat, 28 Nov 2026 12:00:30 GMT", "limit=1, remaining=2, reset=3", `"a";qu="requests"`, "1e308", "1e300", "2562047h47m16.854775807s")
	f.Add("-1", `"x";r=-1;t=-1`, "(", "NaN", "-0", "1.5h")
	f.Fuzz(func(t *testing.T, retry, limit, policy, remaining, reset, llmReset string) {
		a := Read(header(
			"Retry-After", retry, "RateLimit", limit, "RateLimit-Policy", policy,
			"X-RateLimit-Remaining", remaining, "X-RateLimit-Reset", reset,
			"RateLimit-Remaining", remaining, "RateLimit-Reset-After", reset,
			"x-ratelimit-remaining-tokens", remaining, "x-ratelimit-reset-tokens", llmReset,
			"anthropic-ratelimit-requests-remaining", remaining, "anthropic-ratelimit-requests-reset", llmReset,
		), now)
		require.True(t, a.RetryAfter >= 0 && a.RetryAfter <= MaxWait, "RetryAfter %v", a.RetryAfter)
		require.True(t, a.HasRetryAfter || a.RetryAfter == 0)
		for _, q := range a.Quotas {
			require.True(t, q.Unit == Requests || q.Unit == Tokens, "unit %v", q.Unit)
			require.True(t, q.Remaining >= 0 && !math.IsInf(q.Remaining, 0), "remaining %v", q.Remaining)
			require.True(t, q.Reset >= 0 && q.Reset <= MaxWait, "reset %v", q.Reset)
		}
	})
}
