package sluice

import (
	"context"
	"math/rand/v2"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sluice-go/sluice/engine"
)

// gcraOf returns a GCRA of burst 2 at one unit per interval.
func gcraOf(t *testing.T, interval time.Duration) *engine.Params {
	p := &engine.Params{Kind: engine.KindGCRA, Limit: 2, Interval: int64(interval)}
	require.NoError(t, p.Validate())
	return p
}

func TestMemStoreKeepsAGCRAKeyOfAnotherIntervalWithItsInterval(t *testing.T) {
	m := NewMemStore(MemStoreConfig{Shards: 1})
	defer m.Close()
	ctx := context.Background()
	slow, fast := gcraOf(t, 100*time.Millisecond), gcraOf(t, 10*time.Millisecond)
	now := int64(time.Hour)
	allow := func(key string, p *engine.Params) engine.Decision {
		d, err := m.Apply(ctx, key, p, engine.Op{Verb: engine.VerbAllow, Cost: 1, Now: now})
		require.NoError(t, err)
		return d
	}
	for range 2 {
		allow("slow", slow) // the shard's first GCRA interval: the primary
		allow("fast", fast)
	}
	sh := &m.shards[0]
	require.Equal(t, 1, sh.tats.n, "the primary interval's key, in a 24-byte slot")
	require.Equal(t, 1, sh.slots.n, "the other's, in a 48-byte slot with its interval")
	// Each key's TAT converts from its own interval: two units held.
	require.Equal(t, 10*time.Millisecond, allow("slow", fast).RetryAfter)
	require.Equal(t, 100*time.Millisecond, allow("fast", slow).RetryAfter)
	require.Equal(t, 1, sh.tats.n, "each key moved to the table of its new interval")
	require.Equal(t, 1, sh.slots.n)
	_, inTats := sh.tats.find(m.idOf("fast"))
	require.True(t, inTats)
}

// idOf returns key's identity in m.
func (m *MemStore) idOf(key string) keyID {
	id, _ := m.locate(key)
	return id
}

// applyByState is apply without decideTAT: the key's State loaded,
// decided and saved, as apply decides every request decideTAT declines.
// It is the reference decideTAT is held to. (apply does not call a method
// for that path, which would cost the other algorithms 2 to 8 %.)
func (m *MemStore) applyByState(key string, p *engine.Params, op engine.Op, d *engine.Decision) error {
	id, sh := m.locate(key)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	sh.now = max(sh.now, op.Now)
	var s engine.State
	at, other := sh.load(id, p, op.Now, &s)
	if other != 0 {
		d.Limit = p.Limit
		return conflict(key, other, p.Kind)
	}
	a := s.A
	p.Decide(&s, op, d)
	if p.Records(op.Verb, d) || p.Kind == engine.KindGCRA && s.A != a {
		if p.Kind != engine.KindGCRA || !sh.saveUsual(id, at, op.Now, &s, d, op.Verb == engine.VerbAllow) {
			sh.save(id, at, p, op.Now, &s, d, m.perShard)
		}
	}
	return nil
}

// TestDecideTATChangesTheShardAsLoadDecideAndSave runs random traces on
// two one-shard stores that hash keys alike and hold at most four: one
// decides as apply does, the usual GCRA request on its TAT, the other
// loads, decides and saves every request's State. Every decision, and the
// whole shard after it (hot key, tables, slots' use marks, blocks,
// evictions), is the same.
func TestDecideTATChangesTheShardAsLoadDecideAndSave(t *testing.T) {
	gcra := gcraOf(t, 100*time.Millisecond)
	variant := func(p engine.Params, change func(*engine.Params)) *engine.Params {
		change(&p)
		require.NoError(t, p.Validate())
		return &p
	}
	limits := []*engine.Params{
		gcra,
		gcraOf(t, 250*time.Millisecond), // another interval: the other table
		variant(*gcra, func(p *engine.Params) { p.Limit = 0.5 }),
		variant(*gcra, func(p *engine.Params) { p.Penalty = int64(700 * time.Millisecond) }),
		variant(*gcra, func(p *engine.Params) { p.CountDenied = true }),
		{Kind: engine.KindTokenBucket, Limit: 2, Amount: 1, Interval: int64(100 * time.Millisecond)},
	}
	verbs := []engine.Verb{engine.VerbAllow, engine.VerbAllow, engine.VerbAllow, engine.VerbCheck, engine.VerbReserve, engine.VerbCancel, engine.VerbAtMost, engine.VerbExhaust}
	hot, evicted := 0, uint64(0)
	for seed := range uint64(100) {
		byTAT := NewMemStore(MemStoreConfig{Shards: 1, MaxKeys: 4})
		byState := NewMemStore(MemStoreConfig{Shards: 1, MaxKeys: 4})
		byState.hash = byTAT.hash
		rng := rand.New(rand.NewPCG(seed, 0x7a7))
		now, booked := int64(time.Hour), []int64{0}
		for n := range 300 {
			if rng.IntN(3) == 0 {
				now += int64(rng.IntN(300)) * int64(time.Millisecond)
			}
			key := []string{"k", "k", "k", "j", "n" + strconv.Itoa(n), "n" + strconv.Itoa(n)}[rng.IntN(6)]
			p := limits[rng.IntN(len(limits))]
			if rng.IntN(4) > 0 {
				p = gcra // mostly the usual limit, so that keys become hot
			}
			op := engine.Op{Verb: verbs[rng.IntN(len(verbs))], Cost: []float64{0, 0.5, 1, 2}[rng.IntN(4)], Now: now}
			switch op.Verb {
			case engine.VerbReserve, engine.VerbExhaust:
				op.MaxDelay = int64(400 * time.Millisecond)
			case engine.VerbCancel:
				op.At = booked[rng.IntN(len(booked))]
			}
			switch rng.IntN(40) {
			case 0:
				require.NoError(t, byTAT.Reset(context.Background(), key))
				require.NoError(t, byState.Reset(context.Background(), key))
				continue
			case 1:
				require.Equal(t, byState.Sweep(), byTAT.Sweep())
				continue
			}
			if refused := p.Check(op); refused != nil && !p.Overflows(op, refused) {
				continue // Apply's checks: the same for both
			}
			var got, want engine.Decision
			gotErr, wantErr := byTAT.apply(key, p, op, &got), byState.applyByState(key, p, op, &want)
			require.Equal(t, wantErr, gotErr, "seed %d step %d: %+v on %q", seed, n, op, key)
			require.Equal(t, want, got, "seed %d step %d: %+v on %q", seed, n, op, key)
			require.Equal(t, &byState.shards[0].shardData, &byTAT.shards[0].shardData, "seed %d step %d: %+v on %q", seed, n, op, key)
			if got.At != 0 {
				booked = append(booked, got.At)
			}
			if byTAT.shards[0].hot.expires != 0 {
				hot++
			}
		}
		evicted += byTAT.shards[0].evicted
		require.NoError(t, byTAT.Close())
		require.NoError(t, byState.Close())
	}
	require.Greater(t, hot, 1000, "steps with a hot key")
	require.Greater(t, evicted, uint64(100), "keys evicted to make room")
}
