# Kernel verbs that no user verb reaches, through the test module
# rrxe_ktest (tests/kmod, loaded with modprobe): rdma_modify_ah. VM 2
# opens a UD QP with pyverbs, posts two receives and hands its QPN to VM 1;
# VM 1 loads the module, which creates a kernel UD QP and an address
# handle toward 10.0.0.99 (no such host), checks that a modify the core
# refuses (port 2) changes nothing, modifies the handle toward VM 2 and
# sends a datagram through it, then modifies it twice with interrupts off
# (toward 10.0.0.99 and back, as hfi1 calls it, where no route can be
# looked up) and sends another. VM 2 must receive exactly that text,
# twice; had a modify not taken, a datagram would have gone to 10.0.0.99.
# runs: rrxe@debug rxe@fast
# full-runs: rxe@debug

check "link-add-vm$VM" rdma_up
QKEY=0x11111111
# The text of the datagram: VM 1's address in it (no spaces: module
# parameters are split at them).
msg_from() { echo "rrxe_ktest-modify_ah-from-$1"; }

if [ "$VM" = 2 ]; then
	# ud-receive.py DEV QKEY TEXT QPN-FILE: two datagrams on a fresh UD QP,
	# whose QPN goes to VM 1; each payload (after the 40-byte GRH) must be
	# TEXT.
	cat >/tmp/ud-receive.py <<'EOF'
import os, sys, time
from pyverbs.device import Context
from pyverbs.pd import PD
from pyverbs.cq import CQ
from pyverbs.mr import MR
from pyverbs.qp import QP, QPInitAttr, QPCap, QPAttr
from pyverbs.wr import RecvWR, SGE
import pyverbs.enums as e
dev, qkey, want, qpn_file = sys.argv[1], int(sys.argv[2], 0), sys.argv[3].encode(), sys.argv[4]
ctx = Context(name=dev)
pd = PD(ctx)
cq = CQ(ctx, 8)
mr = MR(pd, 4096, e.IBV_ACCESS_LOCAL_WRITE)
qp = QP(pd, QPInitAttr(qp_type=e.IBV_QPT_UD, scq=cq, rcq=cq,
        cap=QPCap(max_send_wr=1, max_recv_wr=4, max_send_sge=1, max_recv_sge=1)))
a = QPAttr()
a.qp_state, a.pkey_index, a.port_num, a.qkey = e.IBV_QPS_INIT, 0, 1, qkey
qp.modify(a, e.IBV_QP_STATE | e.IBV_QP_PKEY_INDEX | e.IBV_QP_PORT | e.IBV_QP_QKEY)
a = QPAttr()
a.qp_state = e.IBV_QPS_RTR
qp.modify(a, e.IBV_QP_STATE)
for i in range(2):
    qp.post_recv(RecvWR(wr_id=i, num_sge=1, sg=[SGE(mr.buf + i * 2048, 2048, mr.lkey)]))
with open(qpn_file + ".tmp", "w") as f:
    print(qp.qp_num, file=f)
os.rename(qpn_file + ".tmp", qpn_file)
deadline, good = time.monotonic() + 60, 0
while time.monotonic() < deadline and good < 2:
    n, wcs = cq.poll()
    if n:
        wc = wcs[0]
        got = mr.read(wc.byte_len - 40, wc.wr_id * 2048 + 40) if wc.byte_len >= 40 else b""
        print(f"datagram {wc.wr_id}: status {wc.status} byte_len {wc.byte_len} payload {got!r}")
        if wc.status != e.IBV_WC_SUCCESS or got != want:
            sys.exit(1)
        good += 1
    else:
        time.sleep(0.01)
print(f"{good} of 2 datagrams in time")
sys.exit(0 if good == 2 else 1)
EOF
	rm -f /tmp/ud-qpn
	python3 /tmp/ud-receive.py "$IBDEV" "$QKEY" "$(msg_from "$PEER_IP")" /tmp/ud-qpn \
		>/tmp/ud-receive.log 2>&1 &
	pid=$!
	retry 60 test -s /tmp/ud-qpn || echo "# no QPN from the receiver"
	send_value "$(cat /tmp/ud-qpn 2>/dev/null || echo 0)"
	received() { wait "$pid"; local rc=$?; cat /tmp/ud-receive.log; return $rc; }
	check "modify-ah-datagram-received" received
else
	qpn=$(recv_value 120)
	echo "# VM 2's UD QPN: $qpn"
	ktest() {
		local rc=0
		# The module looks its source GID up: wait for it to exist.
		retry 10 gid_index "$IBDEV" "$MY_IP" >/dev/null || echo "no GID for $MY_IP"
		dmesg -C
		modprobe rrxe_ktest netdev=eth0 src="$MY_IP" old=10.0.0.99 peer="$PEER_IP" \
			qpn="$qpn" qkey="$QKEY" msg="$(msg_from "$MY_IP")" || rc=$?
		dmesg | grep rrxe_ktest
		rmmod rrxe_ktest 2>/dev/null
		return $rc
	}
	check "modify-ah-ktest" ktest
fi
barrier done 120
check "link-delete-vm$VM" rdma link delete "$IBDEV"
finish
