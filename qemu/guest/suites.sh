# Several suites in one boot.  tests/run writes the guest script of a boot
# as a list of `run_suite` lines; qemu/guest/init sources this file (and
# lib.sh) before that script.  Each suite runs as a fresh bash in its own
# session, with lib.sh sourced anew, a fresh /tmp, its own output folder
# /rrxe/out/DIR ($OUT) and its own time limit; afterwards what it started is
# killed and the VM is put back as it booted (no RDMA links, no RDMA
# driver loaded, eth0 at MTU 1500 with its default qdisc, no other
# interfaces), so that the next suite starts as if on a fresh boot.  In a
# pair both VMs run the same list and meet before each suite.
#
# The host splits the output at the "== suite" lines, and checks each
# suite's kernel log ($OUT/dmesg.txt, the messages logged while it ran) for
# reports on its own.

SUITE_INDEX=0
SUITES_FAILED=0
# eth0's addresses at boot, which every suite starts with.
SUITE_ADDRS=$(ip -o addr show dev eth0 | awk '{ print $4 }')

# suite_reset: what a suite may leave behind, put back.
suite_reset() {
	local l
	for l in $(rdma link show 2>/dev/null | sed -n 's/^link \([^/]*\)\/.*/\1/p' | sort -u); do
		rdma link delete "$l" || echo "# reset: rdma link delete $l failed"
	done
	tc qdisc del dev eth0 root 2>/dev/null
	ip link set eth0 mtu 1500
	# eth0's addresses as the harness set them (suites add IPv6 ones).
	for l in $(ip -o addr show dev eth0 | awk '{ print $4 }'); do
		grep -qxF "$l" <<<"$SUITE_ADDRS" || ip addr del "$l" dev eth0
	done
	for l in $SUITE_ADDRS; do
		ip -o addr show dev eth0 | awk '{ print $4 }' | grep -qxF "$l" || ip addr add "$l" dev eth0
	done
	for l in $(ip -o link show | sed -n 's/^[0-9]*: \([^:@]*\).*/\1/p'); do
		case $l in lo | eth0) ;; *) ip link delete "$l" 2>/dev/null ;; esac
	done
	for l in rdma_rxe rrxe; do
		[ -d "/sys/module/$l" ] || continue
		modprobe -r "$l" || echo "# reset: modprobe -r $l failed"
	done
	cd / && umount -l /tmp && mount -t tmpfs tmpfs /tmp && cd /tmp
}

# run_suite DIR D1 D2 SECONDS FILE: run the suite /rrxe/in/FILE with driver
# D1 in VM 1 and D2 in VM 2 for at most SECONDS; its output and files go to
# /rrxe/out/DIR.
run_suite() {
	local dir=$1 d1=$2 d2=$3 secs=$4 file=/rrxe/in/$5 drv out t0 pid wd rc
	SUITE_INDEX=$((SUITE_INDEX + 1))
	drv=$d1
	[ "$VM" = 2 ] && drv=$d2
	out=/rrxe/out/$dir
	mkdir -p "$out"
	if [ -n "$PEER_IP" ]; then
		# Meet the peer, which may still be in the previous suite.
		BARRIER_PORT=$((6000 + SUITE_INDEX))
		barrier "suite-$SUITE_INDEX" $((secs + 600)) ||
			echo "# $dir: the peer VM did not arrive within $((secs + 600)) s"
	fi
	dmesg -c >"$out/dmesg-before.txt" 2>&1
	echo "rrxe-harness: suite $dir begins" >/dev/kmsg
	echo "== suite $dir begin (driver $drv)"
	t0=$(cut -d' ' -f1 /proc/uptime)
	# Not a process group leader (no job control here), so setsid makes
	# the suite's session in place: its pid is the session's id.
	DRIVER=$drv IBDEV=${drv}0 OUT=$out setsid bash -c '. /rrxe/in/lib.sh; . "$1"' suite "$file" </dev/null &
	pid=$!
	(
		sleep "$secs"
		echo "== suite $dir: time limit of $secs s reached, killing it"
		pkill -TERM -s "$pid"
		sleep 10
		pkill -KILL -s "$pid"
	) &
	wd=$!
	wait "$pid"
	rc=$?
	kill "$wd" 2>/dev/null
	wait "$wd" 2>/dev/null
	pkill -KILL -s "$pid" 2>/dev/null
	suite_reset >>"$out/reset.log" 2>&1
	cat "$out/reset.log"
	echo "rrxe-harness: suite $dir ends" >/dev/kmsg
	dmesg -c >"$out/dmesg.txt" 2>&1
	[ "$rc" -eq 0 ] || SUITES_FAILED=$((SUITES_FAILED + 1))
	echo "== suite $dir end: status $rc after $(awk -v t0="$t0" '{ printf "%d", $1 - t0 }' /proc/uptime) s"
}

# The boot's exit status: non-zero when any suite failed.
suites_done() { [ "$SUITES_FAILED" -eq 0 ]; }
