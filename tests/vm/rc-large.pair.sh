# RC ping-pong of 1 MiB messages (1024 packets each at the 1024-byte path
# MTU), 200 round trips with data validation, between two VMs on rrxe (the
# done-when of the RC data-path issue; the C driver's 1 MiB ping-pong is not
# run: it would add minutes to every CI run).  It runs on the fast kernel:
# on the debug kernel (KASAN) one round trip takes seconds.  rrxe's flow
# counters move as they count: each VM sends 200 messages and receives 200,
# each answered by at least one ACK (sent_acks, rcvd_acks), and a
# 1024-packet message cannot go out without its requester stopping for
# the 128-PSN window or the transmit credit (req_window_full,
# req_credit_stall).  The requester asks for an ACK every 64 packets, as
# rdma_rxe: 16 per MiB, 3,200 each way without loss (12,800 when it asked
# every 16); more than 4,800 means the cadence is off.
# runs: rrxe@fast

check "link-add-vm$VM" rdma_up
GID=$(gid_index "$IBDEV" "$MY_IP")
FLOW="sent_acks rcvd_acks req_window_full req_credit_stall"
counter_snapshot $FLOW >/tmp/flow.before
moved() { counter_delta /tmp/flow.before "$1"; }
port=18600
if [ "$VM" = 1 ]; then
	timeout 900 ibv_rc_pingpong -d "$IBDEV" -g "$GID" -c -s 1048576 -n 200 -p "$port" &
	pid=$!
	retry 30 bash -c "ss -ltnH 'sport = :$port' | grep -q LISTEN"
	barrier pp-1m
	check "rc-pingpong-server-s1048576" wait "$pid"
else
	barrier pp-1m
	check "rc-pingpong-client-s1048576" client_retry 30 timeout 900 \
		ibv_rc_pingpong -d "$IBDEV" -g "$GID" -c -s 1048576 -n 200 -p "$port" "$PEER_IP"
fi
echo "# flow counters moved on VM $VM:$(counters_moved /tmp/flow.before $FLOW)"
check "acks-sent-vm$VM" test "$(moved sent_acks)" -ge 200
check "acks-received-vm$VM" test "$(moved rcvd_acks)" -ge 200
check "acks-every-64-packets-vm$VM" test "$(moved sent_acks)" -le 4800
check "requester-stopped-vm$VM" test $(($(moved req_window_full) + $(moved req_credit_stall))) -gt 0
barrier teardown
check "link-delete-vm$VM" rdma link delete "$IBDEV"
finish
