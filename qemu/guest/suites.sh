# Several suites in one boot.  tests/run writes the guest script of a boot
# as a list of `run_suite` lines; qemu/guest/init sources this file (and
# lib.sh) before that script.  Each suite runs as a fresh bash in its own
# session, with lib.sh sourced anew, a fresh /tmp, its own output folder
# /rrxe/out/DIR ($OUT), its own barrier ports and its own time limit;
# afterwards what it started is killed and the VM is put back as it booted
# (no RDMA links or devices, no module loaded that was not loaded at boot,
# no NVMe-oF target or controller, eth0 up at MTU 1500 with its default
# qdisc and its global addresses, no other interfaces), checked as
# `reset-vmN`, so that the next suite starts as if on a fresh boot.  In a
# pair both VMs run the same list and meet before each suite; a VM whose
# peer does not come fails the rest of the list at once.
#
# The host splits the output at the "== suite" lines and the serial log at
# the "rrxe-harness: suite" markers, and checks each suite's part for
# kernel reports on its own.

# VM 1 serves the barriers of both VMs (lib.sh, barrier), for the whole
# boot, in a session of its own.
if [ "$VM" = 1 ] && [ -n "$PEER_IP" ]; then
	setsid python3 /rrxe/in/barrierd.py "$BARRIERD_PORT" </dev/null >/rrxe/out/barrierd.log 2>&1 &
fi

SUITE_INDEX=0
SUITES_FAILED=0
PEER_GONE=
# The longest a VM may wait for its peer at a suite's start: the longest
# suite of the boot and its reset (tests/run sets it from the plan).
SUITE_WAIT=${SUITE_WAIT:-2400}
# What every suite starts with: eth0's global addresses and the modules
# loaded at boot (link-scope addresses are the kernel's own).
SUITE_ADDRS=$(ip -o addr show dev eth0 scope global | awk '{ print $4 }')
SUITE_MODULES=$(cut -d' ' -f1 /proc/modules)

# unload_new_modules: unload every module loaded since boot, users first
# (a pass removes those nothing uses any more).
unload_new_modules() {
	local pass m left
	for pass in 1 2 3 4 5 6 7 8; do
		left=
		for m in $(cut -d' ' -f1 /proc/modules); do
			grep -qxF "$m" <<<"$SUITE_MODULES" && continue
			left="$left $m"
			[ "$(awk -v m="$m" '$1 == m { print $3 }' /proc/modules)" = 0 ] || continue
			timeout 60 rmmod "$m" 2>/dev/null
		done
		[ -n "$left" ] || return 0
		# Some references go at the end of a grace period or work item.
		sleep 0.5
	done
	echo "# reset: still loaded:$left"
	return 1
}

# nvmet_down: remove an NVMe-oF target left in configfs (ports' links,
# namespaces, subsystems, hosts, ports), so its modules can unload.
nvmet_down() {
	local c=/sys/kernel/config/nvmet f
	[ -d "$c" ] || return 0
	for f in "$c"/ports/*/subsystems/* "$c"/subsystems/*/allowed_hosts/*; do
		[ -L "$f" ] && rm -f "$f"
	done
	for f in "$c"/subsystems/*/namespaces/*; do
		[ -d "$f" ] || continue
		echo 0 >"$f/enable" 2>/dev/null
		rmdir "$f"
	done
	for f in "$c"/subsystems/* "$c"/hosts/* "$c"/ports/*; do
		[ -d "$f" ] && rmdir "$f"
	done
	return 0
}

# suite_reset: put back what a suite may leave behind; fails if the VM is
# not as it booted afterwards.
suite_reset() {
	local l rc=0
	# The RDMA consumers first: deleting a link waits, uninterruptibly,
	# for its device's users to go.
	if ls /sys/class/nvme 2>/dev/null | grep -q . && command -v nvme >/dev/null; then
		timeout 120 nvme disconnect-all
	fi
	nvmet_down
	lio_down
	# An iSCSI initiator left by a suite (tests/vm/iser.pair.sh).
	if pgrep -x iscsid >/dev/null; then
		timeout 60 iscsiadm -m node --logoutall=all
		timeout 30 iscsiadm -k 0
	fi
	for l in /etc/iscsi /var/lib/iscsi; do
		mountpoint -q "$l" && umount -l "$l"
	done
	# An NFS client or server left by a suite (tests/vm/nfs.pair.sh).
	grep -q ' nfs4 ' /proc/mounts && timeout 60 umount -f -l -a -t nfs4
	[ -e /proc/fs/nfsd/threads ] && timeout 60 rpc.nfsd 0
	pkill -x rpc.mountd
	pkill -x nfsdcld
	pkill -x rpcbind
	for l in /proc/fs/nfsd /run/rpc_pipefs /var/lib/nfs; do
		mountpoint -q "$l" && umount -l "$l"
	done
	# An SMB client or server left by a suite (tests/vm/smb.pair.sh);
	# ksmbd.mountd leaves the suite's session when it daemonizes.
	grep -q ' cifs ' /proc/mounts && timeout 60 umount -f -l -a -t cifs
	if pgrep -x ksmbd.mountd >/dev/null; then
		timeout 30 ksmbd.control -s
		pkill -x ksmbd.mountd
	fi
	mountpoint -q /etc/ksmbd && umount -l /etc/ksmbd
	for l in $(rdma link show 2>/dev/null | sed -n 's/^link \([^/]*\)\/.*/\1/p' | sort -u); do
		timeout -k 5 60 rdma link delete "$l" || echo "# reset: rdma link delete $l failed"
	done
	tc qdisc del dev eth0 root 2>/dev/null
	ip link set eth0 mtu 1500
	ip link set eth0 up
	for l in $(ip -o addr show dev eth0 scope global | awk '{ print $4 }'); do
		grep -qxF "$l" <<<"$SUITE_ADDRS" || ip addr del "$l" dev eth0
	done
	for l in $SUITE_ADDRS; do
		ip -o addr show dev eth0 | awk '{ print $4 }' | grep -qxF "$l" || ip addr add "$l" dev eth0
	done
	for l in $(ip -o link show | sed -n 's/^[0-9]*: \([^:@]*\).*/\1/p'); do
		case $l in lo | eth0) ;; *) ip link delete "$l" 2>/dev/null ;; esac
	done
	unload_new_modules || rc=1
	if ls /sys/class/infiniband 2>/dev/null | grep -q .; then
		echo "# reset: RDMA devices left: $(ls /sys/class/infiniband)"
		rc=1
	fi
	for l in $(seq 50); do
		ip -6 addr show dev eth0 | grep -q tentative || break
		sleep 0.2
	done
	cd / && umount -l /tmp && mount -t tmpfs tmpfs /tmp && cd /tmp
	return $rc
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
	if [ -n "$PEER_IP" ] && [ -z "$PEER_GONE" ]; then
		# Meet the peer, which may still be in the previous suite.
		BARRIER_PORT=$((6000 + SUITE_INDEX))
		barrier "suite-$SUITE_INDEX" "$SUITE_WAIT" || PEER_GONE=1
	fi
	echo "rrxe-harness: suite $dir begins" >/dev/kmsg
	echo "== suite $dir begin (driver $drv)"
	if [ -n "$PEER_GONE" ]; then
		echo "not ok suite-peer-vm$VM # the peer VM did not come to this suite within $SUITE_WAIT s"
		SUITES_FAILED=$((SUITES_FAILED + 1))
		echo "== suite $dir end: status 1 after 0 s"
		return
	fi
	t0=$(cut -d' ' -f1 /proc/uptime)
	# Not a process group leader (no job control here), so setsid makes
	# the suite's session in place: its pid is the session's id.  Its
	# barriers use ports of their own, 200 a suite from 10200.
	DRIVER=$drv IBDEV=${drv}0 OUT=$out SUITE_BARRIER_PORT=$((10000 + 200 * SUITE_INDEX)) \
		setsid bash -c '. /rrxe/in/lib.sh; BARRIER_PORT=$SUITE_BARRIER_PORT; . "$1"' suite "$file" </dev/null &
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
	if suite_reset >"$out/reset.log" 2>&1; then
		echo "ok reset-vm$VM"
	else
		cat "$out/reset.log"
		echo "not ok reset-vm$VM # the VM is not as it booted after the suite"
		rc=1
	fi
	dmesg -c >"$out/dmesg.txt" 2>&1
	[ "$rc" -eq 0 ] || SUITES_FAILED=$((SUITES_FAILED + 1))
	echo "== suite $dir end: status $rc after $(awk -v t0="$t0" '{ printf "%d", $1 - t0 }' /proc/uptime) s"
}
