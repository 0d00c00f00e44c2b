package ratelimitheader

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sluice-go/sluice"
)

func TestConcurrencyPolicyCountsConcurrentRequestsWithoutAWindow(t *testing.T) {
	slots, err := sluice.NewConcurrencyLimit(8, time.Minute)
	require.NoError(t, err)
	defer slots.Close()
	rate, err := sluice.NewFixedWindow(8, time.Minute)
	require.NoError(t, err)
	defer rate.Close()
	tests := []struct {
		name string
		lim  *sluice.Limiter
		c    Config
		want string
	}{
		0: {name: "concurrency: its own unit, no window", lim: slots, want: `"default";q=8;qu="concurrent-requests"`},
		1: {name: "concurrency: a unit named wins", lim: slots, c: Config{Unit: "content-bytes"}, want: `"default";q=8;qu="content-bytes"`},
		2: {name: "concurrency: a window set is sent", lim: slots, c: Config{Window: time.Minute, WindowSet: true},
			want: `"default";q=8;qu="concurrent-requests";w=60`},
		3: {name: "rate: requests, left out", lim: rate, want: `"default";q=8;w=60`},
	}
	for i, tt := range tests {
		p, err := New(tt.lim, tt.c)
		require.NoError(t, err, "row %d: %s", i, tt.name)
		require.Equal(t, tt.want, p.Field(), "row %d: %s", i, tt.name)
		require.Equal(t, tt.lim == slots, p.Concurrent(), "row %d: %s", i, tt.name)
	}
	_, err = New(nil, Config{})
	require.ErrorIs(t, err, sluice.ErrInvalidConfig)
}

func TestConcurrencyFieldsCarryRemainingSlotsAndNoT(t *testing.T) {
	slots, err := sluice.NewConcurrencyLimit(2, time.Minute)
	require.NoError(t, err)
	defer slots.Close()
	p, err := New(slots, Config{Name: "slots"})
	require.NoError(t, err)
	tests := []struct {
		d    sluice.Decision
		want Fields
	}{
		0: {d: sluice.Decision{Allowed: true, Limit: 2, Used: 1, Remaining: 1, ResetAfter: time.Minute},
			want: Fields{RateLimit: `"slots";r=1`, Quota: 2, Remaining: 1}},
		1: {d: sluice.Decision{Limit: 2, Used: 2, RetryAfter: 40 * time.Second, ResetAfter: time.Minute},
			want: Fields{RateLimit: `"slots";r=0`, Quota: 2}},
	}
	for i, tt := range tests {
		tt.want.Policy = `"slots";q=2;qu="concurrent-requests"`
		require.Equal(t, tt.want, p.Fields(tt.d), "row %d", i)
	}
}

func TestRetryDelayIsExactForARateAndAHintCappedByTheLeasesForConcurrency(t *testing.T) {
	slots, err := sluice.NewConcurrencyLimit(2, time.Minute)
	require.NoError(t, err)
	defer slots.Close()
	rate, err := sluice.NewFixedWindow(2, time.Minute)
	require.NoError(t, err)
	defer rate.Close()
	concurrent, err := New(slots, Config{})
	require.NoError(t, err)
	windowed, err := New(rate, Config{})
	require.NoError(t, err)
	tests := []struct {
		p     *Policy
		busy  time.Duration
		bound time.Duration // the denial's RetryAfter
		want  time.Duration
		send  bool
	}{
		0: {p: windowed, busy: time.Second, bound: 48 * time.Second, want: 48 * time.Second, send: true},
		1: {p: windowed, busy: 0, bound: 48 * time.Second, want: 48 * time.Second, send: true},
		2: {p: concurrent, busy: time.Second, bound: 48 * time.Second, want: time.Second, send: true},
		3: {p: concurrent, busy: 10 * time.Second, bound: 2500 * time.Millisecond, want: 2500 * time.Millisecond, send: true},
		4: {p: concurrent, busy: time.Second, bound: 0, want: time.Second, send: true},
		5: {p: concurrent, busy: 0, bound: 48 * time.Second},
	}
	for i, tt := range tests {
		got, send := tt.p.RetryDelay(sluice.Decision{RetryAfter: tt.bound}, tt.busy)
		require.Equal(t, tt.want, got, "row %d", i)
		require.Equal(t, tt.send, send, "row %d", i)
	}
}
