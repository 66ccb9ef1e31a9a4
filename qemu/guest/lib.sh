# Helpers for test scripts running inside a guest; sourced before the script.
# Environment: VM (1 or 2), DRIVER (rxe or rrxe), MY_IP, PEER_IP.
# Test scripts report each case with `ok NAME` / `not ok NAME` lines, which
# the host counts.

IBDEV=${DRIVER}0

# Print a TAP-like result line for one case and remember failures.
FAILED=0
ok() { echo "ok $*"; }
not_ok() { echo "not ok $*"; FAILED=$((FAILED + 1)); }

# check NAME CMD...: run CMD in this shell (so `wait PID` works), show its
# output indented, and report ok if it exits 0.
# A case that took 5 s or more says how long, for keeping make test within
# its time budget.
check() {
	local name=$1 log rc t0=$SECONDS
	shift
	echo "# $name: $*"
	log=$(mktemp)
	"$@" >"$log" 2>&1
	rc=$?
	sed 's/^/    /' "$log"
	rm -f "$log"
	[ $((SECONDS - t0)) -lt 5 ] || echo "    ($((SECONDS - t0)) s)"
	if [ "$rc" -eq 0 ]; then
		ok "$name"
	else
		echo "    (exit status $rc)"
		not_ok "$name"
	fi
}

# The script's exit status: non-zero when any case failed.
finish() { [ "$FAILED" -eq 0 ]; }

# Load the selected driver and bind it to eth0 the way a user would.
rdma_up() {
	local dev=${1:-eth0}
	case $DRIVER in
	rxe) modprobe rdma_rxe || return 1 ;;
	rrxe) modprobe rrxe || return 1 ;;
	*) echo "unknown DRIVER=$DRIVER" >&2; return 1 ;;
	esac
	modprobe ib_uverbs
	modprobe rdma_ucm
	rdma link add "$IBDEV" type "$DRIVER" netdev "$dev" || return 1
	wait_port_active "$IBDEV"
}

# wait_port_active DEV [SECONDS]: wait until port 1 of DEV is ACTIVE.
wait_port_active() {
	local dev=$1 tries=$((${2:-30} * 5))
	while [ "$tries" -gt 0 ]; do
		grep -q ACTIVE "/sys/class/infiniband/$dev/ports/1/state" 2>/dev/null && return 0
		sleep 0.2
		tries=$((tries - 1))
	done
	echo "port 1 of $dev is not ACTIVE" >&2
	return 1
}

# gid_index DEV ADDR: the GID table index of a RoCEv2 GID for an IPv4 address.
gid_index() {
	local dev=$1 ip=$2 f hex
	hex=$(printf '0000:0000:0000:0000:0000:ffff:%02x%02x:%02x%02x' $(echo "$ip" | tr . ' '))
	for f in /sys/class/infiniband/"$dev"/ports/1/gids/*; do
		if [ "$(cat "$f")" = "$hex" ] &&
			[ "$(cat "/sys/class/infiniband/$dev/ports/1/gid_attrs/types/${f##*/}" 2>/dev/null)" = "RoCE v2" ]; then
			echo "${f##*/}"
			return 0
		fi
	done
	return 1
}

# gid_index6 DEV ADDR: the index of the RoCE v2 GID of an IPv6 address
# (waiting up to 10 s for the core to add it).
gid_index6() {
	local want f
	want=$(python3 -c 'import ipaddress, sys; print(ipaddress.ip_address(sys.argv[1]).exploded)' "$2")
	for _ in $(seq 50); do
		for f in /sys/class/infiniband/"$1"/ports/1/gids/*; do
			if [ "$(cat "$f")" = "$want" ] &&
				[ "$(cat "/sys/class/infiniband/$1/ports/1/gid_attrs/types/${f##*/}" 2>/dev/null)" = "RoCE v2" ]; then
				echo "${f##*/}"
				return 0
			fi
		done
		sleep 0.2
	done
	return 1
}

# relay_results PREFIX FILE: a test program's "ok NAME" / "not ok NAME"
# lines in FILE become this suite's cases PREFIX-NAME.
relay_results() {
	local line
	while IFS= read -r line; do
		case $line in
		"ok "*) ok "$1-${line#ok }" ;;
		"not ok "*) not_ok "$1-${line#not ok }" ;;
		esac
	done <"$2"
}

# retry SECONDS CMD...: rerun CMD until it succeeds (e.g. a client whose
# server is not listening yet) or SECONDS pass.  The pause between tries
# starts at 0.1 s and doubles up to 1 s: most waits end within a second,
# and a long one does not rerun a heavy command more than once a second.
retry() {
	local deadline=$(($(date +%s) + $1)) rc pause=0.1
	shift
	while :; do
		"$@" && return 0
		rc=$?
		[ "$(date +%s)" -ge "$deadline" ] && return "$rc"
		sleep "$pause"
		case $pause in 0.1) pause=0.2 ;; 0.2) pause=0.4 ;; 0.4) pause=0.8 ;; *) pause=1 ;; esac
	done
}

# wait_tcp IP PORT [SECONDS]: wait until a TCP server accepts on IP:PORT.
wait_tcp() {
	retry "${3:-60}" bash -c "exec 3<>/dev/tcp/$1/$2" 2>/dev/null
}

# barrier NAME [SECONDS]: meet the peer VM at a named point (both VMs call it).
# Each barrier has its own number (BARRIER_PORT, counted up by both VMs in
# step); VM 1's barrier server (qemu/guest/barrierd.py, started by
# suites.sh) answers both VMs once both wait at it.  Bash's own /dev/tcp
# and read: no new process per barrier.
BARRIER_PORT=7000
BARRIERD_PORT=5990
barrier() {
	local rc=0
	barrier_ask wait "${2:-120}" || rc=1
	# Both VMs count every barrier, passed or not, to stay in step.
	BARRIER_PORT=$((BARRIER_PORT + 1))
	return $rc
}

# barrier_reached: VM 2's one try at the next barrier, without waiting:
# true (and the barrier passed) when VM 1 is already at it.
barrier_reached() {
	barrier_ask try 10 || return 1
	BARRIER_PORT=$((BARRIER_PORT + 1))
}

# barrier_ask VERB SECONDS: one request to the barrier server about the
# next barrier, which it passes ("go") within SECONDS or not.
barrier_ask() {
	local host=$PEER_IP fd reply= end=$((SECONDS + $2)) left
	[ "$VM" = 1 ] && host=127.0.0.1
	# The server may not listen yet (VM 1 still booting).  One try can
	# block for the kernel's SYN retries when VM 1 drops the packets (the
	# deadline is checked between tries; the suite's time limit bounds all).
	until exec {fd}<>"/dev/tcp/$host/$BARRIERD_PORT"; do
		[ "$SECONDS" -lt "$end" ] || return 1
		sleep 0.2
	done 2>/dev/null
	echo "$1 $BARRIER_PORT $VM" >&"$fd"
	left=$((end - SECONDS))
	[ "$left" -gt 0 ] || left=1
	read -r -t "$left" reply <&"$fd"
	exec {fd}>&-
	[ "$reply" = go ]
}

# A value handed from VM 2 to VM 1 over TCP (VM 1 listens): recv_value
# [SECONDS] prints it, send_value VALUE [SECONDS] sends it.  Each exchange
# uses its own port, from 100 above the suite's barrier ports: send_value moves to the next one, and the receiver
# does so itself (recv_value runs in a command substitution).
VALUE_PORT=$((${SUITE_BARRIER_PORT:-7300} + 100))
recv_value() {
	timeout "${1:-600}" python3 -c '
import socket, sys
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("", int(sys.argv[1]))); s.listen(1); c, _ = s.accept()
data = b""
while not data.endswith(b"\n"):
    chunk = c.recv(256)
    if not chunk: break
    data += chunk
print(data.decode().strip())' "$VALUE_PORT"
}
send_value() {
	retry "${2:-120}" python3 -c '
import socket, sys
socket.create_connection((sys.argv[1], int(sys.argv[2])), timeout=5).sendall(sys.argv[3].encode() + b"\n")' \
		"$PEER_IP" "$VALUE_PORT" "$1" 2>/dev/null
	local rc=$?
	VALUE_PORT=$((VALUE_PORT + 1))
	return $rc
}

# tree_sum DIR: one SHA-256 over the names and contents of DIR's files.
tree_sum() { (cd "$1" && find . -type f | LC_ALL=C sort | xargs sha256sum | sha256sum | cut -d' ' -f1); }

# same_sum WHAT GOT WANT: the checksum GOT of WHAT is WANT, and not empty.
same_sum() {
	echo "$1: $2"
	echo "expected: $3"
	[ -n "$2" ] && [ "$2" = "$3" ]
}

# The suites of the kernel's file and block consumers (nfs, smb, iser):
# a file set written over the fabric and read back, fio with a verify
# pass, and the port counters showing the data crossed.

# make_file_set DIR: files of sizes around the path MTU, pages, the
# consumers' inline thresholds and up to 4 MiB, and 32 small ones.
make_file_set() {
	local s n=0 i
	mkdir -p "$1"
	for s in 1 1023 1024 1025 4095 4096 4097 8192 65535 65536 65537 262144 1048575 1048576 4194304; do
		head -c "$s" /dev/urandom >"$1/f$n.$s"
		n=$((n + 1))
	done
	for i in $(seq 32); do head -c $((RANDOM * 3)) /dev/urandom >"$1/small$i"; done
}

# check_file_set_round MOUNT...: the file set /tmp/set (make_file_set)
# copied to the file system mounted on /tmp/mnt, which is then unmounted,
# the page cache dropped, mounted again by MOUNT..., and read back: compared
# byte for byte and by one SHA-256.
check_file_set_round() {
	check "write-file-set" timeout 300 cp -r /tmp/set /tmp/mnt/set
	check "sync" timeout 120 sync
	check "umount" timeout 120 umount /tmp/mnt
	echo 3 >/proc/sys/vm/drop_caches
	check "remount" retry 30 "$@"
	check "read-back-identical" timeout 300 diff -r /tmp/set /tmp/mnt/set
	check "read-back-sha256" same_sum "read back" "$(tree_sum /tmp/mnt/set)" "$(tree_sum /tmp/set)"
}

# check_fio_verify DIR: cases fio-verify-4k, -64k and -1m: a file in DIR
# each (2, 4 and 8 MiB: 512, 64 and 8 requests; half as much in make test),
# written in random order with O_DIRECT, then read back and checked (CRC32C
# in every block).  Sets FIO_MIB to the MiB written.
check_fio_verify() {
	local bs size sizes="4k:2M 64k:4M 1m:8M"
	# make test (TEST_LEVEL quick) writes half as much: on the debug kernel
	# the 4 KiB round alone took 24 s of NFS (2026-12-07).
	[ "${TEST_LEVEL:-full}" = full ] || sizes="4k:1M 64k:2M 1m:4M"
	# What was written, for the suites' fabric_moved: 14 or 7 MiB.
	FIO_MIB=0
	for bs in $sizes; do
		size=${bs#*:} bs=${bs%:*}
		FIO_MIB=$((FIO_MIB + ${size%M}))
		check "fio-verify-$bs" timeout 300 fio --name="v$bs" --filename="$1/fio.$bs" \
			--size="$size" --bs="$bs" --rw=randwrite --direct=1 --ioengine=psync \
			--verify=crc32c --do_verify=1 --verify_fatal=1 --output-format=terse --minimal
	done
}

# rc_qp_rts: the suite's device has an RC QP in RTS (a consumer's
# connection is up); lists them.
rc_qp_rts() { rdma res show qp | grep -E "link $IBDEV/" | grep -E 'type RC state RTS'; }

# port_counter NAME: the hardware counter NAME of the suite's device.
port_counter() { cat "/sys/class/infiniband/$IBDEV/ports/1/hw_counters/$1" 2>/dev/null || echo 0; }

# counter_snapshot NAME...: "NAME VALUE" lines of those counters, for
# counter_delta and counters_moved to read back from a file.
counter_snapshot() { local c; for c in "$@"; do echo "$c $(port_counter "$c")"; done; }
# counter_delta FILE NAME: how much counter NAME moved since the snapshot
# in FILE.
counter_delta() { echo $(($(port_counter "$2") - $(awk -v n="$2" '$1 == n { print $2 }' "$1"))); }
# counters_moved FILE NAME...: " NAME +DELTA" for each, on one line.
counters_moved() {
	local f=$1 c
	shift
	for c in "$@"; do printf ' %s +%s' "$c" "$(counter_delta "$f" "$c")"; done
}

# fabric_moved SENT0 RCVD0 MIB [RCVD_MIB]: sent_bytes grew by at least MIB
# MiB and rcvd_bytes by RCVD_MIB (default MIB) since they read SENT0 and
# RCVD0.
fabric_moved() {
	local s=$(($(port_counter sent_bytes) - $1)) r=$(($(port_counter rcvd_bytes) - $2))
	echo "sent_bytes +$s, rcvd_bytes +$r"
	[ $s -ge $(($3 * 1048576)) ] && [ $r -ge $((${4:-$3} * 1048576)) ]
}

# lio_down: remove a LIO target left in configfs (its target portal groups
# with their LUN links, portals and ACLs, the targets, the fabrics, then
# the backstores and their HBAs), so its modules can unload (the
# iser suite, and suite_reset after any suite); fails if any is left.
lio_down() {
	local c=/sys/kernel/config/target f l
	[ -d "$c" ] || return 0
	for f in "$c"/*/*/tpgt_*; do
		[ -d "$f" ] || continue
		echo 0 >"$f/enable" 2>/dev/null
		for l in "$f"/lun/*/* "$f"/acls/*/*/*; do
			[ -L "$l" ] && rm -f "$l"
		done
		for l in "$f"/acls/*/lun_* "$f"/acls/* "$f"/lun/* "$f"/np/*; do
			[ -d "$l" ] && rmdir "$l"
		done
		rmdir "$f"
	done
	for f in "$c"/*/*; do
		case $f in "$c"/core/*) continue ;; esac
		[ -d "$f" ] && [ "${f##*/}" != discovery_auth ] && rmdir "$f" 2>/dev/null
	done
	# The fabrics' own folders (iscsi, srpt), which hold their modules.
	for f in "$c"/*; do
		[ "$f" = "$c/core" ] || { [ -d "$f" ] && rmdir "$f" 2>/dev/null; }
	done
	for f in "$c"/core/*_[0-9]*/*; do
		[ -d "$f" ] && rmdir "$f"
	done
	for f in "$c"/core/*_[0-9]*; do
		[ -d "$f" ] && rmdir "$f"
	done
	# Nothing may be left: no target portal group, fabric or backstore.
	for f in "$c"/*/*/tpgt_* "$c"/core/*_[0-9]*; do
		[ -e "$f" ] && { echo "lio_down: $f is left"; return 1; }
	done
	for f in "$c"/*; do
		[ "$f" = "$c/core" ] || { [ -d "$f" ] && { echo "lio_down: $f is left"; return 1; }; }
	done
	return 0
}

# unload_modules MOD...: unload those of the modules that are loaded, in order
# (for `retry`: a second try skips what the first removed).
unload_modules() {
	local m rc=0
	for m; do
		grep -q "^$m " /proc/modules || continue
		modprobe -r "$m" || rc=1
	done
	return $rc
}

# listening COMM: an rdma_cm listener of the program COMM exists.
listening() {
	rdma res show cm_id 2>/dev/null | grep LISTEN | grep -q "comm $1"
}

# cm_port_listening PORT: an rdma_cm listener (of any device, or of all)
# is bound to PORT.
cm_port_listening() { rdma res show cm_id 2>/dev/null | grep LISTEN | grep -q ":$1 "; }

# no_cm_ids: the suite's device has no rdma_cm ID left (and `rdma` could
# list them).
no_cm_ids() {
	local ids
	ids=$(rdma res show cm_id) || return 1
	! grep -E "link $IBDEV/" <<<"$ids"
}

# tcp_listening PORT: a TCP socket of this VM listens on PORT.
tcp_listening() { ss -ltnH "sport = :$1" | grep -q LISTEN; }

# output_ok RE CMD...: run CMD and show its output; fail if CMD fails or a
# line of its output matches the extended regex RE (case-insensitive): for
# tools that report bad data yet exit 0 (ibv_rc_pingpong -c prints
# "invalid data", rping -V "data mismatch").
output_ok() {
	local re=$1 rc log
	shift
	log=$(mktemp)
	"$@" >"$log" 2>&1
	rc=$?
	cat "$log"
	output_clean "$re" "$log" || rc=1
	rm -f "$log"
	return $rc
}

# wait_ok RE PID LOG: wait for the background command PID, show its output
# LOG, and fail as output_ok does.
wait_ok() {
	local rc
	wait "$2"
	rc=$?
	cat "$3"
	output_clean "$1" "$3" || rc=1
	return $rc
}

# serve_case RE SERVER NAME SECS READY SRV CLI: VM SERVER runs the command
# line SRV (evaluated: it may use $MY_IP and $port) until READY holds, then
# the other VM runs CLI (which may use $PEER_IP and $port); both are bounded
# by SECS and checked as NAME-server / NAME-client with output_ok RE.
serve_case() {
	local re=$1 server=$2 name=$3 secs=$4 ready=$5 srv=$6 cli=$7 pid log
	if [ "$VM" = "$server" ]; then
		log=/tmp/$name.server.log
		eval "timeout $secs $srv" >"$log" 2>&1 &
		pid=$!
		retry 60 eval "$ready" || echo "# $name: server not ready after 60 s"
		barrier "$name" $((secs + 60))
		check "$name-server" wait_ok "$re" "$pid" "$log"
	else
		barrier "$name" $((secs + 60))
		eval "set -- $cli"
		check "$name-client" client_retry 30 output_ok "$re" watchdog "$secs" "$@"
	fi
}

# output_clean RE LOG: no line of LOG matches RE (else name the first).
output_clean() {
	local bad
	bad=$(grep -iE -m 1 "$1" "$2") || return 0
	echo "output reports a failure: $bad"
	return 1
}

# watchdog SECONDS CMD...: run CMD, as `timeout` does (status 124 when it
# had to be stopped), but before stopping it print what the device's QPs
# are doing (`rdma res show qp -dd`: rrxe's PSNs, unacknowledged count,
# retries left, timer) and its counters, while the client's QPs still exist,
# and where in the kernel the client waits.
watchdog() {
	local secs=$1 pid n=0
	shift
	"$@" &
	pid=$!
	while kill -0 "$pid" 2>/dev/null; do
		if [ "$n" -ge $((secs * 5)) ]; then
			echo "# still running after $secs s; its kernel stack, its device's QPs and counters:"
			local t
			for t in /proc/"$pid"/task/*; do
				head -n 12 "$t/stack" 2>/dev/null
			done
			rdma res show qp -dd 2>&1 | grep -v 'type GSI' | head -n 20
			rdma statistic show link "$IBDEV/1" 2>&1 | tr -s ' \n' ' ' | head -c 1500
			echo
			kill -TERM "$pid" 2>/dev/null
			sleep 1
			kill -KILL "$pid" 2>/dev/null
			wait "$pid"
			return 124
		fi
		sleep 0.2
		n=$((n + 1))
	done
	wait "$pid"
}

# client_retry SECONDS CMD...: run a client, rerunning it while it fails only
# because its server is not listening yet; any other failure is final.
client_retry() {
	local deadline=$(($(date +%s) + $1)) log rc
	shift
	log=$(mktemp)
	while :; do
		"$@" >"$log" 2>&1
		rc=$?
		if [ "$rc" -eq 0 ] || [ "$(date +%s)" -ge "$deadline" ] ||
			! grep -qE "Couldn't connect|Connection refused|REJECTED|UNREACHABLE" "$log"; then
			cat "$log"
			rm -f "$log"
			return "$rc"
		fi
		sleep 0.5
	done
}

# netns_veth_pair: network namespaces ns1 and ns2 joined by a veth pair,
# veth1 (10.9.0.1/24) in ns1 and veth2 (10.9.0.2/24) in ns2, loopbacks up;
# returns once ns1 reaches ns2.
netns_veth_pair() {
	ip netns add ns1 && ip netns add ns2 &&
		ip link add veth1 type veth peer name veth2 &&
		ip link set veth1 netns ns1 && ip link set veth2 netns ns2 &&
		ip -n ns1 addr add 10.9.0.1/24 dev veth1 &&
		ip -n ns2 addr add 10.9.0.2/24 dev veth2 &&
		ip -n ns1 link set veth1 up && ip -n ns2 link set veth2 up &&
		ip -n ns1 link set lo up && ip -n ns2 link set lo up &&
		retry 10 ip netns exec ns1 ping -c1 -W1 10.9.0.2
}

# nvme_find_ns NQN: the block device of the first namespace of the NVMe
# subsystem NQN this host is connected to.
nvme_find_ns() {
	local c b
	for c in /sys/class/nvme/nvme*; do
		[ "$(cat "$c/subsysnqn" 2>/dev/null)" = "$1" ] || continue
		for b in /sys/block/"${c##*/}"n1 /sys/block/nvme*n1; do
			[ -e "$b" ] && [ -b "/dev/${b##*/}" ] && { echo "/dev/${b##*/}"; return 0; }
		done
	done
	return 1
}
