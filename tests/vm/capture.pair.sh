# RoCEv2 on the wire: VM 1 captures every UDP 4791 packet on eth0 with
# tcpdump while the stock tools carry traffic between the VMs (VM 1 serves,
# VM 2 is the client): ibv_rc_pingpong at sizes that need pad bytes and
# several packets per message (MTU 1024), over an IPv4 and an IPv6 GID; a
# short ib_read_bw (RDMA READ requests and responses); ibv_ud_pingpong (UD);
# rping (RDMA CM's MADs on QP1, RDMA WRITE and READ).  The capture comes back
# as results/<run>/vm1/out/capture.pcap, and the host check
# (tests/vm/capture.check.sh) verifies every packet's ICRC with an
# independent checker (tests/tools/icrc_check.py) and that tshark decodes
# every packet as InfiniBand (RoCEv2).
# runs: rrxe@fast rxe@fast
# full-runs: rrxe@debug rxe@debug
# host-check: tests/vm/capture.check.sh

MY_IP6=fd00:4791::$VM
ip -6 addr add "$MY_IP6/64" dev eth0 nodad

check "link-add-vm$VM" rdma_up
GID=$(gid_index "$IBDEV" "$MY_IP")

GID6=$(gid_index6 "$IBDEV" "$MY_IP6")
echo "# GID index: IPv4 $GID, IPv6 ${GID6:-none}"

if [ "$VM" = 1 ]; then
	# The whole packet (-s 0), written as it arrives (-U), as root (-Z).
	tcpdump -i eth0 -s 0 -B 16384 -U -Z root -w /tmp/capture.pcap udp port 4791 \
		2>/tmp/tcpdump.err &
	tcpdump_pid=$!
	check tcpdump-started retry 10 grep -q "listening on" /tmp/tcpdump.err
fi

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

for size in 1 1025 4097; do
	pair "rc-pingpong-s$size" 300 ibv_rc_pingpong -d "$IBDEV" -g "$GID" -c -s "$size" -n 10
done
if [ -n "$GID6" ]; then
	pair rc-pingpong-ipv6 300 ibv_rc_pingpong -d "$IBDEV" -g "$GID6" -c -s 2050 -n 10
else
	not_ok "ipv6-gid-vm$VM"
fi
pair read-bw 300 ib_read_bw -d "$IBDEV" -x "$GID" -F -s 4096 -n 20
pair ud-pingpong 300 ibv_ud_pingpong -d "$IBDEV" -g "$GID" -s 512 -n 10

if [ "$VM" = 1 ]; then
	timeout 300 rping -s -a "$MY_IP" -V -C 10 -S 2000 & pid=$!
	retry 30 bash -c 'rdma res show cm_id | grep -q LISTEN'
	barrier rping
	check rping-server wait "$pid"
else
	barrier rping
	check rping-client timeout 300 rping -c -a "$PEER_IP" -V -C 10 -S 2000
fi

barrier done
if [ "$VM" = 1 ]; then
	sleep 1
	kill -INT "$tcpdump_pid"
	wait "$tcpdump_pid"
	sed 's/^/    tcpdump: /' /tmp/tcpdump.err
	check capture-no-drops grep -q "^0 packets dropped by kernel" /tmp/tcpdump.err
	check capture-saved cp /tmp/capture.pcap "${OUT:-/rrxe/out}/capture.pcap"
fi
check "link-delete-vm$VM" rdma link delete "$IBDEV"
finish
