# Device removal while applications hold the device (disassociate_ucontext),
# in one VM.  An application keeps a device open with a QP, a CQ and a 1 MiB
# MR (a small pyverbs program, "holder"), or waits as an ibv_rc_pingpong
# server, or streams a loopback ping-pong; then the device goes:
#   delete-listener   `rdma link delete` while an ibv_rc_pingpong server
#                     waits for its client: returns within 10 s; a new
#                     `rdma link add` works at once and a data-checked
#                     loopback ping-pong runs on it
#   delete-stopped    the holder stopped with SIGSTOP: `rdma link delete`
#                     returns within 10 s; after SIGCONT the holder gets
#                     IBV_EVENT_DEVICE_FATAL and ibv_alloc_pd fails with EIO
#   delete-streaming  a loopback ping-pong in event mode (-e), 4 KiB
#                     messages without end: `rdma link delete` returns
#                     within 10 s and both ends exit with an error
#   rmmod-stopped     the holder stopped: `rmmod rrxe` (with its device)
#                     returns within 10 s; after SIGCONT the holder gets
#                     DEVICE_FATAL and EIO; rrxe loads again and works
# The kernel log is checked for reports by the harness after the suite.
# rdma_rxe has no disassociate_ucontext: its removal waits for the
# application. Its delete-listener is run bounded: the server is killed
# after 10 s, and how long the delete took is printed, not judged.
# runs: rrxe@debug
# full-runs: rxe@debug
# timeout: 400

check "link-add" rdma_up
GID=$(gid_index "$IBDEV" "$MY_IP")

cat >/tmp/holder.py <<'EOF'
import os, select, sys
from pyverbs.device import Context
from pyverbs.pd import PD
from pyverbs.cq import CQ
from pyverbs.mr import MR
from pyverbs.qp import QP, QPCap, QPInitAttr
from pyverbs.pyverbs_error import PyverbsRDMAError
import pyverbs.enums as e

ctx = Context(name=sys.argv[1])
pd = PD(ctx)
cq = CQ(ctx, 16)
mr = MR(pd, 1 << 20, e.IBV_ACCESS_LOCAL_WRITE)
qp = QP(pd, QPInitAttr(qp_type=e.IBV_QPT_RC, scq=cq, rcq=cq,
                       cap=QPCap(max_send_wr=4, max_recv_wr=4)))
# The context's asynchronous event file: the process's one fd on
# uverbs' "[infinibandevent]" inode (pyverbs does not expose it).
def async_fd():
    for f in os.listdir("/proc/self/fd"):
        try:
            if os.readlink(f"/proc/self/fd/{f}") == "anon_inode:[infinibandevent]":
                return int(f)
        except OSError:
            pass
fd = async_fd()
print("ready", flush=True)
ready, _, _ = select.select([fd], [], [], float(sys.argv[2]))
if ready:
    ev = ctx.get_async_event()
    print("event", int(ev.event_type), "fatal" if ev.event_type == e.IBV_EVENT_DEVICE_FATAL else "", flush=True)
    ev.ack()
else:
    print("event none", flush=True)
try:
    PD(ctx)
    print("alloc-pd ok", flush=True)
except PyverbsRDMAError as x:
    print("alloc-pd errno", x.error_code, flush=True)
os._exit(0)
EOF

# timed SECS CMD...: run CMD with a time limit; print how long it took.
timed() {
	local secs=$1 t0 rc
	shift
	t0=$(date +%s%N)
	timeout "$secs" "$@"
	rc=$?
	echo "took $((($(date +%s%N) - t0) / 1000000)) ms, exit $rc"
	return $rc
}

# holder_start: the holder, with its output in /tmp/holder.out; waits until
# it holds its objects.
holder_start() {
	rm -f /tmp/holder.out
	python3 /tmp/holder.py "$IBDEV" 60 >/tmp/holder.out 2>&1 &
	HOLDER=$!
	retry 60 grep -q ready /tmp/holder.out
}

# holder_saw: after SIGCONT, the holder reports DEVICE_FATAL and EIO.
holder_saw() {
	local rc=0
	wait "$HOLDER"
	sed 's/^/    holder: /' /tmp/holder.out
	grep -q "^event .* fatal" /tmp/holder.out || { echo "no DEVICE_FATAL"; rc=1; }
	grep -q "^alloc-pd errno 5$" /tmp/holder.out || { echo "ibv_alloc_pd did not fail with EIO"; rc=1; }
	return $rc
}

# pingpong_ok: a data-checked loopback ping-pong on the device.
pingpong_ok() {
	local port=$1 pid
	timeout 60 ibv_rc_pingpong -d "$IBDEV" -g "$GID" -p "$port" -c -s 4096 -n 20 &
	pid=$!
	retry 30 tcp_listening "$port"
	timeout 60 ibv_rc_pingpong -d "$IBDEV" -g "$GID" -p "$port" -c -s 4096 -n 20 "$MY_IP" || return 1
	wait "$pid"
}

if [ "$DRIVER" != rrxe ]; then
	timeout 120 ibv_rc_pingpong -d "$IBDEV" -g "$GID" -p 18600 >/dev/null 2>&1 &
	srv=$!
	retry 30 tcp_listening 18600
	t0=$(date +%s)
	rdma link delete "$IBDEV" &
	del=$!
	sleep 10
	if kill -0 "$del" 2>/dev/null; then
		echo "# $DRIVER: rdma link delete still waiting after 10 s; killing the server"
	fi
	kill "$srv"
	wait "$del"
	rc=$?
	echo "# $DRIVER: rdma link delete returned after $(($(date +%s) - t0)) s (exit $rc)"
	finish
	exit
fi

# delete-listener
timeout 120 ibv_rc_pingpong -d "$IBDEV" -g "$GID" -p 18600 >/tmp/srv.out 2>&1 &
srv=$!
check "listener-up" retry 30 tcp_listening 18600
check "delete-listener" timed 10 rdma link delete "$IBDEV"
check "delete-listener-gone" test ! -e "/sys/class/infiniband/$IBDEV"
check "delete-listener-readd" rdma_up
GID=$(gid_index "$IBDEV" "$MY_IP")
check "delete-listener-pingpong" pingpong_ok 18601
kill "$srv" 2>/dev/null
wait "$srv" 2>/dev/null

# delete-stopped
holder_start
check "stopped-holder-ready" grep -q ready /tmp/holder.out
kill -STOP "$HOLDER"
check "delete-stopped" timed 10 rdma link delete "$IBDEV"
kill -CONT "$HOLDER"
check "delete-stopped-fatal-eio" holder_saw
check "delete-stopped-readd" rdma_up
GID=$(gid_index "$IBDEV" "$MY_IP")

# delete-streaming
timeout 120 ibv_rc_pingpong -d "$IBDEV" -g "$GID" -p 18602 -e -s 4096 -n 100000000 >/tmp/s.out 2>&1 &
srv=$!
retry 30 tcp_listening 18602
timeout 120 ibv_rc_pingpong -d "$IBDEV" -g "$GID" -p 18602 -e -s 4096 -n 100000000 "$MY_IP" >/tmp/c.out 2>&1 &
cli=$!
sleep 3
check "streaming-running" kill -0 "$cli"
check "delete-streaming" timed 10 rdma link delete "$IBDEV"
# Both ends notice (their completion channel reads fail) and exit in error.
ends_failed() {
	local rc_s rc_c
	timeout 20 tail --pid="$srv" -f /dev/null
	timeout 20 tail --pid="$cli" -f /dev/null
	wait "$srv"; rc_s=$?
	wait "$cli"; rc_c=$?
	tail -2 /tmp/s.out /tmp/c.out
	echo "server exit $rc_s, client exit $rc_c"
	[ "$rc_s" -ne 0 ] && [ "$rc_s" -ne 124 ] && [ "$rc_c" -ne 0 ] && [ "$rc_c" -ne 124 ]
}
check "delete-streaming-ends-failed" ends_failed
kill "$srv" "$cli" 2>/dev/null
check "delete-streaming-readd" rdma_up
GID=$(gid_index "$IBDEV" "$MY_IP")

# rmmod-stopped
holder_start
check "rmmod-holder-ready" grep -q ready /tmp/holder.out
kill -STOP "$HOLDER"
check "rmmod-stopped" timed 10 rmmod rrxe
check "rmmod-stopped-unloaded" test ! -d /sys/module/rrxe
kill -CONT "$HOLDER"
check "rmmod-stopped-fatal-eio" holder_saw
check "rmmod-reload" rdma_up
GID=$(gid_index "$IBDEV" "$MY_IP")
check "rmmod-reload-pingpong" pingpong_ok 18603

check "link-delete" rdma link delete "$IBDEV"
finish
