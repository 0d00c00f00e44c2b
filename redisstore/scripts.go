package redisstore

import (
	_ "embed"
	"strings"
	"sync/atomic"

	"github.com/redis/go-redis/v9"

	"github.com/sluice-go/sluice/engine"
)

//go:embed apply.lua
var applySource string

// The algorithms as the scripts know them, each with the sections of
// apply.lua its step function needs.
const (
	meterScript = iota
	gcraScript
	intervalRefillScript
	fixedWindowScript
	slidingLogScript
	slidingCounterScript
	numScripts
)

var scriptSections = [numScripts][]string{
	meterScript:          {"ceilNanos", "floorNanos", "drain", "meter"},
	gcraScript:           {"gcra"},
	intervalRefillScript: {"refills", "idiv", "mod", "intervalRefill"},
	fixedWindowScript:    {"mod", "window", "fixedWindow"},
	slidingLogScript:     {"slidingLog"},
	slidingCounterScript: {"ceilNanos", "mod", "window", "slidingCounter"},
}

// source is apply.lua cut into its prelude and its sections, which start
// with a line "-- @section name", in the file's order.
var source = splitSections(applySource)

type sections struct {
	prelude string
	names   []string
	bodies  map[string]string
}

func splitSections(text string) sections {
	parts := strings.Split(text, "\n-- @section ")
	s := sections{prelude: parts[0], bodies: make(map[string]string, len(parts))}
	for _, part := range parts[1:] {
		name, body, _ := strings.Cut(part, "\n")
		s.names = append(s.names, name)
		s.bodies[name] = body
	}
	return s
}

// text returns the script made of the prelude, the sections that the
// algorithms in mask (bits of the constants above) need, in the file's
// order, the decide section and main, the section that decides: "single"
// or "group". A script defines only the functions its algorithms run,
// since Redis creates a script's functions anew on every call.
func (s sections) text(mask int, main string) string {
	need := map[string]bool{"decide": true, main: true}
	for i, names := range scriptSections {
		if mask&(1<<i) != 0 {
			for _, name := range names {
				need[name] = true
			}
		}
	}
	var b strings.Builder
	b.WriteString(s.prelude)
	for _, name := range s.names {
		if need[name] && name != main {
			b.WriteString(s.bodies[name])
		}
	}
	b.WriteString(s.bodies[main]) // last, for it ends with the reply
	return b.String()
}

// scripts holds the scripts of single decisions, one per algorithm.
var scripts = func() (built [numScripts]*redis.Script) {
	for i := range built {
		built[i] = redis.NewScript(source.text(1<<i, "single"))
	}
	return built
}()

// scriptIndex returns the index of p's algorithm among the scripts'.
func scriptIndex(p *engine.Params) int {
	switch p.Kind {
	case engine.KindLeakyBucket:
		return meterScript
	case engine.KindGCRA:
		return gcraScript
	case engine.KindTokenBucket:
		if p.IntervalRefill {
			return intervalRefillScript
		}
		return meterScript
	case engine.KindFixedWindow:
		return fixedWindowScript
	case engine.KindSlidingLog:
		return slidingLogScript
	}
	return slidingCounterScript
}

// scriptOf returns the script that decides one op under p.
func scriptOf(p *engine.Params) *redis.Script { return scripts[scriptIndex(p)] }

// groupScripts holds a store's scripts of group decisions, one for each
// set of algorithms a group has met, built when first needed: a group
// script runs only the algorithms of its limits.
type groupScripts [1 << numScripts]atomic.Pointer[redis.Script]

// of returns the script that decides a group of limits whose algorithms
// are the bits of mask.
func (g *groupScripts) of(mask int) *redis.Script {
	if sc := g[mask].Load(); sc != nil {
		return sc
	}
	// Callers racing here build the same script: any of them will do.
	sc := redis.NewScript(source.text(mask, "group"))
	g[mask].Store(sc)
	return sc
}
