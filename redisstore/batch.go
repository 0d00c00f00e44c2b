package redisstore

import (
	"context"

	"github.com/redis/go-redis/v9"

	"github.com/sluice-go/sluice/engine"
)

// A Request is one decision of a batch: op on Key's state under Params.
type Request struct {
	Key    string
	Params *engine.Params
	Op     engine.Op
}

// A Result is the outcome of one Request: what [Store.Apply] would have
// returned for it.
type Result struct {
	Decision engine.Decision
	Err      error
}

// ApplyBatch runs reqs in one round trip, as a pipeline of function calls,
// and returns their results in the same order. Each decision is atomic on
// its key, exactly as [Store.Apply] makes it, and requests on one key run
// in the order given; the batch as a whole is not a transaction, and other
// clients' decisions may run between two of its requests.
//
// A request that Apply would refuse without contacting Redis (invalid
// Params or op) gets the same error and takes no part in the round trip. If
// the round trip fails, every request that was sent gets the error: as
// with Apply, such a decision may or may not have been recorded. On a
// Cluster client the pipeline is split by node, one round trip each.
//
// With [WithReplicaAcks], each master's part of the batch is followed by
// one WAIT on the same connection, and each request that records gets, if
// its master's replicas fell short, its decision and an error wrapping
// [ErrNotReplicated].
func (s *Store) ApplyBatch(ctx context.Context, reqs []Request) []Result {
	results := make([]Result, len(reqs))
	calls := make([]call, 0, len(reqs))
	for i, r := range reqs {
		d, err := s.check(r.Params, r.Op)
		if err != nil && !r.Params.Overflows(r.Op, err) {
			results[i] = Result{Decision: d, Err: err}
			continue
		}
		calls = append(calls, call{req: i, refused: err})
	}
	// A call that finds the library missing on its node (a new server, a
	// promoted replica that never had it, FUNCTION FLUSH) fails without
	// running: load it there, and send those requests again. With replica
	// acknowledgements, the batch goes to the masters the client's layout
	// names, and a slot that has moved answers MOVED without running: wait
	// for the new layout, and send those requests again. At most two such
	// rounds (MOVED, then the library missing on the new master). Requests
	// on one key keep their order: once a node lacks the library, every
	// later call on it fails until it is loaded again.
	for attempt := 0; len(calls) > 0; attempt++ {
		if s.acks.n > 0 {
			s.pipelineAcked(ctx, reqs, calls)
		} else {
			s.pipeline(ctx, reqs, calls)
		}
		var retry []call
		var done loads // made at the first library missing
		for _, c := range calls {
			r := reqs[c.req]
			reply, err := c.cmd.Result()
			if attempt < 2 && missing(err) {
				if done == nil {
					done = loads{}
				}
				if err = s.load(ctx, done, s.Key(r.Key), attempt > 0); err == nil {
					retry = append(retry, call{req: c.req, refused: c.refused})
					continue
				}
			}
			if attempt < 2 && err != nil && s.moved(ctx, s.Key(r.Key), err) {
				retry = append(retry, call{req: c.req, refused: c.refused})
				continue
			}
			s.reload.failed(err)
			d, err := outcome(r.Key, r.Params, r.Op.Verb, reply, err)
			if err == nil && s.acks.records(r.Op.Verb) && judged(r.Params, r.Op.Verb, &d) {
				err = s.acks.verdict(keyName(r.Key), c.wait)
			}
			if err == nil {
				err = c.refused
			}
			results[c.req] = Result{Decision: d, Err: err}
		}
		calls = retry
	}
	return results
}

// A call is a request sent in the pipeline: its index in the batch, the
// error that comes with its decision (a cost that overflows under a
// penalty), and once sent, its command and, with WithReplicaAcks, the WAIT
// that followed it.
type call struct {
	req     int
	refused error
	cmd     *redis.Cmd
	wait    *redis.IntCmd
}

// pipeline sends calls in one round trip. Each call's reply or error, the
// round trip's own included, is in its command.
func (s *Store) pipeline(ctx context.Context, reqs []Request, calls []call) {
	pipe := s.client.Pipeline()
	for i := range calls {
		r := reqs[calls[i].req]
		calls[i].cmd = pipe.FCall(ctx, lib.apply, []string{s.Key(r.Key)}, s.args(r.Params, r.Op))
	}
	_, _ = pipe.Exec(ctx) // the first command's error: each is read from its command
}
