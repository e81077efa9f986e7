#!/usr/bin/env bash
# Load test of a ledgerd binary: CLIENTS clients post BATCH records per request as fast as ledgerd
# acknowledges them, for DURATION, into a scratch database that is dropped afterwards. It prints
# the acknowledged records/s, the acknowledgement latency (p50/p95/p99), and ledgerd's own CPU time
# per record (from /proc: steadier than the rate on a shared machine).
#
# Usage: scripts/ingest-load.sh [DURATION] [CLIENTS] [BATCH]   (defaults: 30s 64 1)
# Issue 2's target: with 64 clients and 1 record a request, at least 10,000 committed records/s with
# p99 under 50 ms on 2 cores. ledgerd, PostgreSQL (DATABASE_URL, default the local server) and the
# load generator share the machine; CPUS (e.g. "0,1") pins ledgerd with taskset.
#
# One record a request is posted by wrk (Debian's package, installed here if missing) with
# scripts/wrk/single.lua: a Go net/http client spends more than twice wrk's CPU per request, taken
# from the same two cores. RATE=10000 paces wrk at that many records/s, to read the latency at the
# target load instead of at saturation. wrk posts for WARMUP (2s) before the measured run.
# After a wrk run, the same client posts to cmd/loadfloor, a bare net/http server that stores nothing,
# for FLOOR_DURATION (10s; FLOOR=0 skips it): the machine's speed at that moment, as ledgerd's
# rate and CPU a request over the floor's. LOADER=ledgerload posts with ledgerload instead, as
# every batched run does. DAYS=7 (ledgerload)
# sends a backfill spread over the last 7 days instead of live records. READS=1 also times a
# dashboard read (GET /v1/summary by model, its default window) every 0.3 s during the load.
# Afterwards it prints ledgerd's group commits (count, records, seconds), rollup folds (count and
# total seconds) and the size of the pending rollup tables.
set -euo pipefail
cd "$(dirname "$0")/.."
duration="${1:-30s}"
clients="${2:-64}"
batch="${3:-1}"
base="${DATABASE_URL:-postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable}"
db="ledgerd_load_$$"
url=$(sed -E "s#^(postgres(ql)?://[^/]*)/[^?]*#\1/${db}#" <<<"$base")
work=$(mktemp -d)
pid=""
cleanup() {
	if [[ -n "$pid" ]]; then
		kill "$pid" 2>/dev/null || true
		wait "$pid" 2>/dev/null || true
	fi
	psql "$base" -qc "DROP DATABASE IF EXISTS ${db} WITH (FORCE)" >/dev/null || true
	rm -rf "$work"
}
trap cleanup EXIT

go build -o "$work/ledgerd" ./cmd/ledgerd
go build -o "$work/ledgerload" ./cmd/ledgerload
go build -o "$work/floor" ./cmd/loadfloor
psql "$base" -qc "CREATE DATABASE ${db}"
"$work/ledgerd" migrate --database-url "$url" >/dev/null
key=$("$work/ledgerd" keys create --project load --database-url "$url")

pin=()
if [[ -n "${CPUS:-}" ]]; then
	pin=(taskset -c "$CPUS")
fi
"${pin[@]}" "$work/ledgerd" serve --listen 127.0.0.1:0 --database-url "$url" --log-level info 2>"$work/ledgerd.log" &
pid=$!
addr=""
for _ in $(seq 100); do
	addr=$(grep -o '"addr":"[^"]*"' "$work/ledgerd.log" | head -1 | cut -d'"' -f4 || true)
	[[ -n "$addr" ]] && break
	sleep 0.1
done
if [[ -z "$addr" ]]; then
	cat "$work/ledgerd.log" >&2
	echo "ledgerd did not start" >&2
	exit 1
fi
loader="${LOADER:-ledgerload}"
if [[ "$batch" == 1 && -z "${LOADER:-}" && -z "${DAYS:-}" ]]; then
	loader=wrk
fi
echo "ledgerd at $addr; $clients clients ($loader), $batch record(s) a request, $duration; $(nproc) CPUs" >&2
threads=$(nproc)
wrk_run() {
	LEDGERD_KEY="$key" wrk --threads "$threads" --connections "$clients" --duration "$1" \
		--script scripts/wrk/single.lua "http://$addr" -- "${RATE:-0}" "$threads"
}
if [[ "$loader" == wrk ]]; then
	command -v wrk >/dev/null || bash scripts/install-deps.sh wrk >&2
	# Unmeasured first: the first commits create the month's partition and the series, and the
	# pools open their connections (a request then waited 0.3-0.4 s).
	wrk_run "${WARMUP:-2s}" >/dev/null
fi
reader=""
if [[ -n "${READS:-}" ]]; then
	# A dashboard's read during the load: each one first folds what this ledgerd committed (Sync).
	(
		sleep 3
		while [[ ! -e "$work/load.done" ]]; do
			curl -s -o /dev/null -w '%{http_code} %{time_total}\n' -H "Authorization: Bearer $key" \
				"http://$addr/v1/summary?group_by=model" >>"$work/reads" || true
			sleep 0.3
		done
	) &
	reader=$!
fi
cpu0=$(awk '{print $14 + $15}' "/proc/$pid/stat")
if [[ "$loader" == wrk ]]; then
	wrk_run "$duration" | tee "$work/load.out" | grep -E '^(rate|ack) '
	acked=$(grep -o '(\([0-9]*\) acknowledged' "$work/load.out" | tr -dc 0-9)
else
	history=()
	if [[ -n "${DAYS:-}" ]]; then
		history=(--days "$DAYS")
	fi
	"$work/ledgerload" --url "http://$addr" --key "$key" --rate "${RATE:-0}" --batch "$batch" \
		--concurrency "$clients" --duration "$duration" --quiet "${history[@]}" | tee "$work/load.out"
	acked=$(grep -o 'acknowledged [0-9]*' "$work/load.out" | head -1 | tr -dc 0-9)
fi
cpu1=$(awk '{print $14 + $15}' "/proc/$pid/stat")
if [[ -n "$reader" ]]; then
	touch "$work/load.done"
	wait "$reader"
	awk '$1 != 200 { bad++ } { t[NR] = $2 * 1000 } END {
		n = asort(t); p90 = int(n * 0.9); if (p90 < 1) p90 = 1
		printf "reads     %d of GET /v1/summary during the load (%d not 200): p50 %.0fms  p90 %.0fms  max %.0fms\n",
			n, bad, t[int((n + 1) / 2)], t[p90], t[n] }' "$work/reads"
fi
# perRecord TICKS N: CPU µs a record from clock ticks.
perRecord() {
	awk -v t="$1" -v hz="$(getconf CLK_TCK)" -v n="$2" 'BEGIN { printf "%.1f", t * 1e6 / hz / n }'
}
lper=""
if ((acked > 0)); then
	lper=$(perRecord $((cpu1 - cpu0)) "$acked")
	echo "ledgerd CPU $lper µs a record"
fi
curl -s "http://$addr/metrics" | grep -E '^ledgerd_(rollup_fold_(seconds_sum|seconds_count|failures_total)|writer_(batch_records|flush_seconds)_(sum|count))' || true
psql "$url" -qAtc "SELECT 'pending rollup tables: ' || pg_size_pretty(sum(pg_total_relation_size(relid))) FROM pg_stat_user_tables WHERE relname LIKE 'pending\_%'"
psql "$url" -qAtc "SELECT 'committed rows in attempts: ' || count(*) FROM attempts"
if [[ "$loader" == wrk && "${FLOOR:-1}" != 0 ]]; then
	# The floor: a bare net/http server (cmd/loadfloor) under the same wrk client, right after
	# ledgerd, for the machine's speed at this moment (ledgerd is stopped first).
	kill "$pid" && wait "$pid" 2>/dev/null || true
	pid=""
	"$work/floor" >"$work/floor.addr" &
	pid=$!
	for _ in $(seq 100); do
		[[ -s "$work/floor.addr" ]] && break
		sleep 0.1
	done
	addr=$(head -1 "$work/floor.addr")
	wrk_run "${WARMUP:-2s}" >/dev/null
	fcpu0=$(awk '{print $14 + $15}' "/proc/$pid/stat")
	wrk_run "${FLOOR_DURATION:-10s}" >"$work/floor.out"
	fcpu1=$(awk '{print $14 + $15}' "/proc/$pid/stat")
	facked=$(grep -o '(\([0-9]*\) acknowledged' "$work/floor.out" | tr -dc 0-9)
	frate=$(grep -o '^rate *[0-9]*' "$work/floor.out" | tr -dc 0-9)
	rate=$(grep -o '^rate *[0-9]*' "$work/load.out" | tr -dc 0-9)
	fper=$(perRecord $((fcpu1 - fcpu0)) "$facked")
	echo "floor     bare net/http server, same client, ${FLOOR_DURATION:-10s}: $frate requests/s, CPU $fper µs a request"
	if [[ -n "$lper" ]]; then
		awk -v r="$rate" -v fr="$frate" -v c="$lper" -v fc="$fper" \
			'BEGIN { printf "ledgerd/floor: rate %.2f, CPU a request %.2f\n", r / fr, c / fc }'
	fi
fi
