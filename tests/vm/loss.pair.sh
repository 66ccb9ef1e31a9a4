# Loss recovery of the reliable service: with netem impairing eth0 on both
# VMs, RC transfers finish with their data intact and the drivers' recovery
# paths demonstrably ran.  Phase 1: 1% loss plus 2 ms delay with 5% of the
# packets reordered; phase 2: 5% duplication.  Cases in each phase:
# ibv_rc_pingpong -c at 1 and 4096 bytes (200 round trips) and 65536 (100),
# and rping -V -C 100 -S 4096 (RDMA READ and WRITE, every transfer
# compared).  Asserted per VM: netem dropped packets (phase 1), the
# responder saw gaps or repeats (out_of_seq_request or
# duplicate_request moved), the requester recovered (rcvd_seq_err or
# completer_retry_err moved), duplicate_request moved (phase 2), and no QP
# exhausted its retries (retry_exceeded_err unchanged).  The same assertions
# hold for both drivers.  VM 1 serves, VM 2 is the client.
# Measured, host wall time with boot, fast kernel, 2026-12-01: C driver
# 112 s, rrxe 124 s (38 passed each).  A heavier impairment (25% reordered,
# 2 ms jitter) took the C driver 583 s, its 64 KiB ping-pong timing out.
# runs: rrxe@debug
# full-runs: rxe@fast rrxe@fast
# timeout: 1800

T0=$(date +%s)
check "link-add-vm$VM" rdma_up
GID=$(gid_index "$IBDEV" "$MY_IP")
# The recovery counters (the same files on both drivers).
COUNTERS="out_of_seq_request duplicate_request rcvd_seq_err completer_retry_err retry_exceeded_err"

# Corrupt data fails a transfer (retries and timeouts on the way are the
# point of the suite, so only corruption is looked for in the output).
BAD="mismatch|verification failed|invalid data"

# pair NAME SECS READY SRV CLI: VM 1 serves (serve_case), VM 2 is the client.
port=18700
pair() {
	serve_case "$BAD" 1 "$@"
	port=$((port + 1))
}

# netem_dropped: packets netem dropped on eth0 since the qdisc was added.
netem_dropped() {
	tc -s qdisc show dev eth0 | sed -n 's/.*(dropped \([0-9]*\),.*/\1/p' | head -n 1
}

# phase NAME NETEM...: impair eth0 with netem NETEM on both VMs, run the
# transfers, then check the counters and remove the qdisc.
phase() {
	local name=$1 t
	shift
	t=$(date +%s)
	check "$name-netem-vm$VM" tc qdisc add dev eth0 root netem "$@"
	counter_snapshot $COUNTERS >"/tmp/$name.before"
	barrier "$name"
	for size in 1 4096 65536; do
		n=200
		[ "$size" = 65536 ] && n=100
		pair "$name-rc-pingpong-s$size" 300 'tcp_listening $port' \
			"ibv_rc_pingpong -d \$IBDEV -g \$GID -c -s $size -n $n -p \$port" \
			"ibv_rc_pingpong -d \$IBDEV -g \$GID -c -s $size -n $n -p \$port \$PEER_IP"
	done
	pair "$name-rping-s4096" 300 'listening rping' \
		"rping -s -a \$MY_IP -p \$port -V -C 100 -S 4096" \
		"rping -c -a \$PEER_IP -p \$port -V -C 100 -S 4096"
	barrier "$name-done" 600
	tc -s qdisc show dev eth0
	echo "# $name: counters moved on VM $VM:$(counters_moved "/tmp/$name.before" $COUNTERS)"
	echo "# $name: $(($(date +%s) - t)) s"
}
moved() { [ "$(counter_delta "/tmp/$1.before" "$2")" -gt 0 ]; }
either_moved() { moved "$1" "$2" || moved "$1" "$3"; }
unchanged() { [ "$(counter_delta "/tmp/$1.before" "$2")" -eq 0 ]; }

# Phase 1: loss and reordering.  Both VMs' requests and acknowledges are
# lost, so each VM, as responder, sees a gap (the packet after a lost one is
# out of sequence) or a retransmitted packet it already had; and, as
# requester, recovers through a sequence NAK or its retransmission timer.
# (1% loss with 25% reordered and 2 ms jitter stalled the C driver's 64 KiB
# ping-pong past 300 s: go-back-N resends most of every message; 5%
# reordered without jitter keeps each message to a few resends.)
phase loss loss 1% delay 2ms reorder 5% 50%
check "loss-netem-dropped-vm$VM" test "$(netem_dropped)" -gt 0
check "loss-responder-saw-gaps-vm$VM" either_moved loss out_of_seq_request duplicate_request
check "loss-requester-recovered-vm$VM" either_moved loss rcvd_seq_err completer_retry_err
check "loss-no-retry-exhausted-vm$VM" unchanged loss retry_exceeded_err
tc qdisc del dev eth0 root

# Phase 2: duplication.  A duplicated request reaches the responder twice:
# the second copy counts as a duplicate, and is not executed again (the
# ping-pong's data stays intact).
phase dup duplicate 5%
check "dup-duplicates-seen-vm$VM" moved dup duplicate_request
check "dup-no-retry-exhausted-vm$VM" unchanged dup retry_exceeded_err
tc qdisc del dev eth0 root

barrier teardown
check "link-delete-vm$VM" rdma link delete "$IBDEV"
echo "# loss wall time in VM $VM: $(($(date +%s) - T0)) s"
finish
