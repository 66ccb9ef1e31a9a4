# Destroying a QP whose packets are still held in the IP stack (review
# suspicion S6), in one VM.  A netem "slot" qdisc on eth0 holds every burst
# for HOLD seconds (slot only, no delay: netem orphans a delayed skb at
# enqueue, which would run its destructor at once and hide the case).  An
# RC QP connected to an address with a static neighbour entry and no host
# behind it posts SENDs (after a primer datagram has left, so that they open
# a slot of their own); while they sit in the qdisc (its backlog is
# checked) the QP is destroyed with ibv_destroy_qp and timed.
#   destroy-while-held  rrxe: destroy returns in under 1 s although its
#                       packets are still queued; C driver: its time is
#                       recorded (rdma_rxe pins the QP per skb and waits
#                       for them, up to 50 s)
#   held-released       the qdisc lets the packets go after the hold; their
#                       destructors then run for a destroyed QP, which
#                       KASAN on the debug kernel would report if anything
#                       touched it (the harness checks the kernel log)
#   qdisc-del-while-held  the same, the qdisc then deleted at once, which
#                       frees the held packets in process context
#   unload-while-held   the same, then at once `rdma link delete` and module
#                       removal: removal must succeed, and on rrxe return
#                       only once the held packets are gone (it waits for
#                       their destructor, which is its code); nothing may
#                       report after the hold
# Measured 2026-12-03, 16 packets held: ibv_destroy_qp took 4400 ms on rrxe
# before the credit's state moved out of the QP (its skbs pinned the QP),
# 12 ms after (debug kernel); rdma_rxe 4472 ms (fast kernel).
# By hand: DRIVER=rrxe qemu/run-one tests/vm/destroy-inflight.one.sh
# runs: rrxe@debug
# full-runs: rxe@fast rxe@debug
# timeout: 300

HOLD=5
FAKE_IP=10.0.0.99
check "link-add" rdma_up
GID=$(gid_index "$IBDEV" "$MY_IP")
# Nothing answers at FAKE_IP: the packets leave eth0 and are never acknowledged.
check "static-neighbour" ip neigh replace "$FAKE_IP" lladdr 02:00:00:00:00:99 dev eth0 nud permanent
check "netem-slot" tc qdisc add dev eth0 root netem slot "${HOLD}s" "${HOLD}s"

cat >/tmp/destroy_inflight.py <<'EOF'
import re, socket, subprocess, sys, time
from pyverbs.device import Context
from pyverbs.pd import PD
from pyverbs.cq import CQ
from pyverbs.mr import MR
from pyverbs.qp import QP, QPCap, QPInitAttr, QPAttr
from pyverbs.addr import AHAttr, GlobalRoute, GID
from pyverbs.wr import SendWR, SGE
import pyverbs.enums as e

dev, gidx, fake_ip, n = sys.argv[1], int(sys.argv[2]), sys.argv[3], int(sys.argv[4])

def backlog():
    out = subprocess.run(["tc", "-s", "qdisc", "show", "dev", "eth0"],
                         capture_output=True, text=True).stdout
    m = re.search(r"backlog \S+ (\d+)p", out)
    return int(m.group(1)) if m else -1

ctx = Context(name=dev)
pd = PD(ctx)
cq = CQ(ctx, 64)
cap = QPCap(max_send_wr=64, max_recv_wr=4, max_send_sge=1, max_recv_sge=1)
qp = QP(pd, QPInitAttr(qp_type=e.IBV_QPT_RC, scq=cq, rcq=cq, cap=cap, sq_sig_all=1))
mr = MR(pd, 1 << 16, e.IBV_ACCESS_LOCAL_WRITE)
a = QPAttr()
a.qp_state = e.IBV_QPS_INIT
a.pkey_index = 0
a.port_num = 1
a.qp_access_flags = 0
qp.modify(a, e.IBV_QP_STATE | e.IBV_QP_PKEY_INDEX | e.IBV_QP_PORT | e.IBV_QP_ACCESS_FLAGS)
a = QPAttr()
a.qp_state = e.IBV_QPS_RTR
a.path_mtu = e.IBV_MTU_1024
a.dest_qp_num = 0x1234
a.rq_psn = 0
a.max_dest_rd_atomic = 1
a.min_rnr_timer = 12
# pyverbs wants all 16 bytes in hex.
o = [int(x) for x in fake_ip.split(".")]
dgid = "0000:0000:0000:0000:0000:ffff:%02x%02x:%02x%02x" % tuple(o)
gr = GlobalRoute(dgid=GID(dgid), sgid_index=gidx, hop_limit=64)
a.ah_attr = AHAttr(port_num=1, is_global=1, gr=gr)
qp.modify(a, e.IBV_QP_STATE | e.IBV_QP_AV | e.IBV_QP_PATH_MTU | e.IBV_QP_DEST_QPN |
          e.IBV_QP_RQ_PSN | e.IBV_QP_MAX_DEST_RD_ATOMIC | e.IBV_QP_MIN_RNR_TIMER)
a = QPAttr()
a.qp_state = e.IBV_QPS_RTS
# 4.3 s: no retransmission before the destroy.
a.timeout = 20
a.retry_cnt = 7
a.rnr_retry = 7
a.sq_psn = 0
a.max_rd_atomic = 1
qp.modify(a, e.IBV_QP_STATE | e.IBV_QP_TIMEOUT | e.IBV_QP_RETRY_CNT |
          e.IBV_QP_RNR_RETRY | e.IBV_QP_SQ_PSN | e.IBV_QP_MAX_QP_RD_ATOMIC)
# A slot opens when a packet arrives after the previous slot's packets left:
# a primer datagram, once it has gone, leaves the qdisc idle, so that the
# SENDs below open a slot of their own and wait all of it.
socket.socket(socket.AF_INET, socket.SOCK_DGRAM).sendto(b"primer", (fake_ip, 9))
deadline = time.monotonic() + 30
while backlog() != 0 and time.monotonic() < deadline:
    time.sleep(0.02)
for i in range(n):
    # One packet each at path MTU 1024.
    qp.post_send(SendWR(wr_id=i, opcode=e.IBV_WR_SEND, num_sge=1,
                        sg=[SGE(mr.buf + i * 1024, 1024, mr.lkey)],
                        send_flags=e.IBV_SEND_SIGNALED))
time.sleep(0.5)
held = backlog()
print(f"held_packets={held}")
t0 = time.monotonic()
qp.close()
ms = (time.monotonic() - t0) * 1000
print(f"destroy_ms={ms:.0f}")
print(f"held_packets_after={backlog()}")
for o in (mr, cq, pd, ctx):
    o.close()
EOF

# inflight_destroy: run the program; leaves its output in /tmp/di.out.
inflight_destroy() {
	timeout 120 python3 /tmp/destroy_inflight.py "$IBDEV" "$GID" "$FAKE_IP" 16 >/tmp/di.out 2>&1
	local rc=$?
	cat /tmp/di.out
	return $rc
}
value() { sed -n "s/^$1=//p" /tmp/di.out; }
backlog_empty() { tc -s qdisc show dev eth0 | grep -q 'backlog 0b 0p'; }
# The packets in eth0's qdisc now.
backlog_packets() { tc -s qdisc show dev eth0 | sed -n 's/.* backlog [^ ]* \([0-9]*\)p.*/\1/p' | head -n 1; }

destroy_while_held() {
	local held ms
	inflight_destroy || return 1
	held=$(value held_packets) ms=$(value destroy_ms)
	[ "${held:-0}" -gt 0 ] || { echo "no packet was held: the case proves nothing"; return 1; }
	if [ "$DRIVER" = rxe ]; then
		# rdma_rxe's skbs pin the QP; its destroy waits for them.
		echo "# C driver: destroy took $ms ms with $held packets held ${HOLD} s (its result, not asserted)"
		return 0
	fi
	echo "destroy took $ms ms with $held packets held"
	[ "$ms" -lt 1000 ]
}
check "destroy-while-held" destroy_while_held
check "held-released" retry $((HOLD * 3)) backlog_empty
sleep 1

# The held packets freed by a qdisc deletion in process context, right
# after the destroy, rather than sent.
qdisc_del_while_held() {
	destroy_while_held || return 1
	tc qdisc del dev eth0 root || return 1
	tc qdisc add dev eth0 root netem slot "${HOLD}s" "${HOLD}s"
}
check "qdisc-del-while-held" qdisc_del_while_held
sleep 1

module=$DRIVER
[ "$DRIVER" = rxe ] && module=rdma_rxe
unload_while_held() {
	local t0 ms
	inflight_destroy || return 1
	t0=$(date +%s%N)
	rdma link delete "$IBDEV" || return 1
	modprobe -r "$module" || return 1
	ms=$((($(date +%s%N) - t0) / 1000000))
	echo "link delete and module removal took $ms ms"
	! lsmod | grep -qw "^$module" || return 1
	# rrxe's unload waits for the destructors of the held packets (its
	# code): they have left the qdisc.  Not "the qdisc is empty": a packet
	# the stack sends meanwhile (neighbour discovery, say) opens a new
	# slot and is held there, as CI saw once.
	[ "$DRIVER" = rxe ] && return 0
	local left
	left=$(backlog_packets)
	echo "held before: $(value held_packets) packets, in the qdisc now: ${left:-?}"
	[ -n "$left" ] && [ "$left" -lt "$(value held_packets)" ]
}
check "unload-while-held" unload_while_held
check "unload-held-released" retry $((HOLD * 3)) backlog_empty
sleep 1
check "qdisc-del" tc qdisc del dev eth0 root
finish
