# The rrxe tracepoints (system rrxe, rust/helpers/rrxe_trace.h) recording a
# ping-pong between two VMs.  Both VMs record rrxe:* through tracefs while
# ibv_rc_pingpong exchanges 20 messages of 4 KiB each way at path MTU 1024
# (4 packets a message), then read their own trace:
#   qp-states     their QP went RESET -> INIT -> RTR -> RTS
#   sent          20 RC_SEND_FIRST, 40 RC_SEND_MIDDLE and 20 RC_SEND_LAST to
#                 the peer's QPN, each with a 1024-byte payload, the PSNs
#                 consecutive from the PSN the tool printed, AckReq on the
#                 LAST packets
#   received      the peer's 80 packets, in the same shape, from the PSN
#                 the peer printed
#   acks          acknowledges sent and received for the QP
#   no-errors     no retransmission, NAK or error completion (no loss here)
#   perf          `perf record -e rrxe:rrxe_send_pkt` during a second
#                 ping-pong sees its packets through `perf script`
# The error events (NAKs, RNR NAKs, retransmissions, error completions)
# are checked in rc-errors.  rdma_rxe has no tracepoints: on it the
# ping-pong runs and the missing events are printed, not judged.
# VM 1 serves, VM 2 is the client.
# runs: rrxe@debug
# full-runs: rxe@debug
# timeout: 600

check "link-add-vm$VM" rdma_up
GID=$(gid_index "$IBDEV" "$MY_IP")
T=/sys/kernel/tracing
mountpoint -q $T || mount -t tracefs nodev $T 2>/dev/null
HAVE_EVENTS=
[ -d $T/events/rrxe ] && HAVE_EVENTS=1
if [ -z "$HAVE_EVENTS" ]; then
	echo "# $DRIVER: no tracepoints (tracefs has no events/rrxe; rdma_rxe defines none)"
	[ "$DRIVER" = rrxe ] && not_ok "events-exist-vm$VM"
fi

# trace_start / trace_stop FILE: record rrxe:* from empty / stop, keep it.
trace_start() {
	[ -n "$HAVE_EVENTS" ] || return 0
	echo 0 >$T/tracing_on
	echo 4096 >$T/buffer_size_kb
	echo >$T/trace
	echo 1 >$T/events/rrxe/enable
	echo 1 >$T/tracing_on
}
trace_stop() {
	[ -n "$HAVE_EVENTS" ] || return 0
	echo 0 >$T/tracing_on
	cat $T/trace >"$1"
	echo 0 >$T/events/rrxe/enable
	echo "# $(grep -c ' rrxe_' "$1") rrxe events recorded; the first 12:"
	grep ' rrxe_' "$1" | head -12 | sed 's/^/#   /'
}

# pingpong NAME LOG ARGS...: VM 1 serves, VM 2 connects; the tool's output
# goes to LOG.
port=18515
pingpong() {
	local name=$1 log=$2 pid
	shift 2
	if [ "$VM" = 1 ]; then
		timeout 120 ibv_rc_pingpong -d "$IBDEV" -g "$GID" -p $port "$@" >"$log" 2>&1 &
		pid=$!
		retry 30 bash -c "ss -ltnH 'sport = :$port' | grep -q LISTEN"
		barrier "$name"
		check "$name-vm$VM" wait "$pid"
	else
		barrier "$name"
		check "$name-vm$VM" client_retry 30 timeout 120 \
			ibv_rc_pingpong -d "$IBDEV" -g "$GID" -p $port "$@" "$PEER_IP" >"$log" 2>&1
	fi
	sed 's/^/#   /' "$log"
	port=$((port + 1))
}

# field LOG WHICH KEY: a hex field of the tool's "WHICH address:" line as
# the events print it (0x11, not 0x000011).
field() {
	local v
	v=$(sed -n "s/.*$2 address:.* $3 \(0x[0-9a-f]*\).*/\1/p" "$1" | head -1)
	[ -n "$v" ] && printf '%#x' "$v"
}

trace_start
pingpong pingpong /tmp/pp.log -c -s 4096 -n 20 -m 1024
trace_stop /tmp/trace.txt
LQPN=$(field /tmp/pp.log local QPN)
LPSN=$(field /tmp/pp.log local PSN)
RQPN=$(field /tmp/pp.log remote QPN)
RPSN=$(field /tmp/pp.log remote PSN)
echo "# local QPN $LQPN PSN $LPSN, remote QPN $RQPN PSN $RPSN"

# events EVENT PATTERN: the recorded EVENT lines of the local QP matching
# the extended regular expression PATTERN.
events() { grep -E " $1: $IBDEV qpn=$LQPN $2" /tmp/trace.txt; }

# send_shape KIND PSN0 DEST: the SEND packets of KIND (sent or received)
# are 20 FIRST, 40 MIDDLE and 20 LAST of 1024 bytes, PSNs consecutive from
# PSN0, AckReq on exactly the LAST ones, addressed to QP DEST.
send_shape() {
	local ev=rrxe_send_pkt
	[ "$1" = received ] && ev=rrxe_recv_pkt
	events $ev "dest_qpn=$3 psn=0x[0-9a-f]+ RC_SEND_" | python3 -c '
import re, sys
psn0, bad, n = int(sys.argv[1], 16), [], {}
lines = sys.stdin.read().splitlines()
for i, line in enumerate(lines):
    m = re.search(r"psn=(0x[0-9a-f]+) (RC_SEND_\w+) len=(\d+) ackreq=(\d)", line)
    psn, op, ln, ack = int(m[1], 16), m[2], int(m[3]), m[4] == "1"
    n[op] = n.get(op, 0) + 1
    if psn != (psn0 + i) % (1 << 24):
        bad.append(f"packet {i}: psn {psn:#x}, want {(psn0 + i) % (1 << 24):#x}")
    if ln != 1024:
        bad.append(f"packet {i}: len {ln}")
    if (op == "RC_SEND_LAST") != ack:
        bad.append(f"packet {i}: {op} ackreq {int(ack)}")
print(f"{len(lines)} packets", n, *bad[:5], sep="\n")
want = {"RC_SEND_FIRST": 20, "RC_SEND_MIDDLE": 40, "RC_SEND_LAST": 20}
sys.exit(1 if bad or n != want else 0)' "$2"
}

# count_is N CMD...: CMD prints exactly N lines.
count_is() {
	local want=$1 got
	shift
	got=$("$@" | wc -l)
	echo "$got lines, want $want"
	[ "$got" -eq "$want" ]
}
count_ge() {
	local want=$1 got
	shift
	got=$("$@" | wc -l)
	echo "$got lines, want at least $want"
	[ "$got" -ge "$want" ]
}

if [ -n "$HAVE_EVENTS" ]; then
	check "qp-ids-vm$VM" test -n "$LQPN" -a -n "$LPSN" -a -n "$RQPN" -a -n "$RPSN"
	check "qp-states-vm$VM" count_is 3 events rrxe_qp_state \
		"(RESET -> INIT|INIT -> RTR|RTR -> RTS)$"
	check "sent-vm$VM" send_shape sent "$LPSN" "$RQPN"
	check "received-vm$VM" send_shape received "$RPSN" "$LQPN"
	check "acks-sent-vm$VM" count_ge 1 events rrxe_send_pkt "dest_qpn=$RQPN .* RC_ACKNOWLEDGE len=0 "
	check "acks-received-vm$VM" count_ge 1 events rrxe_recv_pkt "dest_qpn=$LQPN .* RC_ACKNOWLEDGE len=0 "
	check "no-errors-vm$VM" count_is 0 grep -E " rrxe_(retransmit|nak|wc_error): " /tmp/trace.txt
fi

# The same events through perf, as a user would record them.
if [ -n "$HAVE_EVENTS" ]; then
	perf record -q -a -e rrxe:rrxe_send_pkt -o /tmp/perf.data 2>/tmp/perf.err &
	perf_pid=$!
	# perf writes the file's header before it enables its events: give it
	# time after that.
	retry 30 test -s /tmp/perf.data
	sleep 3
fi
pingpong pingpong-perf /tmp/pp2.log -c -s 4096 -n 5 -m 1024
if [ -n "$HAVE_EVENTS" ]; then
	kill -INT "$perf_pid"
	wait "$perf_pid"
	sed 's/^/#   /' /tmp/perf.err
	LQPN=$(field /tmp/pp2.log local QPN)
	perf script -i /tmp/perf.data 2>/dev/null >/tmp/perf.txt
	head -3 /tmp/perf.txt | sed 's/^/#   /'
	# 5 messages of 4 packets.
	check "perf-sent-vm$VM" count_is 20 grep -E "rrxe_send_pkt: $IBDEV qpn=$LQPN .* RC_SEND_" /tmp/perf.txt
fi

barrier teardown
check "link-delete-vm$VM" rdma link delete "$IBDEV"
finish
