package sluice_test

import (
	"os/exec"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestUsualVerbsInlineAtTheCaller pins what the compiler says of the
// verbs a request calls: each is small enough to be inlined, so that its
// Decision is written into the caller's variable rather than copied out
// of the verb's frame (432 bytes for a group's). A verb that grows past
// the inlining budget keeps working, only slower, which no other test
// notices.
func TestUsualVerbsInlineAtTheCaller(t *testing.T) {
	goCmd, err := exec.LookPath("go")
	require.NoError(t, err, "the go command, which compiles the package")
	out, err := exec.Command(goCmd, "build", "-gcflags=-m", ".").CombinedOutput()
	require.NoError(t, err, "%s", out)
	for _, verb := range []string{
		"(*Limiter).Allow",
		"(*Limiter).CanAccept",
		"(*Limiter).Fillup",
		"(*Limiter).AllowAtMost",
		"(*Limiter).Reserve", // its Reservation then lives on the caller's stack
		"(*Group).Allow",
		"(*Group).CanAccept",
		"(*Group).Reserve", // and its GroupReservation
		"(*Event).Outcome", // read per decision by the metrics adapters
	} {
		t.Run(verb, func(t *testing.T) {
			require.Contains(t, string(out), ": can inline "+verb+"\n", "the compiler no longer inlines %s", verb)
		})
	}
}
