package redisstore

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/big"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/sluice-go/sluice/engine"
	"github.com/sluice-go/sluice/internal/testserver"
)

// TestScriptTimeArithmeticIsExact runs the script's own time arithmetic
// on a real Redis against Go's integers: taddTimes (an instant plus k
// times d nanoseconds, the product beyond 2^53 either way) and tmod (an
// instant's remainder by d), for instants up to 2^62 ns and every size of
// d. The decisions that need them far ahead are rare in traces, so they
// are held to the exact result here, directly.
func TestScriptTimeArithmeticIsExact(t *testing.T) {
	c := redis.NewClient(&redis.Options{Addr: testserver.StartRedis(t).Addr})
	t.Cleanup(func() { c.Close() })
	parts := strings.Split(applySource, "\n-- @section ")
	sections := map[string]string{}
	for _, part := range parts[1:] {
		name, body, _ := strings.Cut(part, "\n")
		sections[name] = body
	}
	// The prelude, the helpers, and a main that evaluates them on each
	// case packed in ARGV[2], ARGV[3], ...
	script := redis.NewScript(parts[0] + sections["refills"] + sections["idiv"] + sections["mod"] + sections["intervalRefill"] + `
local out = {}
for i = 2, #ARGV do
  local s, n, k, d = struct.unpack('<dddd', ARGV[i])
  local rs, rn = taddTimes(s, n, k, d)
  out[#out + 1] = struct.pack('<ddd', rs, rn, tmod(s, n, d))
end
return table.concat(out)
`)
	st := &Store{callerClock: true}
	p := &engine.Params{Kind: engine.KindTokenBucket, Limit: 1, Interval: int64(time.Second), Amount: 1, IntervalRefill: true}
	rng := rand.New(rand.NewPCG(1, 2))
	const maxTime = 1 << 62
	intervals := []int64{1, 7, 999999999, 1e9, 1e9 + 1, 1<<51 + 7, 1<<53 - 1}
	for range 20 {
		intervals = append(intervals, 1+rng.Int64N(1<<rng.IntN(54)))
	}
	type result struct{ sec, nsec, mod int64 }
	var cases []string
	var args []any
	var want []result
	for _, d := range intervals {
		for range 40 {
			// k is a count the script holds exactly: below 2^53.
			at := rng.Int64N(maxTime)
			k := rng.Int64N(min(maxTime/d, 1<<53) + 1)
			if rng.IntN(2) == 0 {
				k = -rng.Int64N(min(at/d, 1<<53) + 1)
			}
			if rng.IntN(4) == 0 {
				k = rng.Int64N(1<<53/d+2) - 1 // around 2^53
			}
			sum := new(big.Int).Add(big.NewInt(at), new(big.Int).Mul(big.NewInt(k), big.NewInt(d)))
			sec, nsec := new(big.Int).DivMod(sum, big.NewInt(1e9), new(big.Int))
			b := make([]byte, 0, 32)
			for _, x := range []float64{float64(at / 1e9), float64(at % 1e9), float64(k), float64(d)} {
				b = binary.LittleEndian.AppendUint64(b, math.Float64bits(x))
			}
			cases = append(cases, fmt.Sprintf("%d + %d * %d", at, k, d))
			args = append(args, string(b))
			want = append(want, result{sec.Int64(), nsec.Int64(), at % d})
		}
	}
	argv := append([]any{st.args(p, engine.Op{Verb: engine.VerbAllow, Now: 1})}, args...)
	reply, err := script.Run(t.Context(), c, []string{"arith"}, argv...).Text()
	require.NoError(t, err)
	require.Len(t, reply, 24*len(want))
	for i := range want {
		x := func(j int) int64 {
			f := math.Float64frombits(binary.LittleEndian.Uint64([]byte(reply[24*i+8*j:])))
			require.Equal(t, math.Trunc(f), f, "%s: a whole number", cases[i])
			return int64(f)
		}
		require.Equal(t, want[i], result{x(0), x(1), x(2)}, cases[i])
	}
}

// TestEveryScriptCompiles loads every script the store can build into a
// real Redis, which compiles it: the single decision of each algorithm,
// and the group decision of every set of algorithms, the largest of which
// defines every function of apply.lua in one chunk (Lua bounds a chunk's
// locals at 200).
func TestEveryScriptCompiles(t *testing.T) {
	c := redis.NewClient(&redis.Options{Addr: testserver.StartRedis(t).Addr})
	t.Cleanup(func() { c.Close() })
	for i, sc := range scripts {
		require.NoError(t, sc.Load(t.Context(), c).Err(), "the single decision of algorithm %d", i)
	}
	var groups groupScripts
	for mask := 1; mask < 1<<numScripts; mask++ {
		require.NoError(t, groups.of(mask).Load(t.Context(), c).Err(), "the group decision of algorithms %06b", mask)
	}
}
