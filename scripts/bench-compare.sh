#!/usr/bin/env bash
# Compares ingest and query speed of two commits in one run: the benchmarks of each commit run in
# alternation (ROUNDS times), so both see the same machine, and benchstat sets them side by side.
# A shared VM's speed moves between runs; the alternation and the ratios against COPY and raw
# GROUP BY (which each benchmark reports) are what make the comparison fair.
#
# Usage: scripts/bench-compare.sh BASE [HEAD]   (env: ROUNDS=3, RECORDS=100000 for ingest vs COPY,
# INGEST_ONLY=1 to leave out the query benchmark)
# Results: bench-compare/{base,head}.txt and benchstat's table on stdout.
set -euo pipefail
cd "$(dirname "$0")/.."
base="${1:?usage: scripts/bench-compare.sh BASE [HEAD]}"
head="${2:-HEAD}"
rounds="${ROUNDS:-3}"
records="${RECORDS:-100000}"
out=bench-compare
mkdir -p "$out"
: >"$out/base.txt"
: >"$out/head.txt"
work=$(mktemp -d)
trap 'git worktree remove --force "$work/base" 2>/dev/null; git worktree remove --force "$work/head" 2>/dev/null; rm -rf "$work"' EXIT
git worktree add --detach -q "$work/base" "$base"
git worktree add --detach -q "$work/head" "$head"

# pkg prints the folder of a package in a tree: the drills and analytics moved under internal/.
pkg() {
	if [[ -d "$1/internal/$2" ]]; then echo "./internal/$2/"; else echo "./$2/"; fi
}

run() { # run TREE OUTFILE
	(
		cd "$1"
		LEDGERD_BENCH_RECORDS="$records" go test -run '^$' -bench 'IngestVsCopy' -benchtime 3x -count 1 \
			"$(pkg . drills)"
		if [[ -z "${INGEST_ONLY:-}" ]]; then
			go test -run '^$' -bench 'Endpoints' -benchtime 20x -count 1 "$(pkg . analytics)"
		fi
	) | grep -v "^pkg:" | tee -a "$2"
}

for i in $(seq "$rounds"); do
	echo "== round $i of $rounds: $base"
	run "$work/base" "$out/base.txt"
	echo "== round $i of $rounds: $head"
	run "$work/head" "$out/head.txt"
done
go run golang.org/x/perf/cmd/benchstat@v0.0.0-20260908200009-22c9c6c9d4da "$out/base.txt" "$out/head.txt"
