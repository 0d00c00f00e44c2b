#!/usr/bin/env bash
# The whole test suite: the README's test command and CI's.
#
# It installs missing test servers when it can, then in every module of the
# workspace checks gofmt, runs go vet and go test -race, runs each fuzz
# target for SLUICE_FUZZTIME (10s by default), and runs every benchmark for
# one iteration so that none rots.
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/install-deps.sh

echo "== gofmt"
unformatted=$(gofmt -l $(git ls-files '*.go' 2>/dev/null || find . -name '*.go' -not -path './.git/*'))
if [ -n "$unformatted" ]; then
	echo "gofmt needed on:"; echo "$unformatted"; exit 1
fi

modules=$(go list -m -f '{{.Dir}}')
for dir in $modules; do
	echo "== ${dir#"$PWD"/}: vet, test -race"
	(cd "$dir" && go vet ./... && go test -race -count=1 -shuffle=on ./...)
done

echo "== fuzz (${SLUICE_FUZZTIME:-10s} per target)"
for target in $(go test -list '^Fuzz' . | grep '^Fuzz' || true); do
	go test -run '^$' -fuzz "^${target}\$" -fuzztime "${SLUICE_FUZZTIME:-10s}" .
done

echo "== benchmarks, one iteration each"
for dir in $modules; do
	(cd "$dir" && go test -run '^$' -bench . -benchtime 1x ./... >/dev/null)
done

echo "== all passed"
