# The RC data path between two VMs with the stock tools: ibv_rc_pingpong
# with data validation (-c) at sizes around the 1024-byte path MTU and up to
# 64 KiB, in event mode (-e), ibv_srq_pingpong, the RNR path (a SEND with
# no receive posted), a path MTU (4096) above what the 1500-byte link
# carries, a link MTU that shrinks under a running ping-pong, a ping-pong
# after thousands of malformed packets, and the port counters moving on
# both sides, in hw_counters and in the performance management agent's
# counters.  VM 1 serves, VM 2 is the client.
# The 1 MiB size runs in rc-large (fast kernel).
# runs: rrxe@debug rxe@fast
# full-runs: rxe@debug

check "link-add-vm$VM" rdma_up
GID=$(gid_index "$IBDEV" "$MY_IP")
HWC=/sys/class/infiniband/$IBDEV/ports/1/hw_counters
sent0=$(cat "$HWC/sent_pkts" 2>/dev/null || echo 0)
rcvd0=$(cat "$HWC/rcvd_pkts" 2>/dev/null || echo 0)

# pair NAME SECONDS COMMAND...: VM 1 runs COMMAND as server, VM 2 as client
# of VM 1 (COMMAND gets PEER_IP appended), each checked under NAME, or, with
# PAIR_JUDGE=shown, only its exit status printed (a C-driver result).
port=18515
shown() {
	local name=$1 rc=0
	shift
	"$@" >/tmp/shown.log 2>&1 || rc=$?
	echo "# $name on $DRIVER: exit $rc (124: timed out)"
}
pair() {
	local name=$1 secs=$2 pid judge=${PAIR_JUDGE:-check}
	shift 2
	if [ "$VM" = 1 ]; then
		timeout "$secs" "$@" -p "$port" &
		pid=$!
		retry 30 bash -c "ss -ltnH 'sport = :$port' | grep -q LISTEN"
		barrier "$name"
		$judge "$name-server" wait "$pid"
	else
		barrier "$name"
		$judge "$name-client" client_retry 30 timeout "$secs" "$@" -p "$port" "$PEER_IP"
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
# A path MTU the link cannot carry: 4096 (-m 4096) over the 1500-byte
# netdev. rrxe clamps it to the port's active MTU (1024) at RTR, so the
# checked ping-pong completes; rdma_rxe takes it as it is and black-holes
# every full packet (measured 2026-12-02): its result is printed, bounded
# in time, not judged.
# rdma_rxe's run waits out its 60 s bound: the complete level only.
mtu_judge=check
[ "$DRIVER" = rrxe ] || mtu_judge=shown
if [ "$DRIVER" = rrxe ] || [ "${TEST_LEVEL:-full}" = full ]; then
	PAIR_JUDGE=$mtu_judge pair rc-pingpong-mtu4096-on-1500 60 \
		ibv_rc_pingpong -d "$IBDEV" -g "$GID" -c -m 4096 -s 8192 -n 20
fi

# A net device MTU that shrinks under a live connection: both VMs go to
# 9000 bytes and a checked ping-pong in event mode of three 8 MiB messages
# each way (2048 packets at path MTU 4096) runs. Each VM sets 1500 once it
# has sent 300 packets: VM 2, which sends first, in the middle of its
# first message; VM 1 at its own moment. rrxe begins new messages at the
# 1024 bytes the link now carries, so each VM's later messages take 8192
# packets; a message begun keeps its 4096-byte packets, which the IP stack
# fragments (DF cleared, so that the reassembled header matches the
# ICRC), and the responder takes a message at any path MTU up to the
# QP's. So the ping-pong completes, VM 2 fragments the rest of its first
# message and nothing after. The third message is there because a busy
# guest's watcher may set the MTU seconds late, inside the second: at
# least one message then still begins after the shrink. Had the QPs kept
# 4096, each VM would have sent at most 3 x 2048 packets and an ACK per
# 16 received, 7680 packets, and fragmented all of them.
# rdma_rxe keeps 4096 and every full packet is dropped: its result is
# printed, bounded in time, in the complete level.
snmp_ip() {
	awk -v k="$1" '/^Ip:/ { if (!c) { for (i = 2; i <= NF; i++) if ($i == k) c = i } else print $c }' /proc/net/snmp
}
# /tmp/shrink.py HWC: once this VM has sent 300 packets, sets eth0's MTU
# to 1500 (SIOCSIFMTU: no program to start, which takes seconds on a busy
# VM) and records whether the ping-pong was still running then.
cat >/tmp/shrink.py <<'EOF'
import fcntl, os, socket, struct, sys, time
counter = sys.argv[1] + "/sent_pkts"
def sent():
    with open(counter) as f:
        return int(f.read())
def pingpong_running():
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/comm") as f:
                if f.read().strip() == "ibv_rc_pingpong":
                    return True
        except OSError:
            pass
    return False
start, state = sent(), "not started"
deadline = time.monotonic() + 240
while time.monotonic() < deadline:
    if sent() - start >= 300:
        state = "running" if pingpong_running() else "ended"
        break
    time.sleep(0.02)
sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
fcntl.ioctl(sock, 0x8922, struct.pack("16si20x", b"eth0", 1500))  # SIOCSIFMTU
with open("/tmp/mtu-live.state", "w") as f:
    print(state, file=f)
EOF
if [ "$DRIVER" = rrxe ] || [ "${TEST_LEVEL:-full}" = full ]; then
	check "mtu-9000-vm$VM" ip link set eth0 mtu 9000
	barrier mtu-live-9000
	icrc_drops() { cat "$HWC/rcvd_drop_bad_icrc" 2>/dev/null || echo 0; }
	frag0=$(snmp_ip FragCreates) icrc0=$(icrc_drops)
	sent_live0=$(cat "$HWC/sent_pkts")
	rm -f /tmp/mtu-live.state
	# At a real-time priority: on a slow host the ping-pong's softirq work
	# kept a normal-priority watcher from running until VM 2's first
	# message had ended (CI 2026-12-06: begun-message-fragmented failed).
	chrt -f 10 python3 /tmp/shrink.py "$HWC" &
	watcher=$!
	live_secs=300
	[ "$DRIVER" = rrxe ] || live_secs=60
	PAIR_JUDGE=$mtu_judge pair rc-pingpong-mtu-shrinks-live "$live_secs" \
		ibv_rc_pingpong -d "$IBDEV" -g "$GID" -c -e -m 4096 -s 8388608 -n 3
	# A ping-pong that stalled before 300 packets leaves the watcher waiting.
	kill "$watcher" 2>/dev/null
	wait "$watcher"
	ip link set eth0 mtu 1500
	frags=$(($(snmp_ip FragCreates) - frag0)) sent_live=$(($(cat "$HWC/sent_pkts") - sent_live0))
	echo "# mtu-shrinks-live on $DRIVER: MTU 1500 set while the ping-pong had $(cat /tmp/mtu-live.state 2>/dev/null || echo 'not sent 300 packets'); $sent_live packets sent, $frags IP fragments made, $(snmp_ip ReasmOKs) packets reassembled, $(($(icrc_drops) - icrc0)) ICRC drops"
	if [ "$DRIVER" = rrxe ]; then
		check "mtu-shrinks-live-mid-run-vm$VM" grep -qx running /tmp/mtu-live.state
		check "mtu-shrinks-live-no-icrc-drops-vm$VM" test "$(icrc_drops)" -eq "$icrc0"
		check "mtu-shrinks-live-new-messages-at-1024-vm$VM" test "$sent_live" -ge 9500
		# Only the message begun before the shrink is fragmented (3
		# fragments a packet), with its retransmissions: most packets sent
		# are not. (Had the QP kept 4096, nearly every packet after the
		# first 300 would be. How many are retransmitted depends on the
		# machine's speed: on one, 4585 of 14552.)
		check "mtu-shrinks-live-most-unfragmented-vm$VM" test $((frags / 3 * 2)) -lt "$sent_live"
		[ "$VM" = 1 ] || check "mtu-shrinks-live-begun-message-fragmented" test "$frags" -gt 0
	fi
	barrier mtu-live-done
fi
pair rc-pingpong-events 300 ibv_rc_pingpong -d "$IBDEV" -g "$GID" -c -e -s 4096 -n 200
pair srq-pingpong 300 ibv_srq_pingpong -d "$IBDEV" -g "$GID" -s 4096 -n 200

# Malformed packets on UDP 4791 leave the device working: VM 2 sends a few
# kinds of them (the builder of tests/vm/garbage.pair.sh, trimmed; that suite
# checks how each kind is counted), then a ping-pong must still pass.
cat >/tmp/garbage.py <<'EOF'
import random, socket, struct, sys, time, zlib
src, dst, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
rnd = random.Random(4791)
raw = socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_RAW)

def send(body, ipid, icrc=True):
    """IPv4 + UDP + body + ICRC (a wrong one if icrc is False, none if None)."""
    tail = 0 if icrc is None else 4
    ip = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 28 + len(body) + tail, ipid, 0x4000,
                     64, 17, 0, socket.inet_aton(src), socket.inet_aton(dst))
    udp = struct.pack("!HHHH", 0xC000 | rnd.randrange(0x4000), 4791, 8 + len(body) + tail, 0)
    crc = b""
    if icrc is not None:
        # Masked: LRH, IP TOS/TTL/checksum, UDP checksum, BTH resv8a.
        masked = ip[:1] + b"\xff" + ip[2:8] + b"\xff" + ip[9:10] + b"\xff\xff" + ip[12:]
        crc = struct.pack("<I", zlib.crc32(b"\xff" * 8 + masked + udp[:6] + b"\xff\xff" +
                                           body[:4] + b"\xff" + body[5:]))
        if not icrc:
            crc = bytes(c ^ 0x5A for c in crc)
    raw.sendto(ip + udp + body + crc, (dst, 0))

def bth(op, tver=0):
    qpn = rnd.randrange(2, 0xFFFFFF)
    return struct.pack("!BBHII", op, tver, 0xFFFF, qpn, rnd.randrange(1 << 24))

for i in range(n):
    k = i % 6
    if k == 0:    # bad ICRC
        send(bth(0x04) + b"garbage!", i, icrc=False)
    elif k == 1:  # unknown QPN
        send(bth(0x04) + b"garbage!", i)
    elif k == 2:  # unknown opcode
        send(bth(rnd.choice([0x15, 0x1B, 0x40, 0xE0])) + bytes(16), i)
    elif k == 3:  # shorter than a BTH
        send(bytes(rnd.randrange(256) for _ in range(1 + i % 11)), i, icrc=None)
    elif k == 4:  # transport version not 0
        send(bth(0x04, tver=1 + i % 15) + b"garbage!", i)
    else:         # RDMA WRITE without room for its RETH
        send(bth(0x0A) + bytes(4), i)
    if i % 20 == 19:
        time.sleep(0.02)
EOF
drops() { cat "$HWC"/rcvd_drop_* 2>/dev/null | awk '{ s += $1 } END { print s + 0 }'; }
if [ "$VM" = 1 ]; then
	rcvd=$(cat "$HWC/rcvd_pkts") dropped=$(drops)
	barrier garbage
	barrier garbage-sent 300
	sleep 1
	echo "# garbage: rcvd_pkts +$(($(cat "$HWC/rcvd_pkts") - rcvd)), rcvd_drop_* +$(($(drops) - dropped))"
	check "garbage-not-received" test "$(cat "$HWC/rcvd_pkts")" -eq "$rcvd"
	[ "$DRIVER" != rrxe ] || check "garbage-dropped" test "$(($(drops) - dropped))" -eq 3000
else
	ping -c1 -W1 "$PEER_IP" >/dev/null
	barrier garbage
	check "send-garbage" python3 /tmp/garbage.py "$MY_IP" "$PEER_IP" 3000
	barrier garbage-sent 300
fi
pair rc-pingpong-after-garbage 600 ibv_rc_pingpong -d "$IBDEV" -g "$GID" -c -s 4096 -n 100

# Counters: both sides sent and received packets.
moved() {
	local sent rcvd
	sent=$(cat "$HWC/sent_pkts") rcvd=$(cat "$HWC/rcvd_pkts")
	echo "sent_pkts $sent0 -> $sent, rcvd_pkts $rcvd0 -> $rcvd"
	[ "$sent" -gt $((sent0 + 1000)) ] && [ "$rcvd" -gt $((rcvd0 + 1000)) ]
}
check "counters-moved-vm$VM" moved

# The same counters through the port's performance management agent
# (process_mad), as on the C driver: sysfs has the 64-bit table, data in
# 4-byte words, link_downed stopping at 255.  Read around the hardware
# counter, in case a late packet moves it.
PMA=/sys/class/infiniband/$IBDEV/ports/1/counters
pma_agrees() {
	local spec f hw div a b h rc=0
	for spec in port_xmit_data:sent_bytes:4 port_rcv_data:rcvd_bytes:4 \
		port_xmit_packets:sent_pkts:1 port_rcv_packets:rcvd_pkts:1 link_downed:link_downed:1; do
		IFS=: read -r f hw div <<<"$spec"
		a=$(cat "$PMA/$f") || return 1
		h=$(cat "$HWC/$hw") || return 1
		b=$(cat "$PMA/$f") || return 1
		h=$((h / div))
		[ "$f" = link_downed ] && [ "$h" -gt 255 ] && h=255
		echo "$f $a..$b, $hw / $div = $h"
		[ "$a" -le "$h" ] && [ "$h" -le "$b" ] || rc=1
	done
	[ "$(cat "$PMA/port_xmit_packets")" -gt 1000 ] || rc=1
	return $rc
}
check "pma-counters-vm$VM" pma_agrees

barrier teardown
check "link-delete-vm$VM" rdma link delete "$IBDEV"
finish
