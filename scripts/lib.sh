# Shared shell helpers for the build scripts.  Sourced, not executed.
set -euo pipefail

RRXE_ROOT=${RRXE_ROOT:-$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)}
# Expensive artefacts live outside the work tree, keyed on their inputs.
RRXE_CACHE=${RRXE_CACHE:-/var/cache/rrxe}
DEBIAN_MIRROR=${DEBIAN_MIRROR:-http://deb.debian.org/debian}

step() { printf '==> %s\n' "$*" >&2; }
die() { printf 'error: %s\n' "$*" >&2; exit 1; }

# run_logged STEP LOG CMD...: run CMD with output to LOG; on failure name the
# step and show the log's tail.
run_logged() {
	local name=$1 log=$2
	shift 2
	mkdir -p "$(dirname "$log")"
	step "$name (log: $log)"
	if ! "$@" >"$log" 2>&1; then
		printf 'error: step "%s" failed; last lines of %s:\n' "$name" "$log" >&2
		tail -n 30 "$log" >&2
		return 1
	fi
}

# key_of FILE...: short hash over the content of the given files and strings.
key_of() {
	local f
	for f in "$@"; do
		if [ -f "$f" ]; then cat "$f"; else printf '%s\n' "$f"; fi
	done | sha256sum | cut -c1-16
}

need_host_tool() {
	command -v "$1" >/dev/null 2>&1 || die "missing host tool '$1' (run: make host-deps)"
}

# cache_lock NAME: serialise builders of one cache entry across processes
# (held until the calling script exits).
cache_lock() {
	mkdir -p "$RRXE_CACHE"
	exec 9>"$RRXE_CACHE/.lock-$1"
	flock 9
}
