package storetest_test

import (
	"bytes"
	"context"
	"os"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/sluice-go/sluice/engine"
	"github.com/sluice-go/sluice/storetest"
	"github.com/sluice-go/sluice/storetest/internal/vectors"
)

const vectorsFile = "testdata/vectors.json"

const regenerate = "regenerate it with `go generate ./storetest`"

// TestVectorsAreUpToDate generates the vectors again from Params.Step and
// requires the committed file to be the same, byte for byte, so that it
// never goes stale when the specification changes.
func TestVectorsAreUpToDate(t *testing.T) {
	want, err := vectors.Marshal(vectors.Generate())
	require.NoError(t, err)
	got, err := os.ReadFile(vectorsFile)
	require.NoError(t, err, "%s is missing: %s", vectorsFile, regenerate)
	if bytes.Equal(want, got) {
		return
	}
	wantLines, gotLines := strings.Split(string(want), "\n"), strings.Split(string(got), "\n")
	for i := range max(len(wantLines), len(gotLines)) {
		w, g := line(wantLines, i), line(gotLines, i)
		if w != g {
			t.Fatalf("%s is stale at line %d: %s\nwant %s\ngot  %s", vectorsFile, i+1, regenerate, w, g)
		}
	}
}

func line(lines []string, i int) string {
	if i < len(lines) {
		return lines[i]
	}
	return "(end of file)"
}

// TestVectorsReplayAgainstStep replays the committed vectors, as every
// store does, against a store that runs Params.Step itself.
func TestVectorsReplayAgainstStep(t *testing.T) {
	storetest.RunVectors(t, &stepStore{states: map[string]engine.State{}}, storetest.Exact())
}

// TestVectorsCoverEveryAlgorithmVerbAndOption requires a vector of every
// algorithm the suite runs with every verb, of every algorithm under a
// penalty and with counted denials, and one that sets each field of
// Params and of Op: a new verb or option that has no vectors fails here.
func TestVectorsCoverEveryAlgorithmVerbAndOption(t *testing.T) {
	data, err := os.ReadFile(vectorsFile)
	require.NoError(t, err)
	cases, err := vectors.Unmarshal(data)
	require.NoError(t, err)
	require.Greater(t, len(cases), 300)

	var verbs []engine.Verb
	for v := engine.VerbAllow; !strings.HasPrefix(v.String(), "verb("); v++ {
		verbs = append(verbs, v)
	}
	uses := func(c vectors.Case, v engine.Verb) bool {
		return slices.ContainsFunc(c.Steps, func(s vectors.Step) bool { return s.Op.Verb == v })
	}
	for _, p := range storetest.Algorithms() {
		for _, v := range verbs {
			require.True(t, slices.ContainsFunc(cases, func(c vectors.Case) bool { return c.Params == p && uses(c, v) }),
				"no vector of %v with %v", p, v)
		}
		for option, set := range map[string]func(engine.Params) bool{
			"a penalty":       func(q engine.Params) bool { return q.Penalty > 0 },
			"counted denials": func(q engine.Params) bool { return q.CountDenied },
		} {
			require.True(t, slices.ContainsFunc(cases, func(c vectors.Case) bool { return c.Params.Kind == p.Kind && set(c.Params) }),
				"no vector of %v with %s", p.Kind, option)
		}
	}

	var params []engine.Params
	var ops []engine.Op
	for _, c := range cases {
		params = append(params, c.Params)
		for _, s := range c.Steps {
			if s.Params != nil {
				params = append(params, *s.Params)
			}
			ops = append(ops, s.Op)
		}
	}
	requireEveryFieldSet(t, params)
	requireEveryFieldSet(t, ops)
}

// TestVectorsChangeTheLimitOfEveryAlgorithm requires, for every algorithm
// and variant the suite runs, a vector in which the key's limit changes:
// some of its steps run under other Params of the algorithm and mode
// (Kind, Anchored, IntervalRefill), and a GCRA vector whose denial carries
// the key's state over to the new limit, which a store must write back.
func TestVectorsChangeTheLimitOfEveryAlgorithm(t *testing.T) {
	data, err := os.ReadFile(vectorsFile)
	require.NoError(t, err)
	cases, err := vectors.Unmarshal(data)
	require.NoError(t, err)

	sameMode := func(p, q engine.Params) bool {
		return p.Kind == q.Kind && p.Anchored == q.Anchored && p.IntervalRefill == q.IntervalRefill
	}
	changes := func(c vectors.Case, p engine.Params) bool {
		if !sameMode(c.Params, p) {
			return false
		}
		return slices.ContainsFunc(c.Steps, func(s vectors.Step) bool { return s.Params != nil })
	}
	for _, p := range storetest.Algorithms() {
		require.True(t, slices.ContainsFunc(cases, func(c vectors.Case) bool { return changes(c, p) }),
			"no vector changes the limit of %v", p)
	}
	for _, c := range cases {
		for i, s := range c.Steps {
			if s.Params != nil {
				require.True(t, sameMode(c.Params, *s.Params), "%s: op %d runs under another algorithm or mode", c.Name, i)
				require.NoError(t, s.Params.Validate(), "%s: op %d", c.Name, i)
			}
		}
	}

	// A denied Allow that carries a GCRA state over: the spec's state
	// before it, replayed.
	carried := false
	for _, c := range cases {
		var s engine.State
		for _, st := range c.Steps {
			p := c.Params
			if st.Params != nil {
				p = *st.Params
			}
			carries := p.Carries(&s, &st.Op)
			in := s
			in.Log = slices.Clone(s.Log)
			next, d, err := p.Step(in, st.Op)
			if carries && err == nil && !d.Allowed && !p.Records(st.Op.Verb, &d) {
				carried = true
			}
			if (err == nil || p.Overflows(st.Op, err)) && (p.Records(st.Op.Verb, &d) || carries) {
				s = next
			}
		}
	}
	require.True(t, carried, "no vector carries a GCRA state over on a denial")
}

// requireEveryFieldSet requires each field of T to be set (not zero) in
// one of values at least.
func requireEveryFieldSet[T any](t *testing.T, values []T) {
	typ := reflect.TypeFor[T]()
	for i := range typ.NumField() {
		set := slices.ContainsFunc(values, func(v T) bool { return !reflect.ValueOf(v).Field(i).IsZero() })
		require.True(t, set, "no vector sets %v.%s: add its vectors to storetest/internal/vectors in the change that adds it",
			typ, typ.Field(i).Name)
	}
}

// stepStore is the specification as a store: Params.Step on a map.
type stepStore struct {
	mu     sync.Mutex
	states map[string]engine.State
}

// Apply steps key's state and writes it back as a store does: iff the op
// was decided, and the decision records or the step carries the state
// over to p's limit.
func (s *stepStore) Apply(_ context.Context, key string, p *engine.Params, op engine.Op) (engine.Decision, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	state := s.states[key]
	carries := p.Carries(&state, &op)
	state.Log = slices.Clone(state.Log) // which a step may rewrite
	next, d, err := p.Step(state, op)
	if (err == nil || p.Overflows(op, err)) && (p.Records(op.Verb, &d) || carries) {
		s.states[key] = next
	}
	return d, err
}

func (s *stepStore) Reset(_ context.Context, key string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.states, key)
	return nil
}
