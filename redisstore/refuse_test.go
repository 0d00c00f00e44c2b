package redisstore

import (
	"fmt"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/sluice-go/sluice"
	"github.com/sluice-go/sluice/engine"
	"github.com/sluice-go/sluice/internal/testserver"
)

// TestScriptRefusesWhatItDoesNotKnow sends the scripts, past the Go
// side's checks, verbs they do not decide and algorithms they do not
// hold: each is refused with an error wrapping sluice.ErrUnsupported, and
// nothing is recorded, never decided as some other verb.
func TestScriptRefusesWhatItDoesNotKnow(t *testing.T) {
	c := redis.NewClient(&redis.Options{Addr: testserver.StartRedis(t).Addr})
	t.Cleanup(func() { c.Close() })
	st := &Store{client: c, callerClock: true}
	ctx := t.Context()
	gcra := &engine.Params{Kind: engine.KindGCRA, Limit: 5, Interval: int64(time.Second)}
	window := &engine.Params{Kind: engine.KindFixedWindow, Limit: 5, Interval: int64(time.Second)}
	const now = int64(1e18)

	for _, tt := range []struct {
		name   string
		script *redis.Script
		p      *engine.Params
		verb   engine.Verb
	}{
		{"VerbZero", scriptOf(gcra), gcra, 0},
		{"VerbSeven", scriptOf(gcra), gcra, 7},
		{"VerbTwoHundred", scriptOf(gcra), gcra, 200},
		{"AlgorithmOfAnotherScript", scriptOf(gcra), window, engine.VerbAllow},
		{"UnknownAlgorithm", scriptOf(gcra), &engine.Params{Kind: 9, Limit: 5, Interval: int64(time.Second)}, engine.VerbAllow},
	} {
		t.Run(tt.name, func(t *testing.T) {
			key := "refused:" + tt.name
			reply, err := tt.script.Run(ctx, c, []string{key}, st.args(tt.p, engine.Op{Verb: tt.verb, Cost: 1, Now: now})).Result()
			_, err = outcome(key, tt.p, tt.verb, reply, err)
			require.ErrorIs(t, err, sluice.ErrUnsupported)
			require.Zero(t, c.Exists(ctx, key).Val(), "nothing recorded")
		})
	}

	var groups groupScripts
	for _, verb := range []engine.Verb{0, engine.VerbFill, engine.VerbAtMost, 7} {
		t.Run(fmt.Sprintf("GroupOfVerb%d", verb), func(t *testing.T) {
			ops := []engine.GroupOp{
				{Key: "g1", Params: gcra, Op: engine.Op{Verb: verb, Cost: 1, Now: now}},
				{Key: "g2", Params: gcra, Op: engine.Op{Verb: verb, Cost: 1, Now: now}},
			}
			_, err := groups.of(1<<gcraScript).Run(ctx, c, []string{"g1", "g2"}, st.groupArgs(ops)).Result()
			require.Error(t, err)
			require.ErrorIs(t, scriptError(verb, groupName(ops), err), sluice.ErrUnsupported)
			require.Zero(t, c.Exists(ctx, "g1", "g2").Val(), "nothing recorded")
		})
	}
	t.Run("GroupWithAnAlgorithmOfAnotherScript", func(t *testing.T) {
		ops := []engine.GroupOp{
			{Key: "h1", Params: gcra, Op: engine.Op{Verb: engine.VerbAllow, Cost: 1, Now: now}},
			{Key: "h2", Params: window, Op: engine.Op{Verb: engine.VerbAllow, Cost: 1, Now: now}},
		}
		_, err := groups.of(1<<gcraScript).Run(ctx, c, []string{"h1", "h2"}, st.groupArgs(ops)).Result()
		require.ErrorIs(t, scriptError(engine.VerbAllow, groupName(ops), err), sluice.ErrUnsupported)
		require.Zero(t, c.Exists(ctx, "h1", "h2").Val(), "nothing recorded, not even the first limit's")
	})
	t.Run("InputOfAnotherLength", func(t *testing.T) {
		_, err := scriptOf(gcra).Run(ctx, c, []string{"i1", "i2"}, st.args(gcra, engine.Op{Verb: engine.VerbAllow, Cost: 1, Now: now})).Result()
		require.ErrorContains(t, err, "bytes of input for 2 keys")
		require.Zero(t, c.Exists(ctx, "i1", "i2").Val(), "nothing recorded")
	})
}
