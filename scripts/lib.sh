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

# cache_use DIR: hold the finished cache entry DIR (a shared lock on its
# .rrxe-done, kept by this shell and the processes it starts) so that no
# cache_prune deletes it while they run, and mark it used now.  Fails if
# DIR was pruned before the hold was taken: build it again then.
cache_use() {
	local fd
	exec {fd}<"$1/.rrxe-done" || return 1
	flock -s "$fd"
	[ -f "$1/.rrxe-done" ] || return 1
	touch "$1/.rrxe-used" 2>/dev/null || true
}

# cache_prune PREFIX KEEP: after a build of KEEP, delete the older entries
# PREFIX*, but the most recently used of them (two work trees that differ
# in an input then do not rebuild each other's entry on every run) and any
# entry a run holds (cache_use): a running VM never loses its root.  The
# caller holds the builder's lock (cache_lock), so no other build of this
# kind is in progress.
cache_prune() {
	local prefix=$1 keep=$2 old kept=0
	# Newest use first (.rrxe-used, else the build's .rrxe-done).
	for old in $(for old in "$prefix"*; do
		[ -e "$old" ] || continue
		echo "$(stat -c %Y "$old/.rrxe-used" 2>/dev/null || stat -c %Y "$old/.rrxe-done" 2>/dev/null || echo 0) $old"
	done | sort -rn | cut -d' ' -f2-); do
		[ "$old" = "$keep" ] && continue
		if [ -f "$old/.rrxe-done" ] && [ $kept -eq 0 ]; then
			kept=1
			continue
		fi
		if [ ! -f "$old/.rrxe-done" ]; then
			rm -rf "$old"
		elif flock -n -x "$old/.rrxe-done" rm -rf "$old"; then
			step "cache: removed $old"
		else
			step "cache: kept $old (in use by a run)"
		fi
	done
}
