#!/usr/bin/env bash
# The whole test suite: the README's test command and CI's.
#
# It installs missing test servers when it can, then in every module of the
# workspace checks gofmt, runs go vet and go test -race, runs every fuzz
# target for SLUICE_FUZZTIME calls (50000x by default), and runs every
# benchmark for one iteration so that none rots.
#
# The fuzz budget is a count of calls, not a duration: with a duration, Go's
# fuzzer races a wall-clock deadline, and on a loaded machine a worker still
# minimizing a new input when the deadline passes fails the target with
# "context deadline exceeded" although no input failed. Minimizing a new
# input is bounded by a count for the same reason.
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
	(cd "$dir" && go vet ./... && go test -race -count=1 -shuffle=on -timeout 30m ./...)
done

fuzztime=${SLUICE_FUZZTIME:-50000x}
echo "== fuzz (${fuzztime} per target)"
# go test -list prints a package's targets, then its "ok" line.
for dir in $modules; do
	(
		cd "$dir"
		targets=()
		go test -list '^Fuzz' ./... | while read -r word pkg _; do
			case $word in
			Fuzz*) targets+=("$word") ;;
			ok)
				for target in "${targets[@]}"; do
					go test -run '^$' -fuzz "^${target}\$" -fuzztime "$fuzztime" -fuzzminimizetime 2000x "$pkg" </dev/null
				done
				targets=()
				;;
			esac
		done
	)
done

echo "== benchmarks, one iteration each"
for dir in $modules; do
	(cd "$dir" && go test -run '^$' -bench . -benchtime 1x ./... >/dev/null)
done

echo "== all passed"
