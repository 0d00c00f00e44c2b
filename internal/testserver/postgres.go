package testserver

import (
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"testing"
)

// Postgres is a PostgreSQL server started for a test by [StartPostgres].
type Postgres struct {
	// URL connects to the server's database as its superuser.
	URL string

	bin  string // directory holding initdb and pg_ctl
	dir  string // the server's temporary directory: data, socket and log
	port int
	as   *user.User // the user the server runs as, when the test runs as root

	mu      sync.Mutex
	running bool
}

// StartPostgres starts a PostgreSQL server for t and returns it: on
// 127.0.0.1, on a free port, with its data directory in t's temporary
// directory, with fsync off and trust authentication on loopback. The
// server is stopped when t ends.
//
// If the environment variable SLUICE_PG_URL is set, it returns that
// database instead, which Stop and Start cannot restart. If PostgreSQL is
// not installed, t is skipped or, under CI=true, fails.
func StartPostgres(t testing.TB) *Postgres {
	t.Helper()
	if url := os.Getenv("SLUICE_PG_URL"); url != "" {
		return &Postgres{URL: url}
	}
	bin := postgresBin()
	if bin == "" {
		Missing(t, "PostgreSQL", "apt-get install -y postgresql")
	}
	pg := &Postgres{bin: bin, dir: t.TempDir(), port: FreePort(t)}
	pg.URL = fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable", pg.port)
	if os.Geteuid() == 0 {
		// PostgreSQL refuses to run as root: hand the directory to its
		// system user, who must be able to reach it through its parent.
		u, err := user.Lookup("postgres")
		if err != nil {
			t.Fatalf("testserver: running as root and %v; PostgreSQL refuses to run as root", err)
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		if err := os.Chown(pg.dir, uid, gid); err != nil {
			t.Fatalf("testserver: %v", err)
		}
		if err := os.Chmod(filepath.Dir(pg.dir), 0o711); err != nil {
			t.Fatalf("testserver: %v", err)
		}
		pg.as = u
	}
	pg.run(t, "initdb", "-D", pg.data(), "-U", "postgres", "--auth=trust", "--no-sync", "--no-locale", "-E", "UTF8")
	t.Cleanup(func() { pg.stop(t) })
	pg.Start(t)
	return pg
}

// Stop stops the server at once, as a crash would, keeping its data. It
// skips t for a server given by SLUICE_PG_URL.
func (pg *Postgres) Stop(t testing.TB) {
	t.Helper()
	pg.external(t)
	pg.stop(t)
}

// Start starts the stopped server again, on the same port with the same
// data, and returns once it accepts connections. It skips t for a server
// given by SLUICE_PG_URL.
func (pg *Postgres) Start(t testing.TB) {
	t.Helper()
	pg.external(t)
	pg.mu.Lock()
	defer pg.mu.Unlock()
	if pg.running {
		return
	}
	opts := fmt.Sprintf("-c listen_addresses=127.0.0.1 -p %d -k %s -c fsync=off -c full_page_writes=off",
		pg.port, pg.dir)
	// -w: pg_ctl polls, for at most -t seconds, until the server accepts
	// connections.
	pg.run(t, "pg_ctl", "start", "-D", pg.data(), "-l", pg.log(), "-w", "-t", "60", "-o", opts)
	pg.running = true
}

func (pg *Postgres) stop(t testing.TB) {
	t.Helper()
	pg.mu.Lock()
	defer pg.mu.Unlock()
	if !pg.running {
		return
	}
	pg.run(t, "pg_ctl", "stop", "-D", pg.data(), "-m", "immediate", "-w", "-t", "60")
	pg.running = false
}

func (pg *Postgres) external(t testing.TB) {
	t.Helper()
	if pg.bin == "" {
		t.Skip("testserver: cannot restart the server at SLUICE_PG_URL")
	}
}

func (pg *Postgres) data() string { return filepath.Join(pg.dir, "data") }
func (pg *Postgres) log() string  { return filepath.Join(pg.dir, "postgres.log") }

// run runs one of the server's programs, as the postgres user when the
// test runs as root, and fails t with its output and the server's log if
// it fails.
func (pg *Postgres) run(t testing.TB, prog string, args ...string) {
	t.Helper()
	name := filepath.Join(pg.bin, prog)
	if pg.as != nil {
		args = append([]string{"-u", pg.as.Username, "--", name}, args...)
		name = "runuser"
	}
	cmd := exec.Command(name, args...)
	cmd.Dir = pg.dir
	if out, err := cmd.CombinedOutput(); err != nil {
		log, _ := os.ReadFile(pg.log())
		t.Fatalf("testserver: %s %v: %v\n%s\nserver log:\n%s", prog, args, err, out, log)
	}
}

// postgresBin returns the directory holding initdb and pg_ctl: from PATH,
// or else the newest /usr/lib/postgresql/*/bin. It returns "" if there is
// none.
func postgresBin() string {
	if p, err := exec.LookPath("pg_ctl"); err == nil {
		dir := filepath.Dir(p)
		if _, err := os.Stat(filepath.Join(dir, "initdb")); err == nil {
			return dir
		}
	}
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	// Newest major version first: compare numerically, so 9 < 15.
	slices.SortFunc(dirs, func(a, b string) int {
		return version(b) - version(a)
	})
	for _, dir := range dirs {
		if _, err := os.Stat(filepath.Join(dir, "pg_ctl")); err == nil {
			return dir
		}
	}
	return ""
}

// version returns the major version in a path /usr/lib/postgresql/N/bin.
func version(bin string) int {
	n, _ := strconv.Atoi(filepath.Base(filepath.Dir(bin)))
	return n
}
