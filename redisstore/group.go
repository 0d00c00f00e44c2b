package redisstore

import (
	"context"
	"fmt"
	"strconv"

	"github.com/redis/go-redis/v9"

	"github.com/sluice-go/sluice"
	"github.com/sluice-go/sluice/engine"
)

// ApplyGroup decides ops as one ([engine.DecideGroup]) in one function call
// over every key of the group, atomically, fills each with each limit's
// decision and returns the group's. It implements [engine.GroupStore].
//
// The function runs the group decision and each limit's algorithm exactly
// as the Go code does, bit for bit: no other decision touches any of the
// keys between its first read and its last write, a request that one
// limit denies is recorded in none, and one round trip decides the group
// whatever the number of limits. In server-clock mode the function reads
// the server's clock once, for the whole group (every op's Now is
// ignored); a calendar window among the limits whose windows do not hold
// the server's time refuses the whole group, recording nothing, with an
// error wrapping [sluice.ErrTimeOutOfRange] (as one that does not hold
// the caller's time does, before Redis is contacted).
//
// Ops are checked with [engine.CheckGroup] before Redis is contacted, as
// are the spans of their Params (as for Apply). On a Cluster client every
// key must hash to one slot, which only keys with a common hash tag do
// (see [Store.Key]): name a client's limits "{api:KEY}:second" and
// "{api:KEY}:day". A group whose keys lie in different slots (on a Ring,
// that have different hash tags) is refused with an error wrapping
// [ErrCrossSlot], before Redis is contacted: it is never decided one key
// at a time. A key holding another algorithm's live state refuses the
// whole group, with an error wrapping [sluice.ErrKeyConflict], before any
// limit is decided.
//
// With [WithReplicaAcks], a group that may record (every verb but Check)
// is followed by one WAIT on the same connection, and its decisions come
// with an error wrapping [ErrNotReplicated] if the replicas fell short.
func (s *Store) ApplyGroup(ctx context.Context, ops []engine.GroupOp, each []engine.Decision) (engine.Decision, error) {
	if err := engine.CheckGroup(ops, s.callerClock); err != nil {
		return engine.Decision{}, err
	}
	if len(each) != len(ops) {
		return engine.Decision{}, fmt.Errorf("%w: redisstore: %d decisions for %d limits", sluice.ErrInvalidConfig, len(each), len(ops))
	}
	names := make([]string, len(ops))
	for i, g := range ops {
		if err := checkSpan(g.Params); err != nil {
			return engine.Decision{}, err
		}
		names[i] = s.Key(g.Key)
	}
	if err := s.sameSlot(ops, names); err != nil {
		return engine.Decision{}, err
	}
	args, verb := s.groupArgs(ops), ops[0].Op.Verb
	var (
		reply any
		err   error
		wait  *redis.IntCmd
	)
	if s.acks.records(verb) {
		reply, wait, err = s.runAcked(ctx, names, lib.group, args)
	} else {
		reply, err = s.call(ctx, lib.group, names, args)
	}
	if err != nil {
		return engine.Decision{}, scriptError(verb, groupName(ops), err)
	}
	d, err := decodeGroup(reply, ops, each)
	if err == nil && wait != nil && recorded(ops, d, each) {
		err = s.acks.verdict(groupName(ops), wait)
	}
	return d, err
}

// recorded reports whether the group decision d may have recorded on any
// of its keys what its acknowledgements are judged on: an admission,
// cancel (release) or extension that records on one, or a limit's denial
// that records (a penalty, a counted denial; not a waiter's place in a
// concurrency limit's line, see judged). A limit that would have admitted
// on its own, in a group that denied, recorded nothing
// ([engine.DecideGroup]); a cancel or an extension runs on each limit by
// its own rule, whatever the group's decision.
func recorded(ops []engine.GroupOp, d engine.Decision, each []engine.Decision) bool {
	for i, o := range ops {
		counts := d.Allowed || !each[i].Allowed || o.Op.Verb == engine.VerbCancel || o.Op.Verb == engine.VerbExtend
		if counts && judged(o.Params, o.Op.Verb, &each[i]) {
			return true
		}
	}
	return false
}

// keyName names key in errors.
func keyName(key string) string { return "key " + strconv.Quote(key) }

// groupName names the keys of a group in errors.
func groupName(ops []engine.GroupOp) string {
	keys := make([]string, len(ops))
	for i, g := range ops {
		keys[i] = g.Key
	}
	return fmt.Sprintf("group %q", keys)
}
