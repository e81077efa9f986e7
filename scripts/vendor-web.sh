#!/usr/bin/env bash
# Copies the browser libraries the dashboard uses from npm into web/static/vendor, where go:embed
# picks them up: ledgerd serves them itself, so the dashboard works with no internet access.
#
# The versions are those pinned in web/package-lock.json; `npm ci` installs exactly those. To move
# to a new version: (cd web && npm install --save-exact uplot@X.Y.Z), run this script, commit
# web/package.json, web/package-lock.json and web/static/vendor. web/vendor_test.go fails when the
# vendored files and the lockfile disagree.
set -euo pipefail
cd "$(dirname "$0")/../web"

npm ci --no-audit --no-fund --ignore-scripts --silent

out=static/vendor
version=$(node -p 'require("./package-lock.json").packages["node_modules/uplot"].version')
src=node_modules/uplot
if [[ "$(node -p "require('./$src/package.json').version")" != "$version" ]]; then
	echo "vendor-web: installed uplot differs from package-lock.json ($version)" >&2
	exit 1
fi

rm -rf "$out"
mkdir -p "$out"
cp "$src/dist/uPlot.iife.min.js" "$src/dist/uPlot.min.css" "$out/"
cp "$src/LICENSE" "$out/uPlot.LICENSE"

# MANIFEST names the package and version each file came from, with its SHA-256, for the test.
{
	echo "# Written by scripts/vendor-web.sh from web/package-lock.json; do not edit."
	for f in uPlot.iife.min.js uPlot.min.css uPlot.LICENSE; do
		printf 'uplot\t%s\t%s\t%s\n' "$version" "$f" "$(sha256sum "$out/$f" | cut -d' ' -f1)"
	done
} >"$out/MANIFEST"
echo "vendor-web: uplot $version -> web/$out"
