# The project's code rules, checked on every run (ARCHITECTURE.md "Layering",
# STYLE.md): driver files forbid unsafe code and never name raw bindings;
# the module builds without a warning under clippy, whose kernel flags include
# undocumented_unsafe_blocks (every `unsafe` block in rust/ carries a
# `// SAFETY:` comment); no function of the module has a stack frame above
# 2048 bytes; Rust sources are rustfmt-clean with the kernel's settings.
cd "$(dirname "$0")/../.." || exit 1
failed=0
result() { if [ "$2" -eq 0 ]; then echo "ok $1"; else echo "not ok $1"; failed=1; fi; }

# 1. Driver files: #![forbid(unsafe_code)], no bindings, no unsafe.
bad=0
for f in drivers/infiniband/sw/rrxe/*.rs drivers/infiniband/sw/rrxe/*/*.rs; do
	case $f in */proto/lib.rs) continue ;; esac
	grep -q '^#!\[forbid(unsafe_code)\]' "$f" || { echo "    $f: no #![forbid(unsafe_code)]"; bad=1; }
	if grep -nE '\bbindings::|\bunsafe\b' "$f" | grep -v 'forbid(unsafe_code)' | grep -vE '^[0-9]+:\s*//'; then
		echo "    $f: names bindings or unsafe (above)"
		bad=1
	fi
done
result driver-files-safe $bad

# 2. The module under clippy, and 3. rustfmt, inside the toolchain root.
log=$(mktemp)
. scripts/lib.sh
set +e +u +o pipefail
# build-module prints the build's warnings; its log may already be the
# next build's (a VM run's, beside this one) once it returns.
if scripts/build-module CLIPPY=1 >"$log" 2>&1; then
	if grep -qE '^(warning|error)' "$log"; then
		grep -E -A6 '^(warning|error)' "$log" | head -n 40 | sed 's/^/    /'
		result module-clippy-clean 1
	else
		result module-clippy-clean 0
	fi
else
	sed 's/^/    /' "$log" | tail -n 30
	result module-clippy-clean 1
fi
tc=$(scripts/build-toolchain)
# 4. No stack frame in the module above the kernel's CONFIG_FRAME_WARN
# (tests/host/frames.py says why).
ko=$(tail -n 1 "$log")
case $ko in
"$PWD"/build/*.ko)
	if scripts/in-toolchain "$tc" - sh -c "cd /src && objdump -d --no-show-raw-insn '${ko#"$PWD"/}'" |
		python3 tests/host/frames.py 2048 >"$log.frames" 2>&1; then
		result module-frames-small 0
	else
		sed 's/^/    /' "$log.frames" | head -n 20
		result module-frames-small 1
	fi
	;;
*)
	echo "    no module built: $ko"
	result module-frames-small 1
	;;
esac
rm -f "$log.frames"
files=$(git ls-files '*.rs' | grep -v '^fuzz/')
if scripts/in-toolchain "$tc" - sh -c "cd /src && rustfmt --edition 2021 --config-path .rustfmt.toml --check $(echo $files)" >"$log" 2>&1; then
	result rustfmt-clean 0
else
	head -n 40 "$log" | sed 's/^/    /'
	result rustfmt-clean 1
fi
rm -f "$log"
exit $failed
