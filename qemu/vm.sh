# QEMU runner internals shared by qemu/run-one, qemu/run-pair and make shell.
# Sourced; not executed.
. "$(dirname "${BASH_SOURCE[0]}")/../scripts/lib.sh"

DRIVER=${DRIVER:-rxe}
VM_MEM=${VM_MEM:-2048}
VM_TIMEOUT=${VM_TIMEOUT:-900}
RESULTS=${RESULTS:-$RRXE_ROOT/results}
QEMU=${QEMU:-qemu-system-x86_64}

# vm_setup NAME: build or reuse kernel, guest root and module tree; make the
# results folder for this run in $RUN.
vm_setup() {
	need_host_tool "$QEMU"
	# Hold the kernel and the guest root for the whole run, so that a build
	# in another work tree that shares the cache cannot prune them under
	# the guests (scripts/lib.sh cache_use); build again if one was pruned
	# between its build and the hold.
	local tries
	for tries in 1 2 3; do
		KBUILD=$("$RRXE_ROOT/scripts/build-kernel")
		GUEST=$("$RRXE_ROOT/scripts/build-guest")
		cache_use "$KBUILD" && cache_use "$GUEST" && break
		[ "$tries" -lt 3 ] || die "the kernel or guest root was pruned three times while being taken"
	done
	RUN=$RESULTS/$(date +%Y%m%d-%H%M%S)-$1-$$
	mkdir -p "$RUN"
	# rrxe.ko is staged when any VM of the run uses it.
	local d=rxe
	case " $DRIVER ${DRIVER1:-} ${DRIVER2:-} " in *" rrxe "*) d=rrxe ;; esac
	MODTREE=$(DRIVER=$d "$RRXE_ROOT/scripts/stage-modules" "$RUN/modtree")
	ln -sfn "$RUN" "$RESULTS/latest"
	# One VM run at a time per machine: two TCG guests fill both cores, and
	# a second run beside them makes ACK timers expire and suites flake.
	# The lock is held until this script and its guests exit.  It is the
	# machine's, not the cache's: runs with another RRXE_CACHE wait too.
	exec 8>"${RRXE_VM_LOCK:-/var/lock/rrxe-vm.lock}"
	if ! flock -n 8; then
		echo "== waiting for another VM run on this machine to end" >&2
		flock 8
	fi
}

free_port() {
	python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}

# vm_start INDEX SCRIPT ADDR PEER NETDEV [EXTRA_APPEND]: boot VM INDEX in
# the background running SCRIPT; sets VM_PID_<INDEX>.  NETDEV is the
# -netdev backend after its id, e.g. "socket,listen=127.0.0.1:PORT".
vm_start() {
	local i=$1 script=$2 addr=$3 peer=$4 net=$5 extra=${6:-} dir=$RUN/vm$1 driver
	# DRIVER1/DRIVER2 give the VMs of a pair different drivers (interop).
	eval "driver=\${DRIVER$i:-\$DRIVER}"
	mkdir -p "$dir/in" "$dir/out"
	cp "$RRXE_ROOT/qemu/guest/init" "$RRXE_ROOT/qemu/guest/lib.sh" "$RRXE_ROOT/qemu/guest/suites.sh" \
		"$RRXE_ROOT/qemu/guest/barrierd.py" "$dir/in/"
	[ -n "$script" ] && cp "$script" "$dir/in/script"
	# VM_FILES: more host files for the guest, found there under /rrxe/in/.
	local f
	for f in ${VM_FILES:-}; do cp "$f" "$dir/in/"; done
	: >"$dir/out/output.log"
	local append="console=ttyS0 root=root rootfstype=9p ro init=/sbin/rrxe-init"
	append+=" rootflags=trans=virtio,version=9p2000.L,msize=262144,cache=loose"
	# no_timer_check: on a busy host, TCG is too slow for the kernel's
	# IO-APIC timer check, which then panics early in boot.
	append+=" panic=-1 no_timer_check hung_task_timeout_secs=60 kunit.enable=1 kunit.autorun=1"
	append+=" harness.vm=$i harness.kernel=${KERNEL_FLAVOUR:-debug} harness.driver=$driver harness.addr=$addr harness.peer=$peer $extra"
	local serial="file:$dir/serial.log"
	[ -n "${VM_INTERACTIVE:-}" ] && serial=mon:stdio
	# No LA57: with 5-level paging under TCG, the KASAN kernel sporadically
	# reports a wild access from an interrupt during early CPU setup.
	# debug-threads: QEMU names its threads ("CPU 0/TCG"), for
	# benches/qemu-threads.
	local -a cmd=("$QEMU" -name "vm$i,debug-threads=on" -accel tcg -cpu max,la57=off -m "$VM_MEM" -smp "${VM_SMP:-1}"
		-no-reboot -display none -nodefaults -serial "$serial"
		-kernel "$KBUILD/arch/x86/boot/bzImage" -append "$append"
		-virtfs "local,path=$GUEST,mount_tag=root,security_model=none,readonly=on,multidevs=remap"
		-virtfs "local,path=$MODTREE,mount_tag=modules,security_model=none,readonly=on"
		-virtfs "local,path=$dir,mount_tag=run,security_model=none"
		-netdev "${net%%,*},id=n0,${net#*,}"
		-device "virtio-net-pci,netdev=n0,mac=52:54:00:12:34:0$i"
		-device virtio-rng-pci)
	echo "${cmd[*]}" >"$dir/qemu-cmdline"
	if [ -n "${VM_INTERACTIVE:-}" ]; then
		"${cmd[@]}"
		return
	fi
	timeout -k 10 "$VM_TIMEOUT" "${cmd[@]}" >"$dir/qemu.log" 2>&1 &
	eval "VM_PID_$i=$!"
}

# vm_follow INDEX: print the guest's script output, prefixed, while it runs.
vm_follow() {
	local i=$1 pid
	eval "pid=\$VM_PID_$i"
	tail -n +1 -F --pid="$pid" "$RUN/vm$i/out/output.log" 2>/dev/null | sed -u "s/^/[vm$i] /" &
	eval "FOLLOW_PID_$i=$!"
}

# Kernel reports that fail a run wherever they appear in a guest's log.
REPORT_RE='WARNING:|BUG:|Oops|KASAN|UBSAN|kernel BUG|general protection fault|Kernel panic|INFO: possible|INFO: task .* blocked|inconsistent lock state|possible circular locking|DEBUG_LOCKS_WARN_ON|turning off the locking correctness validator|soft lockup|hard LOCKUP|rcu_.*detected stalls|panicked at'

# vm_verdict INDEX QEMU_STATUS: print the verdict for one VM; return non-zero
# on a failed script, a timeout, a missing status or a kernel report.
vm_verdict() {
	local i=$1 qrc=$2 dir=$RUN/vm$1 bad=0 rc
	if [ "$qrc" -eq 124 ] || [ "$qrc" -eq 137 ]; then
		echo "[vm$i] FAIL: VM exceeded its timeout of ${VM_TIMEOUT}s (serial log: $dir/serial.log)"
		bad=1
	fi
	rc=$(cat "$dir/out/rc" 2>/dev/null || echo none)
	if [ "$rc" != 0 ]; then
		echo "[vm$i] FAIL: script status $rc (output: $dir/out/output.log, serial log: $dir/serial.log)"
		bad=1
	fi
	local logs=() f
	for f in "$dir/serial.log" "$dir/out/dmesg.txt"; do [ -f "$f" ] && logs+=("$f"); done
	if [ ${#logs[@]} -gt 0 ] && grep -hE "$REPORT_RE" "${logs[@]}" >"$dir/reports.txt"; then
		echo "[vm$i] FAIL: kernel reports in dmesg ($dir/reports.txt):"
		head -n 20 "$dir/reports.txt" | sed "s/^/[vm$i]   /"
		bad=1
		echo "not ok dmesg-clean-vm$i" | tee -a "$dir/out/output.log" | sed "s/^/[vm$i] /"
	else
		echo "ok dmesg-clean-vm$i" | tee -a "$dir/out/output.log" | sed "s/^/[vm$i] /"
		rm -f "$dir/reports.txt"
	fi
	return $bad
}
