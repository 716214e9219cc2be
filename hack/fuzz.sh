#!/usr/bin/env bash
# Runs every fuzz target of the repository (func FuzzXxx in a _test.go file) for FUZZTIME each
# (default 60s), one at a time; the first failure stops the run with the failing input under
# the package's testdata/fuzz. CI runs it from hack/test.sh; `hack/fuzz.sh internal/dev` runs
# the targets of one package folder.
set -euo pipefail
cd "$(dirname "$0")/.."
FUZZTIME=${FUZZTIME:-60s}
dirs=("${@:-.}")
grep -rl --include='*_test.go' -E '^func Fuzz[A-Za-z0-9_]*\(f \*testing\.F\)' "${dirs[@]}" | sort | while read -r file; do
  pkg=./$(dirname "${file#./}")
  for target in $(grep -oE '^func Fuzz[A-Za-z0-9_]*' "$file" | sed 's/^func //'); do
    echo "--- fuzz $pkg $target ($FUZZTIME)"
    go test -run '^$' -fuzz "^${target}\$" -fuzztime "$FUZZTIME" "$pkg"  </dev/null
  done
done
