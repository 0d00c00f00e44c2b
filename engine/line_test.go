package engine

import (
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// lineKey steps one key of a concurrency limit of one slot, with waiters
// of a patience of 10 ns, for the tests of its line.
type lineKey struct {
	t *testing.T
	p Params
	s State
}

func newLineKey(t *testing.T, maxEntries int) *lineKey {
	p := Params{Kind: KindConcurrency, Limit: 1, Interval: 100, MaxEntries: maxEntries}
	require.NoError(t, p.Validate())
	return &lineKey{t: t, p: p}
}

const patience = 10

// step runs op and requires that Step leaves the state it was given as
// it was whenever the decision does not record.
func (k *lineKey) step(op Op) Decision {
	k.t.Helper()
	before := k.s
	log := slices.Clone(k.s.Log)
	s, d, err := k.p.Step(k.s, op)
	require.NoError(k.t, err)
	if !k.p.Records(op.Verb, &d) {
		require.Equal(k.t, log, before.Log, "%+v records nothing", op)
		require.Equal(k.t, before.A, s.A)
	}
	k.s = s
	return d
}

func (k *lineKey) wait(now, ticket int64) Decision {
	return k.step(Op{Verb: VerbAllow, Cost: 1, Now: now, At: ticket, MaxDelay: patience})
}

func (k *lineKey) try(now int64) Decision {
	return k.step(Op{Verb: VerbAllow, Cost: 1, Now: now})
}

func (k *lineKey) release(now, at int64) Decision {
	return k.step(Op{Verb: VerbCancel, Cost: 1, Now: now, At: at})
}

func (k *lineKey) leave(now, ticket int64) Decision {
	return k.step(Op{Verb: VerbLeave, Now: now, At: ticket})
}

func TestLineServesWaitersInTheOrderTheyJoined(t *testing.T) {
	k := newLineKey(t, 4)
	held := k.wait(1000, 0)
	require.True(t, held.Allowed, "an empty line lets the first in")
	first := k.wait(1001, 0)
	second := k.wait(1002, 0)
	require.False(t, first.Allowed)
	require.Equal(t, int64(1), first.At, "the first waiter's ticket")
	require.Equal(t, int64(2), second.At)
	require.Equal(t, time.Duration(1100-1001), first.RetryAfter, "the lease expires at 1100, if not released sooner")
	require.Equal(t, time.Duration(1100-1002), second.RetryAfter)

	require.True(t, k.release(1005, held.At).Allowed)
	behind := k.wait(1006, second.At)
	require.False(t, behind.Allowed, "the second waits behind the first, though a slot is free")
	require.Equal(t, time.Duration(1011-1006), behind.RetryAfter, "until the first could have left the line")
	require.False(t, k.try(1006).Allowed, "an acquisition without a ticket does not pass the line")
	require.False(t, k.step(Op{Verb: VerbCheck, Cost: 1, Now: 1006}).Allowed)
	require.True(t, k.step(Op{Verb: VerbCheck, Cost: 1, Now: 1006, At: first.At}).Allowed, "the head would be admitted")
	got := k.wait(1007, first.At)
	require.True(t, got.Allowed, "the head is served")
	require.Equal(t, int64(1107), got.At, "a lease's identity, its expiry")
	require.Equal(t, []Entry{{1107, 1}, {1016, -2}}, k.s.Log, "the lease, then the line")

	require.True(t, k.release(1008, got.At).Allowed)
	next := k.wait(1009, second.At)
	require.True(t, next.Allowed, "then the second")
	require.Equal(t, []Entry{{1109, 1}}, k.s.Log, "the line is empty")
	require.Equal(t, 2.0, k.s.A, "tickets keep counting while the key lives")
}

func TestLineKeepsAWaitersPlaceWhileItAsksWithinItsPatience(t *testing.T) {
	k := newLineKey(t, 4)
	held := k.wait(1000, 0)
	first := k.wait(1001, 0)
	second := k.wait(1002, 0)
	for now := int64(1005); now < 1100; now += patience - 1 {
		require.Equal(t, first.At, k.wait(now, first.At).At, "the same ticket, its deadline moved")
		require.Equal(t, second.At, k.wait(now, second.At).At)
	}
	require.Equal(t, 2, len(k.s.Log)-1, "two waiters")
	require.True(t, k.release(1100-1, held.At).Allowed)
	require.False(t, k.wait(1100, second.At).Allowed)
	require.True(t, k.wait(1100, first.At).Allowed)
}

func TestLinePassesOverAWaiterThatStoppedAsking(t *testing.T) {
	k := newLineKey(t, 4)
	held := k.wait(1000, 0)
	gone := k.wait(1001, 0)
	next := k.wait(1005, 0)
	require.True(t, k.release(1006, held.At).Allowed)
	require.False(t, k.wait(1010, next.At).Allowed, "ticket 1's deadline, 1011, has not passed")
	got := k.wait(1011, next.At)
	require.True(t, got.Allowed, "at its deadline the first waiter has left the line")
	late := k.wait(1012, gone.At)
	require.False(t, late.Allowed)
	require.Equal(t, int64(3), late.At, "a waiter that came back too late joins again, last")
}

func TestLineLetsAWaiterLeave(t *testing.T) {
	k := newLineKey(t, 4)
	held := k.wait(1000, 0)
	first := k.wait(1001, 0)
	second := k.wait(1002, 0)
	require.True(t, k.leave(1003, first.At).Allowed)
	require.False(t, k.leave(1003, first.At).Allowed, "leaving twice is harmless and says so")
	require.False(t, k.leave(1003, 7).Allowed, "a ticket never handed out")
	require.True(t, k.release(1004, held.At).Allowed)
	require.True(t, k.wait(1005, second.At).Allowed, "the second is first once the first left")
	require.False(t, k.leave(1006, second.At).Allowed, "a served waiter is not in line")
}

func TestLineIsBoundedByMaxEntries(t *testing.T) {
	k := newLineKey(t, 2)
	k.wait(1000, 0)
	require.Equal(t, int64(1), k.wait(1000, 0).At)
	require.Equal(t, int64(2), k.wait(1000, 0).At)
	full := k.wait(1000, 0)
	require.False(t, full.Allowed)
	require.Zero(t, full.At, "no place in a full line")
	require.Equal(t, 2.0, k.s.A, "and no ticket spent")
}

func TestLineKeepsTheKeyUntilItsLastWaitersDeadline(t *testing.T) {
	p := Params{Kind: KindConcurrency, Limit: 1, Interval: 100, MaxEntries: 4}
	k := &lineKey{t: t, p: p}
	held := k.wait(1000, 0)
	w := k.step(Op{Verb: VerbAllow, Cost: 1, Now: 1001, MaxDelay: 500})
	require.Equal(t, time.Duration(500), w.ResetAfter, "the waiter's deadline, past the lease's expiry")
	require.True(t, k.release(1002, held.At).Allowed)
	left := k.leave(1003, w.At)
	require.True(t, left.Allowed)
	require.Equal(t, time.Duration(1100-1003), left.ResetAfter, "the high-water mark once the line is empty")
	require.Equal(t, State{Time: 1100, A: 1, Log: []Entry{}}, k.s)
	end := k.leave(1100, 1)
	require.False(t, end.Allowed)
	require.Zero(t, end.ResetAfter, "fresh again")
}

func TestLineRefusesBadTicketsAndPatience(t *testing.T) {
	p := Params{Kind: KindConcurrency, Limit: 1, Interval: 100, MaxEntries: 4}
	for _, c := range []struct {
		op   Op
		want error
	}{
		{Op{Verb: VerbAllow, Cost: 1, Now: 5, At: -1}, ErrInvalidConfig},
		{Op{Verb: VerbAllow, Cost: 1, Now: 5, At: maxTicket + 1}, ErrInvalidConfig},
		{Op{Verb: VerbCheck, Cost: 1, Now: 5, At: -1}, ErrInvalidConfig},
		{Op{Verb: VerbLeave, Now: 5, At: -1}, ErrInvalidConfig},
		{Op{Verb: VerbAllow, Cost: 1, Now: 5, MaxDelay: -1}, ErrInvalidDelay},
		{Op{Verb: VerbAllow, Cost: 1, Now: 5, MaxDelay: maxSpan + 1}, ErrInvalidDelay},
	} {
		_, _, err := p.Step(State{}, c.op)
		require.ErrorIs(t, err, c.want, "%+v", c.op)
	}
	gcra := Params{Kind: KindGCRA, Limit: 2, Interval: 100}
	_, _, err := gcra.Step(State{}, Op{Verb: VerbLeave, Now: 5, At: 1})
	require.ErrorIs(t, err, ErrUnsupported, "only a concurrency limit has a line")
	_, _, err = p.Step(State{}, Op{Verb: VerbAllow, Cost: 1, Now: 5, At: maxTicket, MaxDelay: maxSpan})
	require.NoError(t, err, "the largest ticket and patience")
}

func TestLineLeavesTheStateAloneWhenAWaiterFindsNoPlace(t *testing.T) {
	k := newLineKey(t, 2)
	k.step(Op{Verb: VerbAllow, Cost: 0.5, Now: 1000})
	k.step(Op{Verb: VerbAllow, Cost: 0.5, Now: 1050})
	k.step(Op{Verb: VerbAllow, Cost: 1, Now: 1060, MaxDelay: 1000})
	k.step(Op{Verb: VerbAllow, Cost: 1, Now: 1060, MaxDelay: 1000})
	// At 1100 the first lease has expired: a rewrite would move the live
	// one over it, in the storage the caller still holds.
	full := k.wait(1100, 0)
	require.False(t, full.Allowed)
	require.Zero(t, full.At, "the line is full")
	require.Equal(t, []Entry{{1100, 0.5}, {1150, 0.5}, {2060, -1}, {2060, -2}}, k.s.Log)
}

func TestLineCountsEveryWaitersDeadlineInResetAfter(t *testing.T) {
	for _, c := range []struct {
		name string
		ops  []Op
		want time.Duration
	}{
		{"a joiner behind a waiter of longer patience", []Op{
			{Verb: VerbAllow, Cost: 1, Now: 0},
			{Verb: VerbAllow, Cost: 1, Now: 10, MaxDelay: 1000},
			{Verb: VerbAllow, Cost: 1, Now: 100, MaxDelay: 5}, // the lease has expired: the log is rewritten
		}, 1010 - 100},
		{"a release ahead of the line", []Op{
			{Verb: VerbAllow, Cost: 1, Now: 0},
			{Verb: VerbAllow, Cost: 1, Now: 10, MaxDelay: 1000},
			{Verb: VerbAllow, Cost: 1, Now: 10, MaxDelay: 5},
			{Verb: VerbCancel, Cost: 1, Now: 12, At: 100},
		}, 1010 - 12},
		{"a waiter's old deadline once it asked again", []Op{
			{Verb: VerbAllow, Cost: 0.5, Now: 0},
			{Verb: VerbAllow, Cost: 0.5, Now: 50},
			{Verb: VerbAllow, Cost: 1, Now: 60, MaxDelay: 1000},
			{Verb: VerbAllow, Cost: 1, Now: 120, At: 1, MaxDelay: 5}, // the first lease has expired
		}, 150 - 120},
	} {
		t.Run(c.name, func(t *testing.T) {
			k := newLineKey(t, 2)
			var d Decision
			for _, op := range c.ops {
				d = k.step(op)
			}
			require.Equal(t, c.want, d.ResetAfter)
		})
	}
}
