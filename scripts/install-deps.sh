#!/usr/bin/env bash
# Installs the Debian packages ledgerd needs on a fresh machine; the Makefile and .ci/run call it.
# Usage: install-deps.sh [PACKAGE...] (default: all of them).
# Idempotent: when every package is installed already it does not touch apt at all.
#
# Runs as root without a terminal (CI, containers), or as a user with sudo. Package scripts are
# kept from starting services (postgresql's cluster, prometheus, alertmanager): there is no init
# system to run them here, and daemons left behind would hold the ports tests use. On a machine
# with systemd, the prometheus and alertmanager services this run installed are also disabled
# (Debian's packages enable them for the next boot): the tests start their own, and a developer's
# laptop should not run a Prometheus on :9090 from then on. A service installed before is left as
# it was. PostgreSQL's own service is left enabled: make run only uses its binaries.
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
policy=${INSTALL_DEPS_POLICY_RC_D:-/usr/sbin/policy-rc.d} # the variable is for tests
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

# Services of the packages just installed that the tests run themselves: disable them, and stop
# them where systemd is running (policy-rc.d kept them from starting, unless the machine has its
# own policy). deb-systemd-helper removes the enablement even without systemd running.
for pkg in "${missing[@]}"; do
	case $pkg in
	prometheus) unit=prometheus.service ;;
	prometheus-alertmanager) unit=prometheus-alertmanager.service ;;
	*) continue ;;
	esac
	if command -v deb-systemd-helper >/dev/null; then
		"${sudo[@]}" deb-systemd-helper disable "$unit" >/dev/null 2>&1 || true
	fi
	if [[ -d /run/systemd/system ]] && command -v systemctl >/dev/null; then
		"${sudo[@]}" systemctl disable --now "$unit" >/dev/null 2>&1 || true
	fi
	echo "install-deps: $unit disabled (the tests start their own $pkg)"
done
echo "install-deps: done"
