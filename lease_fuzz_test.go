package sluice_test

import (
	"encoding/binary"
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/sluice-go/sluice"

	"github.com/sluice-go/sluice/engine"
)

// leaseOpSize is how many bytes encode one fuzzed operation of a
// concurrency limit.
const leaseOpSize = 5

// fuzzLeases decodes ops and replays them against p.Step, the reference
// model and the holders' book, as the lease proofs do (leaseChecker),
// after requiring invalid params to be refused. Each operation takes
// leaseOpSize bytes:
//
//	byte 0, bits 0-1: verb (acquire, check, release, extend)
//	byte 0, bits 2-3: unit of the time step (1ns, Interval/64, Interval,
//	                  16 Intervals)
//	byte 0, bit 4:    a reset instead
//	byte 0, bits 5-7: for a release or an extension, the identity it
//	                  names: 0-3 the k-th the input handed out (k = byte
//	                  3, modulo their number), 4 the one after it, 5 the
//	                  one before, 6 zero, 7 now plus byte 4 in units of
//	                  the time step, plus one (2^61 at most, and then
//	                  one past the latest identity that may be named
//	                  from the latest time)
//	bytes 1-2:        the time step in that unit, a signed int16: negative
//	                  steps are a clock stepping back
//	byte 3:           the cost: k/8 for k < 128 (exact in float), else
//	                  (k-128)/100 of the limit (rounded in float); more
//	                  than the limit is an error, for every verb, and so
//	                  is infinity
//	byte 4:           extra nanoseconds added to the time step
//
// An identity named before any was handed out is now plus byte 4.
func fuzzLeases(t *testing.T, p engine.Params, ops []byte) {
	if err := p.Validate(); err != nil {
		requireRejected(t, p, err)
		return
	}
	c, err := newLeaseChecker(p, fmt.Sprintf("fuzz lease ops %x", ops))
	if err != nil {
		t.Fatal(err)
	}
	units := [4]int64{1, max(p.Interval/64, 1), p.Interval, 16 * min(p.Interval, 1<<56)}
	var seen []int64 // every identity handed out, in order
	now := fuzzStart
	ops = ops[:min(len(ops), maxOps*leaseOpSize)]
	for ; len(ops) >= leaseOpSize; ops = ops[leaseOpSize:] {
		unit := units[ops[0]>>2&3]
		now = min(max(now+fuzzSpan(int64(int16(binary.LittleEndian.Uint16(ops[1:]))), unit)+int64(ops[4]), 0), maxTime)
		if ops[0]&0x10 != 0 {
			c.reset()
			continue
		}
		cost := float64(ops[3]) / 8
		if ops[3] >= 128 {
			cost = float64(ops[3]-128) / 100 * p.Limit
		}
		op := engine.Op{Verb: [4]engine.Verb{engine.VerbAllow, engine.VerbCheck, engine.VerbCancel, engine.VerbExtend}[ops[0]&3], Cost: cost, Now: now}
		if op.Verb == engine.VerbCancel || op.Verb == engine.VerbExtend {
			op.At = fuzzIdentity(seen, ops[0]>>5, int(ops[3]), now, fuzzSpan(int64(ops[4]), unit))
		}
		if want := invalidLeaseOp(p, op); want != nil {
			if err := c.rejects(op, want); err != nil {
				t.Fatal(err)
			}
			continue
		}
		d, err := c.apply(op)
		if err != nil {
			t.Fatal(err)
		}
		if d.At != 0 {
			seen = append(seen, d.At)
		}
	}
}

// invalidLeaseOp returns the error Step must return for op, an
// acquisition, a check, a release or an extension at a time in range, or
// nil if op is valid for p: a cost that is no amount first, then an
// identity out of range, then a cost above the limit.
func invalidLeaseOp(p engine.Params, op engine.Op) error {
	switch {
	case math.IsInf(op.Cost, 0) || math.IsNaN(op.Cost) || op.Cost < 0:
		return sluice.ErrInvalidCost
	case op.At < 0 || op.At > maxLeaseAt:
		return sluice.ErrTimeOutOfRange
	case op.Cost > p.Limit:
		return sluice.ErrCostExceedsLimit
	}
	return nil
}

// fuzzSpan returns n units, saturating at ±2^61 instead of overflowing:
// more than half the times a request may carry, and less than the
// headroom above them to an int64's end.
func fuzzSpan(n, unit int64) int64 {
	const most = 1 << 61
	if n > most/unit || n < -most/unit {
		return max(min(n, 1), -1) * most
	}
	return n * unit
}

// fuzzIdentity returns the identity that a release or an extension
// encoded as which (0-7) and k names, given the identities seen handed
// out: see fuzzLeases.
func fuzzIdentity(seen []int64, which byte, k int, now, later int64) int64 {
	if len(seen) == 0 || which == 7 {
		return now + later + 1
	}
	at := seen[k%len(seen)]
	switch which {
	case 4:
		return at + 1
	case 5:
		return at - 1
	case 6:
		return 0
	}
	return at
}

// leaseSeed is a seed input: three leases of one unit (the third denied
// under a limit of 2) in 5ns, a check of nothing, the first released
// twice, an acquisition, the second extended, then named again by its
// old identity, an Interval later a release of the third one handed out,
// and, with the clock stepped back half an Interval, an acquisition of
// the whole limit.
var leaseSeed = []byte{
	0, 0, 0, 8, 0,
	0, 0, 0, 8, 0,
	0, 0, 0, 8, 5,
	1, 0, 0, 0, 0,
	2, 0, 0, 0, 10,
	2, 0, 0, 0, 1,
	0, 0, 0, 8, 0,
	3, 0, 0, 1, 10,
	3, 0, 0, 1, 1,
	0x0a, 1, 0, 2, 0,
	0x04, 0xe0, 0xff, 228, 0,
}

func FuzzLeases(f *testing.F) {
	f.Add(2.0, int64(time.Minute), 3, leaseSeed)
	f.Add(2.5, int64(7), 1024, leaseSeed)
	f.Add(10.0, int64(time.Hour), 1, leaseSeed)
	f.Add(1.0, int64(time.Second), 4, []byte{0, 0, 0, 8, 0, 0x30, 0, 0, 8, 0, 0, 0, 0, 8, 0})
	f.Fuzz(func(t *testing.T, limit float64, ttl int64, maxEntries int, ops []byte) {
		fuzzLeases(t, engine.Params{Kind: engine.KindConcurrency, Limit: limit, Interval: ttl, MaxEntries: maxEntries}, ops)
	})
}
