package sluice

import (
	"context"

	"github.com/sluice-go/sluice/engine"
)

// Store keeps the per-key state of limiters and decides each request
// atomically: a limiter hands it the whole decision in one call to Apply,
// and the store runs [engine.Params.Step] (or an exact translation of it)
// on the key's state and writes the result back as one step, with no
// compare-and-swap retry loop. [MemStore] holds the key's shard lock; the
// Redis store (module github.com/sluice-go/sluice/redisstore) runs one
// script call, the PostgreSQL store (.../pgstore) one statement. A store
// refuses an algorithm it cannot run with [ErrUnsupported], never falling
// back to something weaker. Package [engine] states the contract in full:
// state, time, keys, and how storetest proves a store.
//
// Limiters that share a store share its key space: give each limiter's
// keys their own prefix (for example "login:" + user).
type Store interface {
	// Apply runs op against the state of key under the algorithm p,
	// atomically, stores the new state (unless op.Verb is VerbCheck) and
	// returns the decision. p is never modified and must not be retained.
	Apply(ctx context.Context, key string, p *engine.Params, op engine.Op) (engine.Decision, error)

	// Reset forgets key, so that its next request sees a fresh state.
	Reset(ctx context.Context, key string) error
}

// A GroupStore decides several limits as one, atomically: a [Store] that
// implements it runs [engine.DecideGroup] on the states of every key of the group
// while no other decision can change them, and writes back the states
// the decision changed. The in-memory store locks the shards involved in a
// fixed order; the Redis store runs one script over every key (in one
// slot of a Cluster); the PostgreSQL store runs one transaction that locks
// the rows in key order. A store that cannot decide a group atomically
// does not implement it, and groups over it are refused with
// [ErrUnsupported]: never decided one key at a time.
type GroupStore interface {
	Store
	// ApplyGroup decides ops as one and fills each[i] with the decision
	// on ops[i]; it returns the group's decision. len(each) == len(ops).
	ApplyGroup(ctx context.Context, ops []engine.GroupOp, each []engine.Decision) (engine.Decision, error)
}
