package sluicehttp_test

import (
	"bufio"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sluice-go/sluice"
	"github.com/sluice-go/sluice/sluicehttp"
)

func TestFractionalBurstPolicyDividesToTheRate(t *testing.T) {
	// A burst of 2.5 at 0.5 per second holds 2 whole requests, which
	// drain in 4 seconds: q/w is the rate.
	lim, err := sluice.NewGCRA(sluice.Per(1, 2*time.Second), 2.5, sluice.WithClock(newClock()))
	require.NoError(t, err)
	w := newServer(t, lim).get()
	require.Equal(t, `"default";q=2;w=4`, w.Header().Get("RateLimit-Policy"))
}

func TestBurstBelowOneUnitIsAConfigurationError(t *testing.T) {
	lim, err := sluice.NewGCRA(sluice.PerSecond(1), 0.5, sluice.WithClock(newClock()))
	require.NoError(t, err)
	_, err = sluicehttp.New(lim)
	require.ErrorIs(t, err, sluice.ErrInvalidConfig)
}

// TestGuideSnippetShowsWhatTheMiddlewareSends runs the configuration of
// the first snippet of docs/http.md and compares the fields it sends
// with the fields the guide shows beside it.
func TestGuideSnippetShowsWhatTheMiddlewareSends(t *testing.T) {
	shown := guideFields(t, "../docs/http.md")
	lim, err := sluice.NewGCRA(sluice.PerMinute(100), 20, sluice.WithClock(newClock())) // as in the guide
	require.NoError(t, err)
	w := newServer(t, lim).get()
	require.Equal(t, http.StatusOK, w.Code)
	require.Equal(t, shown["RateLimit-Policy"], w.Header().Get("RateLimit-Policy"))
	require.Equal(t, shown["RateLimit"], w.Header().Get("RateLimit"))
}

// guideFields returns the first RateLimit-Policy and RateLimit lines a
// guide shows.
func guideFields(t *testing.T, path string) map[string]string {
	t.Helper()
	f, err := os.Open(path)
	require.NoError(t, err)
	defer f.Close()
	fields := map[string]string{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		name, value, ok := strings.Cut(sc.Text(), ": ")
		if ok && (name == "RateLimit-Policy" || name == "RateLimit") && fields[name] == "" {
			fields[name] = value
		}
	}
	require.NoError(t, sc.Err())
	require.Len(t, fields, 2, "the guide shows both fields")
	return fields
}
