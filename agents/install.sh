#!/usr/bin/env bash
# agents/install.sh — install the pinned agent CLIs (package.json and
# package-lock.json beside this file) into a cache directory keyed by the
# lockfile's hash, and print that directory. make test-agents runs it.
#
# npm install (not npm ci): opencode-ai names platform packages the lockfile
# cannot hold for every platform, which npm ci refuses; versions are pinned
# exactly in package.json and the lockfile still fixes what it holds.
#
# Exit 0: installed (or already there); the directory is on stdout, and its
#         bin/ holds claude, codex, gemini, opencode and the node they run on.
# Exit 3: the npm registry cannot be reached; nothing was installed.
# Exit 1: anything else (said on stderr).
set -euo pipefail

here="$(cd "$(dirname "$0")" && pwd)"
lock="$here/package-lock.json"
sum="$(sha256sum "$lock" "$here/package.json" | sha256sum | cut -c1-16)"
cache="${RALPH_AGENTS_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/ralph/agents}"
dir="$cache/$sum"

say() { echo "agents/install.sh: $*" >&2; }

if [ -x "$dir/bin/node" ] && [ -f "$dir/.installed" ]; then
	echo "$dir"
	exit 0
fi

if ! command -v npm >/dev/null 2>&1; then
	say "npm is not on PATH; install nodejs and npm (apt-get install nodejs npm) to run the real agent CLIs"
	exit 3
fi
if ! timeout 60 npm view --silent opencode-ai@1.18.33 version >/dev/null 2>&1; then
	say "the npm registry cannot be reached; the real agent CLIs cannot be installed"
	exit 3
fi

tmp="$cache/.tmp-$sum-$$"
rm -rf "$tmp"
mkdir -p "$tmp/bin"
trap 'rm -rf "$tmp"' EXIT
cp "$here/package.json" "$lock" "$tmp/"

# Gemini CLI needs node >= 20. Use the machine's node when it is new enough,
# else a pinned node from the npm registry's node package.
node_major() { "$1" -e 'process.stdout.write(String(process.versions.node.split(".")[0]))' 2>/dev/null || echo 0; }
node_bin="$(command -v node || true)"
node_min="${RALPH_AGENTS_NODE_MIN:-20}" # a test raises it to take the other path
if [ -n "$node_bin" ] && [ "$(node_major "$node_bin")" -ge "$node_min" ]; then
	ln -s "$node_bin" "$tmp/bin/node"
else
	say "node on PATH is missing or older than $node_min; installing node 22 from the npm registry"
	mkdir -p "$tmp/node"
	echo '{"private": true}' >"$tmp/node/package.json" # else npm installs into the package above
	(cd "$tmp/node" && npm install --no-audit --no-fund --silent node@22.21.1 >&2)
	ln -s "$tmp/node/node_modules/node/bin/node" "$tmp/bin/node"
fi

(cd "$tmp" && PATH="$tmp/bin:$PATH" npm install --ignore-scripts --no-audit --no-fund >&2)

# Each dependency of package.json is one CLI at one version: the newest of
# each under its own package name, a previous pin under an alias
# (claude-code-2.1.197). Its binaries are linked as NAME-VERSION (claude-2.1.197)
# and, for the one under its own name, as NAME too, so bin/ holds claude,
# claude-2.1.197, claude-2.1.332, codex, codex-0.169.0, … and the
# conformance tests run every version they find there.
# Scripts are off (node-pty and keytar would want a compiler, and Gemini CLI
# runs headless without them); Claude Code and OpenCode link their native
# binaries in a postinstall of plain node, run here by name.
deps="$(cd "$tmp" && "$tmp/bin/node" -e '
	const path = require("path");
	const deps = require("./package.json").dependencies;
	for (const dep of Object.keys(deps)) {
		const dir = path.join("node_modules", dep);
		const pkg = require("./" + path.join(dir, "package.json"));
		const bins = typeof pkg.bin === "string" ? {[pkg.name.split("/").pop()]: pkg.bin} : (pkg.bin || {});
		for (const [name, rel] of Object.entries(bins)) {
			console.log([dep === pkg.name ? "newest" : "alias", dir, pkg.name, pkg.version, name, path.join(dir, rel)].join(" "));
		}
	}')"
while read -r which pkgdir name version bin file; do
	case "$name" in
	@anthropic-ai/claude-code) (cd "$tmp/$pkgdir" && "$tmp/bin/node" install.cjs >&2) ;;
	opencode-ai) (cd "$tmp/$pkgdir" && "$tmp/bin/node" postinstall.mjs >&2) ;;
	esac
	ln -s "../$file" "$tmp/bin/$bin-$version"
	if [ "$which" = newest ]; then
		ln -s "../$file" "$tmp/bin/$bin"
	fi
done <<<"$deps"

for cli in claude codex gemini opencode; do
	if [ ! -e "$tmp/bin/$cli" ]; then
		say "npm installed no $cli; see the output above"
		exit 1
	fi
done
# The node link must keep working after the move below.
if [ -d "$tmp/node" ]; then
	rm "$tmp/bin/node"
	ln -s "../node/node_modules/node/bin/node" "$tmp/bin/node"
fi
touch "$tmp/.installed"
rm -rf "$dir"
mv "$tmp" "$dir"
trap - EXIT
echo "$dir"
