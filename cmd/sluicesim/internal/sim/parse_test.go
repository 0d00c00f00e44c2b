package sim

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sluice-go/sluice"
	"github.com/sluice-go/sluice/engine"
	"github.com/sluice-go/sluice/internal/simclock"
)

func TestParseLimiterBuildsWhatTheConstructorBuilds(t *testing.T) {
	params := func(l *sluice.Limiter, err error) engine.Params {
		require.NoError(t, err)
		p, _ := l.Params()
		return p
	}
	tests := map[string]struct {
		spec string
		name string
		want engine.Params
	}{
		"gcra": {"gcra rate=10/s burst=5", "gcra rate=10/s burst=5",
			params(sluice.NewGCRA(sluice.PerSecond(10), 5))},
		"words ignore case, dashes and underscores": {"GCRA Rate=100/min BURST=20", "GCRA Rate=100/min BURST=20",
			params(sluice.NewGCRA(sluice.PerMinute(100), 20))},
		"leaky bucket": {"leaky-bucket capacity=1000 leak=1000/720h", "leaky-bucket capacity=1000 leak=1000/720h",
			params(sluice.NewLeakyBucket(1000, sluice.Per(1000, 720*time.Hour)))},
		"leaky bucket with rate for leak": {"leakybucket capacity=5 rate=5/s", "leakybucket capacity=5 rate=5/s",
			params(sluice.NewLeakyBucket(5, sluice.PerSecond(5)))},
		"token bucket": {"token_bucket rate=10/s", "token_bucket rate=10/s",
			params(sluice.NewTokenBucket(sluice.PerSecond(10), 10))},
		"token bucket with burst and interval refill": {"tokenbucket intervalrefill rate=3/500ms burst=20", "tokenbucket intervalrefill rate=3/500ms burst=20",
			params(sluice.NewTokenBucket(sluice.Per(3, 500*time.Millisecond), 20, sluice.WithIntervalRefill()))},
		"fixed window, anchored": {"fixedwindow limit=10 window=1s anchored", "fixedwindow limit=10 window=1s anchored",
			params(sluice.NewFixedWindow(10, time.Second, sluice.WithAnchoredWindows()))},
		"a flag written =false is off": {"tokenbucket rate=10/s intervalrefill=false", "tokenbucket rate=10/s intervalrefill=false",
			params(sluice.NewTokenBucket(sluice.PerSecond(10), 10))},
		"a flag may be written =true": {"fixedwindow limit=10 window=1m anchored=true", "fixedwindow limit=10 window=1m anchored=true",
			params(sluice.NewFixedWindow(10, time.Minute, sluice.WithAnchoredWindows()))},
		"sliding log": {"slidinglog limit=3 window=250ms maxentries=2", "slidinglog limit=3 window=250ms maxentries=2",
			params(sluice.NewSlidingLog(3, 250*time.Millisecond, sluice.WithMaxEntries(2)))},
		"sliding counter, named, window in seconds": {"slidingcounter limit=10 window=0.5 name=api", "api",
			params(sluice.NewSlidingCounter(10, 500*time.Millisecond))},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			ls, err := ParseLimiter(tt.spec)
			require.NoError(t, err)
			require.Equal(t, tt.name, ls.Name)
			l, err := ls.New(simclock.New(Epoch))
			require.NoError(t, err)
			p, _ := l.Params()
			require.Equal(t, tt.want, p)
			require.NoError(t, l.Close())
		})
	}
}

func TestParseLimiterSaysWhatIsWrong(t *testing.T) {
	tests := map[string]struct{ spec, want string }{
		"nothing":                       {"  ", "empty description"},
		"no algorithm":                  {"rate=10/s burst=5", "starts with a parameter"},
		"unknown algorithm":             {"leakybuckt capacity=1 leak=1/s", `unknown algorithm "leakybuckt" (want one of fixedwindow, gcra, leakybucket,`},
		"missing parameter":             {"gcra rate=10/s", "burst is required (for example burst=5)"},
		"missing rate":                  {"gcra burst=5", "rate is required (for example rate=10/s)"},
		"misspelt parameter":            {"gcra rate=10/s burst=5 brust=3", `unknown parameter "brust" for gcra (it takes rate=, burst=, name=)`},
		"parameter of another":          {"tokenbucket rate=10/s anchored", `unknown parameter "anchored" for tokenbucket`},
		"a rate without a period":       {"gcra rate=10 burst=5", `"10" is not a rate: write amount/period`},
		"an unknown period":             {"gcra rate=10/fortnight burst=5", `"fortnight" is not a period`},
		"an amount that is no number":   {"gcra rate=ten/s burst=5", `"ten" is not a number`},
		"a burst that is no number":     {"gcra rate=10/s burst=five", `burst: "five" is not a number`},
		"a window that is no duration":  {"fixedwindow limit=10 window=soon", `window: "soon" is not a duration`},
		"a zero window":                 {"fixedwindow limit=10 window=0s", "window: must be positive"},
		"a negative burst":              {"gcra rate=10/s burst=-1", "sluice: invalid configuration: GCRA: limit must be positive and finite, at most 2^1000"},
		"a zero rate":                   {"tokenbucket rate=0/s", "sluice: invalid configuration: rate 0/1s: amount must be positive and finite"},
		"a rate too fast":               {"gcra rate=1e10/s burst=1", "faster than one unit per nanosecond"},
		"a flag neither true nor false": {"fixedwindow limit=10 window=1s anchored=yes", `anchored: "yes" is neither true nor false (or write anchored alone for true)`},
		"given twice":                   {"fixedwindow limit=10 window=1s anchored anchored", "anchored is given twice"},
		"leak and rate":                 {"leakybucket capacity=1 leak=1/s rate=1/s", "leak and rate are the same parameter"},
		"no value":                      {"gcra rate= burst=5", "rate= has no value"},
		"no name":                       {"gcra =5", `"=5" has no parameter name`},
		"max entries not a whole count": {"slidinglog limit=3 window=1s maxentries=0", `maxentries: "0" is not a whole number of at least 1`},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			_, err := ParseLimiter(tt.spec)
			require.Error(t, err)
			require.Contains(t, err.Error(), tt.want)
			require.True(t, strings.HasPrefix(err.Error(), "limiter "), "the error says it is about a limiter: %v", err)
		})
	}
}

// offered returns the first n requests of a traffic spec's clients, in the
// order the simulation would decide them (with every request admitted).
func offered(t *testing.T, spec string, n int) []Request {
	t.Helper()
	ts, err := ParseTraffic(spec, t.TempDir())
	require.NoError(t, err)
	var q queue
	for _, src := range ts.sources(Epoch.UnixNano()) {
		q.add(&event{src: src}, nil, time.Hour)
	}
	var out []Request
	for len(out) < n && q.Len() > 0 {
		e := q.pop()
		out = append(out, e.req)
		e.prev = outcome{e.req, sluice.Decision{Allowed: true}}
		q.add(e, &e.prev, time.Hour)
	}
	return out
}

func TestTrafficPatternsOfferTheirRequests(t *testing.T) {
	at := func(ds ...time.Duration) []time.Duration { return ds }
	ms := time.Millisecond
	tests := map[string]struct {
		spec string
		want []time.Duration
		keys []string
	}{
		"uniform, rounded to the nearest nanosecond": {"uniform rate=3/s", at(0, 333333333, 666666667, time.Second), nil},
		"uniform from a start":                       {"uniform rate=2/s start=250ms", at(250*ms, 750*ms, 1250*ms), nil},
		"bursts":                                     {"bursts n=2 every=1s", at(0, 0, time.Second, time.Second, 2*time.Second), nil},
		"edge, on both sides of each boundary":       {"edge n=2 window=1s gap=1ms", at(999*ms, 999*ms, time.Second, time.Second, 1999*ms), nil},
		"edge skips a boundary too close to the start": {"edge n=1 window=1s gap=10ms start=995ms",
			at(1990*ms, 2*time.Second), nil},
		"several clients take turns": {"uniform rate=1/s clients=3 key=user", at(0, 0, 0, time.Second),
			[]string{"user-1", "user-2", "user-3", "user-1"}},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			reqs := offered(t, tt.spec, len(tt.want))
			var got []time.Duration
			var keys []string
			for _, r := range reqs {
				got = append(got, r.At)
				keys = append(keys, r.Key)
				require.Equal(t, 1.0, r.Cost)
			}
			require.Equal(t, tt.want, got)
			if tt.keys != nil {
				require.Equal(t, tt.keys, keys)
			}
		})
	}
}

func TestPoissonTrafficIsSeeded(t *testing.T) {
	a := offered(t, "poisson rate=100/s seed=1 clients=2", 2000)
	require.Equal(t, a, offered(t, "poisson rate=100/s seed=1 clients=2", 2000), "the same seed, the same arrivals")
	require.NotEqual(t, a, offered(t, "poisson rate=100/s seed=2 clients=2", 2000), "another seed, other arrivals")
	// 1000 arrivals per client at 100/s take about 10 s.
	last := a[len(a)-1].At
	require.InDelta(t, 10, last.Seconds(), 1)
	require.NotEqual(t, a[0].At, a[1].At, "each client has its own arrivals")
}

func TestGreedyTrafficRetriesExactlyAtRetryAfter(t *testing.T) {
	c := Config{Duration: 2 * time.Second}
	require.NoError(t, c.Set("limiter", "gcra rate=2/s burst=2", ""))
	require.NoError(t, c.Set("traffic", "greedy", ""))
	runs, err := Simulate(t.Context(), &c, Options{Trace: true})
	require.NoError(t, err)
	var got []string
	for _, d := range runs[0].Trace {
		got = append(got, d.Request.At.String()+map[bool]string{true: " admitted", false: " denied"}[d.Allowed])
	}
	require.Equal(t, []string{
		"0s admitted", "0s admitted", "0s denied",
		"500ms admitted", "500ms denied",
		"1s admitted", "1s denied",
		"1.5s admitted", "1.5s denied",
	}, got)
	require.Equal(t, 500*time.Millisecond, runs[0].Summary.RetryP50)
}

func TestParseTrafficSaysWhatIsWrong(t *testing.T) {
	tests := map[string]struct{ spec, want string }{
		"unknown pattern":                    {"zigzag rate=1/s", `unknown pattern "zigzag" (want uniform, poisson, bursts, edge, greedy or csv)`},
		"no rate":                            {"uniform", "rate is required"},
		"a zero rate":                        {"uniform rate=0/s", "rate: 0/1s must be positive"},
		"a seed that is no seed":             {"poisson rate=1/s seed=-1", `seed: "-1" is not a whole number`},
		"no burst size":                      {"bursts every=1s", "n is required"},
		"a burst of none":                    {"bursts n=0 every=1s", `n: "0" is not a whole number of at least 1`},
		"no burst period":                    {"bursts n=3", "every is required"},
		"a gap wider than the window":        {"edge n=5 window=1s gap=2s", "want 0 < gap < window"},
		"a greedy client asking for nothing": {"greedy cost=0", "positive for greedy"},
		"a cost that is no number":           {"uniform rate=1/s cost=NaN", "want a finite cost"},
		"a negative start":                   {"greedy start=-1s", "start: must not be negative"},
		"no clients":                         {"greedy clients=0", `clients: "0" is not a whole number of at least 1`},
		"more clients than memory holds":     {"greedy clients=1000000000000000", "clients: 1000000000000000: at most 1000000"},
		"a csv without a file":               {"csv", "file is required"},
		"a csv that is not there":            {"csv file=nowhere.csv", "no such file"},
		"a csv with a cost":                  {"csv file=x.csv cost=2", `unknown parameter "cost" for csv (it takes file=)`},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			_, err := ParseTraffic(tt.spec, t.TempDir())
			require.Error(t, err)
			require.Contains(t, err.Error(), tt.want)
			require.True(t, strings.HasPrefix(err.Error(), "traffic "), "the error says it is about traffic: %v", err)
		})
	}
}

func TestCSVTrafficReadsAReducedAccessLog(t *testing.T) {
	tests := map[string]struct {
		csv  string
		want []Request
	}{
		"times from the first one's whole second, sorted": {
			"timestamp,key,cost\n2026-11-22T10:00:00.75Z,a,1\n2026-11-22T10:00:00.5Z,b,2.5\n2026-11-22T10:00:01Z,a,\n",
			[]Request{{500 * time.Millisecond, "b", 2.5}, {750 * time.Millisecond, "a", 1}, {time.Second, "a", 1}},
		},
		"seconds since the start, and defaults": {
			"0.25,,\n1.5\n2s,k,3\n",
			[]Request{{250 * time.Millisecond, "client", 1}, {1500 * time.Millisecond, "client", 1}, {2 * time.Second, "k", 3}},
		},
		"equal times keep their order, comments are skipped": {
			"# a comment\n1,x,1\n1,y,1\n0,z,1\n",
			[]Request{{0, "z", 1}, {time.Second, "x", 1}, {time.Second, "y", 1}},
		},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := parseCSV(strings.NewReader(tt.csv))
			require.NoError(t, err)
			require.Equal(t, tt.want, got)
		})
	}
}

func TestCSVTrafficSaysWhichLineIsWrong(t *testing.T) {
	tests := map[string]struct{ csv, want string }{
		"empty":               {"", "no rows of timestamp,key,cost"},
		"only a header":       {"timestamp,key,cost\n", "no rows"},
		"a bad timestamp":     {"0,a,1\nlater,a,1\n", `line 2: timestamp "later" is neither an RFC 3339 time nor seconds since the start`},
		"a bad cost":          {"0,a,1\n1,a,-2\n", `line 2: cost "-2" is not a finite number of at least 0`},
		"too many columns":    {"0,a,1,extra\n", "line 1: 4 columns, want timestamp,key,cost"},
		"times after offsets": {"0,a,1\n2026-11-22T10:00:00Z,a,1\n", `line 2: timestamp "2026-11-22T10:00:00Z" mixes a time with the earlier rows' offsets`},
		"offsets after times": {"2026-11-22T10:00:00Z,a,1\n0.5,a,1\n", `line 2: timestamp "0.5" mixes an offset with the earlier rows' times`},
		"a negative offset":   {"-1,a,1\n", "is before the start"},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			_, err := parseCSV(strings.NewReader(tt.csv))
			require.ErrorContains(t, err, tt.want)
		})
	}
}

func TestParseConfigReadsTheFlagsWords(t *testing.T) {
	conf := `# every setting
limiter gcra rate=5/s burst=5   # with a comment
limiter fixedwindow limit=5 window=1s

traffic greedy
traffic uniform rate=1/s key=other
duration 3s
window 500ms
bin 100ms
watch other
plots compare
title a test
`
	c, err := ParseConfig(strings.NewReader(conf), "")
	require.NoError(t, err)
	require.Len(t, c.Limiters, 2)
	require.Equal(t, "gcra rate=5/s burst=5", c.Limiters[0].Name)
	require.Len(t, c.Traffic, 2)
	require.Equal(t, Config{Limiters: c.Limiters, Traffic: c.Traffic, Duration: 3 * time.Second, Window: 500 * time.Millisecond,
		Bin: 100 * time.Millisecond, Watch: "other", Plots: "compare", Title: "a test"}, c)
}

func TestParseConfigSaysWhichLineIsWrong(t *testing.T) {
	tests := map[string]struct{ conf, want string }{
		"unknown setting":    {"limiter gcra rate=1/s burst=1\nspeed 3\n", `line 2: unknown setting "speed"`},
		"a bad limiter":      {"\n\nlimiter gcra rate=1/s\n", "line 3: limiter \"gcra rate=1/s\": burst is required"},
		"a bad duration":     {"duration forever\n", `line 1: duration "forever" is not a duration`},
		"a negative window":  {"window -1s\n", `line 1: window "-1s": must be positive`},
		"a setting no value": {"traffic\n", "line 1: traffic needs a value"},
		"unknown plots":      {"plots some\n", `line 1: plots "some": want all, each or compare`},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			_, err := ParseConfig(strings.NewReader(tt.conf), "")
			require.ErrorContains(t, err, tt.want)
		})
	}
}

func TestRoundBinGivesOneHundredToTwoHundredFiftyBins(t *testing.T) {
	for _, d := range []time.Duration{time.Second, 5 * time.Second, 4500 * time.Millisecond, time.Hour, 1000 * time.Second, 7 * time.Minute} {
		b := roundBin(d)
		n := (d + b - 1) / b
		require.True(t, n >= 100 && n <= 250, "%v: bin %v gives %d bins", d, b, n)
	}
}
