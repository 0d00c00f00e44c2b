package testserver

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// installRun is one run of scripts/install-deps.sh in a sandbox: a PATH
// holding only a stand-in apt-get and the few commands the script needs,
// and server directories and a policy file of its own, so that what this
// machine has installed does not matter.
type installRun struct {
	bin, servers, pglib, policy, log string
}

func newInstallRun(t *testing.T) *installRun {
	t.Helper()
	dir := t.TempDir()
	r := &installRun{
		bin:     filepath.Join(dir, "bin"),
		servers: filepath.Join(dir, "servers"),
		pglib:   filepath.Join(dir, "postgresql"),
		policy:  filepath.Join(dir, "policy-rc.d"),
		log:     filepath.Join(dir, "apt-get.log"),
	}
	for _, d := range []string{r.bin, r.servers, r.pglib} {
		require.NoError(t, os.Mkdir(d, 0o755))
	}
	for _, cmd := range []string{"chmod", "rm", "mkdir"} { // mkdir for the stand-in apt-get
		p, err := exec.LookPath(cmd)
		require.NoError(t, err)
		require.NoError(t, os.Symlink(p, filepath.Join(r.bin, cmd)))
	}
	// The script installs only as root: an id that says so, whoever runs
	// the tests (CI runners are ordinary users).
	r.id(t, 0)
	return r
}

// id installs a stand-in id whose -u prints uid.
func (r *installRun) id(t *testing.T, uid int) {
	t.Helper()
	script := "#!/bin/sh\necho " + strconv.Itoa(uid) + "\n"
	require.NoError(t, os.WriteFile(filepath.Join(r.bin, "id"), []byte(script), 0o755))
}

// aptGet installs a stand-in apt-get that logs each call, and whether the
// policy file held services off at the time, and then runs body (a shell
// snippet; $pkgs holds the packages asked for).
func (r *installRun) aptGet(t *testing.T, body string) {
	t.Helper()
	script := `#!/bin/bash
pkgs=()
for a in "$@"; do case $a in -*|update|install) ;; *) pkgs+=("$a") ;; esac; done
held=no; [ -x "` + r.policy + `" ] && held=yes
echo "$* (services held off: $held)" >> "` + r.log + `"
[ "$1" = update ] && exit 0
` + body + "\n"
	require.NoError(t, os.WriteFile(filepath.Join(r.bin, "apt-get"), []byte(script), 0o755))
}

// installs is the body of an apt-get that installs what it is asked for,
// as Debian's packages lay it out.
func (r *installRun) installs() string {
	return `for p in "${pkgs[@]}"; do
  case $p in
  redis-server) printf '#!/bin/sh\n' > "` + r.servers + `/redis-server"; chmod +x "` + r.servers + `/redis-server" ;;
  postgresql) mkdir -p "` + r.pglib + `/15/bin" 2>/dev/null || exit 1; printf '#!/bin/sh\n' > "` + r.pglib + `/15/bin/initdb"; chmod +x "` + r.pglib + `/15/bin/initdb" ;;
  esac
done`
}

// notRoot replaces id with one that names an ordinary user.
func (r *installRun) notRoot(t *testing.T) {
	t.Helper()
	r.id(t, 1000)
}

func (r *installRun) have(t *testing.T, servers ...string) {
	t.Helper()
	for _, s := range servers {
		path := filepath.Join(r.servers, "redis-server")
		if s == "postgresql" {
			path = filepath.Join(r.pglib, "15", "bin", "initdb")
			require.NoError(t, os.MkdirAll(filepath.Dir(path), 0o755))
		}
		require.NoError(t, os.WriteFile(path, []byte("#!/bin/sh\n"), 0o755))
	}
}

// run runs the script and returns its exit code, its output and what
// apt-get was asked.
func (r *installRun) run(t *testing.T) (code int, output string, calls []string) {
	t.Helper()
	bash, err := exec.LookPath("bash")
	require.NoError(t, err)
	cmd := exec.Command(bash, filepath.Join("..", "..", "scripts", "install-deps.sh"))
	cmd.Env = []string{
		"PATH=" + r.bin,
		"SLUICE_SERVER_DIRS=" + r.servers,
		"SLUICE_POSTGRES_LIB=" + r.pglib,
		"SLUICE_POLICY_RC_D=" + r.policy,
	}
	out, err := cmd.CombinedOutput()
	if exit, ok := err.(*exec.ExitError); ok {
		code = exit.ExitCode()
	} else {
		require.NoError(t, err)
	}
	if log, err := os.ReadFile(r.log); err == nil {
		calls = strings.Split(strings.TrimSpace(string(log)), "\n")
	}
	return code, string(out), calls
}

// TestInstallDepsOnEveryPath runs the install script as a fresh machine
// would, on each path it can take. The first case is the one that failed
// on a new Debian container: it ships /usr/sbin/policy-rc.d, and the
// script installed redis-server and then exited 1.
func TestInstallDepsOnEveryPath(t *testing.T) {
	t.Run("a container that ships a policy file installs and exits 0", func(t *testing.T) {
		r := newInstallRun(t)
		r.have(t, "postgresql")
		r.aptGet(t, r.installs())
		require.NoError(t, os.WriteFile(r.policy, []byte("#!/bin/sh\nexit 101\n"), 0o755))
		code, out, calls := r.run(t)
		require.Equal(t, 0, code, out)
		require.Equal(t, []string{
			"update -qq (services held off: yes)",
			"install -y -qq --no-install-recommends redis-server (services held off: yes)",
		}, calls)
		require.Contains(t, out, "installed redis-server")
		policy, err := os.ReadFile(r.policy)
		require.NoError(t, err, "the image's own policy file stays")
		require.Equal(t, "#!/bin/sh\nexit 101\n", string(policy))
	})
	t.Run("a machine without a policy file holds services off only while installing", func(t *testing.T) {
		r := newInstallRun(t)
		r.aptGet(t, r.installs())
		code, out, calls := r.run(t)
		require.Equal(t, 0, code, out)
		require.Equal(t, []string{
			"update -qq (services held off: yes)",
			"install -y -qq --no-install-recommends redis-server postgresql (services held off: yes)",
		}, calls)
		require.NoFileExists(t, r.policy, "the policy file made for the install is removed")
	})
	t.Run("a failing apt-get fails the run and removes the policy file", func(t *testing.T) {
		r := newInstallRun(t)
		r.have(t, "redis-server")
		r.aptGet(t, "echo 'E: Unable to locate package postgresql' >&2; exit 100")
		code, out, calls := r.run(t)
		require.NotEqual(t, 0, code, out)
		require.Contains(t, out, "Unable to locate package")
		require.Len(t, calls, 2)
		require.NoFileExists(t, r.policy)
	})
	t.Run("a package that installs no binary is reported and left to the tests", func(t *testing.T) {
		r := newInstallRun(t)
		r.have(t, "postgresql")
		r.aptGet(t, "exit 0")
		code, out, _ := r.run(t)
		require.Equal(t, 0, code, out)
		require.Contains(t, out, "redis-server still cannot be found; the tests will say so")
	})
	t.Run("a machine that has both servers installs nothing", func(t *testing.T) {
		r := newInstallRun(t)
		r.have(t, "redis-server", "postgresql")
		r.aptGet(t, "exit 1")
		code, out, calls := r.run(t)
		require.Equal(t, 0, code, out)
		require.Empty(t, out)
		require.Empty(t, calls)
	})
	t.Run("an ordinary user is told the command and the run goes on", func(t *testing.T) {
		r := newInstallRun(t)
		r.notRoot(t)
		r.aptGet(t, "exit 1")
		code, out, calls := r.run(t)
		require.Equal(t, 0, code, out)
		require.Contains(t, out, "install with: sudo apt-get install -y redis-server postgresql")
		require.Empty(t, calls)
	})
	t.Run("a machine without apt-get is told the command and the run goes on", func(t *testing.T) {
		r := newInstallRun(t)
		r.have(t, "redis-server")
		code, out, calls := r.run(t)
		require.Equal(t, 0, code, out)
		require.Contains(t, out, "install with: sudo apt-get install -y postgresql")
		require.Empty(t, calls)
	})
}
