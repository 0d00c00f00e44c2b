#!/usr/bin/env bash
# Installs the servers the tests talk to (redis-server and PostgreSQL, from
# Debian's packages) when they are missing and this machine allows it: as
# root with apt-get. Otherwise it says what is missing and carries on; the
# tests then skip those servers with the same advice, or fail under CI=true.
set -euo pipefail

have_redis() { command -v redis-server >/dev/null 2>&1 || [ -x /usr/bin/redis-server ]; }
have_postgres() { ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || command -v initdb >/dev/null 2>&1; }

missing=()
have_redis || missing+=(redis-server)
have_postgres || missing+=(postgresql)
[ ${#missing[@]} -eq 0 ] && exit 0

if [ "$(id -u)" -eq 0 ] && command -v apt-get >/dev/null 2>&1; then
	echo "install-deps: installing ${missing[*]} with apt-get"
	export DEBIAN_FRONTEND=noninteractive
	apt-get update -qq
	# The packages' own services are not needed (the tests start their own
	# servers), so keep their maintainer scripts from starting them.
	policy=/usr/sbin/policy-rc.d
	created=
	if [ ! -e "$policy" ]; then
		printf '#!/bin/sh\nexit 101\n' >"$policy" && chmod +x "$policy" && created=1
	fi
	apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
	[ -n "$created" ] && rm -f "$policy"
else
	echo "install-deps: ${missing[*]} missing; install with: sudo apt-get install -y ${missing[*]}" >&2
fi
