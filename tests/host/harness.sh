# Host-side tests of the VM harness's verdict: a guest whose script failed,
# that timed out, or whose log holds a kernel report must fail the run; a
# clean one must pass.  Uses fabricated result folders, no VM.
. "$(dirname "$0")/../../qemu/vm.sh"
set +e
RUN=$(mktemp -d)
trap 'rm -rf "$RUN"' EXIT
failed=0

# case NAME WANT_STATUS QEMU_STATUS RC SERIAL_LINE
verdict_case() {
	local name=$1 want=$2 qrc=$3 rc=$4 line=$5 got
	rm -rf "$RUN/vm1"
	mkdir -p "$RUN/vm1/out"
	printf '[    1.000000] Linux version 7.2\n%s\n' "$line" >"$RUN/vm1/serial.log"
	[ "$rc" = none ] || echo "$rc" >"$RUN/vm1/out/rc"
	vm_verdict 1 "$qrc" >/dev/null
	got=$?
	if [ "$got" -eq "$want" ]; then
		echo "ok verdict-$name"
	else
		echo "not ok verdict-$name (verdict $got, wanted $want)"
		failed=1
	fi
}

verdict_case clean 0 0 0 '[    2.0] rdma_rxe: loaded'
verdict_case lockdep-boot-banner-is-clean 0 0 0 '[    0.1] ... MAX_LOCKDEP_SUBCLASSES:  8'
verdict_case script-failed 1 0 1 ''
verdict_case no-status 1 0 none ''
verdict_case timeout 1 124 0 ''
verdict_case warn 1 0 0 '[    3.1] WARNING: CPU: 0 PID: 1 at drivers/infiniband/core/device.c:1 x'
verdict_case kasan 1 0 0 '[    3.1] BUG: KASAN: slab-use-after-free in rxe_qp_do_cleanup'
verdict_case lockdep 1 0 0 '[    3.1] WARNING: possible circular locking dependency detected'
verdict_case sleep-in-atomic 1 0 0 '[    3.1] BUG: sleeping function called from invalid context at mm/slab.c:1'
verdict_case hung-task 1 0 0 '[  120.0] INFO: task kworker/0:1:42 blocked for more than 60 seconds.'
verdict_case oops 1 0 0 '[    3.1] Oops: general protection fault, probably for non-canonical address'

# The boots of tests/run (tests/boot.sh): a made-up boot of two suites.
. "$(dirname "$0")/../boot.sh"
expect() { # expect NAME WANT GOT
	if [ "$2" = "$3" ]; then
		echo "ok boot-$1"
	else
		echo "not ok boot-$1 (got '$3', wanted '$2')"
		failed=1
	fi
}
log=$RUN/boot.log
rm -rf "$RUN/vm1" "$RUN/vm2"
mkdir -p "$RUN/vm1/out/a-rrxe-debug" "$RUN/vm2/out/a-rrxe-debug" "$RUN/vm1/out/b-rrxe-debug"
cat >"$log" <<'LOG'
== run-pair DRIVER=rrxe|rrxe: x | x (results: /tmp/r)
[vm1] == suite a-rrxe-debug begin (driver rrxe)
[vm2] == suite a-rrxe-debug begin (driver rrxe)
[vm1] ok one
[vm2] ok two
[vm2] not ok three
[vm1] == suite a-rrxe-debug end: status 0 after 12 s
[vm2] == suite a-rrxe-debug end: status 1 after 40 s
[vm1] == suite b-rrxe-debug begin (driver rrxe)
[vm2] == suite b-rrxe-debug begin (driver rrxe)
[vm1] ok four
[vm1] == suite b-rrxe-debug end: status 0 after 3 s
[vm2] ok five
[vm1] vm1: script exited with status 0 after 80s
[vm2] not ok dmesg-clean-vm2
[vm1] ok dmesg-clean-vm1
LOG
printf '%s\n' '[    1.0] Linux version 7.2' '[    2.0] rrxe-harness: suite a-rrxe-debug begins' \
	'[    3.0] rrxe: loaded' '[    9.0] rrxe-harness: suite b-rrxe-debug begins' >"$RUN/vm1/serial.log"
printf '%s\n' '[    1.0] Linux version 7.2' '[    2.0] rrxe-harness: suite a-rrxe-debug begins' \
	'[    3.0] rrxe: loaded' '[    8.0] BUG: KASAN: slab-out-of-bounds in x' \
	'[    9.0] rrxe-harness: suite b-rrxe-debug begins' '[   10.0] Kernel panic - not syncing' >"$RUN/vm2/serial.log"
expect section-a "[vm1] ok one|[vm2] ok two|[vm2] not ok three" \
	"$(suite_section "$log" a-rrxe-debug | grep ' ok \| not ok ' | paste -sd'|')"
expect section-b-unended "[vm1] ok four|[vm2] ok five" \
	"$(suite_section "$log" b-rrxe-debug | grep ' ok ' | paste -sd'|')"
expect status-a 1 "$(suite_status "$log" a-rrxe-debug; echo $?)"
expect status-b 0 "$(suite_status "$log" b-rrxe-debug; echo $?)"
expect seconds-a 40 "$(suite_seconds "$log" a-rrxe-debug)"
expect verdict-a-report "ok dmesg-clean-vm1|not ok dmesg-clean-vm2" \
	"$(suite_verdict "$log" "$RUN" a-rrxe-debug 2 | grep -o '^[a-z ]*ok [a-z0-9-]*' | paste -sd'|')"
expect section-ends-with-the-list "[vm2] == suite b-rrxe-debug begin (driver rrxe)|[vm2] ok five" \
	"$(suite_section "$log" b-rrxe-debug | grep '^\[vm2\]' | paste -sd'|')"
expect verdict-b-unended "ok dmesg-clean-vm1|not ok suite-ended-vm2" \
	"$(suite_verdict "$log" "$RUN" b-rrxe-debug 2 | grep -o '^[a-z ]*ok [a-z0-9-]*' | paste -sd'|')"

# Plans: the levels, DRIVERS, mixed runs, boot order and a boot of its own.
mkdir -p "$RUN/suites"
printf '# runs: rrxe@fast rxe@debug\n# full-runs: rxe+rrxe@debug\n# timeout: 60\n' >"$RUN/suites/p.pair.sh"
printf '# runs: rrxe@debug\n' >"$RUN/suites/o.one.sh"
printf '# runs: rrxe@debug\n# boot: alone\n' >"$RUN/suites/q.pair.sh"
plan() { plan_runs "$1" "$2" "$RUN"/suites/*.sh | awk '{ print $1 ":" $4 ":" $8 }' | paste -sd' '; }
expect plan-quick "debug-pair:vm/p[rxe,debug]:60 debug-pair-q:vm/q[rrxe,debug]:900 debug-one:vm/o[rrxe,debug]:900 fast-pair:vm/p[rrxe,fast]:60" \
	"$(plan quick "rxe rrxe")"
expect plan-full-mixed "debug-pair:vm/p[rxe,debug]:60 debug-pair:vm/p[rxe+rrxe,debug]:60" \
	"$(plan full "rxe rrxe" | tr ' ' '\n' | grep ':vm/p' | grep debug | paste -sd' ')"
expect plan-drivers "debug-pair:vm/p[rxe,debug]:60" "$(plan full rxe)"
expect script "run_suite p-rxe-debug rxe rxe 60 p.pair.sh" \
	"$(plan_runs quick rxe "$RUN"/suites/*.sh | boot_script | grep run_suite)"
# The test tools of a boot's suites, each once; none for suites naming none.
printf '# runs: rrxe@debug\n# tools: t2 t1\n' >"$RUN/suites/r.one.sh"
printf '# runs: rrxe@debug\n# tools: t1\n' >"$RUN/suites/s.one.sh"
expect tools "t1 t2" "$(plan_runs quick rrxe "$RUN"/suites/*.sh | awk '$1 == "debug-one"' | plan_tools)"
expect tools-none "" "$(plan_runs quick rrxe "$RUN"/suites/*.sh | awk '$1 == "debug-pair"' | plan_tools)"

# make bench's case list: commas or spaces between sizes; a bad list is
# refused, never cut short.
cases() { env "$@" "$RRXE_ROOT/benches/cases" 2>/dev/null | awk '$1 == "write" && $7 == "write" { print $2 "x" $3 }' | paste -sd' '; }
# The labelled cases: event-mode clients, the window sweep, the scale
# cases, other MTUs.
labelled() { env "$@" "$RRXE_ROOT/benches/cases" 2>/dev/null | awk 'NF >= 7 && $7 != $1 { print $7 "/" $2 "/" $3 "/" $5 "/" $8 }' | paste -sd' '; }
# Every line that is not a throughput case of the main set, as "first/second/third".
others() { env "$@" "$RRXE_ROOT/benches/cases" 2>/dev/null | awk 'NF != 8 || $7 != $1 { print $1 "/" $2 "/" $3 }' | paste -sd' '; }
bench_expect() {
	if [ "$2" = "$3" ]; then
		echo "ok bench-$1"
	else
		echo "not ok bench-$1 (got '$3', wanted '$2')"
		failed=1
	fi
}
bench_expect sizes-commas "4096x1 65536x1" "$(cases BENCH_SIZES=4096,65536 BENCH_QPS=1)"
bench_expect sizes-spaces-and-commas "4096x1 4096x4 65536x1 65536x4" "$(cases BENCH_SIZES='4096, 65536' BENCH_QPS=1,4)"
bench_expect default "64x1 64x4 256x1 256x4 1024x1 1024x4 4096x1 4096x4 16384x1 16384x4 65536x1 65536x4 262144x1 262144x4 1048576x1 1048576x4" "$(cases)"
bench_expect event-and-windows "write_ev/4096/1/16/event read_ev/4096/1/16/event send_ev/4096/1/16/event write_w2/65536/1/2/poll write_w64/65536/1/64/poll lat_send_ev/2/1/2/event" \
	"$(labelled BENCH_EVENT_SIZES=4096 BENCH_WINDOWS=2,64 BENCH_SCALE_QPS=none)"
bench_expect none "lat_send_ev/2/1/2/event" "$(labelled BENCH_EVENT_SIZES=none BENCH_WINDOWS=none BENCH_SCALE_QPS=none)"
# The scale cases: 16 MiB in flight over all QPs (64 KiB each, 2 a QP at least),
# the QP rate and memory over the largest count, the MR sizes.
bench_expect scale "write_qps/65536/4/16/poll write_qps/65536/256/2/poll" \
	"$(labelled BENCH_EVENT_SIZES=none BENCH_WINDOWS=none BENCH_SCALE_QPS=4,256 | sed 's/lat_send_ev[^ ]* *//')"
bench_expect scale-control "mtu/1500/ lat_send/2/1 lat_send/2/1 lat_write/2/1 qp_rate/0/1 qp_mem/0/64 mr_reg/4096/1 mr_reg/1073741824/1 iperf3/0/1" \
	"$(others BENCH_SIZES=64 BENCH_EVENT_SIZES=none BENCH_WINDOWS=none BENCH_SCALE_QPS=64,16 BENCH_MR_SIZES=4096,1073741824 | sed 's# write/65536/[0-9]*##g')"
# A second MTU: the same cases again, labelled, without the latency and
# scale cases (2-byte messages fit either MTU).
bench_expect mtus "mtu/1500/ lat_send/2/1 lat_send/2/1 lat_write/2/1 iperf3/0/1 mtu/9000/ write/64/1 read/64/1 send/64/1 iperf3/0/1" \
	"$(others BENCH_SIZES=64 BENCH_QPS=1 BENCH_EVENT_SIZES=none BENCH_WINDOWS=none BENCH_SCALE_QPS=none BENCH_MR_SIZES=none BENCH_MTUS=1500,9000)"
bench_expect mtu-labels "write_mtu9000/64/1/16/poll read_mtu9000/64/1/16/poll send_mtu9000/64/1/16/poll iperf3_mtu9000/0/1/0/" \
	"$(labelled BENCH_SIZES=64 BENCH_QPS=1 BENCH_EVENT_SIZES=none BENCH_WINDOWS=none BENCH_SCALE_QPS=none BENCH_MR_SIZES=none BENCH_MTUS=1500,9000 | sed 's/lat_send_ev[^ ]* *//')"
for bad in BENCH_WINDOWS=0 BENCH_EVENT_SIZES=4k BENCH_WINDOWS=none,4 BENCH_MTUS=none BENCH_MTUS=576 \
	BENCH_MTUS=9216 BENCH_SCALE_QPS=512 BENCH_MR_SIZES=2147483648; do
	if env "$bad" "$RRXE_ROOT/benches/cases" >/dev/null 2>&1; then
		echo "not ok bench-refused '$bad'"
		failed=1
	else
		echo "ok bench-refused '$bad'"
	fi
done
for bad in 4k 0 , "4096;65536" 1e3; do
	if BENCH_SIZES=$bad "$RRXE_ROOT/benches/cases" >/dev/null 2>&1; then
		echo "not ok bench-sizes-refused '$bad'"
		failed=1
	else
		echo "ok bench-sizes-refused '$bad'"
	fi
done
# A failing case's own lines come with its "not ok" line (tests/run prints
# them last, as CI keeps only the end of the output): what it said failed,
# then its last lines; other VMs' lines and passing cases stay out.
printf '%s\n' '[vm1] # a: x' '[vm1]     FAIL: boom' '[vm1]     l2' '[vm2] # b: y' \
	'[vm1]     l3' '[vm1]     l4' '[vm1]     l5' '[vm2]     FAIL: not this one' \
	'[vm1]     (exit status 1)' '[vm1] not ok a' '[vm2] ok b' 'not ok c' >"$RUN/cases.log"
expect failed-cases "L:   [vm1]     FAIL: boom|L:   [vm1]     l3|L:   [vm1]     l4|L:   [vm1]     l5|L:   [vm1]     (exit status 1)|L: [vm1] not ok a|L: not ok c" \
	"$(failed_cases L "$RUN/cases.log" | paste -sd'|')"
# A bare "not ok" after a passing case shows none of its lines; a long
# case keeps its early FAIL and its true last lines.
{
	printf '%s\n' '[vm1] # p: x' '[vm1]     passing output' '[vm1] ok p' '[vm1] not ok reset-vm1'
	printf '%s\n' '[vm1] # long: y' '[vm1]     FAIL: early'
	seq 3000 | sed 's/^/[vm1]     line /'
	printf '%s\n' '[vm1]     (exit status 1)' '[vm1] not ok long'
} >"$RUN/cases2.log"
expect failed-cases-bare-and-long "L: [vm1] not ok reset-vm1|L:   [vm1]     FAIL: early|L:   [vm1]     line 2998|L:   [vm1]     line 2999|L:   [vm1]     line 3000|L:   [vm1]     (exit status 1)|L: [vm1] not ok long" \
	"$(failed_cases L "$RUN/cases2.log" | paste -sd'|')"

# The barriers (qemu/guest/lib.sh, barrierd.py) with both "VMs" on this
# host: neither passes before the other arrives, a one-sided wait times out
# and counts, barrier_reached passes only with VM 1 already waiting.
bport=$((20000 + RANDOM % 20000))
python3 "$RRXE_ROOT/qemu/guest/barrierd.py" "$bport" &
bpid=$!
vm_side() { # VM SCRIPT
	VM=$1 PEER_IP=127.0.0.1 BARRIERD_PORT=$bport bash -c \
		". '$RRXE_ROOT/qemu/guest/lib.sh'; BARRIERD_PORT=$bport; $2"
}
vm_side 1 'barrier a; echo "1a $? $SECONDS"; barrier b 1; echo "1b $?"; sleep 2; barrier c; echo "1c $?"' \
	>"$RUN/b1.log" 2>&1 &
b1=$!
# VM 2 skips barrier b (counting it, as a VM that gave up on it would).
vm_side 2 'sleep 2; barrier a; echo "2a $?"; sleep 2; BARRIER_PORT=$((BARRIER_PORT + 1));
	barrier_reached; echo "2try-early $?"; sleep 2; barrier_reached; echo "2try $? $BARRIER_PORT"' \
	>"$RUN/b2.log" 2>&1
wait $b1
kill $bpid 2>/dev/null
wait $bpid 2>/dev/null
# VM 1 waited for VM 2's 2 s (bash's SECONDS counts whole seconds: 2 or 3).
expect barrier-waits "1a 0" "$(grep -E '^1a 0 [23]$' "$RUN/b1.log" | cut -d' ' -f1-2)"
expect barrier-both "2a 0" "$(grep '^2a' "$RUN/b2.log")"
expect barrier-timeout "1b 1" "$(grep '^1b' "$RUN/b1.log")"
expect barrier-reached-not-yet "2try-early 1" "$(grep '^2try-early' "$RUN/b2.log")"
expect barrier-reached "2try 0 7003|1c 0" "$(grep '^2try ' "$RUN/b2.log")|$(grep '^1c' "$RUN/b1.log")"

exit $failed
