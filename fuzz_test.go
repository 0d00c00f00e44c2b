package sluice_test

import (
	"encoding/binary"
	"errors"
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/sluice-go/sluice"

	"github.com/sluice-go/sluice/engine"
	"github.com/sluice-go/sluice/internal/guarantees"
	"github.com/sluice-go/sluice/internal/reference"
)

// The fuzz targets feed each algorithm's Params.Step arbitrary parameters
// and operations, and require: no panic, an error (wrapping the right
// sentinel, with the state unchanged) exactly for invalid input, and
// otherwise every check of the property tests: the invariants of every
// decision (no NaN, Used and Remaining within [0, Limit], durations not
// negative, RetryAfter zero iff admitted), states that never go back in
// time, and decisions that agree with the exact reference model within the
// tolerances of reference.Compare. The seed corpus is in
// testdata/fuzz/FuzzXxx. Run one target with
//
//	go test -run '^$' -fuzz '^FuzzGCRA$' -fuzztime 10s .

// fuzzStart is where a fuzzed trace's time begins: a realistic time.
var fuzzStart = time.Date(2026, 11, 21, 12, 0, 0, 123456789, time.UTC).UnixNano()

// opSize is how many bytes encode one fuzzed operation, and maxOps how
// many operations of an input are replayed: enough for any state to be
// reached, few enough that every input runs in milliseconds.
const (
	opSize = 6
	maxOps = 256
)

// fuzzSteps decodes ops and replays them against p.Step and the reference
// model. Each operation takes opSize bytes:
//
//	byte 0, bits 0-1: verb (allow, check, fill, reset), unless bits 4-5
//	                  name another
//	byte 0, bits 2-3: unit of the time step (1ns, Interval/64, Interval,
//	                  the time the whole limit takes to come back)
//	byte 0, bits 4-5: 0, or the verb: reserve, cancel, at most
//	byte 0, bits 6-7: a reservation's unit of MaxDelay (as for the time
//	                  step); a partial grant's multiple of the cost (1, 2,
//	                  4, 16); for a cancel, bit 6 names an instant one
//	                  nanosecond after the booked one, and bit 7 makes it
//	                  a reservation with any MaxDelay booked no earlier
//	                  than an instant (Op.At): the extra nanoseconds, in
//	                  units of Interval/64, after now
//	bytes 1-2:        the time step in that unit, a signed int16: negative
//	                  steps are a clock stepping back
//	byte 3:           the cost: k/8 for k < 128 (exact in float), else
//	                  (k-128)/100 of the limit (rounded in float); more than
//	                  the limit is an error but for fill and at most. For a
//	                  cancel, which of the input's booked reservations it
//	                  gives back (k modulo their number), with its cost
//	bytes 4-5:        extra nanoseconds added to the time step; for a
//	                  reservation, its MaxDelay in its unit instead (0xffff
//	                  is 2^60, any delay)
//
// A cancel before anything was booked names an instant the extra
// nanoseconds after now. The encoding of the first four verbs is the one
// the seed corpus was written in.
func fuzzSteps(t *testing.T, p engine.Params, ops []byte) {
	if err := p.Validate(); err != nil {
		requireRejected(t, p, err)
		return
	}
	c, err := newChecker(p, fmt.Sprintf("fuzz ops %x", ops))
	if err != nil {
		t.Fatal(err)
	}
	units := [4]int64{1, max(p.Interval/64, 1), p.Interval, min(guarantees.Period(p), 1<<60)}
	now := fuzzStart
	ops = ops[:min(len(ops), maxOps*opSize)]
	for ; len(ops) >= opSize; ops = ops[opSize:] {
		shaping := ops[0] >> 4 & 3
		extra := int64(binary.LittleEndian.Uint16(ops[4:]))
		step := int64(int16(binary.LittleEndian.Uint16(ops[1:]))) * units[ops[0]>>2&3]
		now += step
		if shaping != 1 {
			now += extra
		}
		now = min(max(now, 0), maxTime)
		cost := float64(ops[3]) / 8
		if ops[3] >= 128 {
			cost = float64(ops[3]-128) / 100 * p.Limit
		}
		op := engine.Op{Cost: cost, Now: now}
		switch {
		case shaping == 1:
			op.Verb, op.MaxDelay = engine.VerbReserve, fuzzDelay(extra, units[ops[0]>>6])
		case shaping == 2 && ops[0]>>7 == 1:
			op.Verb, op.MaxDelay, op.At = engine.VerbReserve, 1<<60, fuzzInstant(now, extra, units[1])
		case shaping == 2 && len(c.booked) > 0:
			op = c.booked[int(ops[3])%len(c.booked)]
			op.Now = now
			op.At += int64(ops[0] >> 6 & 1)
		case shaping == 2:
			op.Verb, op.At = engine.VerbCancel, now+extra
		case shaping == 3:
			op.Verb, op.Cost = engine.VerbAtMost, cost*[4]float64{1, 2, 4, 16}[ops[0]>>6]
		case ops[0]&3 == 0:
			op.Verb = engine.VerbAllow
		case ops[0]&3 == 1:
			op.Verb = engine.VerbCheck
		case ops[0]&3 == 2:
			op.Verb = engine.VerbFill
		default:
			c.reset()
			continue
		}
		if wantErr := invalidOp(p, op); wantErr != nil {
			before := cloneState(c.state)
			next, _, err := p.Step(cloneState(c.state), op)
			if !errors.Is(err, wantErr) || !reflect.DeepEqual(next, before) {
				t.Fatal(c.fail("Step(%+v) = %v with state %+v, want %v and the state unchanged", op, err, next, wantErr))
			}
			continue
		}
		if _, err := c.apply(op); err != nil {
			t.Fatal(err)
		}
	}
}

// fuzzDelay returns a MaxDelay of n units, or 2^60 for n = 0xffff; one
// past 2^60, invalid, when the product is larger.
func fuzzDelay(n, unit int64) int64 {
	switch {
	case n == 0xffff:
		return 1 << 60
	case n > (1<<60)/unit:
		return 1<<60 + 1
	}
	return n * unit
}

// fuzzInstant returns the instant n units after now, or one past the
// latest a reservation may name, invalid, when it is later.
func fuzzInstant(now, n, unit int64) int64 {
	const latest = maxTime + 1<<60
	if n > (latest-now)/unit {
		return latest + 1
	}
	return now + n*unit
}

// invalidOp returns the error Step must return for op, or nil if op is
// valid for p.
func invalidOp(p engine.Params, op engine.Op) error {
	shaping := op.Verb == engine.VerbReserve || op.Verb == engine.VerbCancel
	switch {
	case op.Verb == engine.VerbFill && p.Kind != engine.KindLeakyBucket:
		return sluice.ErrUnsupported
	case shaping && !p.Reservable():
		return sluice.ErrUnsupported
	case op.Verb == engine.VerbReserve && (op.MaxDelay < 0 || op.MaxDelay > 1<<60):
		return sluice.ErrInvalidDelay
	case shaping && (op.At < 0 || op.At > maxTime+1<<60):
		return sluice.ErrTimeOutOfRange
	case op.Verb == engine.VerbAtMost:
		if op.Cost > p.Limit && p.Limit < 1 {
			return sluice.ErrCostExceedsLimit
		}
	case op.Verb != engine.VerbFill && op.Cost > p.Limit:
		// Last, as CheckOp reports it: a cost too large is the one error
		// under which a penalty still decides the op.
		return sluice.ErrCostExceedsLimit
	}
	return nil
}

// requireRejected requires invalid params to be refused by Step too, and
// with ErrInvalidConfig.
func requireRejected(t *testing.T, p engine.Params, err error) {
	if !errors.Is(err, sluice.ErrInvalidConfig) {
		t.Fatalf("Validate(%+v) = %v, want an error wrapping ErrInvalidConfig", p, err)
	}
	if _, _, err := p.Step(engine.State{}, engine.Op{Verb: engine.VerbAllow, Cost: 0, Now: fuzzStart}); !errors.Is(err, sluice.ErrInvalidConfig) {
		t.Fatalf("Step with invalid %+v = %v, want ErrInvalidConfig", p, err)
	}
}

// shapingSeed is a seed input of the shaping verbs: a burst of the whole
// limit (byte 3 = 228), two reservations of one unit with a MaxDelay of
// 4 intervals, a request one nanosecond later, cancels of the second and
// first (the second twice), a partial grant of 4 times the limit, the
// same again an interval later, and a reservation booked no earlier than
// 200/64 intervals later, cancelled.
var shapingSeed = []byte{
	0, 0, 0, 228, 0, 0,
	0x10 | 0x80, 0, 0, 8, 4, 0,
	0x10 | 0x80, 0, 0, 8, 4, 0,
	0, 0, 0, 8, 1, 0,
	0x20, 0, 0, 1, 0, 0,
	0x20, 0, 0, 1, 0, 0,
	0x20, 0, 0, 0, 0, 0,
	0x30 | 0x80, 0, 0, 228, 0, 0,
	0x28, 1, 0, 8, 0, 0,
	0x30, 0, 0, 8, 0, 0,
	0xa0, 0, 0, 8, 200, 0,
	0x20, 0, 0, 5, 0, 0,
}

func FuzzLeakyBucket(f *testing.F) {
	f.Add(3.0, int64(time.Second), 1.5, []byte{0, 0, 0, 8, 0, 0, 0, 0, 0, 8, 0, 0, 2, 1, 0, 16, 0, 0})
	f.Add(3.0, int64(time.Second), 1.5, shapingSeed)
	f.Fuzz(func(t *testing.T, limit float64, interval int64, amount float64, ops []byte) {
		fuzzSteps(t, engine.Params{Kind: engine.KindLeakyBucket, Limit: limit, Interval: interval, Amount: amount}, ops)
	})
}

func FuzzGCRA(f *testing.F) {
	f.Add(2.5, int64(333333333), []byte{0, 0, 0, 8, 0, 0, 0, 0, 0, 8, 0, 0, 4, 1, 0, 8, 0, 0})
	f.Add(5.0, int64(100000000), shapingSeed)
	f.Fuzz(func(t *testing.T, burst float64, interval int64, ops []byte) {
		fuzzSteps(t, engine.Params{Kind: engine.KindGCRA, Limit: burst, Interval: interval}, ops)
	})
}

func FuzzTokenBucket(f *testing.F) {
	f.Add(10.0, int64(time.Second), 4.0, true, []byte{0, 0, 0, 80, 0, 0, 8, 1, 0, 8, 0, 0})
	f.Add(10.0, int64(time.Second), 4.0, true, shapingSeed)
	f.Add(4.25, int64(250*time.Millisecond), 1.5, false, shapingSeed)
	f.Fuzz(func(t *testing.T, burst float64, interval int64, amount float64, intervalRefill bool, ops []byte) {
		fuzzSteps(t, engine.Params{Kind: engine.KindTokenBucket, Limit: burst, Interval: interval, Amount: amount, IntervalRefill: intervalRefill}, ops)
	})
}

func FuzzFixedWindow(f *testing.F) {
	f.Add(5.0, int64(time.Second), false, []byte{0, 0, 0, 40, 0, 0, 8, 1, 0, 8, 0, 0})
	f.Add(5.0, int64(time.Second), false, shapingSeed)
	f.Fuzz(func(t *testing.T, limit float64, window int64, anchored bool, ops []byte) {
		fuzzSteps(t, engine.Params{Kind: engine.KindFixedWindow, Limit: limit, Interval: window, Anchored: anchored}, ops)
	})
}

func FuzzSlidingLog(f *testing.F) {
	f.Add(7.5, int64(3*time.Second), 4, []byte{0, 0, 0, 8, 0, 0, 4, 1, 0, 16, 0, 0, 8, 1, 0, 8, 0, 0})
	f.Add(7.5, int64(3*time.Second), 4, shapingSeed)
	f.Fuzz(func(t *testing.T, limit float64, window int64, maxEntries int, ops []byte) {
		fuzzSteps(t, engine.Params{Kind: engine.KindSlidingLog, Limit: limit, Interval: window, MaxEntries: maxEntries}, ops)
	})
}

func FuzzSlidingCounter(f *testing.F) {
	f.Add(12.25, int64(2*time.Second), []byte{0, 0, 0, 8, 0, 0, 4, 1, 0, 16, 0, 0, 8, 1, 0, 8, 0, 0})
	f.Add(12.25, int64(2*time.Second), shapingSeed)
	f.Fuzz(func(t *testing.T, limit float64, window int64, ops []byte) {
		fuzzSteps(t, engine.Params{Kind: engine.KindSlidingCounter, Limit: limit, Interval: window}, ops)
	})
}

// FuzzValidate checks configuration: Validate never panics, refuses with
// ErrInvalidConfig, and agrees with the constructors, which build exactly
// the Params that Validate accepts from the same numbers.
func FuzzValidate(f *testing.F) {
	f.Add(uint8(engine.KindLeakyBucket), 3.0, int64(time.Second), 1.5, false, false, 0)
	f.Add(uint8(engine.KindSlidingLog), 5.0, int64(time.Second), 0.0, false, false, 5)
	f.Add(uint8(engine.KindConcurrency), 2.0, int64(time.Minute), 0.0, false, false, 3)
	f.Add(uint8(engine.KindConcurrency), 1e308, int64(time.Minute), 0.0, false, false, 3)
	f.Fuzz(func(t *testing.T, kind uint8, limit float64, interval int64, amount float64, intervalRefill, anchored bool, maxEntries int) {
		p := engine.Params{Kind: engine.Kind(kind), Limit: limit, Interval: interval, Amount: amount,
			IntervalRefill: intervalRefill, Anchored: anchored, MaxEntries: maxEntries}
		err := p.Validate()
		if err != nil {
			requireRejected(t, p, err)
		} else if _, err := reference.New(p); err != nil {
			t.Fatalf("the reference cannot model valid %+v: %v", p, err)
		}
		built, buildErr := construct(p)
		switch {
		case buildErr != nil && !errors.Is(buildErr, sluice.ErrInvalidConfig):
			t.Fatalf("constructor for %+v: %v, want an error wrapping ErrInvalidConfig", p, buildErr)
		case buildErr == nil && built.Validate() != nil:
			t.Fatalf("constructor for %+v built invalid %+v: %v", p, built, built.Validate())
		case err == nil && buildErr != nil:
			t.Fatalf("constructor refused valid %+v: %v", p, buildErr)
		case err == nil && built != p:
			t.Fatalf("constructor built %+v from valid %+v", built, p)
		}
	})
}

// construct builds the limiter of p's kind from p's numbers with its
// constructor and options, and returns its Params. A Kind with no
// constructor returns the zero Params and an ErrInvalidConfig.
func construct(p engine.Params) (engine.Params, error) {
	var opts []sluice.Option
	if p.IntervalRefill {
		opts = append(opts, sluice.WithIntervalRefill())
	}
	if p.Anchored {
		opts = append(opts, sluice.WithAnchoredWindows())
	}
	if p.MaxEntries != 0 || p.Kind.Logs() {
		opts = append(opts, sluice.WithMaxEntries(p.MaxEntries))
	}
	var (
		l   limiterParams
		err error
	)
	window := time.Duration(p.Interval)
	switch p.Kind {
	case engine.KindLeakyBucket:
		l, err = checked(sluice.NewLeakyBucket(p.Limit, sluice.Per(p.Amount, window), opts...))
	case engine.KindGCRA:
		if p.Amount != 0 {
			return engine.Params{}, fmt.Errorf("%w: GCRA has no amount", sluice.ErrInvalidConfig)
		}
		l, err = checked(sluice.NewGCRA(sluice.Per(1, window), p.Limit, opts...))
	case engine.KindTokenBucket:
		l, err = checked(sluice.NewTokenBucket(sluice.Per(p.Amount, window), p.Limit, opts...))
	case engine.KindFixedWindow:
		l, err = fixedAmount(p, func() (limiterParams, error) { return checked(sluice.NewFixedWindow(p.Limit, window, opts...)) })
	case engine.KindSlidingLog:
		l, err = checked(sluice.NewSlidingLog(p.Limit, window, opts...))
	case engine.KindSlidingCounter:
		l, err = fixedAmount(p, func() (limiterParams, error) { return checked(sluice.NewSlidingCounter(p.Limit, window, opts...)) })
	case engine.KindConcurrency:
		l, err = fixedAmount(p, func() (limiterParams, error) { return checked(sluice.NewConcurrencyLimit(p.Limit, window, opts...)) })
	default:
		return engine.Params{}, fmt.Errorf("%w: no constructor for %v", sluice.ErrInvalidConfig, p.Kind)
	}
	if err != nil {
		return engine.Params{}, err
	}
	defer l.Close()
	built, _ := l.Params()
	return built, nil
}

// fixedAmount refuses an amount, which the windows' constructors have no
// argument for, and otherwise builds.
func fixedAmount(p engine.Params, build func() (limiterParams, error)) (limiterParams, error) {
	if p.Amount != 0 {
		return nil, fmt.Errorf("%w: %v has no amount", sluice.ErrInvalidConfig, p.Kind)
	}
	return build()
}

// checked turns a constructor's typed result into a limiterParams, nil on
// error.
func checked[L limiterParams](l L, err error) (limiterParams, error) {
	if err != nil {
		return nil, err
	}
	return l, nil
}
