package sluice_test

import (
	"context"
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/sluice-go/sluice"
)

// BenchmarkGroup measures a request decided against 2 and 3 limits at once
// (Group.Allow) beside the same limits decided one after the other with
// Allow (which a group replaces), and a turn booked at once on the two
// limits that reserve, the GCRA per client and the shared token bucket
// (Group.Reserve), on the in-memory store, over 1,000 clients whose keys
// are all held, on the admit path.
func BenchmarkGroup(b *testing.B) {
	ctx := context.Background()
	st := sluice.NewMemStore(sluice.MemStoreConfig{})
	defer st.Close()
	const huge = 1e12
	// An API's limits (10 per second and a daily quota per client, 5,000
	// per second for everyone), with bursts large enough never to deny.
	perSecond, err1 := sluice.NewGCRA(sluice.PerSecond(10), 1e8, sluice.WithStore(st))
	perDay, err2 := sluice.NewFixedWindow(huge, 24*time.Hour, sluice.WithStore(st))
	global, err3 := sluice.NewTokenBucket(sluice.PerSecond(5000), huge, sluice.WithStore(st))
	if err := errors.Join(err1, err2, err3); err != nil {
		b.Fatal(err)
	}
	limiters := []*sluice.Limiter{perSecond, perDay, global}
	prefixes := []string{"s:", "d:", "g:"}
	clients := make([]string, 1000)
	for i := range clients {
		clients[i] = strconv.Itoa(i)
	}
	for _, n := range []int{2, 3} {
		keys := make([][]string, len(clients))
		for c := range clients {
			for j := range n {
				keys[c] = append(keys[c], prefixes[j]+clients[c])
			}
		}
		group, err := sluice.NewGroup(limiters[:n]...)
		if err != nil {
			b.Fatal(err)
		}
		b.Run("Limits"+strconv.Itoa(n)+"/Group", func(b *testing.B) {
			b.ReportAllocs()
			for i := 0; b.Loop(); i++ {
				if d, err := group.Allow(ctx, keys[i%len(keys)], 1); err != nil || !d.Allowed {
					b.Fatal(d, err)
				}
			}
		})
		b.Run("Limits"+strconv.Itoa(n)+"/Separate", func(b *testing.B) {
			b.ReportAllocs()
			for i := 0; b.Loop(); i++ {
				ks := keys[i%len(keys)]
				for j, lim := range limiters[:n] {
					if d, err := lim.Allow(ctx, ks[j], 1); err != nil || !d.Allowed {
						b.Fatal(d, err)
					}
				}
			}
		})
	}
	booking, err := sluice.NewGroup(perSecond, global)
	if err != nil {
		b.Fatal(err)
	}
	keys := make([][]string, len(clients))
	for c := range clients {
		keys[c] = []string{"s:" + clients[c], "g:"}
	}
	b.Run("Reserve", func(b *testing.B) {
		b.ReportAllocs()
		for i := 0; b.Loop(); i++ {
			if r, err := booking.Reserve(ctx, keys[i%len(keys)], 1, time.Second); err != nil || !r.Allowed || r.Delay != 0 {
				b.Fatal(r.Allowed, r.Delay, err)
			}
		}
	})
}
