package redisstore

import (
	"encoding/binary"
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluice-go/sluice"
	"github.com/sluice-go/sluice/engine"
	"github.com/sluice-go/sluice/internal/arith"
)

// A call's input, the function's one argument: the op's fields, then each
// limit's (see lua/prelude.lua), as bytes and little-endian doubles, which Lua reads back
// exactly and without parsing text. One string is one allocation, where
// boxed numbers would be several. Times (the caller's now, a reservation's
// or an exhaust's MaxDelay, an op's At, a penalty) go as seconds and
// nanoseconds, since a double is exact only up to 2^53.
//
// A call whose limits include a calendar window (engine.Params.Calendar,
// variant 2) carries, after all the limit records, one more record per
// limit, in the same order: its four window boundaries, Windows[0] to
// Windows[3], each as seconds and nanoseconds (8 doubles), all zeros for a
// limit that is no calendar window. A call without calendar windows has
// none of them: the common limit record does not grow, and its input is
// what it was before calendar windows, byte for byte.
const (
	opSize      = 2 + 5*8
	limitSize   = 3 + 9*8
	windowsSize = 8 * 8

	// The variant byte of a limit record, zero for the others.
	refillVariant   = 1 // the token bucket's interval refill, an anchored fixed window
	calendarVariant = 2 // a calendar window: its windows follow the limit records
)

// args returns the input of a call deciding one op under p.
func (s *Store) args(p *engine.Params, op engine.Op) string {
	if p.Calendar() {
		return s.calendarArgs(p, op)
	}
	var b [opSize + limitSize]byte
	s.putOp(b[:opSize], op, p.Kind == engine.KindConcurrency)
	putLimit(b[opSize:], p, op)
	return string(b[:])
}

// calendarArgs is args for a calendar window, whose windows follow its
// limit record: apart from args, so that the usual call's input is built
// as it was.
func (s *Store) calendarArgs(p *engine.Params, op engine.Op) string {
	var b [opSize + limitSize + windowsSize]byte
	s.putOp(b[:opSize], op, p.Kind == engine.KindConcurrency)
	putLimit(b[opSize:], p, op)
	putWindows(b[opSize+limitSize:], p)
	return string(b[:])
}

// groupArgs returns the input of a call deciding a group of ops, which share
// their verb, time and maximum delay.
func (s *Store) groupArgs(ops []engine.GroupOp) string {
	var b [opSize + engine.MaxGroup*limitSize]byte
	waits, calendar := false, false // whether a limit has a line to wait in, or is a calendar window
	for _, g := range ops {
		waits = waits || g.Params.Kind == engine.KindConcurrency
		calendar = calendar || g.Params.Calendar()
	}
	if calendar {
		return s.calendarGroupArgs(ops)
	}
	s.putOp(b[:opSize], ops[0].Op, waits)
	for i, g := range ops {
		putLimit(b[opSize+i*limitSize:], g.Params, g.Op)
	}
	return string(b[:opSize+len(ops)*limitSize])
}

// calendarGroupArgs is groupArgs for a group with a calendar window among
// its limits: every limit's record, then every limit's windows (zeros
// for the limits that are no calendar window).
func (s *Store) calendarGroupArgs(ops []engine.GroupOp) string {
	var b [opSize + engine.MaxGroup*(limitSize+windowsSize)]byte
	waits := false
	for _, g := range ops {
		waits = waits || g.Params.Kind == engine.KindConcurrency
	}
	s.putOp(b[:opSize], ops[0].Op, waits)
	windows := opSize + len(ops)*limitSize // where the windows start
	for i, g := range ops {
		putLimit(b[opSize+i*limitSize:], g.Params, g.Op)
		putWindows(b[windows+i*windowsSize:], g.Params)
	}
	return string(b[:windows+len(ops)*windowsSize])
}

// putWindows packs the boundaries of p's calendar windows into b, each as
// seconds and nanoseconds, or leaves b zero if p is no calendar window.
func putWindows(b []byte, p *engine.Params) {
	if !p.Calendar() {
		return
	}
	var xs [8]float64
	for i, w := range p.Windows {
		xs[2*i], xs[2*i+1] = split(w)
	}
	putFloats(b, xs[:]...)
}

// putOp packs the op's fields into b: verb, clock, now, the TTL margin and
// a reservation's MaxDelay, an exhaust's (how long from now the key is
// full, relative on either clock) or, if waits (the op decides a
// concurrency limit), an acquisition's patience.
func (s *Store) putOp(b []byte, op engine.Op, waits bool) {
	b[0] = byte(op.Verb)
	var now, maxDelay int64
	if s.callerClock {
		b[1] = 1
		now = op.Now
	}
	if op.Verb == engine.VerbReserve || op.Verb == engine.VerbExhaust || op.Verb == engine.VerbAllow && waits {
		maxDelay = op.MaxDelay
	}
	sec, nsec := split(now)
	delaySec, delayNsec := split(maxDelay)
	putFloats(b[2:], sec, nsec, float64(s.skewMillis), delaySec, delayNsec)
}

// putLimit packs a limit's fields into b: its Params, and the op's cost
// and instant (the At of a reservation, a cancel, or a lease's release or
// extension, or the ticket of a concurrency limit's acquisition, check or
// leaving, which goes as an instant does), both checked in range.
func putLimit(b []byte, p *engine.Params, op engine.Op) {
	b[0] = byte(p.Kind)
	switch {
	case p.IntervalRefill || p.Anchored:
		b[1] = refillVariant
	case p.Calendar():
		// The library reads the windows, never the interval, which is
		// the middle window's length and may exceed 2^53 ns (a year),
		// where float64(p.Interval) below rounds.
		b[1] = calendarVariant
	}
	if p.CountDenied {
		b[2] = 1
	}
	var at int64
	switch op.Verb {
	case engine.VerbReserve, engine.VerbCancel, engine.VerbExtend:
		at = op.At
	case engine.VerbAllow, engine.VerbCheck, engine.VerbLeave:
		if p.Kind == engine.KindConcurrency {
			at = op.At
		}
	}
	atSec, atNsec := split(at)
	penSec, penNsec := split(p.Penalty)
	putFloats(b[3:], p.Limit, float64(p.Interval), p.Amount, float64(p.MaxEntries), op.Cost,
		atSec, atNsec, penSec, penNsec)
}

func putFloats(b []byte, xs ...float64) {
	for i, x := range xs {
		binary.LittleEndian.PutUint64(b[8*i:], math.Float64bits(x))
	}
}

// split returns ns nanoseconds as whole seconds and the nanoseconds left,
// in [0, 1e9), each exact as a double.
func split(ns int64) (sec, nsec float64) {
	s := arith.FloorDiv(ns, 1e9)
	return float64(s), float64(ns - s*1e9)
}

// The library's replies are records (see lua/io.lua): a status byte (the
// bits below), then little-endian doubles: used, remaining, and the
// seconds and nanoseconds of retry after and reset after; for a
// reservation that waits (waitsBit), the seconds and nanoseconds of its
// delay and of its instant; for an instant without a wait (instantBit: a
// concurrency limit's lease taken or extended, whose Decision.At is its
// expiry and Delay zero, or a denied acquisition's place in the limit's
// line, whose Decision.At is its ticket, split as nanoseconds are), the
// seconds and nanoseconds of the instant; for a partial grant, a charge
// or a refund (always: see grants), the cost granted, recorded or given
// back (Decision.Granted). A group's reply is the index
// of the limit the group's decision is made from (from 1), then the
// group's record and each limit's. A key conflict is 128, the stored
// kind's byte and the key's index (from 1).
const (
	allowedBit = 1
	blockedBit = 2
	waitsBit   = 4
	instantBit = 8

	conflictStatus = 128
	conflictSize   = 3
	recordSize     = 1 + 6*8
	waitSize       = 4 * 8
	instantSize    = 2 * 8
	grantSize      = 8

	// maxTicket is the latest ticket a concurrency limit's line hands out.
	maxTicket = 1 << 53
)

// decode turns the script's reply to op under p on key into a decision. A
// reply of an unexpected shape is an error.
func decode(reply any, key string, p *engine.Params, verb engine.Verb) (engine.Decision, error) {
	b, _ := reply.(string)
	if conflict, kind, _ := conflictOf(b); conflict {
		return engine.Decision{Limit: p.Limit}, conflictError(key, kind, p)
	}
	d, rest, why := record(b, verb, grants(verb), p.Kind == engine.KindConcurrency)
	if why == "" && rest != "" {
		why = ": bytes left over"
	}
	if why != "" {
		return engine.Decision{Limit: p.Limit}, fmt.Errorf("redisstore: key %q: unexpected script reply %q%s", key, reply, why)
	}
	d.Limit = p.Limit
	return d, nil
}

// grants reports whether a decision on verb carries a cost in its reply
// (Decision.Granted): a partial grant's, a charge's or a refund's. A
// group decides none of them.
func grants(verb engine.Verb) bool {
	return verb == engine.VerbAtMost || verb == engine.VerbCharge || verb == engine.VerbRefund
}

// decodeGroup turns the script's reply to a group of ops into each
// limit's decision, in each, and the group's. A reply of an unexpected
// shape is an error, and leaves each as it was.
func decodeGroup(reply any, ops []engine.GroupOp, each []engine.Decision) (engine.Decision, error) {
	b, _ := reply.(string)
	if conflict, kind, i := conflictOf(b); conflict && i >= 1 && i <= len(ops) {
		g := ops[i-1]
		return engine.Decision{}, conflictError(g.Key, kind, g.Params)
	}
	unexpected := func(why string) (engine.Decision, error) {
		return engine.Decision{}, fmt.Errorf("redisstore: group of %d keys: unexpected script reply %q%s", len(ops), reply, why)
	}
	verb := ops[0].Op.Verb
	if len(b) == 0 || int(b[0]) < 1 || int(b[0]) > len(ops) {
		return unexpected(": no limit named")
	}
	best := int(b[0]) - 1
	leases := false // whether some limit's decision, and so the group's, may hold a lease
	for _, g := range ops {
		leases = leases || g.Params.Kind == engine.KindConcurrency
	}
	group, rest, why := record(b[1:], verb, false, leases)
	decided := make([]engine.Decision, len(ops))
	for i := range decided {
		if why != "" {
			break
		}
		decided[i], rest, why = record(rest, verb, false, ops[i].Params.Kind == engine.KindConcurrency)
		decided[i].Limit = ops[i].Params.Limit
	}
	if why == "" && rest != "" {
		why = ": bytes left over"
	}
	if why != "" {
		return unexpected(why)
	}
	copy(each, decided)
	group.Limit = ops[best].Params.Limit
	return group, nil
}

// conflictOf reports whether b is a key conflict's reply, and the kind
// stored and the key's index it names.
func conflictOf(b string) (conflict bool, kind engine.Kind, index int) {
	if len(b) != conflictSize || b[0] != conflictStatus {
		return false, 0, 0
	}
	return true, engine.Kind(b[1]), int(b[2])
}

func conflictError(key string, stored engine.Kind, p *engine.Params) error {
	return fmt.Errorf("%w: key %q holds %v state, not %v", sluice.ErrKeyConflict, key, stored, p.Kind)
}

// record decodes the record at the front of b, a decision on verb with a
// grant if grant, without its Limit, and returns the bytes after it;
// leases tells whether the decision may be a concurrency limit's, which
// alone has an instant without a wait. why is empty if the record is well
// formed, and else says what is wrong: an unknown status, a waiting
// reservation of another verb or of a denial, an instant without a wait
// anywhere but on a lease taken or extended or a denied acquisition's
// ticket, a record cut short, times or a ticket out of range.
func record(b string, verb engine.Verb, grant, leases bool) (d engine.Decision, rest string, why string) {
	if len(b) < recordSize {
		return d, "", ": record cut short"
	}
	status := b[0]
	allowed, waits, holds := status&allowedBit != 0, status&waitsBit != 0, status&instantBit != 0
	switch {
	case status&^(allowedBit|blockedBit|waitsBit|instantBit) != 0:
		return d, "", ": unknown status"
	case waits && (verb != engine.VerbReserve || !allowed):
		return d, "", ": a wait where none can be"
	case holds && (waits || !leases || !(verb == engine.VerbAllow || verb == engine.VerbExtend && allowed)):
		return d, "", ": an instant where none can be"
	}
	n := 6
	if waits {
		n += 4
	}
	if holds {
		n += 2
	}
	if grant {
		n++
	}
	if len(b) < 1+8*n {
		return d, "", ": record cut short"
	}
	var x [11]float64
	for i := range n {
		x[i] = math.Float64frombits(binary.LittleEndian.Uint64([]byte(b[1+8*i : 9+8*i])))
	}
	retry, ok1 := duration(x[2], x[3])
	reset, ok2 := duration(x[4], x[5])
	if !ok1 || !ok2 {
		return d, "", ": durations out of range"
	}
	d.Allowed, d.Blocked = allowed, status&blockedBit != 0
	d.Used, d.Remaining, d.RetryAfter, d.ResetAfter = x[0], x[1], retry, reset
	next := 6
	if waits {
		delay, ok1 := duration(x[6], x[7])
		at, ok2 := instant(x[8], x[9])
		if !ok1 || !ok2 || delay <= 0 {
			return d, "", ": reservation out of range"
		}
		d.Delay, d.At = delay, at
		next = 10
	}
	if holds {
		// A lease's expiry: now plus its time to live at the earliest,
		// after the epoch; or a denied acquisition's ticket, from 1.
		at, ok := instant(x[next], x[next+1])
		switch {
		case !ok || at <= 0:
			return d, "", ": lease out of range"
		case !allowed && at > maxTicket:
			return d, "", ": ticket out of range"
		}
		d.At = at
		next += 2
	}
	if grant {
		if !(x[next] >= 0) || math.IsInf(x[next], 0) {
			return d, "", ": grant out of range"
		}
		d.Granted = x[next]
	}
	return d, b[1+8*n:], ""
}

// duration returns sec seconds and nsec nanoseconds as a Duration, if
// they are whole, non-negative, nsec is under a second, and the sum fits.
func duration(sec, nsec float64) (time.Duration, bool) {
	if !(sec >= 0) {
		return 0, false
	}
	ns, ok := instant(sec, nsec)
	return time.Duration(ns), ok
}

// instant returns the instant sec seconds and nsec nanoseconds from the
// epoch (before it for negative seconds), if they are whole, nsec is in
// [0, 1e9), and the sum fits in an int64.
func instant(sec, nsec float64) (int64, bool) {
	const maxSec = math.MaxInt64 / 1e9
	if !(sec >= -maxSec && sec <= maxSec && nsec >= 0 && nsec < 1e9) || sec != math.Trunc(sec) || nsec != math.Trunc(nsec) {
		return 0, false
	}
	ns := int64(sec)*1e9 + int64(nsec)
	if sec >= 0 && ns < 0 {
		return 0, false // overflowed
	}
	return ns, true
}

// scriptError returns the error of a call of the library on what (a key,
// a group) of verb: wrapping sluice.ErrUnsupported when the library
// refused a verb or algorithm it does not know, or the server has no
// Functions (before Redis 7.0), and sluice.ErrTimeOutOfRange when the
// library refused a calendar window whose windows do not hold the time it
// decides at (see outOfRange).
func scriptError(verb engine.Verb, what string, err error) error {
	switch {
	case redis.HasErrorPrefix(err, "OUTOFRANGE"):
		return fmt.Errorf("%w: redisstore: %v on %s: %s: %w", sluice.ErrTimeOutOfRange, verb, what, outOfRange(err), err)
	case redis.HasErrorPrefix(err, "UNSUPPORTED"):
		return fmt.Errorf("%w: redisstore: %v on %s: %w", sluice.ErrUnsupported, verb, what, err)
	case redis.HasErrorPrefix(err, "unknown command") && strings.Contains(strings.ToLower(err.Error()), "fcall"):
		return fmt.Errorf("%w: redisstore: %v on %s: the server lacks Functions (Redis 7.0 or Valkey 7.2 and later have them): %w",
			sluice.ErrUnsupported, verb, what, err)
	}
	return fmt.Errorf("redisstore: %v on %s: %w", verb, what, err)
}

// outOfRangeReply is the library's error reply for a calendar window
// whose windows do not hold the time of the decision (see fixedwindow.lua's
// outside): the limit's index (from 1), whose clock the time is on
// ("server's" or "caller's"), the time, and the first and last boundaries
// of the windows, each as seconds and nanoseconds since the epoch.
const outOfRangeReply = "OUTOFRANGE sluice: limit %d: the %s time %d s %d ns lies outside its calendar windows, from %d s %d ns to %d s %d ns"

// outOfRange says, as times, what the library's error reply err for a
// calendar window out of range names: the time it decided at, which on
// the server's clock is the server's, and the windows, which the caller
// computed on its own. A reply of another shape says only that.
func outOfRange(err error) string {
	var limit int
	var clock string
	var x [6]int64
	_, scanErr := fmt.Sscanf(err.Error(), outOfRangeReply, &limit, &clock, &x[0], &x[1], &x[2], &x[3], &x[4], &x[5])
	if scanErr != nil {
		return "a time outside a calendar window's windows"
	}
	at := func(sec, nsec int64) string { return time.Unix(sec, nsec).UTC().String() }
	return fmt.Sprintf("the %s time %v lies outside the calendar windows of limit %d, from %v to %v, computed on the caller's clock",
		clock, at(x[0], x[1]), limit, at(x[2], x[3]), at(x[4], x[5]))
}
