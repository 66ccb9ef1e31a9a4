# The RC data path between two VMs with the stock tools: ibv_rc_pingpong
# with data validation (-c) at sizes around the 1024-byte path MTU and up to
# 64 KiB, in event mode (-e), ibv_srq_pingpong, the RNR path (a SEND with
# no receive posted), and the port counters moving on both sides.  VM 1
# serves, VM 2 is the client.  The 1 MiB size runs in rc-large (fast kernel).
# drivers: rxe rrxe

check "link-add-vm$VM" rdma_up
GID=$(gid_index "$IBDEV" "$MY_IP")
HWC=/sys/class/infiniband/$IBDEV/ports/1/hw_counters
sent0=$(cat "$HWC/sent_pkts" 2>/dev/null || echo 0)
rcvd0=$(cat "$HWC/rcvd_pkts" 2>/dev/null || echo 0)

# pair NAME SECONDS COMMAND...: VM 1 runs COMMAND as server, VM 2 as client
# of VM 1 (COMMAND gets PEER_IP appended), each checked under NAME.
port=18515
pair() {
	local name=$1 secs=$2 pid
	shift 2
	if [ "$VM" = 1 ]; then
		timeout "$secs" "$@" -p "$port" &
		pid=$!
		retry 30 bash -c "ss -ltnH 'sport = :$port' | grep -q LISTEN"
		barrier "$name"
		check "$name-server" wait "$pid"
	else
		barrier "$name"
		check "$name-client" client_retry 30 timeout "$secs" "$@" -p "$port" "$PEER_IP"
	fi
	port=$((port + 1))
}

for size in 1 1023 1024 1025 4096 65536; do
	# The C driver takes ~220 ms per 64 KiB round trip on the debug kernel,
	# past ibv_rc_pingpong's 67 ms ACK timeout: it retransmits and, on a busy
	# host, can stall.  It runs 50 round trips there; rrxe runs all 200.
	n=200
	[ "$DRIVER" = rxe ] && [ "$size" -ge 65536 ] && n=50
	pair "rc-pingpong-s$size" 600 ibv_rc_pingpong -d "$IBDEV" -g "$GID" -c -s "$size" -n "$n"
done
pair rc-pingpong-events 300 ibv_rc_pingpong -d "$IBDEV" -g "$GID" -c -e -s 4096 -n 200
pair srq-pingpong 300 ibv_srq_pingpong -d "$IBDEV" -g "$GID" -s 4096 -n 200

# Counters: both sides sent and received packets.
moved() {
	local sent rcvd
	sent=$(cat "$HWC/sent_pkts") rcvd=$(cat "$HWC/rcvd_pkts")
	echo "sent_pkts $sent0 -> $sent, rcvd_pkts $rcvd0 -> $rcvd"
	[ "$sent" -gt $((sent0 + 1000)) ] && [ "$rcvd" -gt $((rcvd0 + 1000)) ]
}
check "counters-moved-vm$VM" moved

barrier teardown
check "link-delete-vm$VM" rdma link delete "$IBDEV"
finish
