package redisstore

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluice-go/sluice"
	"github.com/sluice-go/sluice/engine"
)

// ErrNotReplicated reports a decision that fewer replicas acknowledged, in
// the time [WithReplicaAcks] allows, than it asks for, or whose
// acknowledgement was lost with its connection. The decision was made
// and recorded on the master, and is returned along with the error: it
// stands, unless the master fails before its replicas have it, and it is
// the caller's choice whether to act on it.
var ErrNotReplicated = errors.New("redisstore: decision not acknowledged by enough replicas")

// acks is what [WithReplicaAcks] asks for; n is 0 without it.
type acks struct {
	n        int
	timeout  time.Duration // whole milliseconds, as WAIT takes it
	waitArgs []any         // WAIT n timeout, built once: commands only read their arguments
}

// WithReplicaAcks makes every decision that may record (every verb but
// Check: an admission, a fill-up, a reservation, the cancel that gives one
// back, a partial grant) wait until at least n replicas of its master have
// acknowledged it, for at most timeout, rounded up to whole milliseconds.
//
// Redis replicates asynchronously: a master that dies takes with it the
// decisions its replicas had not received yet, and the replica that takes
// over admits those requests again. With this option, a decision returned
// without an error is on n replicas, and survives the failover of its
// master to any of them. The store sends Redis's WAIT in the same round
// trip as the function call, on the same connection (on a Cluster client,
// the connection to the master that serves the key), so a decision costs
// one round trip plus the replicas' acknowledgement.
//
// A decision that fewer replicas acknowledge in time is returned with an
// error wrapping [ErrNotReplicated]: it was recorded on the master all the
// same. A decision that records nothing (a check, a denial without a
// penalty or counted denials, a group denied) comes without that error:
// it has nothing to lose. Nor does a concurrency limit's denial that
// takes or keeps a waiter's place in the key's line: a place lost with
// its master costs the waiter its turn, never a slot beyond the limit,
// and a waiter, unlike a holder, cannot act on a denial that might not
// stand. timeout must be shorter than the client's ReadTimeout, which
// bounds the wait for the reply.
func WithReplicaAcks(n int, timeout time.Duration) Option {
	return optionFunc(func(s *Store) error {
		ms := timeout.Truncate(time.Millisecond)
		if ms < timeout {
			ms += time.Millisecond // negative if it overflowed
		}
		if n < 1 || ms < time.Millisecond {
			return fmt.Errorf("%w: redisstore: replica acknowledgements need n >= 1 and a timeout from 1ms, not %d and %v",
				sluice.ErrInvalidConfig, n, timeout)
		}
		s.acks = acks{n: n, timeout: ms, waitArgs: []any{"wait", n, ms.Milliseconds()}}
		return nil
	})
}

// check reports an option of replica acknowledgements that client cannot
// honour: on a Ring, whose shards have no common connection for
// WAIT, or with a timeout that the client's ReadTimeout cuts short.
func (a acks) check(client redis.UniversalClient) error {
	if a.n == 0 {
		return nil
	}
	var read time.Duration
	switch c := client.(type) {
	case *redis.Ring:
		return fmt.Errorf("%w: redisstore: replica acknowledgements on a Ring client", sluice.ErrUnsupported)
	case *redis.Client:
		read = c.Options().ReadTimeout
	case *redis.ClusterClient:
		read = c.Options().ReadTimeout
	}
	if read > 0 && a.timeout >= read {
		return fmt.Errorf("%w: redisstore: replica acknowledgement timeout %v is not shorter than the client's ReadTimeout %v",
			sluice.ErrInvalidConfig, a.timeout, read)
	}
	return nil
}

// records reports whether a decision of verb may record, and so waits for
// acknowledgements when the store asks for them: whether it does is known
// only from its reply, in the same round trip as the WAIT.
func (a acks) records(verb engine.Verb) bool {
	return a.n > 0 && verb != engine.VerbCheck
}

// wait adds WAIT to pipe, and returns its command.
func (a acks) wait(ctx context.Context, pipe redis.Pipeliner) *redis.IntCmd {
	cmd := redis.NewIntCmd(ctx, a.waitArgs...)
	_ = pipe.Process(ctx, cmd) // queued: the error comes with Exec
	return cmd
}

// verdict returns nil if the WAIT that followed a recorded decision on
// what (a key, a group's keys) counted enough replicas, and else an error
// wrapping ErrNotReplicated. A decision that recorded nothing (a denial)
// has nothing to lose and is not given a verdict: the WAIT counts the
// connection's earlier writes, other callers' decisions.
func (a acks) verdict(what string, wait *redis.IntCmd) error {
	n, err := wait.Result()
	switch {
	case err != nil:
		return fmt.Errorf("%w: %s: waiting for replicas: %w", ErrNotReplicated, what, err)
	case n < int64(a.n):
		return fmt.Errorf("%w: %s: %d of %d replicas acknowledged within %v", ErrNotReplicated, what, n, a.n, a.timeout)
	}
	return nil
}

// applyAcked is Apply for a decision that waits for acknowledgements.
func (s *Store) applyAcked(ctx context.Context, key string, p *engine.Params, op engine.Op) (engine.Decision, error) {
	reply, wait, err := s.runAcked(ctx, []string{s.Key(key)}, lib.apply, s.args(p, op))
	d, err := outcome(key, p, op.Verb, reply, err)
	if err == nil && judged(p, op.Verb, &d) {
		err = s.acks.verdict(keyName(key), wait)
	}
	return d, err
}

// judged reports whether a decision d on verb under p is given a verdict
// on its acknowledgements: whether it recorded ([engine.Params.Records]),
// unless it is a concurrency limit's denial, which records only a
// waiter's place in line (see [WithReplicaAcks]).
func judged(p *engine.Params, verb engine.Verb, d *engine.Decision) bool {
	inLine := p.Kind == engine.KindConcurrency && verb == engine.VerbAllow && !d.Allowed
	return !inLine && p.Records(verb, d)
}

// runAcked runs fn of the library on the Redis keys names, which share a
// slot, and WAIT after it, in one pipeline on one connection to the master
// that serves them. It returns the function's reply or error, and the
// WAIT.
func (s *Store) runAcked(ctx context.Context, names []string, fn string, args string) (reply any, wait *redis.IntCmd, err error) {
	// A call refused without running (the library missing on the master,
	// MOVED after the slot moved) is sent again, at most twice.
	for attempt := 0; attempt < 3; attempt++ {
		var node redis.UniversalClient
		if node, err = s.master(ctx, names[0]); err != nil {
			break
		}
		pipe := node.Pipeline()
		run := pipe.FCall(ctx, fn, names, args)
		wait = s.acks.wait(ctx, pipe)
		_, _ = pipe.Exec(ctx) // the first command's error: each is read from its command
		reply, err = run.Result()
		if err != nil && attempt < 2 && s.refused(ctx, node, names[0], err) {
			continue
		}
		break
	}
	s.reload.failed(err)
	return reply, wait, err
}

// master returns the client whose pipelines run on one connection to the
// master that serves the Redis key name: on a Cluster client, that node's
// client; on a Ring, the shard's; otherwise the store's client itself.
func (s *Store) master(ctx context.Context, name string) (redis.UniversalClient, error) {
	switch c := s.client.(type) {
	case *redis.ClusterClient:
		return c.MasterForKey(ctx, name)
	case *redis.Ring:
		return c.GetShardClientForKey(name)
	}
	return s.client, nil
}

// refused reports whether a call on node failed without running in a way
// that sending it again may cure, having done what it takes: loaded the
// library where it was missing, or waited for the new layout after MOVED.
func (s *Store) refused(ctx context.Context, node redis.UniversalClient, name string, err error) bool {
	if missing(err) {
		return lib.load(ctx, node) == nil
	}
	return s.moved(ctx, name, err)
}

// moved reports whether err is a MOVED reply of a Cluster node (the slot
// of the Redis key name has moved, as after a failover), once the client's
// reloaded layout names the node that MOVED points to as the master of
// that slot. It waits for that at most a second.
func (s *Store) moved(ctx context.Context, name string, err error) bool {
	c, ok := s.client.(*redis.ClusterClient)
	if !ok || !redis.HasErrorPrefix(err, "MOVED") {
		return false
	}
	fields := strings.Fields(err.Error())
	addr := fields[len(fields)-1] // MOVED slot host:port
	c.ReloadState(ctx)
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for deadline := time.Now().Add(time.Second); time.Now().Before(deadline); {
		if m, err := c.MasterForKey(ctx, name); err == nil && m.Options().Addr == addr {
			return true
		}
		select {
		case <-ctx.Done():
			return false
		case <-tick.C:
		}
	}
	return false
}

// pipelineAcked sends calls, as pipeline does, each master's followed by
// one WAIT on the same connection: on a Cluster client, one pipeline for
// each master that serves the calls' keys, all at once. Each call's reply
// or error is in its command, and its master's WAIT in its wait.
func (s *Store) pipelineAcked(ctx context.Context, reqs []Request, calls []call) {
	groups := make(map[redis.UniversalClient][]int, 1) // a master's calls, by index
	for i := range calls {
		node, err := s.master(ctx, s.Key(reqs[calls[i].req].Key))
		if err != nil {
			cmd := redis.NewCmd(ctx)
			cmd.SetErr(err)
			calls[i].cmd, calls[i].wait = cmd, nil
			continue
		}
		groups[node] = append(groups[node], i)
	}
	send := func(node redis.UniversalClient, idx []int) {
		pipe := node.Pipeline()
		for _, i := range idx {
			r := reqs[calls[i].req]
			calls[i].cmd = pipe.FCall(ctx, lib.apply, []string{s.Key(r.Key)}, s.args(r.Params, r.Op))
		}
		wait := s.acks.wait(ctx, pipe)
		_, _ = pipe.Exec(ctx) // the first command's error: each is read from its command
		for _, i := range idx {
			calls[i].wait = wait
		}
	}
	if len(groups) == 1 {
		for node, idx := range groups {
			send(node, idx)
		}
		return
	}
	var wg sync.WaitGroup
	for node, idx := range groups {
		wg.Go(func() { send(node, idx) })
	}
	wg.Wait()
}
