#!/usr/bin/env bash
# Installs the servers the tests talk to (redis-server and PostgreSQL, from
# Debian's packages) when they are missing and this machine allows it: as
# root with apt-get. Otherwise it says what is missing and carries on; the
# tests then skip those servers with the same advice, or fail under CI=true.
#
# It exits non-zero only when apt-get fails; in every other case it exits 0
# and the tests say what, if anything, is still missing. internal/testserver/install_test.go runs
# it on every path with a stand-in apt-get.
#
# Where it looks can be moved, for that test: SLUICE_SERVER_DIRS (the
# directories besides PATH that may hold redis-server), SLUICE_POSTGRES_LIB
# (where Debian puts PostgreSQL's versions) and SLUICE_POLICY_RC_D (the file
# that keeps Debian's maintainer scripts from starting services).
set -euo pipefail

server_dirs=${SLUICE_SERVER_DIRS:-/usr/bin /usr/sbin}
postgres_lib=${SLUICE_POSTGRES_LIB:-/usr/lib/postgresql}
policy=${SLUICE_POLICY_RC_D:-/usr/sbin/policy-rc.d}

in_dirs() { local d; for d in $server_dirs; do [ -x "$d/$1" ] && return 0; done; return 1; }
have_redis() { command -v redis-server >/dev/null 2>&1 || in_dirs redis-server; }
have_postgres() { compgen -G "$postgres_lib/*/bin/initdb" >/dev/null || command -v initdb >/dev/null 2>&1; }

missing() {
	local m=()
	have_redis || m+=(redis-server)
	have_postgres || m+=(postgresql)
	echo "${m[*]}"
}

read -r -a todo <<<"$(missing)"
if [ ${#todo[@]} -eq 0 ]; then
	exit 0
fi

if [ "$(id -u)" -ne 0 ] || ! command -v apt-get >/dev/null 2>&1; then
	echo "install-deps: ${todo[*]} missing; install with: sudo apt-get install -y ${todo[*]}" >&2
	exit 0
fi

echo "install-deps: installing ${todo[*]} with apt-get"
export DEBIAN_FRONTEND=noninteractive
# The packages' own services are not needed (the tests start their own
# servers), so keep their maintainer scripts from starting them. A policy
# file already there (container images ship one) is left as it is; one made
# here is removed on every way out, failure included.
if [ ! -e "$policy" ]; then
	printf '#!/bin/sh\nexit 101\n' >"$policy"
	chmod +x "$policy"
	trap 'rm -f "$policy"' EXIT
fi
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${todo[@]}" >/dev/null

read -r -a still <<<"$(missing)"
if [ ${#still[@]} -ne 0 ]; then
	echo "install-deps: apt-get installed ${todo[*]}, but ${still[*]} still cannot be found; the tests will say so" >&2
	exit 0
fi
echo "install-deps: installed ${todo[*]}"
