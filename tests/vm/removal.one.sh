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
#   netdev-deleted    a device on one end of a veth pair, the holder on
#                     it stopped: `ip link delete` of the veth returns
#                     within 10 s and the device is gone; after SIGCONT
#                     the holder gets DEVICE_FATAL and EIO
#   delete-cm-listener an rping server listening on the device's address:
#                     `rdma link delete` returns within 10 s and rping
#                     reports RDMA_CM_EVENT_DEVICE_REMOVAL and exits
#   delete-cm-connected an rping client and server connected over the
#                     device, pinging without end: the same, for both
#   netdev-moved      as netdev-deleted, but the veth moves to another
#                     network namespace (`ip link set rmv0 netns rmns`),
#                     which unregisters it here as deletion does
#   dev-moved         in exclusive namespace mode, the device itself moves
#                     (`rdma dev set DEV netns rmns`) while the stopped
#                     holder has it open: returns within 10 s, the holder
#                     gets DEVICE_FATAL and EIO, the namespace lists the
#                     device, and it comes back when the namespace goes
#   delete-kernel-ulp an NVMe-oF host (nvme-rdma) connected over the device
#                     to a target (nvmet-rdma) in the same VM, I/O checked:
#                     `rdma link delete` returns within 10 s, the host's
#                     controller is gone and the modules unload
#   rmmod-stopped     the holder stopped: `rmmod rrxe` (with its device)
#                     returns within 10 s; after SIGCONT the holder gets
#                     DEVICE_FATAL and EIO; rrxe loads again and works
# The kernel log is checked for reports by the harness after the suite.
# rdma_rxe has no disassociate_ucontext: its removal waits for the
# application. Its delete-listener, delete-cm-listener, netdev-deleted and
# netdev-moved are run bounded (the application is killed after 10 s) and
# its delete-kernel-ulp run: how long each took is printed, not judged.
# (The RDMA core refuses dev-moved to a driver without
# disassociate_ucontext; the netns-exclusive suite prints that.)
# runs: rrxe@debug
# full-runs: rxe@debug
# timeout: 600

check "link-add" rdma_up
GID=$(gid_index "$IBDEV" "$MY_IP")

cat >/tmp/holder.py <<'EOF'
import os, select, sys, time
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
# Every event until DEVICE_FATAL: a net device's removal reports the
# loss of its GIDs (IBV_EVENT_GID_CHANGE) first.
deadline = time.monotonic() + float(sys.argv[2])
while True:
    ready, _, _ = select.select([fd], [], [], max(0, deadline - time.monotonic()))
    if not ready:
        print("event none", flush=True)
        break
    ev = ctx.get_async_event()
    fatal = ev.event_type == e.IBV_EVENT_DEVICE_FATAL
    print("event", int(ev.event_type), "fatal" if fatal else "", flush=True)
    ev.ack()
    if fatal:
        break
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

# holder_start [DEV]: the holder on DEV (default the device under test),
# with its output in /tmp/holder.out; waits until it holds its objects.
holder_start() {
	rm -f /tmp/holder.out
	python3 /tmp/holder.py "${1:-$IBDEV}" 60 >/tmp/holder.out 2>&1 &
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

# The net device and kernel ULP cases' helpers.
VDEV=${DRIVER}v0
veth_up() {
	ip link add rmv0 type veth peer name rmv1 &&
		ip link set rmv0 up && ip link set rmv1 up &&
		rdma link add "$VDEV" type "$DRIVER" netdev rmv0 &&
		retry 10 test -e "/sys/class/infiniband/$VDEV"
}
CFS=/sys/kernel/config
NQN=nqn.2026-12.io.rrxe:removal
SUB=$CFS/nvmet/subsystems/$NQN
NVPORT=$CFS/nvmet/ports/1
# find_ns: the block device of the namespace of our subsystem.
find_ns() { nvme_find_ns "$NQN"; }
host_ctrls() { grep -lx "$NQN" /sys/class/nvme/nvme*/subsysnqn 2>/dev/null | wc -l; }
target_up() {
	modprobe brd rd_nr=1 rd_size=16384 && modprobe nvmet-rdma && modprobe nvme-rdma || return 1
	mountpoint -q "$CFS" || mount -t configfs configfs "$CFS"
	mkdir "$SUB" &&
		echo 1 >"$SUB/attr_allow_any_host" &&
		mkdir "$SUB/namespaces/1" &&
		echo -n /dev/ram0 >"$SUB/namespaces/1/device_path" &&
		echo 1 >"$SUB/namespaces/1/enable" &&
		mkdir "$NVPORT" &&
		echo rdma >"$NVPORT/addr_trtype" &&
		echo ipv4 >"$NVPORT/addr_adrfam" &&
		echo "$MY_IP" >"$NVPORT/addr_traddr" &&
		echo 4420 >"$NVPORT/addr_trsvcid" &&
		ln -s "$SUB" "$NVPORT/subsystems/$NQN"
}
# ulp_io: 1 MiB written through the host and read back on the target's
# RAM disk and through the host, compared.
ulp_io() {
	local dev
	dev=$(find_ns) || return 1
	head -c 1M /dev/urandom >/tmp/ulp.bin
	timeout 60 dd if=/tmp/ulp.bin of="$dev" bs=64k oflag=direct status=none &&
		timeout 60 dd if="$dev" of=/tmp/ulp.back bs=64k count=16 iflag=direct status=none &&
		cmp /tmp/ulp.bin /tmp/ulp.back &&
		dd if=/dev/ram0 bs=64k count=16 iflag=direct status=none | cmp - /tmp/ulp.bin
}
ulp_down() {
	rm "$NVPORT/subsystems/$NQN" && rmdir "$NVPORT" &&
		rmdir "$SUB/namespaces/1" && rmdir "$SUB" &&
		timeout 60 modprobe -r nvme-rdma nvmet-rdma
}
target_listening() {
	rdma res show cm_id 2>/dev/null | grep -E "(dev|link) $IBDEV[ /].*state LISTEN .*comm \\[nvmet_rdma\\]"
}
# cm_listener_up PORT [ARG...]: an rping server listening on the device's
# address and PORT, its output in /tmp/rping-PORT.out; sets RPING.
cm_listener_up() {
	local port=$1
	shift
	timeout 120 rping -s -a "$MY_IP" -p "$port" "$@" >"/tmp/rping-$port.out" 2>&1 &
	RPING=$!
	retry 30 cm_port_listening "$port"
}
if [ "$DRIVER" != rrxe ]; then
	# bounded CASE PID CMD...: run CMD (the removal) in the background; after
	# 10 s kill -9 PID (the application holding the device) and its
	# children (PID may be the `timeout` running it) if CMD still waits;
	# print how long CMD took. A removal still waiting 30 s after the kill
	# ends the suite: the device is neither here nor gone.
	bounded() {
		local what=$1 pid=$2 t0 del rc
		shift 2
		t0=$(date +%s)
		"$@" &
		del=$!
		sleep 10
		kill -0 "$del" 2>/dev/null && echo "# $DRIVER: $what still waiting after 10 s; killing the application"
		pkill -9 -P "$pid" 2>/dev/null
		kill -9 "$pid" 2>/dev/null
		if ! timeout 30 tail --pid="$del" -f /dev/null; then
			echo "# $DRIVER: $what still waiting 30 s after the application was killed; ending the suite"
			finish
			exit
		fi
		wait "$del"
		rc=$?
		echo "# $DRIVER: $what returned after $(($(date +%s) - t0)) s (exit $rc)"
	}
	timeout 120 ibv_rc_pingpong -d "$IBDEV" -g "$GID" -p 18600 >/dev/null 2>&1 &
	srv=$!
	retry 30 tcp_listening 18600
	bounded "rdma link delete with an ibv_rc_pingpong server" "$srv" rdma link delete "$IBDEV"
	if rdma_up && cm_listener_up 18604; then
		bounded "rdma link delete with an rping listener" "$RPING" rdma link delete "$IBDEV"
		echo "# $DRIVER: rping said: $(grep -i removal /tmp/rping-18604.out)"
	fi
	# netdev-deleted and netdev-moved: the stopped holder is killed after 10 s.
	if veth_up; then
		holder_start "$VDEV"
		kill -STOP "$HOLDER"
		bounded "ip link delete of the device's net device" "$HOLDER" ip link delete rmv0
	fi
	if ip netns add rmns && veth_up; then
		holder_start "$VDEV"
		kill -STOP "$HOLDER"
		bounded "moving the device's net device to another namespace" "$HOLDER" ip link set rmv0 netns rmns
	fi
	ip netns delete rmns
	# delete-kernel-ulp, printed.
	if rdma_up && target_up &&
		timeout 120 nvme connect -t rdma -n "$NQN" -a "$MY_IP" -s 4420 \
			--ctrl-loss-tmo=5 --reconnect-delay=1 >/dev/null && retry 30 find_ns >/dev/null && ulp_io; then
		t0=$(date +%s)
		timeout 60 rdma link delete "$IBDEV"
		rc=$?
		echo "# $DRIVER: with an NVMe-oF host connected over it, rdma link delete returned after $(($(date +%s) - t0)) s (exit $rc); host controllers left: $(host_ctrls)"
	else
		echo "# $DRIVER: the NVMe-oF connection over the device failed"
	fi
	timeout 60 nvme disconnect -n "$NQN" >/dev/null 2>&1
	ulp_down
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
	tail -n 2 /tmp/s.out /tmp/c.out
	echo "server exit $rc_s, client exit $rc_c"
	[ "$rc_s" -ne 0 ] && [ "$rc_s" -ne 124 ] && [ "$rc_c" -ne 0 ] && [ "$rc_c" -ne 124 ]
}
check "delete-streaming-ends-failed" ends_failed
kill "$srv" "$cli" 2>/dev/null
check "delete-streaming-readd" rdma_up
GID=$(gid_index "$IBDEV" "$MY_IP")

# delete-cm-listener
check "cm-listener-up" cm_listener_up 18604
check "delete-cm-listener" timed 10 rdma link delete "$IBDEV"
# rping_removed PID LOG: rping (PID) exits in error within 10 s, having
# reported RDMA_CM_EVENT_DEVICE_REMOVAL.
rping_removed() {
	local rc
	timeout 10 tail --pid="$1" -f /dev/null
	wait "$1"
	rc=$?
	echo "rping exit $rc:"
	sed 's/^/    /' "$2"
	[ "$rc" -ne 0 ] && [ "$rc" -ne 124 ] && grep -qi "device removal" "$2"
}
check "delete-cm-listener-event" rping_removed "$RPING" /tmp/rping-18604.out
check "delete-cm-listener-readd" rdma_up

# delete-cm-connected
check "cm-connected-up" cm_listener_up 18605 -S 4096
RSRV=$RPING
timeout 120 rping -c -a "$MY_IP" -p 18605 -S 4096 >/tmp/rping-c.out 2>&1 &
RCLI=$!
cm_connected() { rdma res show cm_id 2>/dev/null | grep -E "link $IBDEV/" | grep -c "state CONNECT " | grep -qx 2; }
check "cm-connected" retry 30 cm_connected
sleep 2
check "cm-connected-running" kill -0 "$RCLI"
check "delete-cm-connected" timed 10 rdma link delete "$IBDEV"
check "delete-cm-connected-server-event" rping_removed "$RSRV" /tmp/rping-18605.out
check "delete-cm-connected-client-event" rping_removed "$RCLI" /tmp/rping-c.out
check "delete-cm-connected-readd" rdma_up
GID=$(gid_index "$IBDEV" "$MY_IP")

# netdev-deleted
check "netdev-device-added" veth_up
holder_start "$VDEV"
check "netdev-holder-ready" grep -q ready /tmp/holder.out
kill -STOP "$HOLDER"
check "netdev-deleted" timed 10 ip link delete rmv0
check "netdev-deleted-device-gone" retry 10 test ! -e "/sys/class/infiniband/$VDEV"
kill -CONT "$HOLDER"
check "netdev-deleted-fatal-eio" holder_saw

# netdev-moved
check "netdev-moved-device-added" veth_up
holder_start "$VDEV"
check "netdev-moved-holder-ready" grep -q ready /tmp/holder.out
kill -STOP "$HOLDER"
ip netns add rmns
check "netdev-moved" timed 10 ip link set rmv0 netns rmns
check "netdev-moved-device-gone" retry 10 test ! -e "/sys/class/infiniband/$VDEV"
kill -CONT "$HOLDER"
check "netdev-moved-fatal-eio" holder_saw
ip netns delete rmns

# dev-moved (exclusive mode can be set only while no other namespace is
# left; their removal is asynchronous)
check "dev-moved-exclusive" retry 60 rdma system set netns exclusive
ip netns add rmns
holder_start
check "dev-moved-holder-ready" grep -q ready /tmp/holder.out
kill -STOP "$HOLDER"
check "dev-moved" timed 10 rdma dev set "$IBDEV" netns rmns
ns_lists_dev() { ip netns exec rmns rdma dev show "$IBDEV"; }
check "dev-moved-listed-there" retry 10 ns_lists_dev
check "dev-moved-not-here" bash -c "! rdma dev show $IBDEV"
kill -CONT "$HOLDER"
check "dev-moved-fatal-eio" holder_saw
ip netns delete rmns
check "dev-moved-back" retry 30 rdma dev show "$IBDEV"
check "dev-moved-shared" retry 60 rdma system set netns shared
check "dev-moved-port-active" wait_port_active "$IBDEV"
GID=$(gid_index "$IBDEV" "$MY_IP")

# delete-kernel-ulp
check "ulp-target-up" target_up
check "ulp-host-connected" timeout 120 nvme connect -t rdma -n "$NQN" -a "$MY_IP" -s 4420 \
	--ctrl-loss-tmo=5 --reconnect-delay=1
check "ulp-namespace" retry 30 find_ns
check "ulp-io" ulp_io
check "ulp-target-listening" target_listening
check "ulp-host-ctrl" test "$(host_ctrls)" -eq 1
check "delete-kernel-ulp" timed 10 rdma link delete "$IBDEV"
check "delete-kernel-ulp-gone" test ! -e "/sys/class/infiniband/$IBDEV"
host_ctrl_gone() { [ "$(host_ctrls)" -eq 0 ]; }
check "delete-kernel-ulp-host-ctrl-gone" retry 30 host_ctrl_gone
check "delete-kernel-ulp-modules-unload" ulp_down
check "delete-kernel-ulp-readd" rdma_up
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
