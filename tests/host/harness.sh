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
exit $failed
