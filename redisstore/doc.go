// Package redisstore keeps sluice limiters' state in Redis, so that many
// processes and hosts share one limit per key.
//
//	client := redis.NewClient(&redis.Options{Addr: "localhost:6379", ContextTimeoutEnabled: true})
//	st, err := redisstore.New(client, redisstore.WithPrefix("myapp:"))
//	...
//	lim, err := sluice.NewGCRA(sluice.PerSecond(10), 5, sluice.WithStore(st))
//
// Every algorithm of sluice runs here, each decision as one call (FCALL)
// of a function of the store's Lua library, which the store loads into
// Redis (FUNCTION LOAD) the first time a server answers that it lacks it:
// a new server, a promoted replica that never had it, a node added to a
// Cluster, after FUNCTION FLUSH. Redis runs the function atomically, so
// concurrent callers on one key are serialized without WATCH, transactions
// or retries, and a hot key is limited, never failed. The library is an
// exact translation of [engine.Params.Step], and gives its decisions bit
// for bit. Its name carries a hash of its source, so that processes of
// two versions, during a rolling deploy, each call their own library.
//
// The store needs Redis 7.0 or Valkey 7.2 or later, which have Functions;
// on an older server every decision fails with an error wrapping
// [sluice.ErrUnsupported].
//
// Reservations (Reserve, and Wait, which books its turn with one), the
// cancels that give them back, partial grants (AllowAtMost), exhausts
// (Exhaust) and the charge or refund that settles a request's actual cost
// (Settle: VerbCharge, VerbRefund) are one call each too: a reservation
// books its instant and records its cost in the key at once, so waiters
// on one key, in any process, are served in the order Redis booked them.
//
// The concurrency limit ([sluice.NewConcurrencyLimit]) keeps a key's live
// leases in its value, at most MaxEntries, with the latest expiry it
// handed out, and its line of waiters, served in the order they joined
// it, with the latest ticket it handed out. Taking a lease (VerbAllow),
// releasing it (VerbCancel), extending it (VerbExtend) and leaving the
// line (VerbLeave) are one call each, alone or in a group (but for
// leaving). A lease's identity is its expiry, Decision.At, an instant on
// the clock the function decided by: any process releases or extends the
// lease by passing it back unchanged. A denied acquisition with a
// patience (Op.MaxDelay) waits in line: its Decision.At is its ticket,
// which its next try and its leaving pass back as Op.At. The key lives
// until its last lease's expiry and its last waiter's deadline.
//
// Waiters for a lease ([sluice.Limiter.Acquire], [sluice.Group.Acquire])
// sleep until a release, in any process: the function that releases a
// lease, takes a waiter out of the line or serves one with room left,
// whose successor may now be first (engine.Params.Frees), publishes it
// (SPUBLISH) in the same call, on a sharded channel named as the key's
// Redis name, and [Store.WatchReleases] subscribes to it (SSUBSCRIBE),
// sharing a connection per server, or per slot in a Cluster. From one
// store's Release to the lease of a waiter in another, on a local Redis:
// a median of 0.16 ms and a p99 of 0.25 ms, against 10.5 ms for a
// waiter that asks every 10 ms (BenchmarkLeaseHandoff). [Store.Close]
// ends the subscriptions.
//
// Penalties ([sluice.WithPenalty]) and counted denials
// ([sluice.WithCountDenied]) run in the same call as the algorithm.
// A blocked key's value carries the block's end, and its TTL covers the
// block.
//
// # Groups
//
// [Store.ApplyGroup] decides a group of limits ([sluice.NewGroup]) in one
// function call over every key of the group, exactly as
// [engine.DecideGroup]: recorded in every limit or in none, in one round
// trip whatever the number of limits. In a Cluster the keys of a group
// must be in one slot: start them with the same hash tag, as in
// "{api:KEY}:second" and "{api:KEY}:day" (see [Store.Key]). A group whose
// keys lie in different slots is refused with an error wrapping
// [ErrCrossSlot], never decided one key at a time; a global cap's key,
// which cannot share every client's slot, is decided in a Cluster as a call
// of its own.
//
// # Clocks
//
// By default a decision's time is the Redis server's clock (TIME, to the
// microsecond), read inside the function, so that hosts whose clocks disagree
// still share one timeline; the limiter's own clock is ignored.
// [WithCallerClock] uses the time the limiter passes instead (its Clock):
// for tests with simulated time, and for processes whose clocks are known
// to agree within a given skew. A booked reservation's Decision.At is an
// instant on the clock the function decided by: pass it back unchanged, as
// [sluice.Reservation] does, and its cancel is compared on the same clock.
//
// # Keys and expiry
//
// A sluice key is one Redis string named prefix + "{" + key + "}", holding
// the state packed in binary, read with one GET and written with its TTL by
// one SET. The braces are a Cluster hash tag, so everything a decision
// touches lives in one slot. The key expires when its state is fresh again
// (Decision.ResetAfter after the decision, rounded up to milliseconds), so
// Redis holds only keys in use, and a decision that leaves a key fresh
// deletes it. A key holding a reservation booked ahead is fresh only after
// that instant, and lives until then. In caller-clock mode the expiry is later by the tolerated
// clock skew, so that a caller whose clock runs behind still finds the
// state.
//
// # Limits
//
// Lua numbers are doubles, exact for integers up to 2^53: the library keeps
// times as seconds and nanoseconds, but the spans an algorithm computes
// with must be shorter than 2^53 ns (about 104 days). Apply returns an
// error wrapping [sluice.ErrUnsupported] for Params whose longest span is
// longer: the window (twice it for the sliding counter), a lease's time to
// live, GCRA's burst times its emission interval, or the time a full
// bucket takes to drain or refill. Calendar windows
// ([engine.Params.Windows]) are the exception: they compute with times
// alone, as seconds and nanoseconds, so a year's window works.
//
// A calendar window counts in the window, among the three the caller
// computed around its clock, that holds the time of the decision. On the
// server's clock, a call whose windows do not hold the server's time is
// refused with an error wrapping [sluice.ErrTimeOutOfRange] that names it,
// and records nothing, for a group too: the store never falls back on the
// caller's clock. The callers' clocks must stay close enough to the
// server's for its time to lie in their windows.
//
// A sliding log or concurrency limit decision reads and rewrites all of
// the key's entries or leases (at most MaxEntries).
//
// # Clients
//
// The store takes any go-redis client, and the client decides how it
// finds the server:
//
//   - one server: redis.NewClient, with its address;
//   - Redis Cluster: redis.NewClusterClient, with the addresses of some
//     nodes (or redis.NewUniversalClient with IsClusterMode, or with two
//     addresses or more, which builds the same Cluster client);
//   - Sentinel: redis.NewFailoverClient, with the master's name and the
//     Sentinels' addresses (or redis.NewUniversalClient with MasterName).
//
// redis.NewUniversalClient with a single address and neither IsClusterMode
// nor MasterName builds a plain client: against a Cluster, every decision
// on a slot of another node fails with MOVED.
//
// # Failover
//
// On a Cluster, go-redis learns the slots' layout again when a node
// answers MOVED or ASK, or every ClusterStateReloadInterval (60 s by
// default); a master that dies answers neither. The store asks a Cluster
// client to reload the layout when a decision cannot reach its node (at
// most ten times a second), so decisions on a dead master's slots fail
// only until its replica takes over: within the cluster's own failover
// time (cluster-node-timeout and about a second), not until the next
// periodic reload. A Sentinel client asks the Sentinels for the new master
// by itself.
//
// # What Redis can lose
//
// Redis replicates asynchronously: a master that dies takes with it the
// decisions its replicas had not received (the replication lag, usually
// under a millisecond on a healthy network, more under load), and the
// replica that takes over admits those requests again, at most each key's
// admissions in that window. [WithReplicaAcks] closes that window: a
// decision returns only once replicas acknowledge it, and fails with
// [ErrNotReplicated] (while standing on the master) when they do not in
// time. A Redis without persistence (appendonly) that restarts, and is not
// replaced by a replica, forgets every key: every limit starts afresh.
//
// Leases are decisions too. A lease that the dead master had not
// replicated is unknown to the new one, which grants its slot again:
// until its holder learns it (its release or extension fails with
// [sluice.ErrNotHeld]), a key is held by at most its limit plus its
// leases granted in the replication window and still held. A release not
// replicated is lost the other way: the new master holds the slot until
// the lease expires. With WithReplicaAcks a lease returned without an
// error survives the failover, and one that comes with [ErrNotReplicated]
// is not to be counted on (give it back). A release's notice reaches the
// subscribers connected when it is published: a waiter whose subscription
// was lost (the master killed) is woken when it is confirmed again, on
// the new master, and asks again.
// docs/redis.md in the repository says what to configure.
//
// # Batches
//
// [Store.ApplyBatch] sends many decisions in one round trip, as a pipeline
// of function calls: each is atomic on its key and gives Apply's decision,
// requests on one key run in the order given, and the batch as a whole is
// not a transaction.
//
// # Errors
//
// Errors from Redis are returned, wrapped, never hidden: a limiter built on
// this store fails when Redis is unreachable, and what to do then (deny or
// allow) is the caller's choice. Set the client's ContextTimeoutEnabled so
// that a context's deadline bounds every call. go-redis sends a command
// again when its connection fails (MaxRetries, 3 by default), so a
// decision whose reply was lost with its connection may be recorded twice;
// set MaxRetries to -1 where a decision must be recorded at most once.
package redisstore
