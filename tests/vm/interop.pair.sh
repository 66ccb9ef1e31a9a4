# Wire interop in both directions, so that data flows both ways and each
# VM's driver is requester and responder of every opcode: VM 1 on the C
# driver against VM 2 on rrxe (the "mixed" line),
# at netdev MTU 1500 (path MTU 1024) and then 9000 (path MTU 4096, checked in
# ibv_devinfo), the MTU set back to 1500 at the end.  Cases: perftest
# ib_write_bw, ib_read_bw and ib_send_bw with -a (2 B ... 8 MiB, 5 iterations
# per size) run bidirectionally (-b), VM 1 serving at 1500 and VM 2 at 9000
# (the 9000 sweeps in the complete level only, TEST_LEVEL=full);
# ib_atomic_bw FETCH_AND_ADD and CMP_AND_SWAP (one size: perftest refuses
# -a for atomics); ibv_rc_pingpong -c at 4097 and 65536 bytes,
# ibv_ud_pingpong, ibv_uc_pingpong -c and ibv_srq_pingpong; rping -V
# -S 65535 (RDMA READ and WRITE, every transfer compared); rstream -T v
# (rsockets, every byte verified).  All but the sweeps run twice, VM 1
# serving then VM 2.  perftest checks completions only, never the data; a
# case fails on a non-zero exit or an error or corruption line in either
# side's output, and then prints the port counters and qdisc drops.
# Only the mixed pair runs (the "runs:" line): rrxe against
# itself is covered by the perftest suite (the -a sweeps, rrxe/rrxe) and cm
# (rping, rstream), and the C driver against itself tests no rrxe code; run
# either by hand with DRIVER=rrxe (or rxe) qemu/run-pair.  Measured (host
# wall time, fast kernel, boot included, 2026-12-01): rrxe/rrxe 298 s,
# 72 passed, before the UD/UC/SRQ ping-pongs were added.
# runs: rxe+rrxe@fast
# timeout: 1800

T0=$(date +%s)
check "link-add-vm$VM" rdma_up
GID=$(gid_index "$IBDEV" "$MY_IP")

# What fails a transfer whose tool exits 0 anyway: an error or corrupt data.
BAD="completion with error|couldn't|failed|mismatch|invalid data|error"

# run_case SERVER NAME SECS READY SRV CLI: serve_case with this suite's
# failure pattern, timed; on failure it shows the counters.
port=18600
run_case() {
	local t=$(date +%s) f=$FAILED
	serve_case "$BAD" "$@"
	[ "$VM" = "$1" ] || echo "# $2: $(($(date +%s) - t)) s"
	# On failure, what the lead needs to tell the driver's fault from the
	# peer's: the port counters and the qdisc's drops.
	[ "$FAILED" = "$f" ] || { rdma statistic show link "$IBDEV/1"; tc -s qdisc show dev eth0; }
	port=$((port + 1))
}

# both NAME SECS READY SRV CLI: the case with VM 1 serving (NAME-vm1srv),
# then with VM 2 serving (NAME-vm2srv).
both() {
	local name=$1
	shift
	run_case 1 "$name-vm1srv" "$@"
	run_case 2 "$name-vm2srv" "$@"
}

# perf NAME SECS ARGS...: a perftest program, the same flags on both sides,
# each VM serving once.
perf() {
	local name=$1 secs=$2
	shift 2
	both "$name" "$secs" 'tcp_listening $port' \
		"$* -d \$IBDEV -x \$GID -F -p \$port" "$* -d \$IBDEV -x \$GID -F -p \$port \$PEER_IP"
}
# perf_bidir SERVER NAME SECS ARGS...: a perftest program with -b (both
# sides post, so each VM is requester and responder in the same run), VM
# SERVER serving.  A bidirectional -a sweep takes about as long as a
# one-way one (28 s against 26 s, rrxe, MTU 9000), half of two runs.
perf_bidir() {
	local server=$1 name=$2 secs=$3
	shift 3
	run_case "$server" "$name-vm${server}srv" "$secs" 'tcp_listening $port' \
		"$* -b -d \$IBDEV -x \$GID -F -p \$port" "$* -b -d \$IBDEV -x \$GID -F -p \$port \$PEER_IP"
}

# set_mtu MTU IBMTU: set eth0's MTU and wait for the port's active MTU.
set_mtu() {
	local n=0
	ip link set eth0 mtu "$1" || return 1
	wait_port_active "$IBDEV" || return 1
	until ibv_devinfo -d "$IBDEV" | grep -q "active_mtu:.*$2 "; do
		n=$((n + 1))
		[ $n -lt 50 ] || { ibv_devinfo -d "$IBDEV" | grep -E 'state|mtu'; return 1; }
		sleep 0.2
	done
	ibv_devinfo -d "$IBDEV" | grep -E 'state:|active_mtu'
}

for mtu in 1500 9000; do
	ibmtu=1024
	[ "$mtu" = 9000 ] && ibmtu=4096
	check "mtu$mtu-vm$VM" set_mtu "$mtu" "$ibmtu"
	barrier "mtu$mtu"
	t=$(date +%s)
	m=m$mtu
	# The -a sweeps run bidirectionally, VM 1 serving at MTU 1500 and VM 2
	# at 9000 (the server only drives the TCP exchange).
	# The sweeps are most of the suite's time: make test (TEST_LEVEL quick)
	# sweeps at MTU 1500 only, the complete level at both; every other case
	# runs at both MTUs on either level.
	srv=1
	[ "$mtu" = 9000 ] && srv=2
	if [ "$mtu" = 1500 ] || [ "${TEST_LEVEL:-full}" = full ]; then
		perf_bidir $srv "$m-write-bw" 150 ib_write_bw -a -n 5
		perf_bidir $srv "$m-read-bw" 150 ib_read_bw -a -n 5
		perf_bidir $srv "$m-send-bw" 150 ib_send_bw -a -n 5
	fi
	# Atomics have one size (perftest refuses -a: "Message size cannot be
	# changed for Atomic tests").
	perf "$m-atomic-fa" 120 ib_atomic_bw -A FETCH_AND_ADD -n 20
	perf "$m-atomic-cs" 120 ib_atomic_bw -A CMP_AND_SWAP -n 20
	for size in 4097 65536; do
		both "$m-rc-pingpong-s$size" 120 'tcp_listening $port' \
			"ibv_rc_pingpong -d \$IBDEV -g \$GID -m $ibmtu -c -s $size -n 50 -p \$port" \
			"ibv_rc_pingpong -d \$IBDEV -g \$GID -m $ibmtu -c -s $size -n 50 -p \$port \$PEER_IP"
	done
	# The other verbs ping-pongs: UD (a datagram at most the path MTU),
	# UC (data checked) and 16 RC QPs on one SRQ.
	both "$m-ud-pingpong" 120 'tcp_listening $port' \
		"ibv_ud_pingpong -d \$IBDEV -g \$GID -s 1024 -n 50 -p \$port" \
		"ibv_ud_pingpong -d \$IBDEV -g \$GID -s 1024 -n 50 -p \$port \$PEER_IP"
	both "$m-uc-pingpong" 120 'tcp_listening $port' \
		"ibv_uc_pingpong -d \$IBDEV -g \$GID -m $ibmtu -c -s 4096 -n 50 -p \$port" \
		"ibv_uc_pingpong -d \$IBDEV -g \$GID -m $ibmtu -c -s 4096 -n 50 -p \$port \$PEER_IP"
	both "$m-srq-pingpong" 120 'tcp_listening $port' \
		"ibv_srq_pingpong -d \$IBDEV -g \$GID -m $ibmtu -s 4096 -n 50 -p \$port" \
		"ibv_srq_pingpong -d \$IBDEV -g \$GID -m $ibmtu -s 4096 -n 50 -p \$port \$PEER_IP"
	for size in 65535; do
		both "$m-rping-s$size" 120 'listening rping' \
			"rping -s -a \$MY_IP -p \$port -V -C 50 -S $size" \
			"rping -c -a \$PEER_IP -p \$port -V -C 50 -S $size"
	done
	both "$m-rstream-s65536" 120 'listening rstream' \
		"rstream -b \$MY_IP -p \$port -T v -S 65536 -C 50" \
		"rstream -s \$PEER_IP -p \$port -T v -S 65536 -C 50"
	echo "# MTU $mtu: $(($(date +%s) - t)) s"
done
check "mtu-restored-vm$VM" set_mtu 1500 1024

barrier teardown
check "link-delete-vm$VM" rdma link delete "$IBDEV"
echo "# interop wall time in VM $VM: $(($(date +%s) - T0)) s"
finish
