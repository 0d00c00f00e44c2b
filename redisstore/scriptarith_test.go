package redisstore

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/big"
	"math/rand/v2"
	"testing"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

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
	// The library's files up to the interval refill's, and a function
	// that evaluates the helpers on each case packed in its arguments.
	arith := newLibrary("sluice_arith", "prelude.lua", "time.lua", "arith.lua", "intervalrefill.lua")
	arith.source += `
redis.register_function(LIBRARY .. '_eval', function(_, args)
  bind()
  local out = {}
  for i = 1, #args do
    local s, n, k, d = struct.unpack('<dddd', args[i])
    local rs, rn = taddTimes(s, n, k, d)
    out[#out + 1] = struct.pack('<ddd', rs, rn, tmod(s, n, d))
  end
  return table.concat(out)
end)
`
	require.NoError(t, arith.load(t.Context(), c))
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
	reply, err := c.FCall(t.Context(), arith.name+"_eval", nil, args...).Text()
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

// TestLibraryLoads loads the library into a real Redis, which compiles it
// (Lua bounds a chunk's locals at 200 and a function's upvalues at 60),
// twice, as stores that find it missing at once do (the second finds it
// there), and finds its two functions under its versioned name.
func TestLibraryLoads(t *testing.T) {
	c := redis.NewClient(&redis.Options{Addr: testserver.StartRedis(t).Addr})
	t.Cleanup(func() { c.Close() })
	for range 2 {
		require.NoError(t, lib.load(t.Context(), c))
	}
	libs, err := c.FunctionList(t.Context(), redis.FunctionListQuery{LibraryNamePattern: "sluice_*"}).Result()
	require.NoError(t, err)
	require.Len(t, libs, 1)
	require.Equal(t, lib.name, libs[0].Name)
	var names []string
	for _, f := range libs[0].Functions {
		names = append(names, f.Name)
	}
	require.ElementsMatch(t, []string{lib.apply, lib.group}, names)
}

// TestScriptRefillCountsAreExact runs the interval refill's counts of
// whole intervals on a real Redis against Go's integers: refillsInMaxSpan
// (Go's float64(maxSpan / interval), a quotient beyond 2^53 for intervals
// below 2^7 ns) and refillPoint's refills over 2^53 ns or more, which a
// state in debt (a charge may hold 2^60 ns of refills) needs counted to the
// last, as Go's float64 of its int64 count. The traces reach them only at
// the extreme intervals, and rarely.
func TestScriptRefillCountsAreExact(t *testing.T) {
	c := redis.NewClient(&redis.Options{Addr: testserver.StartRedis(t).Addr})
	t.Cleanup(func() { c.Close() })
	refills := newLibrary("sluice_refills", "prelude.lua", "time.lua", "arith.lua", "intervalrefill.lua")
	refills.source += `
redis.register_function(LIBRARY .. '_eval', function(_, args)
  bind()
  local out = {}
  for i = 1, #args do
    local d, a, used, ls, ln, ts, tn = struct.unpack('<ddddddd', args[i])
    interval, amount, limit, slack = d, a, 1, 0
    local u, rs, rn = refillPoint(used, ls, ln, ts, tn)
    out[#out + 1] = struct.pack('<dddd', refillsInMaxSpan(), u, rs, rn)
  end
  return table.concat(out)
end)
`
	require.NoError(t, refills.load(t.Context(), c))
	rng := rand.New(rand.NewPCG(3, 4))
	const maxTime, maxSpan = 1 << 62, 1 << 60
	intervals := []int64{1, 2, 3, 7, 127, 128, 129, 999999999, 1e9 + 1, 1<<52 + 1, 1<<53 - 1}
	for range 40 {
		intervals = append(intervals, 1+rng.Int64N(1<<rng.IntN(54)))
	}
	type result struct {
		inMaxSpan, used float64
		sec, nsec       int64
	}
	var cases []string
	var args []any
	var want []result
	for _, d := range intervals {
		for range 40 {
			amount := []float64{1, 0.3, 2.5, rng.Float64() * 10}[rng.IntN(4)]
			last := rng.Int64N(maxTime)
			now := last + rng.Int64N(maxTime+maxSpan-last+1)
			if rng.IntN(4) > 0 {
				now = min(last+1<<53+rng.Int64N(1<<60), maxTime+maxSpan) // the count beyond 2^53 ns
			}
			k := (now - last) / d
			// In use: as much as a charge leaves at most, around what k
			// refills free, or anything.
			var used float64
			switch rng.IntN(3) {
			case 0:
				used = float64(maxSpan/d) * amount
			case 1:
				used = float64(k) * amount * (1 + (rng.Float64()-0.5)*0x1p-40)
			default:
				used = rng.Float64() * float64(maxSpan/d) * amount
			}
			// Go's refillPoint, with no slack.
			u, l := used, last
			if u > 0 && now > l {
				u = max(u-float64(k)*amount, 0)
				l += k * d
			}
			if u <= 0 {
				u, l = 0, now
			}
			b := make([]byte, 0, 56)
			for _, x := range []float64{float64(d), amount, used, float64(last / 1e9), float64(last % 1e9), float64(now / 1e9), float64(now % 1e9)} {
				b = binary.LittleEndian.AppendUint64(b, math.Float64bits(x))
			}
			cases = append(cases, fmt.Sprintf("interval %d, amount %v, %v in use from %d to %d", d, amount, used, last, now))
			args = append(args, string(b))
			want = append(want, result{float64(maxSpan / d), u, l / 1e9, l % 1e9})
		}
	}
	reply, err := c.FCall(t.Context(), refills.name+"_eval", nil, args...).Text()
	require.NoError(t, err)
	require.Len(t, reply, 32*len(want))
	for i := range want {
		x := func(j int) float64 {
			return math.Float64frombits(binary.LittleEndian.Uint64([]byte(reply[32*i+8*j:])))
		}
		got := result{x(0), x(1), int64(x(2)), int64(x(3))}
		require.Equal(t, want[i], got, cases[i])
		require.Equal(t, math.Float64bits(want[i].used), math.Float64bits(got.used), cases[i])
	}
}
