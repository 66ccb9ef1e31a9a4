# The VM half of tests/run: which runs a level makes, how they are grouped
# into boots, and how one boot's output is split back into its suites.
# Sourced by tests/run and by tests/host/harness.sh (which tests it on made-up
# output).  Needs qemu/vm.sh (REPORT_RE).

# A suite is tests/vm/NAME.pair.sh (both VMs of qemu/run-pair) or
# tests/vm/NAME.one.sh (qemu/run-one); its header lines say how it runs:
#   # runs: rrxe@debug rxe@fast rxe+rrxe@debug   the runs of `make test`:
#       DRIVER@KERNEL, where DRIVER is rxe, rrxe or A+B (VM 1 on A, VM 2
#       on B) and KERNEL is debug or fast
#   # full-runs: rxe@debug   runs that only TEST_LEVEL=full adds
#   # timeout: SECONDS       one run's time limit (default 900)
#   # boot: alone            the suite gets a boot of its own (default:
#       it shares one with the other suites of its kind and kernel)
#   # host-check: SCRIPT     run on the host after each run, with the
#       run's folder of VM 1 (vm1/out/DIR) as argument
#   # tools: NAME...         test tools tests/tools/NAME.c the suite runs:
#       built on the host (scripts/build-tool) and staged in the guest as
#       /rrxe/in/NAME
# Inside a suite TEST_LEVEL is quick or full, for matrices that only the
# complete level runs in full.

# suite_header FILE NAME: the value of a "# NAME:" header line.
suite_header() { sed -n "s/^# $2: *//p" "$1" | head -n 1; }

# plan_runs LEVEL DRIVERS FILE...: one line per run the level makes of the
# given suites, in boot order (debug before fast, pair boots before single
# VM ones):
#   BOOT KIND KERNEL LABEL DIR D1 D2 SECONDS FILE
# A run whose drivers are not all in DRIVERS is left out.
plan_runs() {
	local level=$1 drivers=" $2 " f base name kind runs spec drv kernel d1 d2 secs boot
	shift 2
	for f in "$@"; do
		base=$(basename "$f" .sh)
		name=${base%.*} kind=${base##*.}
		runs=$(suite_header "$f" runs)
		[ "$level" = full ] && runs="$runs $(suite_header "$f" full-runs)"
		secs=$(suite_header "$f" timeout)
		secs=${secs:-900}
		for spec in $runs; do
			drv=${spec%@*} kernel=${spec#*@}
			d1=${drv%+*} d2=${drv#*+}
			case $drivers in *" $d1 "*) ;; *) continue ;; esac
			case $drivers in *" $d2 "*) ;; *) continue ;; esac
			boot=$kernel-$kind
			[ "$(suite_header "$f" boot)" = alone ] && boot=$kernel-$kind-$name
			printf '%s %s %s %s %s %s %s %s %s\n' "$boot" "$kind" "$kernel" \
				"vm/$name[$drv,$kernel]" "$name-$drv-$kernel" "$d1" "$d2" "$secs" "$f"
		done
	done | awk '{ k = ($3 == "debug" ? 0 : 1) ($2 == "pair" ? 0 : 1); print k, NR, $0 }' |
		sort -k1,1 -k2,2n | cut -d' ' -f3-
}

# plan_tools PLAN_LINES: the tools the suites of the plan name, once each.
plan_tools() {
	local f
	while read -r _ _ _ _ _ _ _ _ f; do
		suite_header "$f" tools
	done | tr ' ' '\n' | sed '/^$/d' | sort -u | tr '\n' ' ' | sed 's/ $//'
}

# boot_script PLAN_LINES: the guest script of one boot.
boot_script() {
	echo "# Made by tests/run: the suites of one boot (qemu/guest/suites.sh)."
	echo "export TEST_LEVEL=${TEST_LEVEL:-quick}"
	local boot kind kernel label dir d1 d2 secs f max=0 lines=
	while read -r boot kind kernel label dir d1 d2 secs f; do
		lines+="run_suite $dir $d1 $d2 $secs $(basename "$f")"$'\n'
		[ "$secs" -le "$max" ] || max=$secs
	done
	# A VM waits for its peer at most the longest suite and its reset.
	echo "SUITE_WAIT=$((max + 900))"
	printf '%s' "$lines"
	# The suites' failures are counted per suite; the boot's own status
	# only says that the list ran to its end.
	echo "true"
}

# suite_section LOG DIR: the lines both VMs printed inside suite DIR.  A
# VM's section also ends where the VM went on without ending it (the next
# suite, the end of its list, the harness's verdict on a VM that died).
suite_section() {
	awk -v dir="$2" '
		{ vm = $1 }
		index($0, "== suite " dir " begin") { on[vm] = 1; print; next }
		on[vm] && (/ == suite [^ ]* begin/ || / script exited with status / ||
			/^\[vm[0-9]\] (FAIL: |(not )?ok dmesg-clean-vm)/) { on[vm] = 0 }
		on[vm] { print }
		index($0, "== suite " dir " end:") { on[vm] = 0 }' "$1"
}

# serial_section SERIAL DIR: the kernel's messages from the start of suite
# DIR to the start of the next (its reset, and the wait for the peer that
# follows it, included), from the guest's markers.
serial_section() {
	awk -v m="rrxe-harness: suite $2 begins" '
		index($0, "rrxe-harness: suite ") && index($0, " begins") { on = index($0, m) > 0 }
		on' "$1"
}

# suite_verdict LOG RUN DIR VMS: the harness's own lines for suite DIR of
# the boot whose output is LOG and results folder RUN, for VMs 1..VMS: that
# each VM ended the suite, and that the kernel logged no report while it ran.
suite_verdict() {
	local log=$1 run=$2 dir=$3 vms=$4 i
	for i in $(seq "$vms"); do
		if ! grep -qF "[vm$i] == suite $dir end:" "$log"; then
			echo "not ok suite-ended-vm$i # the VM never ended the suite (timeout or crash: see $run/vm$i/serial.log)"
			continue
		fi
		if serial_section "$run/vm$i/serial.log" "$dir" | grep -E "$REPORT_RE" >"$run/vm$i/out/$dir/reports.txt"; then
			echo "not ok dmesg-clean-vm$i # kernel reports while the suite ran ($run/vm$i/out/$dir/reports.txt):"
			head -n 20 "$run/vm$i/out/$dir/reports.txt" | sed 's/^/    /'
		else
			rm -f "$run/vm$i/out/$dir/reports.txt"
			echo "ok dmesg-clean-vm$i"
		fi
	done
}

# suite_status LOG DIR: 0 when every VM ended suite DIR with status 0.
suite_status() {
	! grep -F "== suite $2 end:" "$1" | grep -vq 'end: status 0 '
}

# suite_seconds LOG DIR: the longest time a VM reported for suite DIR.
suite_seconds() {
	grep -F "== suite $2 end:" "$1" | sed -n 's/.* after \([0-9]*\) s$/\1/p' | sort -n | tail -n 1
}

# failed_cases LABEL LOG: each "not ok" line of LOG, after the lines its
# case printed (per VM) that say what failed (FAIL, error, timed out; the
# first 8) and its last 4 lines, so a failure in CI's output says what
# failed.  A case's lines are those since its "# NAME: ..." line or the
# last "ok" line.
failed_cases() {
	awk -v label="$1" '
	function reset(p) { nf[p] = 0; n[p] = 0 }
	{
		p = ""
		if (match($0, /^\[(vm[0-9]|host)\] /)) p = substr($0, 1, RLENGTH)
		body = substr($0, length(p) + 1)
	}
	body ~ /^# / || body ~ /^ok / { reset(p); next }
	body ~ /^    / {
		# The last 4 lines in a ring; what failed kept apart (8 at most).
		last[p, n[p] % 4] = $0
		n[p]++
		if (body ~ /FAIL|[Ee]rror|[Tt]imed out|not ok/ && nf[p] < 8)
			fails[p, nf[p]++] = $0 SUBSEP n[p]
		next
	}
	body ~ /^not ok / {
		first = n[p] > 4 ? n[p] - 4 : 0
		for (i = 0; i < nf[p]; i++) {
			split(fails[p, i], f, SUBSEP)
			if (f[2] <= first)
				print label ":   " f[1]
		}
		for (i = first; i < n[p]; i++)
			print label ":   " last[p, i % 4]
		print label ": " $0
		reset(p)
	}' "$2"
}
