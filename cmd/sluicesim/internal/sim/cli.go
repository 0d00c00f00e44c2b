package sim

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/sluice-go/sluice"
)

// Exit codes of the command.
const (
	exitOK    = 0
	exitError = 1 // the simulation or writing its output failed
	exitUsage = 2 // the input is wrong
)

// usageError marks an error in the command's input.
type usageError struct{ error }

func (e usageError) Unwrap() error { return e.error }

// listFlag collects a repeatable flag.
type listFlag []string

func (l *listFlag) String() string     { return strings.Join(*l, "; ") }
func (l *listFlag) Set(v string) error { *l = append(*l, v); return nil }

const usage = `sluicesim drives sluice's limiters with simulated traffic on simulated time,
and writes what they admit: a summary table on stdout, and CSV data and SVG and
PNG figures in the -out directory.

  sluicesim -limiter 'gcra rate=10/s burst=5' -traffic 'uniform rate=20/s' -duration 5s
  sluicesim -config sim.conf

Limiters, in the words of their constructors:
  leakybucket capacity=10 leak=5/s
  gcra rate=10/s burst=5
  tokenbucket rate=10/s [burst=20] [intervalrefill]
  fixedwindow limit=10 window=1s [anchored]
  slidinglog limit=10 window=1s [maxentries=10]
  slidingcounter limit=10 window=1s
each with an optional name=label.

Traffic (several -traffic flags are offered together):
  uniform rate=10/s            poisson rate=10/s [seed=1]
  bursts n=20 every=2s         edge n=5 [window=1s] [gap=1ms]
  greedy                       csv file=log.csv (rows timestamp,key,cost)
each but csv with optional cost=1, clients=1, key=client, start=0s; a rate=
is each client's.

A config file holds the same settings, one per line: "limiter gcra rate=10/s
burst=5", "traffic greedy", "duration 5s", ...; flags add to it.

Flags:
`

// Main runs the command with args (without the program name) and returns
// its exit code.
func Main(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	err := run(ctx, args, stdout, stderr)
	var u usageError
	switch {
	case err == nil:
		return exitOK
	case errors.Is(err, flag.ErrHelp):
		return exitOK
	case errors.As(err, &u):
		fmt.Fprintln(stderr, "sluicesim:", err)
		fmt.Fprintln(stderr, "run sluicesim -h for the words it takes")
		return exitUsage
	default:
		fmt.Fprintln(stderr, "sluicesim:", err)
		return exitError
	}
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("sluicesim", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(stderr, usage)
		fs.PrintDefaults()
	}
	var limiters, traffic listFlag
	fs.Var(&limiters, "limiter", "a limiter to simulate, as `'gcra rate=10/s burst=5'` (repeatable)")
	fs.Var(&traffic, "traffic", "traffic to offer, as `'uniform rate=20/s'` (repeatable)")
	config := fs.String("config", "", "read settings from `file` first")
	settings := map[string]*string{}
	for _, s := range []struct{ name, help string }{
		{"duration", "simulated `time` to run (default 10s, or the csv's length)"},
		{"window", "length of the intervals in which to find the most admitted (default: the longest limiter period)"},
		{"bin", "width of the figures' bins (default: 100 to 250 bins)"},
		{"watch", "the `key` whose state the figures draw (default: the first traffic's first key)"},
		{"plots", "figures to draw: all, each (one per limiter) or compare (side by side)"},
		{"title", "the figures' title (default: the traffic)"},
	} {
		settings[s.name] = fs.String(s.name, "", s.help)
	}
	out := fs.String("out", "sluicesim-out", "write CSV and figures into `dir` (\"\" writes only the table)")
	formats := fs.String("format", "svg,png", "figure formats: svg, png or both")
	every := fs.Int64("progress", 1_000_000, "report progress on stderr every `n` requests (0: never)")
	most := fs.Int64("max-requests", DefaultMaxRequests,
		"refuse a simulation that would offer a limiter more than `n` requests (each takes up to about 100 bytes)")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return usageError{err}
	}
	if fs.NArg() > 0 {
		return usageError{fmt.Errorf("unexpected argument %q: limiters and traffic go in -limiter and -traffic flags, quoted", fs.Arg(0))}
	}
	var c Config
	if *config != "" {
		f, err := os.Open(*config)
		if err != nil {
			return usageError{err}
		}
		c, err = ParseConfig(f, filepath.Dir(*config))
		f.Close()
		if err != nil {
			return usageError{fmt.Errorf("%s: %w", *config, err)}
		}
	}
	var err error
	fs.Visit(func(f *flag.Flag) {
		if v, ok := settings[f.Name]; ok && err == nil {
			err = c.Set(f.Name, *v, "")
		}
	})
	for _, l := range limiters {
		if err == nil {
			err = c.Set("limiter", l, "")
		}
	}
	for _, t := range traffic {
		if err == nil {
			err = c.Set("traffic", t, "")
		}
	}
	if err != nil {
		return usageError{err}
	}
	wantSVG, wantPNG, err := parseFormats(*formats)
	if err != nil {
		return usageError{err}
	}
	if *every < 0 {
		return usageError{fmt.Errorf("-progress %d: want 0 or more", *every)}
	}
	if *most < 1 {
		return usageError{fmt.Errorf("-max-requests %d: want 1 or more", *most)}
	}
	o := Options{ProgressEvery: *every, MaxRequests: *most}
	if *every > 0 {
		o.Progress = stderr
	}
	runs, err := Simulate(ctx, &c, o)
	if err != nil {
		if errors.Is(err, errConfig) || errors.Is(err, sluice.ErrCostExceedsLimit) || errors.Is(err, sluice.ErrInvalidCost) {
			return usageError{err}
		}
		return err
	}
	if err := WriteTable(stdout, summaries(runs)); err != nil {
		return err
	}
	if *out == "" {
		return nil
	}
	files, err := Outputs(runs, &c, wantSVG, wantPNG)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(*out, 0o755); err != nil {
		return err
	}
	for _, f := range files {
		if err := os.WriteFile(filepath.Join(*out, f.Name), f.Data, 0o644); err != nil {
			return err
		}
	}
	fmt.Fprintf(stderr, "sluicesim: wrote %d files to %s\n", len(files), *out)
	return nil
}

func parseFormats(v string) (svg, png bool, err error) {
	for _, f := range strings.Split(v, ",") {
		switch strings.ToLower(strings.TrimSpace(f)) {
		case "svg":
			svg = true
		case "png":
			png = true
		case "":
		default:
			return false, false, fmt.Errorf("-format %q: want svg, png or svg,png", v)
		}
	}
	if !svg && !png {
		return false, false, fmt.Errorf("-format %q: want svg, png or svg,png", v)
	}
	return svg, png, nil
}

// File is one output file.
type File struct {
	Name string
	Data []byte
}

// Outputs returns the files a simulation writes: summary.txt (the table
// written on stdout), summary.csv, series.csv
// (requests per bin) and state.csv (the watched key's state), the data
// behind the figures, then the figures the config asks for.
func Outputs(runs []Run, c *Config, svg, png bool) ([]File, error) {
	var files []File
	for _, d := range []struct {
		name  string
		write func(io.Writer) error
	}{
		{"summary.txt", func(w io.Writer) error { return WriteTable(w, summaries(runs)) }},
		{"summary.csv", func(w io.Writer) error { return WriteCSV(w, summaries(runs)) }},
		{"series.csv", func(w io.Writer) error { return WriteSeries(w, runs) }},
		{"state.csv", func(w io.Writer) error { return WriteState(w, runs) }},
	} {
		var b bytes.Buffer
		if err := d.write(&b); err != nil {
			return nil, err
		}
		files = append(files, File{d.name, b.Bytes()})
	}
	names := figureNames(runs, c)
	figures := map[string]Figure{}
	for i, name := range names {
		if name == "compare" {
			figures[name] = CompareFigure(runs, c)
		} else {
			figures[name] = LimiterFigure(runs[i], c)
		}
	}
	for _, name := range names {
		for _, format := range []struct {
			ext  string
			want bool
		}{{"svg", svg}, {"png", png}} {
			if !format.want {
				continue
			}
			data, err := render(figures[name], format.ext)
			if err != nil {
				return nil, fmt.Errorf("%s.%s: %w", name, format.ext, err)
			}
			files = append(files, File{name + "." + format.ext, data})
		}
	}
	return files, nil
}

// figureNames returns the names of the figures the config asks for,
// without extension: one per limiter, in order, then "compare".
func figureNames(runs []Run, c *Config) []string {
	var names []string
	if c.Plots != "compare" {
		seen := map[string]int{}
		for _, r := range runs {
			name := slug(r.Name)
			if seen[name]++; seen[name] > 1 {
				name = fmt.Sprintf("%s-%d", name, seen[name])
			}
			names = append(names, name)
		}
	}
	if c.Plots != "each" && len(runs) > 1 {
		names = append(names, "compare")
	}
	return names
}

func summaries(runs []Run) []Summary {
	sums := make([]Summary, len(runs))
	for i, r := range runs {
		sums[i] = r.Summary
	}
	return sums
}

// slug turns a label into a file name: lower-case letters, digits and
// dashes.
func slug(name string) string {
	var b strings.Builder
	dash := false
	for _, r := range strings.ToLower(name) {
		switch {
		case r >= 'a' && r <= 'z' || r >= '0' && r <= '9':
			if dash && b.Len() > 0 {
				b.WriteByte('-')
			}
			b.WriteRune(r)
			dash = false
		default:
			dash = true
		}
	}
	if b.Len() == 0 {
		return "limiter"
	}
	return b.String()
}
