// Package testserver starts real servers (redis-server, PostgreSQL) for
// sluice's tests: on 127.0.0.1, on a free port, in a temporary directory,
// stopped when the test ends. Nothing here is mocked.
//
// When a server's binaries are missing, the test is skipped with a message
// saying how to install them, except under CI=true, where a missing server
// is a failure.
package testserver

import (
	"net"
	"os"
	"testing"
)

// FreePort returns a TCP port on 127.0.0.1 that was free a moment ago.
func FreePort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("testserver: finding a free port: %v", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// Missing reports that what is not installed: it fails the test under
// CI=true and skips it otherwise, saying how to install it.
func Missing(t testing.TB, what, install string) {
	t.Helper()
	msg := what + " is not installed; install it with: " + install + " (or run the README's test command, which does)"
	if os.Getenv("CI") == "true" {
		t.Fatal("testserver: " + msg + "; under CI=true a missing server is a failure")
	}
	t.Skip("testserver: " + msg)
}
