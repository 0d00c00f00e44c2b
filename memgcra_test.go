package sluice

import (
	"context"
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
