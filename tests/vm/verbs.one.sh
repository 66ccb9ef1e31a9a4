# Verbs objects (CQ, MR, QP, SRQ, AH) through the stock rdma-core rxe
# provider, for any DRIVER (rxe or rrxe), in one VM: pyverbs' object-level
# suites, compared per test with the C driver's outcomes recorded below, the
# objects listed by `rdma res show`, and no leaked index afterwards.
# runs: rrxe@debug
# full-runs: rxe@debug

check "link-add" rdma_up

# The C driver's (rxe) outcome of every test of the suites below, as
# `TEST-ID OUTCOME`, recorded from `DRIVER=rxe qemu/run-one
# tests/vm/verbs.one.sh`.  A test the C driver passes must pass on every
# driver.  Tests missing from the list fail the check, so the list follows
# the suites.
EXPECT=$(cat <<'LIST'
tests.test_cq.CQAPITest.test_create_cq ok
tests.test_cq.CQAPITest.test_create_cq_bad_flow ok
tests.test_cq.CQAPITest.test_create_cq_with_comp_channel ok
tests.test_cq.CQTest.test_resize_cq error
tests.test_cq_events.CqEventsTestCase.test_cq_events_rc ok
tests.test_cq_events.CqEventsTestCase.test_cq_events_ud ok
tests.test_device.DMTest.test_create_dm skip
tests.test_device.DMTest.test_create_dm_bad_flow skip
tests.test_device.DMTest.test_destroy_dm skip
tests.test_device.DMTest.test_destroy_dm_bad_flow skip
tests.test_device.DMTest.test_dm_read skip
tests.test_device.DMTest.test_dm_write skip
tests.test_device.DMTest.test_dm_write_bad_flow skip
tests.test_device.DMTest.test_multi_process_alloc_dm skip
tests.test_device.DeviceTest.test_dev_list ok
tests.test_device.DeviceTest.test_get_pkey_index ok
tests.test_device.DeviceTest.test_open_dev ok
tests.test_device.DeviceTest.test_phys_port_cnt_ex ok
tests.test_device.DeviceTest.test_query_device ok
tests.test_device.DeviceTest.test_query_device_ex ok
tests.test_device.DeviceTest.test_query_gid ok
tests.test_device.DeviceTest.test_query_gid_ex ok
tests.test_device.DeviceTest.test_query_gid_ex_bad_flow ok
tests.test_device.DeviceTest.test_query_gid_table ok
tests.test_device.DeviceTest.test_query_gid_table_bad_flow ok
tests.test_device.DeviceTest.test_query_pkey ok
tests.test_device.DeviceTest.test_query_port ok
tests.test_device.DeviceTest.test_query_port_bad_flow ok
tests.test_device.SharedDMTest.test_import_dm skip
tests.test_mr.DeviceMemoryAPITest.test_create_dm_mr skip
tests.test_mr.DeviceMemoryAPITest.test_dm_bad_access skip
tests.test_mr.DeviceMemoryAPITest.test_dm_bad_registration skip
tests.test_mr.DeviceMemoryTest.test_dm_atomic_cmp_swp skip
tests.test_mr.DeviceMemoryTest.test_dm_atomic_fetch_add skip
tests.test_mr.DeviceMemoryTest.test_dm_remote_read_traffic skip
tests.test_mr.DeviceMemoryTest.test_dm_remote_traffic skip
tests.test_mr.DeviceMemoryTest.test_dm_remote_write_traffic_imm skip
tests.test_mr.DeviceMemoryTest.test_dm_traffic skip
tests.test_mr.DmaBufMRTest.test_dmabuf_dereg_mr skip
tests.test_mr.DmaBufMRTest.test_dmabuf_dereg_mr_twice skip
tests.test_mr.DmaBufMRTest.test_dmabuf_lkey skip
tests.test_mr.DmaBufMRTest.test_dmabuf_read skip
tests.test_mr.DmaBufMRTest.test_dmabuf_reg_mr skip
tests.test_mr.DmaBufMRTest.test_dmabuf_reg_mr_bad_flags skip
tests.test_mr.DmaBufMRTest.test_dmabuf_rkey skip
tests.test_mr.DmaBufMRTest.test_dmabuf_write skip
tests.test_mr.DmaBufTestCase.test_dmabuf_rc_traffic skip
tests.test_mr.DmaBufTestCase.test_dmabuf_rdma_traffic skip
tests.test_mr.MRTest.test_mr_rereg_access skip
tests.test_mr.MRTest.test_mr_rereg_access_bad_flow skip
tests.test_mr.MRTest.test_mr_rereg_addr skip
tests.test_mr.MRTest.test_mr_rereg_atomic skip
tests.test_mr.MRTest.test_mr_rereg_pd skip
tests.test_mr.MRTest.test_reg_mr_bad_flags ok
tests.test_mr.MWTest.test_invalidate_mw_type1 ok
tests.test_mr.MWTest.test_mw_type1 ok
tests.test_mr.MWTest.test_mw_type2 ok
tests.test_mr.MWTest.test_mw_type2_invalidate_dealloc ok
tests.test_mr.MWTest.test_mw_type2_invalidate_local ok
tests.test_mr.MWTest.test_mw_type2_invalidate_remote ok
tests.test_mr.MWTest.test_reg_mw_wrong_type ok
tests.test_pd.PDTest.test_alloc_pd ok
tests.test_pd.PDTest.test_dealloc_pd ok
tests.test_pd.PDTest.test_destroy_pd_twice ok
tests.test_pd.PDTest.test_multiple_pd_creation ok
tests.test_qp.QPTest.test_create_raw_qp_ex_no_attr skip
tests.test_qp.QPTest.test_create_raw_qp_ex_with_attr skip
tests.test_qp.QPTest.test_create_raw_qp_ex_with_illegal_caps_max_recv_sge ok
tests.test_qp.QPTest.test_create_raw_qp_ex_with_illegal_caps_max_recv_wr ok
tests.test_qp.QPTest.test_create_raw_qp_ex_with_illegal_caps_max_send_sge ok
tests.test_qp.QPTest.test_create_raw_qp_ex_with_illegal_caps_max_send_wr ok
tests.test_qp.QPTest.test_create_raw_qp_no_attr skip
tests.test_qp.QPTest.test_create_raw_qp_with_attr skip
tests.test_qp.QPTest.test_create_rc_qp_ex_no_attr ok
tests.test_qp.QPTest.test_create_rc_qp_ex_with_attr ok
tests.test_qp.QPTest.test_create_rc_qp_no_attr ok
tests.test_qp.QPTest.test_create_rc_qp_with_attr ok
tests.test_qp.QPTest.test_create_uc_qp_ex_no_attr ok
tests.test_qp.QPTest.test_create_uc_qp_ex_with_attr ok
tests.test_qp.QPTest.test_create_uc_qp_no_attr ok
tests.test_qp.QPTest.test_create_uc_qp_with_attr ok
tests.test_qp.QPTest.test_create_ud_qp_ex_no_attr ok
tests.test_qp.QPTest.test_create_ud_qp_ex_with_attr ok
tests.test_qp.QPTest.test_create_ud_qp_no_attr ok
tests.test_qp.QPTest.test_create_ud_qp_with_attr ok
tests.test_qp.QPTest.test_modify_ud_qp ok
tests.test_qp.QPTest.test_query_data_in_order ok
tests.test_qp.QPTest.test_query_raw_qp skip
tests.test_qp.QPTest.test_query_rc_qp ok
tests.test_qp.QPTest.test_query_uc_qp ok
tests.test_qp.QPTest.test_query_ud_qp ok
tests.test_srq.SrqTestCase.test_modify_srq_limit ok
tests.test_srq.SrqTestCase.test_rc_srq_traffic ok
tests.test_srq.SrqTestCase.test_resize_srq ok
LIST
)

SUITES="test_device test_pd test_cq test_cq_events test_mr test_srq test_qp"

# pyverbs_outcomes LOG: one `TEST-ID OUTCOME` line per test of a unittest
# -v log (OUTCOME is ok, skip, fail or error).
pyverbs_outcomes() {
	python3 - "$1" <<'PY'
import re, sys
text = open(sys.argv[1], errors="replace").read()
pat = re.compile(r"^(\w+) \((tests\.[\w.]+)\)", re.M)
res = re.compile(r" \.\.\. (ok|skipped|FAIL|ERROR|expected failure|unexpected success)\b")
norm = {"ok": "ok", "skipped": "skip", "FAIL": "fail", "ERROR": "error",
        "expected failure": "ok", "unexpected success": "fail"}
hits = list(pat.finditer(text))
for i, m in enumerate(hits):
    end = hits[i + 1].start() if i + 1 < len(hits) else len(text)
    r = res.search(text, m.end(), end)
    print(m.group(2), norm[r.group(1)] if r else "error")
PY
}

# All tests run in one process (on the debug kernel each Python start
# imports pyverbs' test modules again, seconds each).  If the batch hangs,
# its tests are rerun one process each under a time limit, so that a test
# waiting for a completion that never comes fails only itself.
run_one_test() {
	local id=$1 t=${1#tests.} rc out
	timeout 30 python3 tests/run_tests.py --dev "$IBDEV" --gid 1 -v "$t" >/tmp/one.log 2>&1
	rc=$?
	out=$(pyverbs_outcomes /tmp/one.log | awk '{print $2}' | head -n 1)
	[ "$rc" -eq 124 ] && out=timeout
	echo "$id ${out:-error}" >>/tmp/outcomes
	case ${out:-error} in
	ok | skip) ;;
	*) echo "== $t: ${out:-error}"; tail -n 30 /tmp/one.log ;;
	esac
}

run_pyverbs() {
	local id batch
	: >/tmp/outcomes
	cd /opt/pyverbs || return 1
	batch=$(echo "$EXPECT" | awk '{print $1}')
	if timeout 300 python3 tests/run_tests.py --dev "$IBDEV" --gid 1 -v \
		$(echo "$batch" | sed 's/^tests\.//') >/tmp/batch.log 2>&1 ||
		[ $? -ne 124 ]; then
		pyverbs_outcomes /tmp/batch.log >>/tmp/outcomes
		# Tracebacks of failures and errors.
		sed -n '/^======/,/^------/p' /tmp/batch.log
	else
		echo "batch timed out; running its tests one by one"
		for id in $batch; do run_one_test "$id"; done
	fi
	return 0
}
check "pyverbs-run" run_pyverbs
sort -o /tmp/outcomes /tmp/outcomes
echo "# per-test outcomes on $DRIVER:"
sed 's/^/#   /' /tmp/outcomes
echo "# counts on $DRIVER: $(awk '{print $2}' /tmp/outcomes | sort | uniq -c | tr '\n' ' ')"

# The list covers exactly the tests of the suites (pyverbs 56.1).
suite_list_matches() {
	(cd /opt/pyverbs && python3 tests/run_tests.py --list-tests 2>/dev/null) |
		grep -E "^tests\.($(echo $SUITES | tr ' ' '|'))\." | sort >/tmp/suite-ids
	echo "$EXPECT" | awk '{print $1}' | sort >/tmp/expect-ids
	[ -s /tmp/suite-ids ] && diff /tmp/suite-ids /tmp/expect-ids
}
check "pyverbs-list-complete" suite_list_matches

# compare_expected: every test the C driver passes passes here too; no test
# is unknown to the list.
compare_expected() {
	# One awk over the list and the outcomes (a process per test took
	# 19 s on the debug kernel).
	[ -s /tmp/outcomes ] && echo "$EXPECT" | awk '
		FNR == NR { want[$1] = $2; next }
		!($1 in want) { print "unknown test (add it to the list): " $0; bad = 1; next }
		want[$1] == "ok" && $2 != "ok" { print "REGRESSION: " $0 " (C driver: ok)"; bad = 1 }
		END { exit bad }' - /tmp/outcomes
}
check "pyverbs-vs-c-driver" compare_expected

res_baseline() {
	local r
	r=$(rdma res show "$1" 2>&1 | grep -c "dev $IBDEV")
	echo "$r"
}

# Objects created by a small program are listed while it lives, and freed.
res_lists_objects() {
	python3 - "$IBDEV" <<'PY' || return 1
import subprocess, sys
from pyverbs.device import Context
from pyverbs.pd import PD
from pyverbs.cq import CQ
from pyverbs.mr import MR
from pyverbs.qp import QP, QPInitAttr, QPCap
import pyverbs.enums as e
dev = sys.argv[1]
with Context(name=dev) as ctx:
    pd = PD(ctx)
    cq = CQ(ctx, 16)
    mr = MR(pd, 4096, e.IBV_ACCESS_LOCAL_WRITE)
    qp = QP(pd, QPInitAttr(qp_type=e.IBV_QPT_RC, scq=cq, rcq=cq, cap=QPCap(4, 4, 1, 1)))
    for kind in ("pd", "cq", "mr", "qp"):
        out = subprocess.run(["rdma", "res", "show", kind], capture_output=True, text=True).stdout
        print(out.strip())
        if dev not in out or "comm python3" not in out:
            sys.exit(f"{kind} not listed")
    qp.close(); mr.close(); cq.close(); pd.close()
PY
}
check "res-show-lists-objects" res_lists_objects

# A QP moved to ERR and destroyed at once, 20 times, each with its own CQ
# on a completion channel, armed, and one receive posted: the flushed
# receive's completion event reaches the channel every time, and the CQ
# holds that receive as WR_FLUSH_ERR. rrxe makes the completion handler
# call a flush owes from the QP's kick (never under the QP's lock); a QP
# destroyed before its kick ran lost the call, and a consumer waiting on
# the channel for its flushed work waited for ever (review of dfe3853).
flush_then_destroy() {
	timeout 60 python3 - "$IBDEV" <<'PY'
import sys
from pyverbs.device import Context
from pyverbs.pd import PD
from pyverbs.cq import CQ, CompChannel
from pyverbs.mr import MR
from pyverbs.qp import QP, QPInitAttr, QPCap, QPAttr
from pyverbs.wr import RecvWR, SGE
import pyverbs.enums as e
with Context(name=sys.argv[1]) as ctx:
    pd = PD(ctx)
    mr = MR(pd, 4096, e.IBV_ACCESS_LOCAL_WRITE)
    for i in range(20):
        ch = CompChannel(ctx)
        cq = CQ(ctx, 16, None, ch, 0)
        qp = QP(pd, QPInitAttr(qp_type=e.IBV_QPT_RC, scq=cq, rcq=cq, cap=QPCap(4, 4, 1, 1)))
        a = QPAttr(qp_state=e.IBV_QPS_INIT, port_num=1)
        a.pkey_index = 0
        a.qp_access_flags = 0
        qp.modify(a, e.IBV_QP_STATE | e.IBV_QP_PKEY_INDEX | e.IBV_QP_PORT | e.IBV_QP_ACCESS_FLAGS)
        qp.post_recv(RecvWR(wr_id=1000 + i, num_sge=1, sg=[SGE(mr.buf, 64, mr.lkey)]))
        cq.req_notify()
        qp.modify(QPAttr(qp_state=e.IBV_QPS_ERR), e.IBV_QP_STATE)
        qp.close()
        ch.get_cq_event(cq)
        cq.ack_events(1)
        n, wcs = cq.poll(4)
        got = [(w.wr_id, w.status) for w in wcs[:n]]
        if got != [(1000 + i, e.IBV_WC_WR_FLUSH_ERR)]:
            sys.exit(f"round {i}: CQ holds {got}")
        cq.close()
        ch.close()
    print("20 rounds: event and flushed receive each time")
    mr.close()
    pd.close()
PY
}
check "flush-then-destroy-event" flush_then_destroy

# modify_qp's access flags: a bit of the optional range (20-29, here
# RELAXED_ORDERING) is accepted and ignored, a bit above it (30) refused
# with EINVAL, as rxe_qp_chk_attr (RXE_ACCESS_SUPPORTED_QP). rrxe took
# every bit from 20 up as optional until bf6e3ec.
qp_access_bits() {
	timeout 60 python3 - "$IBDEV" <<'PY'
import sys
from pyverbs.device import Context
from pyverbs.pd import PD
from pyverbs.cq import CQ
from pyverbs.qp import QP, QPInitAttr, QPCap, QPAttr
from pyverbs.pyverbs_error import PyverbsRDMAError
import pyverbs.enums as e
with Context(name=sys.argv[1]) as ctx:
    pd = PD(ctx)
    cq = CQ(ctx, 16)
    got = {}
    for bit in (20, 29, 30):
        qp = QP(pd, QPInitAttr(qp_type=e.IBV_QPT_RC, scq=cq, rcq=cq, cap=QPCap(4, 4, 1, 1)))
        a = QPAttr(qp_state=e.IBV_QPS_INIT, port_num=1)
        a.pkey_index = 0
        a.qp_access_flags = e.IBV_ACCESS_REMOTE_WRITE | (1 << bit)
        try:
            qp.modify(a, e.IBV_QP_STATE | e.IBV_QP_PKEY_INDEX | e.IBV_QP_PORT | e.IBV_QP_ACCESS_FLAGS)
            got[bit] = 0
        except PyverbsRDMAError as err:
            got[bit] = err.error_code
        qp.close()
    print("access bit: errno", got)
    if got != {20: 0, 29: 0, 30: 22}:
        sys.exit("wanted {20: 0, 29: 0, 30: 22 (EINVAL)}")
PY
}
check "qp-access-bits" qp_access_bits

# After all users are gone only the kernel's own objects remain (the GSI QP
# and the MAD agents' CQ/PD/MR): nothing leaked by the suites.
res_no_user_objects() {
	local kind rc=0
	for kind in pd cq qp mr srq; do
		if rdma res show "$kind" 2>/dev/null | grep "dev $IBDEV" | grep -v "comm \[" | grep -q .; then
			echo "leaked $kind:"; rdma res show "$kind"; rc=1
		fi
	done
	rdma res show
	return $rc
}
check "res-no-leak" res_no_user_objects

check "link-delete" rdma link delete "$IBDEV"
finish
