package engine

import "context"

// Store keeps the per-key state of limiters and decides each request
// atomically: a limiter hands it the whole decision in one call to Apply,
// and the store runs [Params.Step] (or an exact translation of it) on the
// key's state and writes the result back as one step, with no
// compare-and-swap retry loop. sluice.MemStore holds the key's shard
// lock; the Redis store (module github.com/sluice-go/sluice/redisstore)
// runs one script call, the PostgreSQL store (.../pgstore) one statement.
// A store refuses an algorithm it cannot run with [ErrUnsupported], never
// falling back to something weaker. This package's documentation states
// the contract in full: state, time, keys, and how storetest proves a
// store.
//
// Limiters that share a store share its key space: give each limiter's
// keys their own prefix (for example "login:" + user).
type Store interface {
	// Apply runs op against the state of key under the algorithm p,
	// atomically, stores the new state (unless op.Verb is VerbCheck) and
	// returns the decision. p is never modified and must not be retained.
	Apply(ctx context.Context, key string, p *Params, op Op) (Decision, error)

	// Reset forgets key, so that its next request sees a fresh state.
	Reset(ctx context.Context, key string) error
}

// A GroupStore decides several limits as one, atomically: a [Store] that
// implements it runs [DecideGroup] on the states of every key of the group
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
	ApplyGroup(ctx context.Context, ops []GroupOp, each []Decision) (Decision, error)
}

// A ReleaseWatcher is a [Store] that tells waiters when a slot may be
// free, so that sluice's Limiter.Acquire sleeps until then instead of
// polling. sluice.MemStore tells the waiters of its process; the Redis
// store publishes on a channel (Redis pub/sub), the PostgreSQL store with
// NOTIFY, so that waiters in every process that shares the store are
// woken.
type ReleaseWatcher interface {
	// WatchReleases sends on c, without blocking (a full channel has a
	// wake-up pending already), after each decision on key that may let
	// a waiter in ([Params.Frees]: a lease released, a waiter
	// leaving the line or served with room left), from any limiter
	// sharing the store, until stop is called. A spurious send is
	// allowed; a missed one costs the waiter a poll. It returns an error
	// if the store cannot watch now; ctx bounds the setting up only.
	WatchReleases(ctx context.Context, key string, c chan<- struct{}) (stop func(), err error)
}
