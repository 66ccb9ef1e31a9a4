# A hostile peer: VM 2 has no RDMA device at all; it builds RoCEv2 packets
# with valid ICRCs from VM 2's address to QPs that VM 1 connected to it,
# sends them with a raw socket and reads VM 1's answers on UDP 4791. VM 1
# (a pyverbs program, below) says for each case which packets go out and
# checks what its driver did: the answers (opcode, PSN, AETH syndrome),
# the completions, the QP state, the counters, and that memory inside and
# outside the MRs holds exactly what it should. The cases:
#   dup-read-*       a duplicate READ that was never answered (PSN before
#                    the expected one) is dropped, on a QP without remote
#                    read access and on one with it; a remembered READ is
#                    answered again with the same bytes
#   reth-2g1-*       READ and WRITE FIRST with a DMA length of 2^31 + 1:
#                    Invalid Request NAK (IBTA C9-94), nothing written
#   write-past-mr    a WRITE whose first packet fits in the MR but whose
#                    length runs past it: Remote Access NAK at the first
#                    packet, nothing written
#   write-other-pd / write-key-flipped / write-read-only-mr  Remote Access
#                    NAK, the MR of the other PD untouched
#   atomic-*         FetchAdd: a wrong R_Key at a misaligned address gets a
#                    Remote Access NAK (the key is checked first, as
#                    rdma_rxe), the right key there an Invalid Request NAK;
#                    aligned, the original value comes back in the ATOMIC
#                    ACKNOWLEDGE and the word holds the sum
#   wrong-transport  UC and UD opcodes to an RC QP: dropped (no answer, no
#                    completion, the PSN does not move), then an RC SEND
#                    completes
#   bad-pkey         P_Key 0x1234: dropped and counted in bad_pkey_cntr;
#                    0x7fff (limited member) is accepted
#   bad-qkey         UD Q_Key of another QP: dropped and counted in
#                    qkey_viol_cntr; the right Q_Key is delivered
#   psn-wrap         SENDs at PSNs 0xfffffe..0x000001 all complete and are
#                    acknowledged; a duplicate after the wrap gets an ACK
#                    and no completion
#   uc-send-too-long a UC SEND of 1124 bytes into a 64-byte receive: the
#                    bytes past the receive buffer stay untouched; rrxe
#                    completes the receive with LOC_LEN_ERR and the next SEND
#                    is delivered; rdma_rxe completes it with LOC_QP_OP_ERR
#                    and moves the QP to ERR (shown, not judged)
#   ud-ah-other-pd   a UD send through an AH of another PD: LOC_QP_OP_ERR
#                    (rdma_rxe, whose rxe_get_av refuses it too, reports
#                    WR_FLUSH_ERR), through its own: sent
#   rnr-timer-*      a SEND with no receive posted: RNR NAK with the QP's
#                    min_rnr_timer (12, and 0x45 as its low 5 bits, as
#                    rdma_rxe); the retry after a receive is posted is
#                    acknowledged and delivered
#   reset-timers-*   RESET cancels the retransmit timer: a SEND of the QP's
#                    next life (no retries) is not failed by the old timer
#   route-*          VM 1 as requester: a SEND goes out; with a host route
#                    to VM 2 through a missing gateway added, the next one
#                    does not arrive (the cached route is checked, dst_check,
#                    as rdma_rxe does); once the route is gone
#                    again, the retransmission goes out and is acknowledged
#   route-responder-* VM 1 only responds: during the change its ACK does
#                    not arrive; after it the duplicate is acknowledged
#   route-ud-*       a UD AH's route: during the change the datagram does
#                    not arrive, after it it does
# runs: rrxe@debug
# full-runs: rxe@fast rxe@debug

CTL_PORT=7471
# VM 2's second address (10.0.0.2 -> 10.0.0.102).
if [ "$VM" = 1 ]; then ALT_IP=${PEER_IP%.*}.$((${PEER_IP##*.} + 100)); else ALT_IP=${MY_IP%.*}.$((${MY_IP##*.} + 100)); fi
export ALT_IP

cat >/tmp/hostile_peer.py <<'EOF'
import json, os, random, select, socket, struct, sys, time, zlib

VM, DEV, MY_IP, PEER_IP, DRIVER = int(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4], sys.argv[5]
CTL_PORT = int(os.environ["CTL_PORT"])
# A second address of VM 2, for the case that changes a route (the
# control connection stays on the first).
ALT_IP = os.environ["ALT_IP"]

def log(*a):
    print("#", *a, flush=True)

def ctl_connect():
    if VM == 2:
        ls = socket.socket()
        ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        ls.bind(("", CTL_PORT))
        ls.listen(1)
        ls.settimeout(180)
        s, _ = ls.accept()
    else:
        deadline = time.time() + 180
        while True:
            try:
                s = socket.create_connection((PEER_IP, CTL_PORT), timeout=5)
                break
            except OSError:
                if time.time() > deadline:
                    raise
                time.sleep(0.5)
    s.settimeout(300)
    return s, s.makefile("r")

# ---------------------------------------------------------------- VM 2 ----
# The injector: for each request {"pkts": [...], "listen": secs} it sends
# the packets, then returns the BTH (and AETH) of every packet VM 1 sent to
# UDP 4791 meanwhile.

def icrc(ip, udp, roce):
    # Masked: IPv4 TOS, TTL, checksum; UDP checksum; BTH resv8a (RoCEv2
    # Annex A17.3.3); 8 bytes of 0xff stand for the masked LRH.
    mip = ip[:1] + b"\xff" + ip[2:8] + b"\xff" + ip[9:10] + b"\xff\xff" + ip[12:]
    u = udp[:6] + b"\xff\xff"
    b = roce[:4] + b"\xff" + roce[5:12]
    return struct.pack("<I", zlib.crc32(b"\xff" * 8 + mip + u + b + roce[12:]))

def build(p, ipid):
    payload = bytes.fromhex(p.get("payload", ""))
    pad = -len(payload) % 4
    first = (p.get("se", 0) << 7) | (pad << 4)
    psn = ((1 << 31) if p.get("ackreq") else 0) | (p["psn"] & 0xFFFFFF)
    body = struct.pack("!BBHII", p["op"], first, p.get("pkey", 0xFFFF),
                       p["qpn"] & 0xFFFFFF, psn)
    if "deth" in p:
        body += struct.pack("!II", p["deth"][0], p["deth"][1] & 0xFFFFFF)
    if "reth" in p:
        body += struct.pack("!QII", *p["reth"])
    if "aeth" in p:
        body += struct.pack("!I", (p["aeth"][0] << 24) | (p["aeth"][1] & 0xFFFFFF))
    if "atomic" in p:
        # AtomicETH: VA, R_Key, swap (or add) data, compare data.
        body += struct.pack("!QIQQ", *p["atomic"])
    body += payload + b"\0" * pad
    S, D = socket.inet_aton(p.get("src", MY_IP)), socket.inet_aton(PEER_IP)
    total = 20 + 8 + len(body) + 4
    ip = struct.pack("!BBHHHBBH4s4s", 0x45, 0, total, ipid, 0x4000, 64, 17, 0, S, D)
    udp = struct.pack("!HHHH", 0xC000 | (ipid & 0x3FFF), 4791, 8 + len(body) + 4, 0)
    return ip + udp + body + icrc(ip, udp, body)

def injector():
    raw = socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_RAW)
    rx = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    rx.bind(("", 4791))
    s, f = ctl_connect()
    ipid = 0x1000
    sent = 0
    while True:
        line = f.readline()
        if not line:
            break
        req = json.loads(line)
        if req.get("end"):
            break
        for p in req["pkts"]:
            ipid = (ipid + 1) & 0xFFFF
            raw.sendto(build(p, ipid), (PEER_IP, 0))
            sent += 1
            time.sleep(0.002)
        got = []
        deadline = time.time() + req.get("listen", 0.5)
        while True:
            left = deadline - time.time()
            if left <= 0 or not select.select([rx], [], [], left)[0]:
                break
            d, (src, _) = rx.recvfrom(65536)
            if src != PEER_IP or len(d) < 16:
                continue
            op, _, _, qpn, psn = struct.unpack("!BBHII", d[:12])
            r = {"op": op, "qpn": qpn & 0xFFFFFF, "psn": psn & 0xFFFFFF, "len": len(d)}
            # Acknowledges and READ responses FIRST, LAST, ONLY carry an AETH.
            if op in (0x0D, 0x0F, 0x10, 0x11, 0x12):
                r["syndrome"] = d[12]
            if op in (0x0D, 0x0E, 0x0F, 0x10):
                off = 16 if op != 0x0E else 12
                r["data"] = d[off:len(d) - 4].hex()
            if op == 0x12:
                # ATOMIC ACKNOWLEDGE: the AtomicAckETH's original value.
                r["data"] = d[16:24].hex()
            got.append(r)
        s.sendall((json.dumps({"got": got}) + "\n").encode())
    log(f"injector: {sent} packets sent")

# ---------------------------------------------------------------- VM 1 ----
if VM == 2:
    injector()
    sys.exit(0)

from pyverbs.device import Context
from pyverbs.pd import PD
from pyverbs.cq import CQ
from pyverbs.mr import MR
from pyverbs.qp import QP, QPCap, QPInitAttr, QPAttr
from pyverbs.addr import AH, AHAttr, GlobalRoute, GID
from pyverbs.wr import SendWR, RecvWR, SGE
import pyverbs.enums as e

HWC = f"/sys/class/infiniband/{DEV}/ports/1/hw_counters"
RC_SEND_ONLY, RC_SEND_FIRST, RC_WRITE_FIRST, RC_WRITE_ONLY, RC_READ_REQ = 0x04, 0x00, 0x06, 0x0A, 0x0C
RC_READ_RESP_ONLY, RC_ACK, RC_ATOMIC_ACK, RC_FETCH_ADD = 0x10, 0x11, 0x12, 0x14
UC_SEND_FIRST, UC_SEND_LAST, UC_SEND_ONLY, UD_SEND_ONLY = 0x20, 0x22, 0x24, 0x64
NAK_INV_REQ, NAK_REM_ACCESS = 0x61, 0x62
STATE = {e.IBV_QPS_RESET: "RESET", e.IBV_QPS_INIT: "INIT", e.IBV_QPS_RTR: "RTR",
         e.IBV_QPS_RTS: "RTS", e.IBV_QPS_ERR: "ERR"}
REMOTE = (e.IBV_ACCESS_LOCAL_WRITE | e.IBV_ACCESS_REMOTE_WRITE |
          e.IBV_ACCESS_REMOTE_READ)
RW = e.IBV_ACCESS_LOCAL_WRITE | e.IBV_ACCESS_REMOTE_WRITE
MR_SIZE = 8192
failed = 0

def result(name, ok, detail=""):
    global failed
    failed += not ok
    print(f"RESULT {name} {'pass' if ok else 'fail'} {detail}", flush=True)

def expect(name, got, want):
    result(name, got == want, f"got {got!r}, want {want!r}")

def counter(n):
    try:
        return int(open(f"{HWC}/{n}").read())
    except OSError:
        return 0

def pattern(seed, n):
    return bytes((i * 7 + seed) & 0xFF for i in range(n))

ctx = Context(name=DEV)
gidx = int(sys.argv[6])
def v4_gid(ip):
    return "0000:0000:0000:0000:0000:ffff:" + "%02x%02x:%02x%02x" % tuple(int(x) for x in ip.split("."))
PEER_GID = v4_gid(PEER_IP)
log(f"source GID index {gidx}, peer GID {PEER_GID}")

pd = PD(ctx)
pd2 = PD(ctx)
cq = CQ(ctx, 256)
mr = MR(pd, MR_SIZE, REMOTE | e.IBV_ACCESS_REMOTE_ATOMIC)
mr2 = MR(pd2, MR_SIZE, REMOTE)
mr_ro = MR(pd, MR_SIZE, e.IBV_ACCESS_LOCAL_WRITE | e.IBV_ACCESS_REMOTE_READ)
ctl, ctlf = ctl_connect()
fake_qpn = 0x4700

def inject(pkts, listen=0.6):
    ctl.sendall((json.dumps({"pkts": pkts, "listen": listen}) + "\n").encode())
    return json.loads(ctlf.readline())["got"]

def fill_all():
    for m, seed in ((mr, 1), (mr2, 2), (mr_ro, 3)):
        m.write(pattern(seed, MR_SIZE), MR_SIZE, 0)

def unchanged(name, m, seed):
    expect(f"{name}-memory", m.read(MR_SIZE, 0) == pattern(seed, MR_SIZE), True)

def poll(n=16, wait=0.5):
    out, deadline = [], time.time() + wait
    while time.time() < deadline:
        k, wcs = cq.poll(n)
        out += wcs
        if not k:
            time.sleep(0.02)
    return out

class Rc:
    """A connected QP whose peer is the injector (no QP exists there)."""
    def __init__(self, qp_type=e.IBV_QPT_RC, access=REMOTE, rq_psn=None, qp_pd=None, timeout=14,
                 peer_gid=PEER_GID, min_rnr_timer=12):
        global fake_qpn
        fake_qpn += 1
        self.peer_qpn = fake_qpn
        self.qp_type, self.access, self.peer_gid, self.min_rnr_timer = qp_type, access, peer_gid, min_rnr_timer
        self.qp = QP(qp_pd or pd, QPInitAttr(qp_type=qp_type, scq=cq, rcq=cq,
                     cap=QPCap(max_send_wr=8, max_recv_wr=8, max_send_sge=1, max_recv_sge=1)))
        self.epsn = random.randrange(0x1000, 0xF00000) if rq_psn is None else rq_psn
        self.connect(timeout)
        self.qpn = self.qp.qp_num

    def connect(self, timeout, retry_cnt=7, sq_psn=0x100):
        """RESET (or a fresh QP) -> INIT -> RTR -> RTS."""
        qp_type = self.qp_type
        a = QPAttr()
        a.qp_state, a.pkey_index, a.port_num, a.qp_access_flags = e.IBV_QPS_INIT, 0, 1, self.access
        self.qp.modify(a, e.IBV_QP_STATE | e.IBV_QP_PKEY_INDEX | e.IBV_QP_PORT |
                       e.IBV_QP_ACCESS_FLAGS)
        a = QPAttr()
        a.qp_state, a.path_mtu, a.dest_qp_num, a.rq_psn = e.IBV_QPS_RTR, e.IBV_MTU_1024, self.peer_qpn, self.epsn
        gr = GlobalRoute(dgid=GID(self.peer_gid), sgid_index=gidx, hop_limit=64)
        a.ah_attr = AHAttr(port_num=1, is_global=1, gr=gr)
        mask = (e.IBV_QP_STATE | e.IBV_QP_AV | e.IBV_QP_PATH_MTU | e.IBV_QP_DEST_QPN |
                e.IBV_QP_RQ_PSN)
        if qp_type == e.IBV_QPT_RC:
            a.max_dest_rd_atomic, a.min_rnr_timer = 4, self.min_rnr_timer
            mask |= e.IBV_QP_MAX_DEST_RD_ATOMIC | e.IBV_QP_MIN_RNR_TIMER
        self.qp.modify(a, mask)
        a = QPAttr()
        a.qp_state, a.sq_psn = e.IBV_QPS_RTS, sq_psn
        mask = e.IBV_QP_STATE | e.IBV_QP_SQ_PSN
        if qp_type == e.IBV_QPT_RC:
            a.timeout, a.retry_cnt, a.rnr_retry, a.max_rd_atomic = timeout, retry_cnt, 7, 1
            mask |= (e.IBV_QP_TIMEOUT | e.IBV_QP_RETRY_CNT | e.IBV_QP_RNR_RETRY |
                     e.IBV_QP_MAX_QP_RD_ATOMIC)
        self.qp.modify(a, mask)

    def reset(self):
        a = QPAttr()
        a.qp_state = e.IBV_QPS_RESET
        self.qp.modify(a, e.IBV_QP_STATE)

    def state(self):
        attr, _ = self.qp.query(e.IBV_QP_STATE)
        return STATE.get(attr.qp_state, attr.qp_state)

    def recv(self, wr_id, off, length, m=None):
        m = m or mr
        self.qp.post_recv(RecvWR(wr_id=wr_id, num_sge=1, sg=[SGE(m.buf + off, length, m.lkey)]))

    def pkt(self, op, psn, **kw):
        return dict(op=op, qpn=self.qpn, psn=psn & 0xFFFFFF, **kw)

def answers(got, qp):
    """(opcode, PSN, syndrome) of the packets VM 1 sent to QP's peer; an ACK's
    syndrome as 0, whatever credit count it carries."""
    def syn(g):
        s = g.get("syndrome")
        return 0 if s is not None and s >> 5 == 0 else s
    return [(g["op"], g["psn"], syn(g)) for g in got if g["qpn"] == qp.peer_qpn]

def case_dup_read():
    fill_all()
    for name, access in (("no-access", RW), ("with-access", REMOTE)):
        q = Rc(access=access)
        d0 = counter("duplicate_request")
        got = inject([q.pkt(RC_READ_REQ, q.epsn - 5, ackreq=1, reth=[mr.buf, mr.rkey, 64])])
        expect(f"dup-read-{name}-dropped", answers(got, q), [])
        expect(f"dup-read-{name}-qp-rts", q.state(), "RTS")
        if DRIVER == "rrxe":
            expect(f"dup-read-{name}-counted", counter("duplicate_request") - d0, 1)
    # The no-access QP refuses a READ at the expected PSN.
    q = Rc(access=RW)
    got = inject([q.pkt(RC_READ_REQ, q.epsn, ackreq=1, reth=[mr.buf, mr.rkey, 64])])
    expect("read-no-access-nak", answers(got, q), [(RC_ACK, q.epsn, NAK_INV_REQ)])
    expect("read-no-access-qp-err", q.state(), "ERR")
    # A READ that was answered is answered again, with the same bytes.
    q = Rc(access=REMOTE)
    pkt = q.pkt(RC_READ_REQ, q.epsn, ackreq=1, reth=[mr.buf + 64, mr.rkey, 64])
    for i in (1, 2):
        got = [g for g in inject([pkt]) if g["qpn"] == q.peer_qpn]
        expect(f"read-answered-{i}", [(g["op"], g["psn"], g.get("data")) for g in got],
               [(RC_READ_RESP_ONLY, q.epsn, pattern(1, MR_SIZE)[64:128].hex())])

def case_reth_len():
    fill_all()
    q = Rc()
    got = inject([q.pkt(RC_READ_REQ, q.epsn, ackreq=1, reth=[mr.buf, mr.rkey, (1 << 31) + 1])])
    expect("reth-2g1-read-nak", answers(got, q), [(RC_ACK, q.epsn, NAK_INV_REQ)])
    q = Rc()
    got = inject([q.pkt(RC_WRITE_FIRST, q.epsn, reth=[mr.buf, mr.rkey, (1 << 31) + 1],
                        payload=(b"\xee" * 1024).hex())])
    expect("reth-2g1-write-nak", answers(got, q), [(RC_ACK, q.epsn, NAK_INV_REQ)])
    unchanged("reth-2g1-write", mr, 1)
    # 2^31 itself is allowed: refused for its range, not its length.
    q = Rc()
    got = inject([q.pkt(RC_READ_REQ, q.epsn, ackreq=1, reth=[mr.buf, mr.rkey, 1 << 31])])
    expect("reth-2g-read-range-nak", answers(got, q), [(RC_ACK, q.epsn, NAK_REM_ACCESS)])

def case_write_access():
    fill_all()
    data = (b"\xee" * 1024).hex()
    q = Rc()
    # The first packet's 1024 bytes lie inside the MR; the message does not.
    got = inject([q.pkt(RC_WRITE_FIRST, q.epsn, reth=[mr.buf + MR_SIZE - 1024, mr.rkey, 4096],
                        payload=data)])
    expect("write-past-mr-nak", answers(got, q), [(RC_ACK, q.epsn, NAK_REM_ACCESS)])
    unchanged("write-past-mr", mr, 1)
    for name, m, key in (("other-pd", mr2, mr2.rkey), ("key-flipped", mr, mr.rkey ^ 0x5A),
                         ("read-only-mr", mr_ro, mr_ro.rkey)):
        q = Rc()
        got = inject([q.pkt(RC_WRITE_ONLY, q.epsn, ackreq=1, reth=[m.buf, key, 64],
                            payload=(b"\xee" * 64).hex())])
        expect(f"write-{name}-nak", answers(got, q), [(RC_ACK, q.epsn, NAK_REM_ACCESS)])
        expect(f"write-{name}-qp-err", q.state(), "ERR")
    unchanged("write-other-pd", mr2, 2)
    unchanged("write-key-flipped", mr, 1)
    unchanged("write-read-only", mr_ro, 3)

def case_atomic_keys():
    """A FetchAdd's R_Key is checked before its alignment (rdma_rxe: check_rkey,
    then the misaligned-atomic check when it executes): a wrong key at a
    misaligned address is a Remote Access NAK, the right key there an
    Invalid Request NAK; aligned with the right key it adds and answers the
    original value. Memory changes only in the last."""
    fill_all()
    word = MR_SIZE - 64
    orig = int.from_bytes(pattern(1, MR_SIZE)[word:word + 8], "little")
    for name, off, key, nak in (("bad-key-misaligned", word + 4, mr.rkey ^ 0x5A, NAK_REM_ACCESS),
                                ("misaligned", word + 4, mr.rkey, NAK_INV_REQ)):
        q = Rc(access=REMOTE | e.IBV_ACCESS_REMOTE_ATOMIC)
        got = inject([q.pkt(RC_FETCH_ADD, q.epsn, ackreq=1, atomic=[mr.buf + off, key, 1, 0])])
        expect(f"atomic-{name}-nak", answers(got, q), [(RC_ACK, q.epsn, nak)])
        expect(f"atomic-{name}-qp-err", q.state(), "ERR")
        unchanged(f"atomic-{name}", mr, 1)
    q = Rc(access=REMOTE | e.IBV_ACCESS_REMOTE_ATOMIC)
    got = inject([q.pkt(RC_FETCH_ADD, q.epsn, ackreq=1, atomic=[mr.buf + word, mr.rkey, 5, 0])])
    expect("atomic-aligned-answer",
           [(g["op"], g["psn"], g.get("syndrome", 0) >> 5, g.get("data"))
            for g in got if g["qpn"] == q.peer_qpn],
           [(RC_ATOMIC_ACK, q.epsn, 0, orig.to_bytes(8, "big").hex())])
    expect("atomic-aligned-memory",
           int.from_bytes(mr.read(8, word), "little"), (orig + 5) & ((1 << 64) - 1))

def case_wrong_transport():
    fill_all()
    q = Rc()
    q.recv(7, 0, 256)
    t0 = counter("rcvd_drop_bad_transport")
    msg = pattern(9, 32)
    got = inject([q.pkt(UC_SEND_ONLY, q.epsn, ackreq=1, payload=msg.hex()),
                  q.pkt(UD_SEND_ONLY, q.epsn, ackreq=1, deth=[0x11111111, 0x4701], payload=msg.hex())])
    expect("wrong-transport-no-answer", answers(got, q), [])
    expect("wrong-transport-no-completion", len(poll()), 0)
    if DRIVER == "rrxe":
        expect("wrong-transport-counted", counter("rcvd_drop_bad_transport") - t0, 2)
    got = inject([q.pkt(RC_SEND_ONLY, q.epsn, ackreq=1, payload=msg.hex())])
    expect("rc-send-after-acked", answers(got, q), [(RC_ACK, q.epsn, 0)])
    wcs = poll()
    expect("rc-send-after-completes", [(w.wr_id, w.status, w.byte_len) for w in wcs],
           [(7, e.IBV_WC_SUCCESS, 32)])
    expect("rc-send-after-data", mr.read(32, 0), msg)

def case_pkey():
    fill_all()
    q = Rc()
    q.recv(8, 0, 256)
    b0 = ctx.query_port(1).bad_pkey_cntr
    msg = pattern(11, 40)
    got = inject([q.pkt(RC_SEND_ONLY, q.epsn, ackreq=1, pkey=0x1234, payload=msg.hex()),
                  q.pkt(RC_SEND_ONLY, q.epsn, ackreq=1, pkey=0x0000, payload=msg.hex())])
    expect("bad-pkey-no-answer", answers(got, q), [])
    expect("bad-pkey-no-completion", len(poll()), 0)
    expect("bad-pkey-counted", ctx.query_port(1).bad_pkey_cntr - b0, 2)
    got = inject([q.pkt(RC_SEND_ONLY, q.epsn, ackreq=1, pkey=0x7FFF, payload=msg.hex())])
    expect("limited-pkey-acked", answers(got, q), [(RC_ACK, q.epsn, 0)])
    expect("limited-pkey-completes", [(w.wr_id, w.status, w.byte_len) for w in poll()],
           [(8, e.IBV_WC_SUCCESS, 40)])

def case_qkey():
    fill_all()
    qp = ud_qp()
    qp.post_recv(RecvWR(wr_id=9, num_sge=1, sg=[SGE(mr.buf, 40 + 256, mr.lkey)]))
    v0 = ctx.query_port(1).qkey_viol_cntr
    msg = pattern(13, 48)
    got = inject([dict(op=UD_SEND_ONLY, qpn=qp.qp_num, psn=1, deth=[0x22222222, 0x4702],
                       payload=msg.hex())])
    expect("bad-qkey-no-completion", len(poll()), 0)
    expect("bad-qkey-counted", ctx.query_port(1).qkey_viol_cntr - v0, 1)
    inject([dict(op=UD_SEND_ONLY, qpn=qp.qp_num, psn=2, deth=[0x11111111, 0x4702],
                 payload=msg.hex())])
    wcs = poll()
    expect("right-qkey-completes", [(w.wr_id, w.status, w.byte_len, w.src_qp) for w in wcs],
           [(9, e.IBV_WC_SUCCESS, 40 + 48, 0x4702)])
    expect("right-qkey-data", mr.read(48, 40), msg)

def case_psn_wrap():
    fill_all()
    q = Rc(rq_psn=0xFFFFFE)
    for i in range(4):
        q.recv(20 + i, 256 * i, 256)
    psns = [0xFFFFFE, 0xFFFFFF, 0, 1]
    got = inject([q.pkt(RC_SEND_ONLY, p, ackreq=1, payload=pattern(p & 0xFF, 100).hex())
                  for p in psns])
    expect("psn-wrap-acked", answers(got, q), [(RC_ACK, p, 0) for p in psns])
    wcs = poll()
    expect("psn-wrap-completes", [(w.wr_id, w.status, w.byte_len) for w in wcs],
           [(20 + i, e.IBV_WC_SUCCESS, 100) for i in range(4)])
    expect("psn-wrap-data", [mr.read(100, 256 * i) for i in range(4)],
           [pattern(p & 0xFF, 100) for p in psns])
    got = inject([q.pkt(RC_SEND_ONLY, 0xFFFFFF, ackreq=1, payload=pattern(0, 100).hex())])
    expect("psn-wrap-duplicate-acked", answers(got, q), [(RC_ACK, 1, 0)])
    expect("psn-wrap-duplicate-no-completion", len(poll()), 0)
    expect("psn-wrap-qp-rts", q.state(), "RTS")

def case_uc_too_long():
    fill_all()
    q = Rc(qp_type=e.IBV_QPT_UC, access=RW)
    q.recv(30, 0, 64)
    q.recv(31, 4096, 64)
    first, last = pattern(21, 1024), pattern(22, 100)
    inject([q.pkt(UC_SEND_FIRST, q.epsn, payload=first.hex()),
            q.pkt(UC_SEND_LAST, q.epsn + 1, payload=last.hex())])
    wcs = [(w.wr_id, w.status) for w in poll()]
    log(f"uc-send-too-long on {DRIVER}: completions {wcs}")
    if DRIVER == "rrxe":
        expect("uc-send-too-long-len-err", wcs, [(30, e.IBV_WC_LOC_LEN_ERR)])
    # Nothing lands past the receive buffer, whatever the driver does.
    expect("uc-send-too-long-outside-untouched", mr.read(MR_SIZE - 64, 64),
           pattern(1, MR_SIZE)[64:])
    if DRIVER != "rrxe":
        # rdma_rxe 7.2 completes the receive with LOC_QP_OP_ERR and moves
        # the QP to ERR (its result, printed above); rrxe keeps the UC QP.
        log(f"uc-send-too-long on {DRIVER}: QP {q.state()} afterwards")
        return
    msg = pattern(23, 32)
    inject([q.pkt(UC_SEND_ONLY, q.epsn + 2, payload=msg.hex())])
    wcs = poll()
    expect("uc-send-next-delivered", [(w.wr_id, w.status, w.byte_len) for w in wcs],
           [(31, e.IBV_WC_SUCCESS, 32)])
    expect("uc-send-next-data", mr.read(32, 4096), msg)
    expect("uc-qp-rts", q.state(), "RTS")

def case_rnr_timer():
    # A SEND with no receive posted: RNR NAK whose AETH carries the QP's
    # min_rnr_timer in its 5 timer bits (IBTA 9.7.5.2.8). A value above 31
    # (ib_core and rdma_rxe accept any u8) keeps its low 5 bits, as
    # rdma_rxe's responder does; it must not spill into the NAK code.
    for timer in (12, 0x45):
        q = Rc(min_rnr_timer=timer)
        msg = pattern(31, 48)
        pkt = q.pkt(RC_SEND_ONLY, q.epsn, ackreq=1, payload=msg.hex())
        got = inject([pkt])
        expect(f"rnr-timer-{timer:#x}-nak", answers(got, q), [(RC_ACK, q.epsn, 0x20 | timer & 0x1F)])
        expect(f"rnr-timer-{timer:#x}-qp-rts", q.state(), "RTS")
        q.recv(60, 0, 256)
        got = inject([pkt])
        expect(f"rnr-timer-{timer:#x}-retry-acked", answers(got, q), [(RC_ACK, q.epsn, 0)])
        expect(f"rnr-timer-{timer:#x}-retry-completes",
               [(w.wr_id, w.status, w.byte_len) for w in poll()], [(60, e.IBV_WC_SUCCESS, 48)])
        expect(f"rnr-timer-{timer:#x}-data", mr.read(48, 0), msg)

def case_reset_timers():
    # Review suspicion S2: RESET must cancel the retransmit timer. Life 1
    # sends with a 0.5 s ACK timeout and gets no ACK; RESET and back to RTS
    # with an 8.6 s timeout and no retries; life 2 sends. A timer left over
    # from life 1 would fire at 0.5 s and, with no retry left, fail life
    # 2's SEND with RETRY_EXC_ERR long before its own timeout.
    q = Rc(timeout=17)
    def send(wr_id):
        q.qp.post_send(SendWR(wr_id=wr_id, opcode=e.IBV_WR_SEND, num_sge=1,
                              sg=[SGE(mr.buf, 32, mr.lkey)], send_flags=e.IBV_SEND_SIGNALED))
    send(90)
    q.reset()
    q.connect(timeout=21, retry_cnt=0, sq_psn=0x200)
    send(91)
    got = inject([], listen=2.0)
    expect("reset-timers-no-early-completion", [(w.wr_id, w.status) for w in poll()], [])
    expect("reset-timers-qp-rts", q.state(), "RTS")
    sent = sorted(g["psn"] for g in got if g["qpn"] == q.peer_qpn and g["op"] == RC_SEND_ONLY)
    log(f"reset-timers: SENDs seen at PSNs {[hex(p) for p in sent]}")
    if DRIVER != "rrxe":
        # rdma_rxe 7.2 sends life 2's SEND at PSN 0x201, not at its SQ PSN
        # 0x200 (measured 2026-12-03): shown, not judged.
        inject([dict(op=RC_ACK, qpn=q.qpn, psn=max(sent or [0x200]), aeth=[0x1F, 1])], listen=0.2)
        log(f"reset-timers on {DRIVER}: completions {[(w.wr_id, w.status) for w in poll()]}")
        return
    # Life 2's SEND went out once, at its SQ PSN.
    expect("reset-timers-life2-sent-once", [p for p in sent if p != 0x100], [0x200])
    inject([dict(op=RC_ACK, qpn=q.qpn, psn=0x200, aeth=[0x1F, 1])], listen=0.2)
    expect("reset-timers-acked", [(w.wr_id, w.status) for w in poll()], [(91, e.IBV_WC_SUCCESS)])

def ud_qp(qkey=0x11111111):
    qp = QP(pd, QPInitAttr(qp_type=e.IBV_QPT_UD, scq=cq, rcq=cq,
            cap=QPCap(max_send_wr=4, max_recv_wr=4, max_send_sge=1, max_recv_sge=1)))
    a = QPAttr()
    a.qp_state, a.pkey_index, a.port_num, a.qkey = e.IBV_QPS_INIT, 0, 1, qkey
    qp.modify(a, e.IBV_QP_STATE | e.IBV_QP_PKEY_INDEX | e.IBV_QP_PORT | e.IBV_QP_QKEY)
    a = QPAttr()
    a.qp_state = e.IBV_QPS_RTR
    qp.modify(a, e.IBV_QP_STATE)
    a = QPAttr()
    a.qp_state, a.sq_psn = e.IBV_QPS_RTS, 0
    qp.modify(a, e.IBV_QP_STATE | e.IBV_QP_SQ_PSN)
    return qp

def case_ud_ah_pd():
    gr = GlobalRoute(dgid=GID(PEER_GID), sgid_index=gidx, hop_limit=64)
    for name, ah_pd, want in (("other-pd", pd2, e.IBV_WC_LOC_QP_OP_ERR),
                              ("own-pd", pd, e.IBV_WC_SUCCESS)):
        qp = ud_qp()
        ah = AH(ah_pd, attr=AHAttr(port_num=1, is_global=1, gr=gr))
        wr = SendWR(wr_id=40, opcode=e.IBV_WR_SEND, num_sge=1, sg=[SGE(mr.buf, 16, mr.lkey)],
                    send_flags=e.IBV_SEND_SIGNALED)
        wr.set_wr_ud(ah, 0x4703, 0x11111111)
        qp.post_send(wr)
        got = inject([], listen=0.5)
        got_st = [w.status for w in poll()]
        if DRIVER != "rrxe" and want != e.IBV_WC_SUCCESS:
            # rdma_rxe reports the refused WQE as flushed (WR_FLUSH_ERR).
            log(f"ud-ah-{name} on {DRIVER}: {got_st}")
            result(f"ud-ah-{name}-status", len(got_st) == 1 and got_st[0] != e.IBV_WC_SUCCESS,
                   f"got {got_st!r}, want one error")
        else:
            expect(f"ud-ah-{name}-status", got_st, [want])
        sent = [g for g in got if g["qpn"] == 0x4703]
        expect(f"ud-ah-{name}-on-wire", len(sent), 1 if want == e.IBV_WC_SUCCESS else 0)

def case_route_change():
    # VM 1 is the requester here: its SENDs go out through the QP's cached
    # route, which must be looked up again once the routes change.
    import subprocess
    # A 0.5 s ACK timeout: the half second of the changed route costs at most one retry.
    q = Rc(timeout=17, peer_gid=v4_gid(ALT_IP))
    def send(wr_id):
        wr = SendWR(wr_id=wr_id, opcode=e.IBV_WR_SEND, num_sge=1,
                    sg=[SGE(mr.buf, 32, mr.lkey)], send_flags=e.IBV_SEND_SIGNALED)
        q.qp.post_send(wr)
    def sends(got):
        return [g["psn"] for g in got if g["qpn"] == q.peer_qpn and g["op"] == RC_SEND_ONLY]
    send(50)
    got = inject([], listen=0.5)
    expect("route-send-before", sorted(set(sends(got))), [0x100])
    inject([dict(op=RC_ACK, qpn=q.qpn, psn=0x100, aeth=[0x1F, 1], src=ALT_IP)], listen=0.2)
    expect("route-send-before-acked", [(w.wr_id, w.status) for w in poll()], [(50, e.IBV_WC_SUCCESS)])
    # A host route through a gateway that does not exist. (Not a blackhole
    # or unreachable route: a lookup bound to eth0 that finds one assumes
    # the destination is on link and sends anyway.)
    gone = PEER_IP.rsplit(".", 1)[0] + ".250"
    detour = ["ip", "route", "add", ALT_IP + "/32", "via", gone, "dev", "eth0"]
    subprocess.run(detour, check=True)
    try:
        send(51)
        got = inject([], listen=0.5)
        expect("route-changed-nothing-arrives", sends(got), [])
    finally:
        subprocess.run(["ip", "route", "del", ALT_IP + "/32"], check=True)
    # The retransmit timer finds the route again.
    got = inject([], listen=1.2)
    expect("route-restored-resent", sorted(set(sends(got))), [0x101])
    inject([dict(op=RC_ACK, qpn=q.qpn, psn=0x101, aeth=[0x1F, 2], src=ALT_IP)], listen=0.2)
    expect("route-restored-acked", [(w.wr_id, w.status) for w in poll()], [(51, e.IBV_WC_SUCCESS)])

def detour():
    """A host route to VM 2's second address through a gateway that does
    not exist; the cached routes to it go stale. (Not a blackhole or
    unreachable route: a lookup bound to eth0 that finds one assumes the
    destination is on link and sends anyway.)"""
    import contextlib, subprocess
    gone = PEER_IP.rsplit(".", 1)[0] + ".250"
    @contextlib.contextmanager
    def cm():
        subprocess.run(["ip", "route", "add", ALT_IP + "/32", "via", gone, "dev", "eth0"], check=True)
        try:
            yield
        finally:
            subprocess.run(["ip", "route", "del", ALT_IP + "/32"], check=True)
    return cm()

def case_route_responder():
    # VM 1 only responds: its ACKs go out through the QP's cached route,
    # which must be looked up again when a request arrives after a change.
    q = Rc(peer_gid=v4_gid(ALT_IP))
    for i in range(3):
        q.recv(70 + i, 256 * i, 256)
    def send(psn):
        return inject([q.pkt(RC_SEND_ONLY, psn, ackreq=1, src=ALT_IP,
                             payload=pattern(psn & 0xFF, 32).hex())], listen=0.5)
    expect("route-responder-acked-before", answers(send(q.epsn), q), [(RC_ACK, q.epsn, 0)])
    with detour():
        expect("route-responder-changed-no-ack", answers(send(q.epsn + 1), q), [])
    # The duplicate of the SEND whose ACK went astray is acknowledged again.
    expect("route-responder-restored-acked", answers(send(q.epsn + 1), q), [(RC_ACK, q.epsn + 1, 0)])
    expect("route-responder-completes", [(w.wr_id, w.status) for w in poll()],
           [(70, e.IBV_WC_SUCCESS), (71, e.IBV_WC_SUCCESS)])

def case_route_ud():
    # A UD AH caches its route: after a change the next datagram must take
    # the new one (rdma_rxe looks a UD route up for every packet).
    qp = ud_qp()
    gr = GlobalRoute(dgid=GID(v4_gid(ALT_IP)), sgid_index=gidx, hop_limit=64)
    ah = AH(pd, attr=AHAttr(port_num=1, is_global=1, gr=gr))
    def send(wr_id):
        wr = SendWR(wr_id=wr_id, opcode=e.IBV_WR_SEND, num_sge=1, sg=[SGE(mr.buf, 16, mr.lkey)],
                    send_flags=e.IBV_SEND_SIGNALED)
        wr.set_wr_ud(ah, 0x4704, 0x11111111)
        qp.post_send(wr)
        got = inject([], listen=0.5)
        return [w.status for w in poll()], len([g for g in got if g["qpn"] == 0x4704])
    expect("route-ud-before", send(80), ([e.IBV_WC_SUCCESS], 1))
    with detour():
        # Sent (a UD datagram completes when it leaves), but not to VM 2.
        expect("route-ud-changed-nothing-arrives", send(81), ([e.IBV_WC_SUCCESS], 0))
    expect("route-ud-restored", send(82), ([e.IBV_WC_SUCCESS], 1))

CASES = [case_dup_read, case_reth_len, case_write_access, case_atomic_keys, case_wrong_transport,
         case_pkey, case_qkey, case_psn_wrap, case_uc_too_long, case_ud_ah_pd,
         case_rnr_timer, case_reset_timers, case_route_change, case_route_responder,
         case_route_ud]
only = sys.argv[7:]
for c in CASES:
    if only and c.__name__[5:] not in only:
        continue
    log(f"== {c.__name__[5:]}")
    try:
        c()
    except Exception as ex:
        import traceback
        traceback.print_exc()
        result(c.__name__[5:].replace("_", "-") + "-ran", False, repr(ex))
ctl.sendall(b'{"end": 1}\n')
log(f"{failed} failed")
EOF

verdict() { echo "$detail"; [ "$1" = pass ]; }
if [ "$VM" = 1 ]; then
	check "link-add-vm1" rdma_up
	barrier ready
	mkfifo /tmp/hostile_peer.out
	CTL_PORT=$CTL_PORT timeout 300 python3 /tmp/hostile_peer.py 1 "$IBDEV" "$MY_IP" "$PEER_IP" \
		"$DRIVER" "$(gid_index "$IBDEV" "$MY_IP")" ${HOSTILE_CASES:-} >/tmp/hostile_peer.out 2>&1 &
	pid=$!
	while IFS= read -r line; do
		case $line in
		"RESULT "*)
			read -r _ name v detail <<<"$line"
			check "$name" verdict "$v"
			;;
		*) echo "    $line" ;;
		esac
	done </tmp/hostile_peer.out
	check "program-completed-vm1" wait "$pid"
	check "still-active" wait_port_active "$IBDEV" 5
	check "link-delete-vm1" rdma link delete "$IBDEV"
else
	check "alt-address-vm2" ip addr add "$ALT_IP/32" dev eth0
	# No RDMA device here: the injector owns UDP 4791.
	check "no-roce-socket-vm2" bash -c "! ss -ulnH 'sport = :4791' | grep -q 4791"
	ping -c1 -W1 "$PEER_IP" >/dev/null
	barrier ready
	check "injector-vm2" env CTL_PORT=$CTL_PORT timeout 300 python3 /tmp/hostile_peer.py 2 \
		"$IBDEV" "$MY_IP" "$PEER_IP" "$DRIVER"
fi
finish
