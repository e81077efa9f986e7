#!/usr/bin/env bash
# Runs every fuzz target in the module for a while (default 30s each). The fuzzer's own corpus stays
# in its cache ($(go env GOCACHE)/fuzz), which the next run starts from. A target that fails has
# `go test` write the failing input to the package's testdata/fuzz/<Target>/, where every later
# `go test` replays it: commit that file with the fix. testdata/fuzz holds only such inputs and
# hand-written seeds, never a copy of the cache.
set -euo pipefail
cd "$(dirname "$0")/.."
fuzztime="${1:-30s}"
failed=()
for dir in $(grep -rl --include='*_test.go' '^func Fuzz' . | xargs -n1 dirname | sort -u); do
  for target in $(grep -h '^func Fuzz' "$dir"/*_test.go | sed -E 's/^func (Fuzz[A-Za-z0-9_]*).*/\1/'); do
    echo "== $dir $target ($fuzztime)"
    if ! go test -run '^$' -fuzz "^${target}\$" -fuzztime "$fuzztime" "$dir"; then
      failed+=("$dir $target")
    fi
  done
done
if [ "${#failed[@]}" -gt 0 ]; then
  echo "failing fuzz targets (their inputs are under each package's testdata/fuzz/<Target>/; git status shows them):"
  printf '  %s\n' "${failed[@]}"
  exit 1
fi
