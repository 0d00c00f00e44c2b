// Package answers reads what a rate-limited service says about its limits
// in the header fields of its answers: Retry-After, the IETF RateLimit and
// RateLimit-Policy fields (draft-ietf-httpapi-ratelimit-headers, the list
// form of -07 on and the RateLimit-Limit/-Remaining/-Reset fields of the
// drafts before it), the common X-RateLimit-* fields, and the requests and
// tokens fields of LLM APIs (x-ratelimit-remaining-requests, "6m0s";
// anthropic-ratelimit-tokens-remaining, an RFC 3339 instant).
//
// The fields come from servers the client does not control: a field that
// does not parse is ignored, as the draft asks, and every number that
// comes out is finite, not negative, and every duration between 0 and
// [MaxWait]. Reading never fails.
package answers

import (
	"math"
	"strconv"
	"strings"
	"time"
)

// MaxWait bounds every duration read: 2^60 ns, about 36 years.
const MaxWait = time.Duration(1 << 60)

// Unit is what a quota counts.
type Unit uint8

const (
	// Requests counts requests: the IETF fields' default unit.
	Requests Unit = iota + 1
	// Tokens counts an LLM API's tokens (input, output, or both).
	Tokens
)

// String returns "requests" or "tokens".
func (u Unit) String() string {
	switch u {
	case Requests:
		return "requests"
	case Tokens:
		return "tokens"
	}
	return "unit(" + strconv.Itoa(int(u)) + ")"
}

// Quota is one limit's state as the service reports it: Remaining units
// may be used within Reset, after which it has more.
type Quota struct {
	Unit      Unit
	Remaining float64
	Reset     time.Duration
}

// Answer is what one answer says.
type Answer struct {
	// RetryAfter is how long the service asks the client to wait, and
	// HasRetryAfter whether it said so (Retry-After).
	RetryAfter    time.Duration
	HasRetryAfter bool
	// Quotas are the limits it reports, each with a remaining count and a
	// time until it resets. A remaining count without a reset says nothing
	// usable, and is left out.
	Quotas []Quota
}

// Fields returns the values of the header field name, as http.Header's
// Values does (the name in any case).
type Fields func(name string) []string

// Read returns what the fields of an answer received at now say.
func Read(fields Fields, now time.Time) Answer {
	var a Answer
	if v, ok := first(fields, "Retry-After"); ok {
		a.RetryAfter, a.HasRetryAfter = retryAfter(v, now)
	}
	a.Quotas = ietf(fields, a.Quotas)
	a.Quotas = legacy(fields, now, a.Quotas)
	a.Quotas = llm(fields, now, a.Quotas)
	return a
}

// retryAfter reads a Retry-After value: delay-seconds or an HTTP-date.
func retryAfter(v string, now time.Time) (time.Duration, bool) {
	if n, ok := digits(v); ok {
		return seconds(n), true
	}
	t, err := httpTime(v)
	if err != nil {
		return 0, false
	}
	return until(t, now), true
}

// legacy reads the quotas of the fields named prefix + Remaining and
// prefix + Reset: the IETF drafts up to -06 (RateLimit-), and the common
// X-RateLimit- and X-Rate-Limit- fields, whose reset is delay-seconds, an
// epoch instant in seconds or milliseconds, or an X-RateLimit-Reset-After
// in seconds.
func legacy(fields Fields, now time.Time, qs []Quota) []Quota {
	for _, prefix := range []string{"RateLimit-", "X-RateLimit-", "X-Rate-Limit-"} {
		rem, ok := first(fields, prefix+"Remaining")
		if !ok {
			continue
		}
		remaining, ok := number(rem)
		if !ok {
			continue
		}
		var reset time.Duration
		if v, ok := first(fields, prefix+"Reset-After"); ok {
			n, ok := number(v)
			if !ok {
				continue
			}
			reset = seconds(n)
		} else if v, ok := first(fields, prefix+"Reset"); ok {
			n, ok := number(v)
			if !ok {
				continue
			}
			reset = resetAt(n, now)
		} else {
			continue
		}
		qs = append(qs, Quota{Unit: Requests, Remaining: remaining, Reset: reset})
	}
	return qs
}

// resetAt reads a reset that may be delay-seconds or an epoch instant: a
// number above 10^11 (the year 5138 in seconds) is milliseconds since the
// epoch, above 10^8 (1973, and three years as a delay, which no reset
// is) seconds since the epoch, and otherwise seconds from now.
func resetAt(n float64, now time.Time) time.Duration {
	switch {
	case n > 1e11:
		return until(time.UnixMilli(int64(min(n, 1e17))), now)
	case n > 1e8:
		return until(time.Unix(int64(min(n, 1e14)), 0), now)
	}
	return seconds(n)
}

// llm reads the requests and tokens quotas of LLM APIs: OpenAI's
// x-ratelimit-remaining-requests with x-ratelimit-reset-requests as a Go
// duration ("6m0s", "20ms"), and Anthropic's
// anthropic-ratelimit-requests-remaining with -reset as an RFC 3339
// instant (and its input and output tokens).
func llm(fields Fields, now time.Time, qs []Quota) []Quota {
	for _, u := range []struct {
		name string
		unit Unit
	}{{"requests", Requests}, {"tokens", Tokens}} {
		if q, ok := quota(fields, "x-ratelimit-remaining-"+u.name, "x-ratelimit-reset-"+u.name, u.unit, func(v string) (time.Duration, bool) {
			d, err := time.ParseDuration(strings.TrimSpace(v))
			return min(d, MaxWait), err == nil && d >= 0
		}); ok {
			qs = append(qs, q)
		}
	}
	for _, u := range []struct {
		name string
		unit Unit
	}{{"requests", Requests}, {"tokens", Tokens}, {"input-tokens", Tokens}, {"output-tokens", Tokens}} {
		prefix := "anthropic-ratelimit-" + u.name
		if q, ok := quota(fields, prefix+"-remaining", prefix+"-reset", u.unit, func(v string) (time.Duration, bool) {
			t, err := time.Parse(time.RFC3339, strings.TrimSpace(v))
			return until(t, now), err == nil
		}); ok {
			qs = append(qs, q)
		}
	}
	return qs
}

// quota reads one quota from its remaining and reset fields, the reset
// parsed by reset.
func quota(fields Fields, remaining, reset string, unit Unit, parse func(string) (time.Duration, bool)) (Quota, bool) {
	rem, ok := first(fields, remaining)
	if !ok {
		return Quota{}, false
	}
	res, ok := first(fields, reset)
	if !ok {
		return Quota{}, false
	}
	r, ok := number(rem)
	if !ok {
		return Quota{}, false
	}
	d, ok := parse(res)
	if !ok {
		return Quota{}, false
	}
	return Quota{Unit: unit, Remaining: r, Reset: d}, true
}

// first returns the first value of the field name, if it has one.
func first(fields Fields, name string) (string, bool) {
	vs := fields(name)
	if len(vs) == 0 {
		return "", false
	}
	return vs[0], true
}

// digits reads a string of ASCII digits (after trimming spaces), as
// delay-seconds are, saturating far beyond any real delay.
func digits(v string) (float64, bool) {
	v = strings.TrimSpace(v)
	if v == "" || len(v) > 30 {
		return 0, false
	}
	var n float64
	for i := 0; i < len(v); i++ {
		c := v[i]
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + float64(c-'0')
	}
	return n, true
}

// number reads a finite, non-negative decimal number.
func number(v string) (float64, bool) {
	v = strings.TrimSpace(v)
	if v == "" || len(v) > 40 || strings.ContainsAny(v, "xXpPnN_") {
		return 0, false // no hex, no Inf or NaN spelled out, no underscores
	}
	n, err := strconv.ParseFloat(v, 64)
	if err != nil || !(n >= 0) || math.IsInf(n, 0) {
		return 0, false
	}
	return n, true
}

// seconds converts n seconds to a duration, at most MaxWait.
func seconds(n float64) time.Duration {
	if n >= float64(MaxWait/time.Second) {
		return MaxWait
	}
	return time.Duration(math.Ceil(n * float64(time.Second)))
}

// until returns how long from now until t, 0 for a past t, at most
// MaxWait.
func until(t, now time.Time) time.Duration {
	d := t.Sub(now) // saturates at the extremes of time.Duration
	return min(max(d, 0), MaxWait)
}
