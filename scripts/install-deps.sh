#!/usr/bin/env bash
# Installs the Debian packages ledgerd needs on a fresh machine; the Makefile and .ci/run call it.
# Usage: install-deps.sh [PACKAGE...] (default: all of them).
# Idempotent: when every package is installed already it does not touch apt at all.
#
# Runs as root without a terminal (CI, containers), or as a user with sudo. Package scripts are
# kept from starting services (postgresql's cluster, prometheus, alertmanager): there is no init
# system to run them here, and daemons left behind would hold the ports tests use.
set -euo pipefail

packages=(
	postgresql              # server binaries (initdb, postgres) for the embedded database
	chromium                # headless browser for the page tests
	prometheus              # promtool and the server, for rule and scrape tests
	prometheus-alertmanager # alert delivery tests
)
# `install-deps.sh PKG...` installs only the named ones (make run needs just postgresql).
if (($# > 0)); then
	packages=("$@")
fi

missing=()
for pkg in "${packages[@]}"; do
	if [[ "$(dpkg-query --show --showformat='${db:Status-Status}' "$pkg" 2>/dev/null)" != installed ]]; then
		missing+=("$pkg")
	fi
done
if ((${#missing[@]} == 0)); then
	echo "install-deps: already installed: ${packages[*]}"
	exit 0
fi

sudo=()
if ((EUID != 0)); then
	if ! command -v sudo >/dev/null; then
		echo "install-deps: need root to install: ${missing[*]}" >&2
		exit 1
	fi
	sudo=(sudo --non-interactive)
fi

# invoke-rc.d asks /usr/sbin/policy-rc.d whether a package may start its service; 101 means no.
# Put one in place for this run unless the machine has its own (Docker images do).
policy=/usr/sbin/policy-rc.d
if [[ ! -e $policy ]]; then
	printf '#!/bin/sh\n# Written by ledgerd scripts/install-deps.sh for the duration of an install.\nexit 101\n' |
		"${sudo[@]}" tee "$policy" >/dev/null
	"${sudo[@]}" chmod 0755 "$policy"
	trap '"${sudo[@]}" rm -f "$policy"' EXIT
fi

echo "install-deps: installing ${missing[*]}"
apt_opts=(-o DPkg::Lock::Timeout=300 -o Dpkg::Use-Pty=0)
"${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get "${apt_opts[@]}" update -qq
"${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get "${apt_opts[@]}" install -y -qq \
	--no-install-recommends "${missing[@]}" </dev/null

for pkg in "${missing[@]}"; do
	if [[ "$(dpkg-query --show --showformat='${db:Status-Status}' "$pkg" 2>/dev/null)" != installed ]]; then
		echo "install-deps: $pkg is still not installed" >&2
		exit 1
	fi
done
echo "install-deps: done"
