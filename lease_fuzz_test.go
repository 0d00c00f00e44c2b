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
//	                  from the latest time); for an acquisition or a
//	                  check, its place in the key's line: its ticket
//	                  (Op.At) and patience (Op.MaxDelay), as
//	                    0 no ticket, no patience
//	                    1 no ticket, a patience
//	                    2 the k-th ticket, a patience
//	                    3 the k-th ticket, no patience
//	                    4 a made-up ticket, a patience
//	                    5 a made-up ticket, no patience
//	                    6 instead, a leaving (VerbLeave) of the k-th
//	                      ticket
//	                    7 instead, a leaving of a made-up ticket
//	                  where the k-th ticket is the k-th the input handed
//	                  out (a denied acquisition's Decision.At with a
//	                  patience: joining the line, or keeping its place;
//	                  k = byte 3, modulo their number), and a made-up
//	                  one if none was; a made-up ticket is, for b =
//	                  byte 4: b for b < 64 (0 is none); the last of
//	                  those tickets (0 for none) plus b - 96 for b <
//	                  128, so below zero (out of range) after few
//	                  tickets; 2^53 + b - 160 for b < 192 (out of range
//	                  above 2^53); -(b - 191) for b < 224 (out of range);
//	                  else 2^(b - 193), 2^31 to 2^62 (out of range
//	                  above 2^53); and the patience is byte 4 in units
//	                  of the time step (zero if byte 4 is; 2^61 at most,
//	                  out of range above 2^60), but minus one unit (out
//	                  of range) for byte 4 = 255. A check sends its
//	                  patience too (it ignores it, in range or not), and
//	                  so does a leaving decoded from a check, which
//	                  ignores it as well
//	bytes 1-2:        the time step in that unit, a signed int16: negative
//	                  steps are a clock stepping back
//	byte 3:           the cost: k/8 for k < 128 (exact in float), else
//	                  (k-128)/100 of the limit (rounded in float); more
//	                  than the limit is an error, for every verb, and so
//	                  is infinity
//	byte 4:           extra nanoseconds added to the time step
//
// An identity named before any was handed out is now plus byte 4. Lease
// identities (an admitted acquisition's or an extension's Decision.At)
// and tickets are kept apart: releases and extensions name the former,
// waits and leavings the latter. An op out of range (a cost, an
// identity, a ticket from 0 to 2^53, an acquisition's patience from 0 to
// 2^60) must be refused with the error CheckOp gives first.
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
	var seen []int64    // every identity handed out, in order
	var tickets []int64 // every ticket handed out, in order
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
		which := ops[0] >> 5
		switch op.Verb {
		case engine.VerbCancel, engine.VerbExtend:
			op.At = fuzzIdentity(seen, which, int(ops[3]), now, fuzzSpan(int64(ops[4]), unit))
		default:
			op = fuzzLine(op, tickets, which, int(ops[3]), ops[4], unit)
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
		switch {
		case takesLease(op, d):
			seen = append(seen, d.At)
		case waitsInLine(op, d):
			tickets = append(tickets, d.At)
		}
	}
}

// fuzzLine returns op, an acquisition or a check, with the place in line
// which (0-7) encodes, given the tickets seen handed out, k (byte 3) and
// b (byte 4), in units of unit: see fuzzLeases.
func fuzzLine(op engine.Op, tickets []int64, which byte, k int, b byte, unit int64) engine.Op {
	ticket := fuzzTicket(tickets, b)
	if len(tickets) > 0 && (which == 2 || which == 3 || which == 6) {
		ticket = tickets[k%len(tickets)]
	}
	patience := fuzzSpan(int64(b), unit)
	if b == 255 {
		patience = -unit
	}
	switch which {
	case 1:
		op.MaxDelay = patience
	case 2, 4:
		op.At, op.MaxDelay = ticket, patience
	case 3, 5:
		op.At = ticket
	case 6, 7:
		if op.Verb == engine.VerbCheck {
			op.MaxDelay = patience
		}
		op.Verb, op.At = engine.VerbLeave, ticket
	}
	return op
}

// fuzzTicket returns the made-up ticket that b (byte 4) encodes, given the
// tickets seen handed out, the last of them last: see fuzzLeases.
func fuzzTicket(tickets []int64, b byte) int64 {
	var latest int64
	if len(tickets) > 0 {
		latest = tickets[len(tickets)-1]
	}
	n := int64(b)
	switch {
	case n < 64:
		return n
	case n < 128:
		return latest + n - 96
	case n < 192:
		return maxTicket + n - 160
	case n < 224:
		return -(n - 191)
	}
	return 1 << (n - 193)
}

// invalidLeaseOp returns the error Step must return for op, an
// acquisition, a check, a leaving, a release or an extension at a time in
// range, or nil if op is valid for p: a cost that is no amount first,
// then an acquisition's patience out of range, then a ticket out of range
// (an acquisition's, a check's, a leaving's), then an identity out of
// range (a release's, an extension's), then a cost above the limit.
func invalidLeaseOp(p engine.Params, op engine.Op) error {
	ticket := op.Verb == engine.VerbAllow || op.Verb == engine.VerbCheck || op.Verb == engine.VerbLeave
	switch {
	case math.IsInf(op.Cost, 0) || math.IsNaN(op.Cost) || op.Cost < 0:
		return sluice.ErrInvalidCost
	case op.Verb == engine.VerbAllow && (op.MaxDelay < 0 || op.MaxDelay > maxPatience):
		return sluice.ErrInvalidDelay
	case ticket && (op.At < 0 || op.At > maxTicket):
		return sluice.ErrInvalidConfig
	case !ticket && (op.At < 0 || op.At > maxLeaseAt):
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

// lineSeed is a seed input of the line (the first waits under a limit of
// 2, with MaxEntries 3): the whole limit taken; two acquisitions of a
// unit joining the line as tickets 1 and 2, with a patience of an
// Interval and of half of one; a plain acquisition denied behind them; a
// check as ticket 2; ticket 2 leaving, then leaving again (refused); the
// lease released; ticket 1 served, with a patience of 64ns; a made-up
// ticket of 2^53 - 10 joining the line as ticket 3; a made-up ticket of
// -9, and a patience of minus one nanosecond (both refused); a check as
// ticket 3 with that patience (which a check ignores); a leaving of ticket
// 2^53 + 30 (refused); and an Interval later, ticket 3 asking again with a
// patience of 200 Intervals, and served.
var lineSeed = []byte{
	0x00, 0, 0, 16, 0,
	0x24, 0, 0, 8, 64,
	0x24, 0, 0, 8, 32,
	0x00, 0, 0, 8, 0,
	0x61, 0, 0, 1, 0,
	0xc0, 0, 0, 1, 0,
	0xc0, 0, 0, 1, 0,
	0x02, 0, 0, 0, 0,
	0x40, 0, 0, 8, 64,
	0x84, 0, 0, 16, 150,
	0xa0, 0, 0, 8, 200,
	0x20, 0, 0, 8, 255,
	0x41, 0, 0, 8, 255,
	0xe1, 0, 0, 0, 190,
	0x48, 1, 0, 2, 200,
}

func FuzzLeases(f *testing.F) {
	f.Add(2.0, int64(time.Minute), 3, leaseSeed)
	f.Add(2.5, int64(7), 1024, leaseSeed)
	f.Add(10.0, int64(time.Hour), 1, leaseSeed)
	f.Add(1.0, int64(time.Second), 4, []byte{0, 0, 0, 8, 0, 0x30, 0, 0, 8, 0, 0, 0, 0, 8, 0})
	f.Add(2.0, int64(time.Minute), 3, lineSeed)
	f.Add(2.0, int64(7), 2, lineSeed)
	f.Add(1.0, int64(1)<<56, 1024, lineSeed)
	f.Fuzz(func(t *testing.T, limit float64, ttl int64, maxEntries int, ops []byte) {
		fuzzLeases(t, engine.Params{Kind: engine.KindConcurrency, Limit: limit, Interval: ttl, MaxEntries: maxEntries}, ops)
	})
}
