#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# Short cargo-fuzz run of the protocol core's packet parser (fuzz/, target
# parse_packet).  Prints "ok fuzz-parse" or "not ok fuzz-parse" (with the
# log indented) and exits non-zero on failure.
#
# FUZZ_SECONDS (default 30) sets the run time.  Uses the nightly toolchain
# when rustup has one, else the default toolchain with RUSTC_BOOTSTRAP=1
# (cargo-fuzz needs -Z flags).  Installs cargo-fuzz from crates.io when it is
# missing.  A crash leaves its input in fuzz/artifacts/parse_packet/.
set -u
cd "$(dirname "$0")/../.." || exit 1

name=fuzz-parse
secs=${FUZZ_SECONDS:-30}
log=$(mktemp)
corpus=$(mktemp -d)
trap 'rm -rf "$log" "$corpus"' EXIT

fail() {
	echo "not ok $name${1:+ ($1)}"
	{
		grep -E 'panicked at|SUMMARY|Failing input|Test unit written|^error' "$log" | head -n 20
		echo '...'
		tail -n 20 "$log"
	} | sed 's/^/    /'
	exit 1
}

if ! command -v cargo >/dev/null 2>&1 && [ -x "$HOME/.cargo/bin/cargo" ]; then
	PATH=$HOME/.cargo/bin:$PATH
fi
if ! command -v cargo >/dev/null 2>&1; then
	echo "ok $name # SKIP no Rust toolchain (cargo) on this machine"
	exit 0
fi

toolchain=()
if command -v rustup >/dev/null 2>&1 && rustup run nightly rustc --version >/dev/null 2>&1; then
	toolchain=(+nightly)
else
	export RUSTC_BOOTSTRAP=1
fi

if ! cargo fuzz --version >/dev/null 2>&1; then
	echo "# installing cargo-fuzz from crates.io" >>"$log"
	cargo install --locked cargo-fuzz >>"$log" 2>&1 || fail "cargo install cargo-fuzz"
fi

# Seeds: one valid packet per header layout, so the run starts past the
# opcode and length checks (BTH with QPN 0x11, pad as needed, zero ICRC).
seed() { printf "$2" >"$corpus/$1"; }
seed rc_send_only '\x04\x30\xff\xff\x00\x00\x00\x11\x80\x00\x00\x01hello\x00\x00\x00\x00\x00\x00\x00'
seed rc_ack '\x11\x00\xff\xff\x00\x00\x00\x11\x00\x00\x00\x01\x1f\x00\x00\x01\x00\x00\x00\x00'
seed rc_write_first '\x06\x00\xff\xff\x00\x00\x00\x11\x00\x00\x00\x01\x00\x00\x00\x00\x00\x00\x10\x00\x00\x00\x01\x02\x00\x00\x10\x00abcd\x00\x00\x00\x00'
seed ud_send_imm '\x65\x20\xff\xff\x00\x00\x00\x11\x00\x00\x00\x01\x80\x01\x00\x00\x00\x00\x00\x01\xde\xad\xbe\xefRoCEv2\x00\x00\x00\x00\x00\x00'
seed rc_atomic_ack '\x12\x00\xff\xff\x00\x00\x00\x11\x00\x00\x00\x01\x1f\x00\x00\x01\x00\x00\x00\x00\x00\x00\x00\x2a\x00\x00\x00\x00'

if ! cargo "${toolchain[@]}" fuzz build parse_packet >>"$log" 2>&1; then
	fail "build"
fi
if ! cargo "${toolchain[@]}" fuzz run parse_packet "$corpus" -- \
	-max_total_time="$secs" -max_len=4200 -print_final_stats=1 >>"$log" 2>&1; then
	fail "crash or error"
fi
grep -E '^(#[0-9]+ +DONE|Done [0-9]+ runs)|stat::number_of_executed_units' "$log" | tail -n 2 | sed 's/^/# /'
echo "ok $name"
