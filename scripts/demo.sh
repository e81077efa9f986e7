#!/usr/bin/env bash
# Starts a ledgerd filled with 30 days of believable history, so every page and alert has something
# to show: several services, models and tenants, retries, fallbacks, healthy and broken prompt
# caches, a retry storm, an outage served by a fallback model, and a cache a deploy broke three days
# ago (still broken). It serves at http://$LISTEN until Ctrl-C.
#
# Usage: scripts/demo.sh   (env: LISTEN=127.0.0.1:8080, DEMO_DIR=.ledgerd-demo, DEMO_RECORDS=200000,
#        LEDGERD_TIMEZONE=UTC, LEDGERD_DATABASE_URL to use your own PostgreSQL instead of the
#        embedded one in DEMO_DIR)
# The history is loaded once per DEMO_DIR; later runs just serve it. Remove DEMO_DIR to start over.
set -euo pipefail
cd "$(dirname "$0")/.."
listen="${LISTEN:-127.0.0.1:8080}"
dir="${DEMO_DIR:-.ledgerd-demo}"
records="${DEMO_RECORDS:-200000}"
tz="${LEDGERD_TIMEZONE:-UTC}"
export DATABASE_URL="${LEDGERD_DATABASE_URL:-}"

go build -o bin/ledgerd ./cmd/ledgerd
go build -o bin/ledgerload ./cmd/ledgerload
mkdir -p "$dir"
keyfile="$dir/demo.key"
fresh=false
if [[ ! -s "$keyfile" ]]; then
	bin/ledgerd migrate --data-dir "$dir" >/dev/null
	(umask 077 && bin/ledgerd keys create --project demo --data-dir "$dir" >"$keyfile")
	fresh=true
fi
key=$(cat "$keyfile")

bin/ledgerd serve --data-dir "$dir" --listen "$listen" --timezone "$tz" --migrate &
pid=$!
trap 'kill $pid 2>/dev/null; wait $pid 2>/dev/null' EXIT INT TERM
for _ in $(seq 300); do
	curl -fsS "http://$listen/readyz" >/dev/null 2>&1 && break
	kill -0 "$pid" 2>/dev/null || { echo "ledgerd did not start" >&2; exit 1; }
	sleep 0.2
done

if $fresh; then
	bin/ledgerload --url "http://$listen" --key "$key" --scenario demo --count "$records" --timezone "$tz" \
		--rate 0 --batch 1000 --concurrency 4 --ack-log "$dir/demo-acks.jsonl"
fi
cat <<EOF

ledgerd demo at http://$listen/ : sign in with the API key $key (kept in $keyfile)
Ctrl-C stops it; run scripts/demo.sh again to serve the same data, or remove $dir to start over.
EOF
wait "$pid"
