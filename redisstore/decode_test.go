package redisstore

import (
	"encoding/binary"
	"io/fs"
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sluice-go/sluice"
	"github.com/sluice-go/sluice/engine"
)

// reply packs a decision's record as the script does: a status byte and
// little-endian doubles.
func reply(status byte, x ...float64) string {
	b := []byte{status}
	for _, f := range x {
		b = binary.LittleEndian.AppendUint64(b, math.Float64bits(f))
	}
	return string(b)
}

func TestDecodeReadsDecision(t *testing.T) {
	p := &engine.Params{Kind: engine.KindGCRA, Limit: 5, Interval: int64(time.Second)}
	tests := []struct {
		name  string
		verb  engine.Verb
		reply string
		want  engine.Decision
	}{
		{"Denial", engine.VerbAllow, reply(0, 4.5, 0.5, 0, 123, 9223372036, 854775807),
			engine.Decision{Limit: 5, Used: 4.5, Remaining: 0.5, RetryAfter: 123, ResetAfter: 1<<63 - 1}},
		{"Blocked", engine.VerbAllow, reply(2, 5, 0, 2, 0, 3, 0),
			engine.Decision{Limit: 5, Used: 5, RetryAfter: 2e9, ResetAfter: 3e9, Blocked: true}},
		{"ReservationThatFitsNow", engine.VerbReserve, reply(1, 1, 4, 0, 0, 0, 200),
			engine.Decision{Allowed: true, Limit: 5, Used: 1, Remaining: 4, ResetAfter: 200}},
		{"ReservationThatWaits", engine.VerbReserve, reply(5, 5, 0, 0, 0, 3, 5, 2, 999999999, 5764607523, 34234880),
			engine.Decision{Allowed: true, Limit: 5, Used: 5, ResetAfter: 3e9 + 5, Delay: 2999999999, At: 1<<62 + 1<<60}},
		{"ReservationBehindABlock", engine.VerbReserve, reply(7, 5, 0, 0, 0, 3, 5, 2, 0, 7, 0),
			engine.Decision{Allowed: true, Limit: 5, Used: 5, ResetAfter: 3e9 + 5, Delay: 2e9, At: 7e9, Blocked: true}},
		{"MarkBeforeTheEpoch", engine.VerbReserve, reply(5, 5, 0, 0, 0, 3, 5, 2, 0, -2, 999999999),
			engine.Decision{Allowed: true, Limit: 5, Used: 5, ResetAfter: 3e9 + 5, Delay: 2e9, At: -1e9 - 1}},
		{"PartialGrant", engine.VerbAtMost, reply(1, 5, 0, 0, 0, 1, 0, 2),
			engine.Decision{Allowed: true, Limit: 5, Used: 5, ResetAfter: 1e9, Granted: 2}},
		{"NothingGranted", engine.VerbAtMost, reply(0, 5, 0, 0, 7, 1, 0, 0),
			engine.Decision{Limit: 5, Used: 5, RetryAfter: 7, ResetAfter: 1e9}},
		{"ChargeIntoDebt", engine.VerbCharge, reply(0, 5, 0, 3, 0, 8, 0, 7.5),
			engine.Decision{Limit: 5, Used: 5, RetryAfter: 3e9, ResetAfter: 8e9, Granted: 7.5}},
		{"Refund", engine.VerbRefund, reply(1, 1, 4, 0, 0, 1, 0, 0.25),
			engine.Decision{Allowed: true, Limit: 5, Used: 1, Remaining: 4, ResetAfter: 1e9, Granted: 0.25}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d, err := decode(tt.reply, "k", p, tt.verb)
			require.NoError(t, err)
			require.Equal(t, tt.want, d)
		})
	}
}

func TestDecodeReportsConflict(t *testing.T) {
	p := &engine.Params{Kind: engine.KindGCRA, Limit: 5, Interval: int64(time.Second)}
	_, err := decode("\x80\x05\x01", "k", p, engine.VerbReserve)
	require.ErrorIs(t, err, sluice.ErrKeyConflict)
	require.ErrorContains(t, err, "sliding log")
}

// TestDecodeRejectsUnexpectedReplies requires an error, never a panic or
// a made-up decision, for replies of any other shape, or of a shape that
// the verb never gets.
func TestDecodeRejectsUnexpectedReplies(t *testing.T) {
	p := &engine.Params{Kind: engine.KindGCRA, Limit: 5, Interval: int64(time.Second)}
	valid := reply(1, 0, 5, 0, 0, 0, 0)
	waits := func(delayS, delayN, atS, atN float64) string {
		return reply(5, 5, 0, 0, 0, 1, 0, delayS, delayN, atS, atN)
	}
	grants := func(g float64) string { return reply(1, 5, 0, 0, 0, 1, 0, g) }
	allow, reserve, atMost := engine.VerbAllow, engine.VerbReserve, engine.VerbAtMost
	charge, refund := engine.VerbCharge, engine.VerbRefund
	for name, tt := range map[string]struct {
		verb  engine.Verb
		reply any
	}{
		"Nil":                 {allow, nil},
		"Integer":             {allow, int64(1)},
		"Array":               {allow, []any{valid}},
		"Empty":               {allow, ""},
		"Short":               {allow, valid[:len(valid)-1]},
		"Long":                {allow, valid + "\x00"},
		"UnknownStatus":       {allow, reply(16, 0, 5, 0, 0, 0, 0)},
		"InstantOfAGCRA":      {allow, reply(9, 4, 1, 0, 0, 1, 0, 1, 0)},
		"ConflictNoKind":      {allow, "\x80"},
		"ConflictNoIndex":     {allow, "\x80\x05"},
		"ConflictLong":        {allow, "\x80\x05\x01\x01"},
		"FractionalNanos":     {allow, reply(0, 5, 0, 0, 1.5, 0, 0)},
		"FractionalSeconds":   {allow, reply(0, 5, 0, 0.5, 0, 0, 0)},
		"NegativeSeconds":     {allow, reply(0, 5, 0, -1, 0, 0, 0)},
		"NanosOverASecond":    {allow, reply(0, 5, 0, 0, 1e9, 0, 0)},
		"NaNNanos":            {allow, reply(0, 5, 0, 0, math.NaN(), 0, 0)},
		"OverflowingDuration": {allow, reply(1, 0, 5, 0, 0, 9223372036, 854775808)},
		"HugeSeconds":         {allow, reply(1, 0, 5, 0, 0, 1e19, 0)},
		"GrantOfAnAllow":      {allow, grants(1)},
		"WaitOfAnAllow":       {allow, waits(1, 0, 2, 0)},
		"GrantOfAReservation": {reserve, grants(1)},
		"WaitOfAGrant":        {atMost, waits(1, 0, 2, 0)},
		"GrantMissing":        {atMost, valid},
		"DeniedWait":          {reserve, reply(4, 5, 0, 0, 0, 1, 0, 1, 0, 2, 0)},
		"WaitCutShort":        {reserve, waits(1, 0, 2, 0)[:70]},
		"ZeroDelay":           {reserve, waits(0, 0, 2, 0)},
		"NegativeDelay":       {reserve, waits(-1, 0, 2, 0)},
		"FractionalAt":        {reserve, waits(1, 0, 2, 0.5)},
		"OverflowingAt":       {reserve, waits(1, 0, 9223372036, 854775808)},
		"NegativeGrant":       {atMost, grants(-1)},
		"NaNGrant":            {atMost, grants(math.NaN())},
		"InfiniteGrant":       {atMost, grants(math.Inf(1))},
		"ChargeMissing":       {charge, valid},
		"RefundMissing":       {refund, valid},
		"WaitOfACharge":       {charge, waits(1, 0, 2, 0)},
		"InfiniteCharge":      {charge, grants(math.Inf(1))},
		"NegativeRefund":      {refund, grants(-1)},
	} {
		t.Run(name, func(t *testing.T) {
			d, err := decode(tt.reply, "k", p, tt.verb)
			require.Error(t, err)
			require.NotErrorIs(t, err, sluice.ErrKeyConflict)
			require.Equal(t, engine.Decision{Limit: 5}, d)
		})
	}
}

// leases are the Params of a concurrency limit: two slots of a minute.
var leases = &engine.Params{Kind: engine.KindConcurrency, Limit: 2, Interval: int64(time.Minute), MaxEntries: 4}

// TestDecodeReadsALeasesInstant reads the instant of a lease taken or
// extended, which has no delay, and a denied acquisition's ticket in the
// limit's line: Decision.At alone, after the durations.
func TestDecodeReadsALeasesInstant(t *testing.T) {
	tests := []struct {
		name  string
		verb  engine.Verb
		reply string
		want  engine.Decision
	}{
		{"LeaseTaken", engine.VerbAllow, reply(9, 1, 1, 0, 0, 60, 5, 1795262460, 5),
			engine.Decision{Allowed: true, Limit: 2, Used: 1, Remaining: 1, ResetAfter: time.Minute + 5, At: 1795262460e9 + 5}},
		{"LeaseExtended", engine.VerbExtend, reply(9, 2, 0, 0, 0, 60, 0, 1, 999999999),
			engine.Decision{Allowed: true, Limit: 2, Used: 2, ResetAfter: time.Minute, At: 2e9 - 1}},
		{"LeaseOfNothing", engine.VerbAllow, reply(1, 0, 2, 0, 0, 0, 0),
			engine.Decision{Allowed: true, Limit: 2, Remaining: 2}},
		{"Full", engine.VerbAllow, reply(0, 2, 0, 59, 7, 60, 0),
			engine.Decision{Limit: 2, Used: 2, RetryAfter: 59e9 + 7, ResetAfter: time.Minute}},
		{"InLine", engine.VerbAllow, reply(8, 2, 0, 59, 7, 60, 0, 0, 3),
			engine.Decision{Limit: 2, Used: 2, RetryAfter: 59e9 + 7, ResetAfter: time.Minute, At: 3}},
		{"LastTicket", engine.VerbAllow, reply(8, 2, 0, 59, 7, 60, 0, 9007199, 254740992),
			engine.Decision{Limit: 2, Used: 2, RetryAfter: 59e9 + 7, ResetAfter: time.Minute, At: 1 << 53}},
		{"Left", engine.VerbLeave, reply(1, 2, 0, 0, 0, 60, 0),
			engine.Decision{Allowed: true, Limit: 2, Used: 2, ResetAfter: time.Minute}},
		{"Released", engine.VerbCancel, reply(1, 1, 1, 0, 0, 60, 0),
			engine.Decision{Allowed: true, Limit: 2, Used: 1, Remaining: 1, ResetAfter: time.Minute}},
		{"ReleasedTwice", engine.VerbCancel, reply(0, 1, 1, 0, 0, 60, 0),
			engine.Decision{Limit: 2, Used: 1, Remaining: 1, ResetAfter: time.Minute}},
		{"NotExtended", engine.VerbExtend, reply(0, 1, 1, 0, 0, 60, 0),
			engine.Decision{Limit: 2, Used: 1, Remaining: 1, ResetAfter: time.Minute}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d, err := decode(tt.reply, "k", leases, tt.verb)
			require.NoError(t, err)
			require.Equal(t, tt.want, d)
		})
	}
}

// TestDecodeRejectsInconsistentLeases requires an error for an instant
// without a wait where no lease is taken or extended and no denied
// acquisition waits in line, or out of range.
func TestDecodeRejectsInconsistentLeases(t *testing.T) {
	holds := func(status byte, atS, atN float64) string { return reply(status, 1, 1, 0, 0, 60, 0, atS, atN) }
	allow, extend := engine.VerbAllow, engine.VerbExtend
	for name, tt := range map[string]struct {
		verb  engine.Verb
		reply string
	}{
		"InstantOfACheck":     {engine.VerbCheck, holds(9, 60, 0)},
		"InstantOfARelease":   {engine.VerbCancel, holds(9, 60, 0)},
		"InstantOfAReserve":   {engine.VerbReserve, holds(9, 60, 0)},
		"TicketBeyond2To53":   {allow, holds(8, 9007199, 254740993)},
		"ZeroTicket":          {allow, holds(8, 0, 0)},
		"InstantOfALeaving":   {engine.VerbLeave, holds(9, 60, 0)},
		"TicketOfALeaving":    {engine.VerbLeave, holds(8, 0, 1)},
		"DeniedExtension":     {extend, holds(8, 60, 0)},
		"InstantAndAWait":     {allow, reply(13, 1, 1, 0, 0, 60, 0, 1, 0, 60, 0, 60, 0)},
		"InstantCutShort":     {allow, holds(9, 60, 0)[:57]},
		"InstantMissing":      {allow, reply(9, 1, 1, 0, 0, 60, 0)},
		"ZeroInstant":         {allow, holds(9, 0, 0)},
		"InstantBeforeEpoch":  {extend, holds(9, -1, 0)},
		"FractionalInstant":   {allow, holds(9, 60, 0.5)},
		"NanosOverASecond":    {extend, holds(9, 60, 1e9)},
		"OverflowingInstant":  {allow, holds(9, 9223372036, 854775808)},
		"WaitOfALease":        {allow, reply(5, 1, 1, 0, 0, 60, 0, 1, 0, 60, 0)},
		"LongAfterTheInstant": {allow, holds(9, 60, 0) + "\x00"},
	} {
		t.Run(name, func(t *testing.T) {
			d, err := decode(tt.reply, "k", leases, tt.verb)
			require.Error(t, err)
			require.NotErrorIs(t, err, sluice.ErrKeyConflict)
			require.Equal(t, engine.Decision{Limit: 2}, d)
		})
	}
}

// groupOps are the ops of a group of two limits of different limits.
func groupOps(verb engine.Verb) []engine.GroupOp {
	return []engine.GroupOp{
		{Key: "a", Params: &engine.Params{Kind: engine.KindGCRA, Limit: 5, Interval: int64(time.Second)}, Op: engine.Op{Verb: verb, Cost: 1}},
		{Key: "b", Params: &engine.Params{Kind: engine.KindFixedWindow, Limit: 100, Interval: int64(time.Hour)}, Op: engine.Op{Verb: verb, Cost: 1}},
	}
}

func TestDecodeGroupReadsEachDecision(t *testing.T) {
	ops := groupOps(engine.VerbReserve)
	each := make([]engine.Decision, 2)
	b := "\x02" + reply(5, 50, 50, 0, 0, 3600, 0, 1, 0, 9, 0) +
		reply(5, 5, 0, 0, 0, 3, 0, 1, 0, 8, 500) + reply(1, 50, 50, 0, 0, 3600, 0)
	d, err := decodeGroup(b, ops, each)
	require.NoError(t, err)
	require.Equal(t, engine.Decision{Allowed: true, Limit: 100, Used: 50, Remaining: 50, ResetAfter: time.Hour, Delay: time.Second, At: 9e9}, d,
		"the group's decision is made from the limit it names, with its Limit")
	require.Equal(t, []engine.Decision{
		{Allowed: true, Limit: 5, Used: 5, ResetAfter: 3 * time.Second, Delay: time.Second, At: 8e9 + 500},
		{Allowed: true, Limit: 100, Used: 50, Remaining: 50, ResetAfter: time.Hour},
	}, each)
}

// TestDecodeGroupReadsALeasesInstant reads a group of a rate limit and a
// concurrency limit whose decision is the lease's: the group's instant is
// the lease's, and the rate limit's record has none.
func TestDecodeGroupReadsALeasesInstant(t *testing.T) {
	ops := groupOps(engine.VerbAllow)
	ops[1].Params = leases
	each := make([]engine.Decision, 2)
	lease := reply(9, 2, 0, 0, 0, 60, 0, 61, 0)
	d, err := decodeGroup("\x02"+lease+reply(1, 1, 4, 0, 0, 1, 0)+lease, ops, each)
	require.NoError(t, err)
	require.Equal(t, engine.Decision{Allowed: true, Limit: 2, Used: 2, ResetAfter: time.Minute, At: 61e9}, d)
	require.Equal(t, []engine.Decision{
		{Allowed: true, Limit: 5, Used: 1, Remaining: 4, ResetAfter: time.Second},
		{Allowed: true, Limit: 2, Used: 2, ResetAfter: time.Minute, At: 61e9},
	}, each)

	_, err = decodeGroup("\x02"+lease+lease+lease, ops, each)
	require.ErrorContains(t, err, "an instant where none can be", "the GCRA's record holds no lease")
	_, err = decodeGroup("\x01"+lease+reply(1, 1, 4, 0, 0, 1, 0)+lease, groupOps(engine.VerbAllow), make([]engine.Decision, 2))
	require.ErrorContains(t, err, "an instant where none can be", "a group without a concurrency limit holds no lease")
}

func TestDecodeGroupReportsTheConflictingKey(t *testing.T) {
	_, err := decodeGroup("\x80\x05\x02", groupOps(engine.VerbAllow), make([]engine.Decision, 2))
	require.ErrorIs(t, err, sluice.ErrKeyConflict)
	require.ErrorContains(t, err, `key "b" holds sliding log state, not fixed window`)
}

func TestDecodeGroupRejectsUnexpectedReplies(t *testing.T) {
	ops := groupOps(engine.VerbAllow)
	r := reply(1, 1, 4, 0, 0, 1, 0)
	for name, b := range map[string]any{
		"Nil":             nil,
		"Empty":           "",
		"NoLimitNamed":    "\x00" + r + r + r,
		"LimitOutOfRange": "\x03" + r + r + r,
		"OneRecordShort":  "\x01" + r + r,
		"CutShort":        "\x01" + r + r + r[:10],
		"Long":            "\x01" + r + r + r + "\x00",
		"WaitOfAnAllow":   "\x01" + r + r + reply(5, 5, 0, 0, 0, 3, 0, 1, 0, 8, 500),
		"ConflictOfNoKey": "\x80\x05\x03",
	} {
		t.Run(name, func(t *testing.T) {
			each := []engine.Decision{{Used: 7}, {Used: 7}}
			_, err := decodeGroup(b, ops, each)
			require.Error(t, err)
			require.NotErrorIs(t, err, sluice.ErrKeyConflict)
			require.Equal(t, []engine.Decision{{Used: 7}, {Used: 7}}, each, "each is left as it was")
		})
	}
}

// TestLibraryHasEveryFile requires the library's list of files and the
// Lua files embedded to be the same, each listed once, since a file left
// out would only show as a Lua error at run time.
func TestLibraryHasEveryFile(t *testing.T) {
	embedded, err := fs.Glob(luaFS, "lua/*.lua")
	require.NoError(t, err)
	var listed []string
	for _, f := range libraryFiles {
		listed = append(listed, "lua/"+f)
	}
	require.ElementsMatch(t, embedded, listed)
}
