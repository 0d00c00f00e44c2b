package redisstore_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sluice-go/sluice/engine"
	"github.com/sluice-go/sluice/internal/testserver"
	"github.com/sluice-go/sluice/redisstore"
)

// libraries returns the names of the sluice libraries the server at addr
// holds.
func libraries(t *testing.T, addr string) []string {
	t.Helper()
	reply, err := testserver.Do(addr, "FUNCTION", "LIST", "LIBRARYNAME", "sluice_*")
	require.NoError(t, err)
	var names []string
	for _, lib := range reply.([]any) {
		fields := lib.([]any)
		for i := 0; i+1 < len(fields); i += 2 {
			if fields[i] == "library_name" {
				names = append(names, fields[i+1].(string))
			}
		}
	}
	return names
}

// decideEveryWay runs, on st, each way a decision reaches Redis on the
// keys named after tag, which share a slot: an Apply, a group and a batch.
func decideEveryWay(t *testing.T, st *redisstore.Store, tag string) {
	t.Helper()
	ctx := t.Context()
	p := engine.Params{Kind: engine.KindGCRA, Limit: 1e6, Interval: int64(time.Microsecond)}
	d, err := st.Apply(ctx, "{"+tag+"}:one", &p, allow(1, 0))
	require.NoError(t, err)
	require.True(t, d.Allowed)
	ops := group(&p, engine.VerbAllow, 1, 0, "{"+tag+"}:a", "{"+tag+"}:b")
	d, err = st.ApplyGroup(ctx, ops, make([]engine.Decision, len(ops)))
	require.NoError(t, err)
	require.True(t, d.Allowed)
	for _, r := range st.ApplyBatch(ctx, []redisstore.Request{
		{Key: "{" + tag + "}:x", Params: &p, Op: allow(1, 0)},
		{Key: "{" + tag + "}:y", Params: &p, Op: allow(1, 0)},
	}) {
		require.NoError(t, r.Err)
		require.True(t, r.Decision.Allowed)
	}
}

// loadModes are the ways a store sends its calls that load the library
// apart: through the client, and to the master itself for replica
// acknowledgements.
var loadModes = []struct {
	name string
	opts []redisstore.Option
}{
	{"Plain", nil},
	{"ReplicaAcks", []redisstore.Option{redisstore.WithReplicaAcks(1, ackTimeout)}},
}

// TestEveryWayLoadsTheLibraryWhereMissing decides, each way a decision
// reaches Redis (with and without replica acknowledgements, which send
// their calls to the master themselves), on a server that holds no
// library, as a fresh server or one after FUNCTION FLUSH does: each loads
// the library and decides.
func TestEveryWayLoadsTheLibraryWhereMissing(t *testing.T) {
	nodes := testserver.StartRedisWithReplicas(t, 1)
	c := newClient(t, nodes[0].Addr)
	for _, mode := range loadModes {
		t.Run(mode.name, func(t *testing.T) {
			st := newStore(t, c, mode.opts...)
			for round := range 3 {
				require.NoError(t, c.FunctionFlush(t.Context()).Err())
				decideEveryWay(t, st, fmt.Sprint("round", round))
			}
			require.Len(t, libraries(t, nodes[0].Addr), 1)
		})
	}
}

// TestFunctionFlushMidRun flushes the server's functions 20 times while 8
// callers decide, each flush after the callers made progress since the
// last: a call that finds the library missing did not run, so every
// decision that succeeds is recorded exactly once, and one that fails
// (its retries each found the library flushed again) recorded nothing and
// says the function was not found. Once the flushes stop, the store
// decides again at once.
func TestFunctionFlushMidRun(t *testing.T) {
	addr := testserver.StartRedis(t).Addr
	c := newClient(t, addr)
	st := newStore(t, c, redisstore.WithCallerClock(testSkew))
	p := engine.Params{Kind: engine.KindFixedWindow, Limit: 1e6, Interval: int64(time.Hour)}
	const callers, each, flushes, between = 8, 200, 20, 40
	progress := make(chan struct{}, 2*callers*each) // never blocks a caller
	var succeeded, failed, flushed atomic.Int64
	done := make(chan struct{})
	var flusher sync.WaitGroup
	flusher.Go(func() {
		for range flushes {
			for range between {
				select {
				case <-progress:
				case <-done: // the callers finished first
					return
				}
			}
			if !assert.NoError(t, c.FunctionFlush(context.Background()).Err()) {
				return
			}
			flushed.Add(1)
		}
	})
	var wg sync.WaitGroup
	for range callers {
		wg.Go(func() {
			for range each {
				batch := st.ApplyBatch(t.Context(), []redisstore.Request{{Key: "k", Params: &p, Op: allow(1, base)}})
				_, err := st.Apply(t.Context(), "k", &p, allow(1, base))
				for _, err := range []error{batch[0].Err, err} {
					if err != nil {
						assert.ErrorContains(t, err, "Function not found") // from a goroutine: no FailNow
						failed.Add(1)
						continue
					}
					succeeded.Add(1)
					progress <- struct{}{}
				}
			}
		})
	}
	wg.Wait()
	close(done)
	flusher.Wait()
	t.Logf("%d decisions succeeded, %d found the library flushed on every try", succeeded.Load(), failed.Load())
	require.Equal(t, int64(flushes), flushed.Load())
	require.Less(t, failed.Load(), succeeded.Load())
	d, err := st.Apply(t.Context(), "k", &p, engine.Op{Verb: engine.VerbCheck, Now: base})
	require.NoError(t, err, "decides again once the flushes stop")
	require.Equal(t, float64(succeeded.Load()), d.Used, "every decision that succeeded recorded once, no other")
}

// TestClusterNodeWithoutTheLibrary flushes the functions of one master of
// a Cluster, as a node added to the cluster or a replica promoted that
// never had them would lack them: decisions on its keys load the library
// there, each way a decision reaches Redis, with and without replica
// acknowledgements, and the other masters' keys are decided as before.
func TestClusterNodeWithoutTheLibrary(t *testing.T) {
	cluster := testserver.StartRedisClusterWithReplicas(t)
	c := redis.NewClusterClient(&redis.ClusterOptions{Addrs: cluster.Addrs(), ContextTimeoutEnabled: true})
	t.Cleanup(func() { c.Close() })
	for _, mode := range loadModes {
		t.Run(mode.name, func(t *testing.T) {
			st := newStore(t, c, mode.opts...)
			// A tag on each master.
			tags := map[*testserver.Redis]string{}
			for i := 0; len(tags) < 3; i++ {
				tag := fmt.Sprint("t", i)
				tags[cluster.MasterOf(t, cluster.Slot(t, st.Key("{"+tag+"}:one")))] = tag
			}
			for _, tag := range tags {
				decideEveryWay(t, st, tag)
			}
			for m := range tags {
				_, err := testserver.Do(m.Addr, "FUNCTION", "FLUSH")
				require.NoError(t, err)
				require.Empty(t, libraries(t, m.Addr))
				for _, tag := range tags {
					decideEveryWay(t, st, tag)
				}
				require.Len(t, libraries(t, m.Addr), 1, "loaded again on %s", m.Addr)
			}
		})
	}
}

// TestOtherVersionsStay loads a library of another version, as a process
// of the previous release would during a rolling deploy: the store loads
// its own beside it, leaves it in place, and the other version's
// functions still decide.
func TestOtherVersionsStay(t *testing.T) {
	addr := testserver.StartRedis(t).Addr
	c := newClient(t, addr)
	require.NoError(t, c.FunctionFlush(t.Context()).Err())
	const other = "sluice_0000000000000000"
	_, err := testserver.Do(addr, "FUNCTION", "LOAD", "#!lua name="+other+"\n"+
		"redis.register_function('"+other+"_apply', function() return 'old' end)")
	require.NoError(t, err)

	st := newStore(t, c)
	decideEveryWay(t, st, "new")
	names := libraries(t, addr)
	require.Len(t, names, 2)
	require.Contains(t, names, other)
	reply, err := c.FCall(t.Context(), other+"_apply", []string{"k"}).Text()
	require.NoError(t, err)
	require.Equal(t, "old", reply)
	for _, name := range names {
		require.True(t, strings.HasPrefix(name, "sluice_"))
	}
}
