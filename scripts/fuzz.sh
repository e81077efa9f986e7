#!/usr/bin/env bash
# Runs every fuzz target in the module for a while (default 30s each) and keeps the inputs the
# fuzzer found interesting under the package's testdata/fuzz/<Target>/, where `go test` replays them
# as regression cases on every run.
set -euo pipefail
cd "$(dirname "$0")/.."
fuzztime="${1:-30s}"
module=$(go list -m)
cache="$(go env GOCACHE)/fuzz"
grep -rl --include='*_test.go' '^func Fuzz' . | xargs -n1 dirname | sort -u | while read -r dir; do
  pkg="$module/${dir#./}"
  for target in $(grep -h '^func Fuzz' "$dir"/*_test.go | sed -E 's/^func (Fuzz[A-Za-z0-9_]*).*/\1/'); do
    echo "== $pkg $target ($fuzztime)"
    go test -run '^$' -fuzz "^${target}\$" -fuzztime "$fuzztime" "$dir"
    if [ -d "$cache/$pkg/$target" ]; then
      mkdir -p "$dir/testdata/fuzz/$target"
      cp -n "$cache/$pkg/$target"/* "$dir/testdata/fuzz/$target/" 2>/dev/null || true
    fi
  done
done
