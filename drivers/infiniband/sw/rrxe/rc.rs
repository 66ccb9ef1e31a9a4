// SPDX-License-Identifier: GPL-2.0

#![forbid(unsafe_code)]

//! The reliable-connection transport (IBTA Vol 1 chapter 9): requester,
//! completer and responder of a QP, for SEND, SEND with immediate, RDMA
//! WRITE and RDMA WRITE with immediate, RDMA READ, the atomics CmpSwap
//! and FetchAdd, and ATOMIC WRITE (IBTA Vol 1 Annex A19).
//!
//! All three run with the QP's state lock held and leave the packets they
//! build on the QP's transmit queue; the caller sends them after dropping
//! the lock ([`super::tx::send_queued`]).
//!
//! - The **requester** ([`run_requester`]) walks the send queue from
//!   `req.next`, cuts each WQE into packets of the path MTU and sends until
//!   [`MAX_UNACKED_PSNS`] packets are outstanding. Each WQE gets its PSN
//!   range the first time it is started; a retransmission rewinds `req` to
//!   a PSN inside that range and sends the same packets again.
//! - The **completer** ([`on_ack`], [`on_timer`]) retires WQEs whose last
//!   PSN is acknowledged, in order, rewinds on a PSN sequence NAK or a
//!   local ACK timeout (counted against `retry_cnt`), waits out RNR NAKs on
//!   the RNR timer (counted against `rnr_retry`, 7 = forever), and turns
//!   any other NAK or an exhausted retry count into an error completion
//!   that moves the QP to ERR.
//! - The **responder** ([`on_request`]) accepts exactly the expected PSN,
//!   re-acknowledges duplicates, NAKs the first packet past a gap, checks
//!   opcode sequence, lengths, keys and permissions before touching memory,
//!   answers RNR when no receive WQE is posted, and acknowledges when the
//!   requester asks (AckReq). An atomic is executed once: its original
//!   value is kept by PSN ([`AtomicReplies`]) and a retransmitted request
//!   gets the same atomic acknowledge again. A READ is answered as a
//!   stream ([`ReadStream`]) that goes out as transmit credit allows;
//!   requests arriving meanwhile wait on the QP's `rxq` and are handled
//!   after it, in order ([`resume_responder`]).
//!
//! Requester and READ responder stop while the QP's packets in flight and
//! queued reach the transmit credit's high-water mark (64, as rdma_rxe);
//! the QP's kick resumes them when fewer than 16 are left.
//!
//! WQEs are snapshots: the requester copies a send WQE out of the shared
//! queue before using it, and keeps what completion needs (`WqeMeta`) in
//! kernel memory, so that user space rewriting its queue cannot change
//! what the kernel does except with its own data.

use crate::{
    proto::{
        aeth::{
            Aeth,
            NakCode,
            Syndrome, //
        },
        atmack::AtomicAckEth,
        atmeth::AtomicEth,
        bth::{
            Bth,
            DEFAULT_PKEY, //
        },
        feth::Feth,
        icrc::UDP_HDR_LEN,
        ieth::Ieth,
        immdt::ImmDt,
        opcode::{
            MessageKind,
            Opcode,
            Operation,
            Position,
            Transport, //
        },
        packet::{
            parse_packet,
            ExtHeaders,
            Packet, //
        },
        psn::{
            Psn,
            PsnRegion, //
        },
        rc::{
            self,
            AtomicReplies,
            InProgress,
            ReadHistory,
            ReadStream,
            MAX_UNACKED_PSNS, //
        },
        reth::Reth,
        segment::{
            packet_count,
            segment_at,
            PathMtu, //
        },
        wqe::{
            self,
            RecvWqe,
            SendWqe, //
        },
    },
    rdma::{
        qp::{
            qp_state,
            qp_type,
            Qp,
            QpTimer, //
        },
        trace::{
            self,
            RetransmitReason, //
        },
        wc::{
            Wc,
            WcStatus, //
        },
    },
};
use kernel::prelude::*;

use super::{
    cq::RrxeCq,
    hw_counters::{
        qp_counts,
        Counter, //
    },
    mem::{
        self,
        MemError,
        Need,
        Via, //
    },
    mr::{
        access,
        RrxeMr, //
    },
    mw::{
        is_mw_key,
        RrxeMw, //
    },
    qp::State,
    srq::RrxeSrq,
    tx::TxCtx,
    verbs::Rrxe, //
};

/// `IB_WC_SEND`.
const WC_SEND: u32 = 0;
/// `IB_WC_RDMA_WRITE`.
const WC_RDMA_WRITE: u32 = 1;
/// `IB_WC_RDMA_READ`.
const WC_RDMA_READ: u32 = 2;
/// `IB_WC_COMP_SWAP`.
const WC_COMP_SWAP: u32 = 3;
/// `IB_WC_FETCH_ADD`.
const WC_FETCH_ADD: u32 = 4;
/// `IB_WC_FLUSH`.
const WC_FLUSH: u32 = 8;
/// `IB_WC_ATOMIC_WRITE`.
const WC_ATOMIC_WRITE: u32 = 9;
/// `IB_WC_RECV`.
pub(crate) const WC_RECV: u32 = 1 << 7;
/// `IB_WC_RECV_RDMA_WITH_IMM`.
const WC_RECV_RDMA_WITH_IMM: u32 = WC_RECV + 1;
/// `IB_WC_LOCAL_INV`.
const WC_LOCAL_INV: u32 = 6;
/// `IB_WC_REG_MR`.
const WC_REG_MR: u32 = 10;
/// `IB_WC_BIND_MW`.
const WC_BIND_MW: u32 = 5;
/// `IB_WC_WITH_IMM`.
const WC_WITH_IMM: u32 = 1 << 1;
/// `IB_WC_WITH_INVALIDATE`.
const WC_WITH_INVALIDATE: u32 = 1 << 2;

/// What the completer needs of a started send WQE, kept out of user reach.
#[derive(Clone, Copy, Default)]
pub(crate) struct WqeMeta {
    wr_id: u64,
    wc_opcode: u32,
    signaled: bool,
    len: u32,
    first_psn: Psn,
    last_psn: Psn,
    /// The path MTU of the WQE's packets, fixed at its first one: its
    /// PSNs and their offsets stay as sent, and a retransmission repeats
    /// the same packets, even if the QP's MTU has shrunk since.
    mtu: PathMtu,
    /// An RDMA READ or an atomic: completed only by its responses (READ
    /// responses, the atomic acknowledge), never by a plain ACK.
    rd_atomic: bool,
    /// An atomic (CmpSwap, FetchAdd).
    atomic: bool,
    /// An ATOMIC WRITE or a FLUSH: completed by its READ response without
    /// data.
    empty_read_response: bool,
    /// A local operation (REG_MR, LOCAL_INV), executed when started; it
    /// completes once it is the oldest WQE ([`complete_local_ops`]).
    local: bool,
    /// The local operation failed: it completes in error, which moves the
    /// QP to ERR, and the requester goes no further.
    failed: bool,
    /// A SEND (with immediate or invalidate): counted in `rdma_sends` when
    /// it completes, successfully or not, as the C driver's completer does.
    send: bool,
}

/// Requester and completer state.
#[derive(Default)]
pub(crate) struct Req {
    /// PSN of the next packet to send.
    psn: Psn,
    /// Send queue index of the WQE being sent.
    next: u32,
    /// Bytes of WQE `next` already sent.
    offset: u32,
    /// One past the last send queue index ever started.
    started_end: u32,
    /// Oldest unacknowledged PSN.
    comp_psn: Psn,
    /// One past the highest PSN sent.
    sent_end: Psn,
    /// Transport retries left (`retry_cnt`).
    retry_left: u8,
    /// RNR retries left (`rnr_retry`).
    rnr_left: u8,
    /// Waiting for the RNR timer.
    rnr_wait: bool,
    /// The retransmit timer is armed.
    timer_armed: bool,
    /// RDMA READs and atomics started and not completed.
    reads_in_flight: u32,
    /// A READ response was missing and the READ was asked again.
    read_gap: bool,
}

/// The receive WQE a SEND (or WRITE with immediate) is placed into; its
/// bytes are in `State::rq_snap`.
#[derive(Clone, Copy)]
pub(crate) struct RecvCtx {
    wr_id: u64,
    num_sge: u32,
    /// Bytes placed so far.
    offset: u32,
    /// Taken from the SRQ (already consumed there).
    from_srq: bool,
}

/// Responder state.
#[derive(Default)]
pub(crate) struct Resp {
    /// Expected PSN.
    epsn: Psn,
    /// Message sequence number: messages completed.
    msn: u32,
    /// The multi-packet message in progress.
    op: InProgress,
    /// The path MTU of that message, set by its FIRST packet.
    msg_mtu: u32,
    /// A PSN sequence NAK was sent for the current gap.
    nak_sent: bool,
    /// The receive WQE of the SEND in progress.
    recv: Option<RecvCtx>,
    /// RDMA WRITE in progress: next address, rkey, bytes left, total.
    write_va: u64,
    write_rkey: u32,
    write_resid: u32,
    write_len: u32,
    /// Original values of the atomics executed recently, for replay.
    atomics: AtomicReplies,
    /// The READ whose responses are being sent; requests that arrive
    /// meanwhile wait on the QP's `rxq`, so that they are answered after
    /// it, in PSN order.
    read: Option<ReadStream>,
    /// The READs accepted last, for duplicates.
    reads: ReadHistory,
}

impl Req {
    /// Resets the requester to `psn` with the retry counts of the QP.
    pub(crate) fn reset(&mut self, psn: Psn) {
        *self = Req {
            psn,
            comp_psn: psn,
            sent_end: psn,
            retry_left: self.retry_left,
            rnr_left: self.rnr_left,
            ..Req::default()
        };
    }

    /// The PSN of the next packet of a service without acknowledges (UD),
    /// advancing it.
    pub(crate) fn take_psn(&mut self) -> Psn {
        let p = self.psn;
        self.psn = p.next();
        p
    }

    /// Sets the retry counts (`retry_cnt`, `rnr_retry`).
    pub(crate) fn set_retries(&mut self, retry: Option<u8>, rnr: Option<u8>) {
        if let Some(r) = retry {
            self.retry_left = r;
        }
        if let Some(r) = rnr {
            self.rnr_left = r;
        }
    }
}

/// One driver detail of a QP for `rdma res show qp -dd`: name, value, and
/// whether it reads best in hexadecimal (PSNs).
pub(crate) type Detail = (&'static CStr, u32, bool);

/// The transport state `rdma res show qp -dd` shows of a connected QP,
/// beyond the attributes the RDMA core prints itself (the C driver shows
/// none): where the requester and responder stand and what they wait for.
pub(crate) fn details(st: &State) -> [Detail; 10] {
    let r = &st.req;
    [
        (c"sq_next_psn", r.psn.get(), true),
        (c"sq_unacked_psn", r.comp_psn.get(), true),
        (c"sq_unacked", rc::in_flight(r.comp_psn, r.sent_end), false),
        (c"retry_left", u32::from(r.retry_left), false),
        (c"rnr_retry_left", u32::from(r.rnr_left), false),
        (c"rnr_wait", u32::from(r.rnr_wait), false),
        (c"ack_timer", u32::from(r.timer_armed), false),
        (c"rd_atomic_in_flight", r.reads_in_flight, false),
        (c"rq_expected_psn", st.resp.epsn.get(), true),
        (c"msn", st.resp.msn, false),
    ]
}

impl Resp {
    /// Resets the responder to expect `psn`.
    pub(crate) fn reset(&mut self, psn: Psn) {
        *self = Resp {
            epsn: psn,
            ..Resp::default()
        };
    }

    /// Gives up the READ being answered (the QP leaves service).
    pub(crate) fn drop_read(&mut self) {
        self.read = None;
    }

    /// The SRQ receive WQE held by the responder, if any (to flush it).
    pub(crate) fn take_srq_recv(&mut self) -> Option<u64> {
        match self.recv {
            Some(r) if r.from_srq => {
                self.recv = None;
                Some(r.wr_id)
            }
            _ => None,
        }
    }
}

/// The QP's path MTU attribute, as set at RTR.
fn path_mtu(st: &State) -> PathMtu {
    PathMtu::from_ib_mtu(st.attr.path_mtu()).unwrap_or(PathMtu::Mtu256)
}

/// The path MTU of messages begun now: the QP's, or the port's active MTU
/// while the net device carries less (its MTU shrank after RTR). Packets
/// at the QP's MTU would be dropped by the IP stack at every retry, a
/// black hole ending in RETRY_EXC_ERR, as on the C driver, which keeps
/// the RTR value. A message already begun keeps its MTU ([`WqeMeta::mtu`]);
/// READs and their responses always use the QP's.
pub(crate) fn current_mtu(qp: &Qp<Rrxe>, st: &State) -> PathMtu {
    // From the net device itself, not the port's MTU: the net device
    // carries its new MTU before the notifier that updates the port runs.
    // The one the packets leave through, once resolved (a VLAN's MTU may
    // be lower than its parent's).
    let ndev_mtu = st
        .tx
        .as_ref()
        .map_or_else(|| qp.device().ndev().mtu(), TxCtx::netdev_mtu);
    let port = PathMtu::from_ib_mtu(super::mtu::active_mtu(ndev_mtu).to_ib_mtu());
    path_mtu(st).min(port.unwrap_or(PathMtu::Mtu256))
}

/// Responder: whether a request packet at `position` with `plen` bytes of
/// payload has a length to accept, noting the MTU of its message
/// ([`rc::message_mtu`]).
fn accept_payload_len(st: &mut State, position: Position, plen: u32) -> bool {
    let configured = path_mtu(st).bytes();
    match rc::message_mtu(position, plen, configured, st.resp.msg_mtu) {
        Some(mtu) => {
            st.resp.msg_mtu = mtu;
            true
        }
        None => false,
    }
}

/// The transmit context, resolved outside the lock by
/// `RrxeQp::prepare_tx` (a route lookup cannot run with interrupts off).
/// Without one, nothing is sent: the retransmit timer tries again.
fn tx_ctx<'a>(qp: &Qp<Rrxe>, st: &'a mut State) -> Option<&'a TxCtx> {
    if st.tx.is_none() {
        qp_counts(qp).inc(Counter::SendErr);
    }
    st.tx.as_ref()
}

/// A completion of `qp` with the fields every service sets alike.
pub(crate) fn wc(qp: &Qp<Rrxe>, wr_id: u64, status: WcStatus, opcode: u32, byte_len: u32) -> Wc {
    Wc {
        wr_id,
        status,
        opcode,
        byte_len,
        ex: 0,
        qp_num: qp.qp_num(),
        src_qp: 0,
        wc_flags: 0,
        pkey_index: 0,
        port_num: 1,
        network_hdr_type: None,
        vlan_id: None,
        qp: if qp.is_user() { 0 } else { qp.wc_qp() },
    }
}

/// Whether send queue index `a` comes before `b`, counting from the
/// oldest uncompleted WQE.
fn sq_before(st: &State, a: u32, b: u32) -> bool {
    let c = st.sq.consumer();
    st.sq.geo.count(a, c) < st.sq.geo.count(b, c)
}

fn meta(st: &State, idx: u32) -> WqeMeta {
    st.sq_meta.get(idx as usize).copied().unwrap_or_default()
}

/// Completes the oldest send WQE with `status` (always reported unless
/// successful and unsignaled).
fn complete_head(qp: &Qp<Rrxe>, st: &mut State, status: WcStatus) {
    let m = meta(st, st.sq.consumer());
    if m.send {
        qp_counts(qp).inc(Counter::RdmaSends);
    }
    if status != WcStatus::Success || m.signaled {
        let w = wc(qp, m.wr_id, status, m.wc_opcode, m.len);
        // An overrun is reported as a CQ error event by the CQ.
        let _ = RrxeCq::post(qp.send_cq(), &w, false);
    }
    st.sq.advance();
}

/// Moves the QP to ERR after an error completion: every other WQE is
/// flushed and the timers stop.
pub(crate) fn to_error(qp: &Qp<Rrxe>, st: &mut State) {
    trace::qp_state(qp.device(), qp.qp_num(), st.attr.qp_state(), qp_state::ERR);
    st.attr.set_qp_state(qp_state::ERR);
    st.attr.set_cur_qp_state(qp_state::ERR);
    st.attr.set_sq_draining(0);
    qp.cancel_timer(QpTimer::Retransmit);
    qp.cancel_timer(QpTimer::Rnr);
    super::qp::RrxeQp::flush(qp, st);
    super::qp::RrxeQp::last_wqe_reached(qp);
}

/// Completes the oldest send WQE in error and moves the QP to ERR.
fn fail_head(qp: &Qp<Rrxe>, st: &mut State, status: WcStatus) {
    if st.sq.count() > 0 {
        complete_head(qp, st, status);
    }
    to_error(qp, st);
}

/// Points the requester at `psn`: inside a started WQE, or at the first
/// WQE not started yet.
fn set_position(st: &mut State, psn: Psn) {
    let mut idx = st.sq.consumer();
    while sq_before(st, idx, st.req.started_end) {
        let m = meta(st, idx);
        if !psn.before(m.first_psn) && !psn.after(m.last_psn) {
            st.req.next = idx;
            let mtu = m.mtu.bytes();
            st.req.offset = m.first_psn.distance_to(psn).saturating_mul(mtu);
            st.req.psn = psn;
            return;
        }
        idx = st.sq.geo.next(idx);
    }
    st.req.next = st.req.started_end;
    st.req.offset = 0;
    st.req.psn = psn;
}

/// Retires, in order, every started WQE whose last PSN is at or before
/// `upto`; returns whether any was.
fn retire(qp: &Qp<Rrxe>, st: &mut State, upto: Psn) -> bool {
    let mut progress = false;
    while sq_before(st, st.sq.consumer(), st.req.started_end) {
        let m = meta(st, st.sq.consumer());
        if m.last_psn.after(upto) || m.rd_atomic || m.failed {
            break;
        }
        complete_head(qp, st, WcStatus::Success);
        progress = true;
    }
    progress
}

fn arm_retransmit(qp: &Qp<Rrxe>, st: &mut State) {
    if let Some(us) = rc::local_ack_timeout_usecs(st.attr.timeout()) {
        qp.arm_timer(QpTimer::Retransmit, us);
        st.req.timer_armed = true;
    }
}

/// What the requester sends for a WQE.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Work {
    /// A message of packets carrying the data.
    Msg(MessageKind),
    /// One READ request; the data comes back in READ responses.
    Read,
    /// One atomic request; the original value comes back in the atomic
    /// acknowledge.
    Atomic,
    /// One ATOMIC WRITE request carrying the 8-byte value; it is answered
    /// by a READ response without data (as rdma_rxe).
    AtomicWrite,
    /// One FLUSH request (FETH and RETH, no payload), answered likewise.
    Flush,
}

/// Work and completion opcode of a send WR opcode.
fn kind_of(opcode: u32) -> Option<(Work, u32)> {
    match opcode {
        wqe::IB_WR_SEND => Some((Work::Msg(MessageKind::Send), WC_SEND)),
        wqe::IB_WR_SEND_WITH_IMM => Some((Work::Msg(MessageKind::SendWithImm), WC_SEND)),
        wqe::IB_WR_RDMA_WRITE => Some((Work::Msg(MessageKind::RdmaWrite), WC_RDMA_WRITE)),
        wqe::IB_WR_RDMA_WRITE_WITH_IMM => {
            Some((Work::Msg(MessageKind::RdmaWriteWithImm), WC_RDMA_WRITE))
        }
        wqe::IB_WR_RDMA_READ => Some((Work::Read, WC_RDMA_READ)),
        wqe::IB_WR_SEND_WITH_INV => Some((Work::Msg(MessageKind::SendWithInv), WC_SEND)),
        wqe::IB_WR_ATOMIC_CMP_AND_SWP => Some((Work::Atomic, WC_COMP_SWAP)),
        wqe::IB_WR_ATOMIC_FETCH_AND_ADD => Some((Work::Atomic, WC_FETCH_ADD)),
        wqe::IB_WR_ATOMIC_WRITE => Some((Work::AtomicWrite, WC_ATOMIC_WRITE)),
        wqe::IB_WR_FLUSH => Some((Work::Flush, WC_FLUSH)),
        _ => None,
    }
}

/// Largest message (IBTA: 2^31 bytes).
const MAX_MSG_SIZE: u32 = 1 << 31;

/// Queues the READ request of the WQE at `req.next` for its packets from
/// `index` on (all of them, or the rest after a retry); `false` if it could
/// not be built.
fn send_read_request(
    qp: &Qp<Rrxe>,
    st: &mut State,
    w: &SendWqe,
    mtu: PathMtu,
    index: u32,
    count: u32,
) -> bool {
    let mtu = mtu.bytes();
    let done = index.saturating_mul(mtu).min(w.length);
    let ext = ExtHeaders {
        reth: Some(Reth {
            va: w.remote_addr.wrapping_add(u64::from(done)),
            rkey: w.rkey,
            dma_len: w.length - done,
        }),
        ..ExtHeaders::default()
    };
    // The responses take the PSNs of the packets still to come.
    queue_request(
        qp,
        st,
        Opcode::RC_RDMA_READ_REQUEST,
        &ext,
        count.saturating_sub(index).max(1),
        &[],
    )
}

/// Queues the one request packet of the WQE at `req.next` (a READ request,
/// an atomic or an ATOMIC WRITE with its value as `payload`), asking for an
/// acknowledge, whose responses take `psns` PSNs, and moves to the next
/// WQE; `false` if it could not be built (the retransmit timer tries again).
fn queue_request(
    qp: &Qp<Rrxe>,
    st: &mut State,
    opcode: Opcode,
    ext: &ExtHeaders,
    psns: u32,
    payload: &[u8],
) -> bool {
    let bth = Bth {
        opcode,
        pkey: DEFAULT_PKEY,
        dest_qpn: st.attr.dest_qp_num(),
        ack_req: true,
        psn: st.req.psn,
        ..Bth::default()
    };
    let Some(tx) = tx_ctx(qp, st) else {
        return false;
    };
    let built = tx.build(&bth, ext, payload.len(), |buf| {
        buf.get_mut(..payload.len())
            .ok_or(EINVAL)?
            .copy_from_slice(payload);
        Ok(())
    });
    let ok = match built {
        Ok(skb) => {
            qp.txq.push_back(skb);
            true
        }
        Err(_) => false,
    };
    if ok {
        st.req.psn = st.req.psn.add(psns);
        if st.req.sent_end.before(st.req.psn) {
            st.req.sent_end = st.req.psn;
        }
        st.req.next = st.sq.geo.next(st.req.next);
        st.req.offset = 0;
    }
    if !st.req.timer_armed {
        arm_retransmit(qp, st);
    }
    ok
}

/// Queues the atomic request of the WQE at `req.next` (CmpSwap or
/// FetchAdd, IBTA Vol 1 §9.4.5); `false` if it could not be built.
fn send_atomic_request(qp: &Qp<Rrxe>, st: &mut State, w: &SendWqe) -> bool {
    let (opcode, atmeth) = if w.opcode == wqe::IB_WR_ATOMIC_CMP_AND_SWP {
        (
            Opcode::RC_COMPARE_SWAP,
            AtomicEth {
                va: w.remote_addr,
                rkey: w.rkey,
                swap_add: w.swap,
                compare: w.compare_add,
            },
        )
    } else {
        (
            Opcode::RC_FETCH_ADD,
            AtomicEth {
                va: w.remote_addr,
                rkey: w.rkey,
                swap_add: w.compare_add,
                compare: 0,
            },
        )
    };
    let ext = ExtHeaders {
        atmeth: Some(atmeth),
        ..ExtHeaders::default()
    };
    queue_request(qp, st, opcode, &ext, 1, &[])
}

/// Queues the ATOMIC WRITE request of the WQE at `req.next` (IBTA Vol 1
/// Annex A19): a RETH for the 8 bytes at the remote address and the value
/// itself, as the provider stored it in the WQE; `false` if it could not be
/// built.
fn send_atomic_write_request(qp: &Qp<Rrxe>, st: &mut State, w: &SendWqe) -> bool {
    let Ok(value) = wqe::send_atomic_write_value(&st.sq_snap) else {
        return false;
    };
    let ext = ExtHeaders {
        reth: Some(Reth {
            va: w.remote_addr,
            rkey: w.rkey,
            // CAST: 8.
            dma_len: wqe::ATOMIC_WRITE_SIZE as u32,
        }),
        ..ExtHeaders::default()
    };
    queue_request(qp, st, Opcode::RC_ATOMIC_WRITE, &ext, 1, &value)
}

/// Queues the FLUSH request of the WQE at `req.next` (IBTA Vol 1 Annex
/// A19): the FETH with the placement type and selectivity, and a RETH for
/// the range (librxe, like the C requester, keeps the length in
/// `dma.length`); no payload. `false` if it could not be built.
fn send_flush_request(qp: &Qp<Rrxe>, st: &mut State, w: &SendWqe) -> bool {
    let ext = ExtHeaders {
        // The FETH fields are 4 and 2 bits wide: the rest of the user's
        // bytes is dropped, as the C requester's `feth_init` masks them.
        feth: Some(Feth {
            placement_type: w.flush_type & 0xf,
            selectivity: w.flush_level & 0x3,
        }),
        reth: Some(Reth {
            va: w.remote_addr,
            rkey: w.rkey,
            dma_len: w.length,
        }),
        ..ExtHeaders::default()
    };
    queue_request(qp, st, Opcode::RC_FLUSH, &ext, 1, &[])
}

/// Sends what the send queue and the window allow.
pub(crate) fn run_requester(qp: &Qp<Rrxe>, st: &mut State, sq_sig_all: bool) {
    send_requests(qp, st, sq_sig_all);
    check_sq_drained(qp, st);
}

/// In SQD, once every message started before the move has completed (all
/// its packets acknowledged, its responses in), the send queue is drained:
/// `sq_draining` clears and SQ Drained is reported (IBTA Vol 1 §10.3.1;
/// as the C driver's requester and completer check after each step).
fn check_sq_drained(qp: &Qp<Rrxe>, st: &mut State) {
    if st.attr.qp_state() != qp_state::SQD || st.attr.sq_draining() == 0 {
        return;
    }
    let idle = st.req.offset == 0
        && !sq_before(st, st.sq.consumer(), st.req.started_end)
        && st.req.comp_psn == st.req.psn;
    if idle {
        st.attr.set_sq_draining(0);
        // Reported once the state lock is released, as every caller does
        // (`RrxeQp::report_events`).
        super::qp::RrxeQp::sq_drained(qp);
    }
}

/// The requester: sends the packets of the WQEs at `req.next` while the
/// window, the transmit credit and `max_rd_atomic` allow. In SQD it only
/// finishes (or sends again) the messages already started.
fn send_requests(qp: &Qp<Rrxe>, st: &mut State, sq_sig_all: bool) {
    let draining = match st.attr.qp_state() {
        qp_state::RTS => false,
        qp_state::SQD => true,
        _ => return,
    };
    if st.req.rnr_wait {
        return;
    }
    if !complete_local_ops(qp, st) {
        return;
    }
    let dev = qp.device();
    let pd_id = qp.pd_id();
    // UC sends without acknowledges: no window, and a WQE completes once
    // its last packet is queued.
    let uc = qp.qp_type() == qp_type::UC;
    let transport = if uc { Transport::Uc } else { Transport::Rc };
    loop {
        if !uc && rc::in_flight(st.req.comp_psn, st.req.psn) >= MAX_UNACKED_PSNS {
            break;
        }
        // Resumed from the QP's kick when transmit credit comes back.
        if !super::tx::tx_room(qp) {
            break;
        }
        let idx = st.req.next;
        if st.sq.geo.is_empty(st.sq.producer(), idx) {
            break;
        }
        if draining && !sq_before(st, idx, st.req.started_end) {
            break;
        }
        if st.snap_index != Some(idx) {
            let State { sq, sq_snap, .. } = &mut *st;
            if sq.read_slot(idx, sq_snap).is_err() {
                break;
            }
            st.snap_index = Some(idx);
        }
        if let Some(w) = local_op_of(&st.sq_snap) {
            if run_local_op(qp, st, idx, &w, sq_sig_all) {
                continue;
            }
            break;
        }
        let parsed = SendWqe::parse(&st.sq_snap)
            .ok()
            .and_then(|w| kind_of(w.opcode).map(|k| (w, k)))
            .filter(|(w, (work, _))| {
                // A FLUSH's length is a range, not a message size: sent
                // as the C requester sends it (the responder refuses one
                // past 2^31, C9-94).
                (w.length <= MAX_MSG_SIZE || *work == Work::Flush)
                    && !(uc
                        && matches!(
                            *work,
                            Work::Read
                                | Work::Atomic
                                | Work::AtomicWrite
                                | Work::Flush
                                | Work::Msg(MessageKind::SendWithInv)
                        ))
                    // An atomic reads and writes one aligned 8-byte word.
                    && (*work != Work::Atomic || (w.length >= 8 && w.remote_addr & 7 == 0))
                    // An ATOMIC WRITE carries exactly its 8-byte value (the
                    // provider sets the length to 8).
                    && (*work != Work::AtomicWrite || w.length as usize == wqe::ATOMIC_WRITE_SIZE)
            });
        let Some((w, (work, wc_opcode))) = parsed else {
            // A WQE rxe cannot execute completes in error once it is the oldest.
            if idx == st.sq.consumer() {
                // `wr_id` is the first field of every send WQE.
                let wr_id = st
                    .sq_snap
                    .first_chunk::<8>()
                    .map_or(0, |b| u64::from_ne_bytes(*b));
                let m = WqeMeta {
                    wr_id,
                    ..WqeMeta::default()
                };
                if let Some(slot) = st.sq_meta.get_mut(idx as usize) {
                    *slot = m;
                }
                fail_head(qp, st, WcStatus::LocQpOpErr);
            }
            break;
        };
        let atomic = work == Work::Atomic;
        let empty_read_response = matches!(work, Work::AtomicWrite | Work::Flush);
        let pmtu = if sq_before(st, idx, st.req.started_end) {
            meta(st, idx).mtu
        } else if work == Work::Read {
            // The responder spends the PSNs this end reserves for the
            // responses: both count them at the MTU agreed at RTR.
            path_mtu(st)
        } else {
            current_mtu(qp, st)
        };
        let count = if atomic || empty_read_response {
            1
        } else {
            packet_count(w.length, pmtu)
        };
        // An ATOMIC WRITE or FLUSH counts against `max_rd_atomic` like a
        // READ (the C requester counts ATOMIC WRITE, not FLUSH; both use a
        // responder resource).
        let rd_atomic = atomic || empty_read_response || work == Work::Read;
        if st.req.offset == 0 {
            if sq_before(st, idx, st.req.started_end) {
                st.req.psn = meta(st, idx).first_psn;
            } else {
                // At most `max_rd_atomic` READs and atomics outstanding (at
                // least one).
                if rd_atomic && st.req.reads_in_flight >= u32::from(st.attr.max_rd_atomic()).max(1)
                {
                    break;
                }
                let m = WqeMeta {
                    wr_id: w.wr_id,
                    wc_opcode,
                    signaled: sq_sig_all || w.send_flags & wqe::IB_SEND_SIGNALED != 0,
                    len: w.length,
                    first_psn: st.req.psn,
                    last_psn: st.req.psn.add(count - 1),
                    mtu: pmtu,
                    rd_atomic,
                    atomic,
                    empty_read_response,
                    send: matches!(
                        work,
                        Work::Msg(
                            MessageKind::Send | MessageKind::SendWithImm | MessageKind::SendWithInv
                        )
                    ),
                    ..WqeMeta::default()
                };
                if rd_atomic {
                    st.req.reads_in_flight += 1;
                }
                match st.sq_meta.get_mut(idx as usize) {
                    Some(slot) => *slot = m,
                    None => break,
                }
                st.req.started_end = st.sq.geo.next(idx);
            }
        }
        let index = st.req.offset / pmtu.bytes();
        if let Work::Read = work {
            if !send_read_request(qp, st, &w, pmtu, index, count) {
                break;
            }
            continue;
        }
        if atomic {
            if !send_atomic_request(qp, st, &w) {
                break;
            }
            continue;
        }
        if work == Work::AtomicWrite {
            if !send_atomic_write_request(qp, st, &w) {
                break;
            }
            continue;
        }
        if work == Work::Flush {
            if !send_flush_request(qp, st, &w) {
                break;
            }
            continue;
        }
        let Work::Msg(kind) = work else {
            break;
        };
        let Some(seg) = segment_at(w.length, pmtu, index) else {
            break;
        };
        let Some(opcode) = Opcode::for_message(transport, kind, seg.position) else {
            break;
        };
        let last = matches!(seg.position, Position::Last | Position::Only);
        let first = matches!(seg.position, Position::First | Position::Only);
        let bth = Bth {
            opcode,
            se: last && w.send_flags & wqe::IB_SEND_SOLICITED != 0,
            pkey: DEFAULT_PKEY,
            dest_qpn: st.attr.dest_qp_num(),
            ack_req: !uc && rc::wants_ack(index, count),
            psn: st.req.psn,
            ..Bth::default()
        };
        let mut ext = ExtHeaders::default();
        let is_write = matches!(kind, MessageKind::RdmaWrite | MessageKind::RdmaWriteWithImm);
        if first && is_write {
            ext.reth = Some(Reth {
                va: w.remote_addr,
                rkey: w.rkey,
                dma_len: w.length,
            });
        }
        if last
            && matches!(
                kind,
                MessageKind::SendWithImm | MessageKind::RdmaWriteWithImm
            )
        {
            ext.immdt = Some(ImmDt {
                imm_data: w.imm_data.to_ne_bytes(),
            });
        }
        if last && kind == MessageKind::SendWithInv {
            ext.ieth = Some(Ieth {
                rkey: w.invalidate_rkey,
            });
        }
        let Some(_) = tx_ctx(qp, st) else {
            // No route yet: the timer (which resolves it) tries again.
            if !st.req.timer_armed {
                arm_retransmit(qp, st);
            }
            break;
        };
        let mut gather_err = None;
        let built = {
            let State { tx, sq_snap, .. } = &*st;
            let Some(tx) = tx.as_ref() else {
                break;
            };
            tx.build(&bth, &ext, seg.len as usize, |buf| {
                mem::gather(
                    dev,
                    pd_id,
                    sq_snap,
                    w.has_inline(),
                    w.length,
                    w.num_sge,
                    seg.offset,
                    buf,
                )
                .map_err(|e| {
                    gather_err = Some(e);
                    EFAULT
                })
            })
        };
        let skb = match built {
            Ok(skb) => skb,
            Err(_) => {
                if let Some(e) = gather_err {
                    if idx == st.sq.consumer() && index == 0 {
                        let status = match e {
                            MemError::Length => WcStatus::LocLenErr,
                            _ => WcStatus::LocProtErr,
                        };
                        fail_head(qp, st, status);
                    }
                } else if !st.req.timer_armed {
                    // Out of memory: the retransmit timer tries again.
                    arm_retransmit(qp, st);
                }
                break;
            }
        };
        qp.txq.push_back(skb);
        st.req.psn = st.req.psn.next();
        if st.req.sent_end.before(st.req.psn) {
            st.req.sent_end = st.req.psn;
        }
        if last {
            st.req.next = st.sq.geo.next(idx);
            st.req.offset = 0;
        } else {
            st.req.offset += seg.len;
        }
        if uc {
            if last {
                complete_head(qp, st, WcStatus::Success);
                st.req.comp_psn = st.req.psn;
            }
        } else if !st.req.timer_armed {
            arm_retransmit(qp, st);
        }
    }
}

/// Completer: an acknowledge (ACK, RNR NAK or NAK) arrived.
pub(crate) fn on_ack(qp: &Qp<Rrxe>, st: &mut State, pkt: &Packet<'_>, sq_sig_all: bool) {
    let state = st.attr.qp_state();
    if !matches!(state, qp_state::RTS | qp_state::SQD | qp_state::SQE) {
        return;
    }
    // `ack_deferred` is the C driver's count of responses handed to its
    // completer task (`RXE_CNT_SENDER_SCHED`): every response received.
    qp_counts(qp).inc(Counter::AckDeferred);
    match pkt.info().operation {
        Operation::RdmaReadResponse => return on_read_response(qp, st, pkt, sq_sig_all),
        Operation::AtomicAcknowledge => return on_atomic_ack(qp, st, pkt, sq_sig_all),
        Operation::Acknowledge => {}
        _ => return,
    }
    let Some(aeth) = pkt.ext().aeth else {
        return;
    };
    let Ok(syndrome) = aeth.syndrome() else {
        return;
    };
    let psn = pkt.bth().psn;
    if !rc::ack_in_flight(psn, st.req.comp_psn, st.req.sent_end) {
        return;
    }
    let counters = qp_counts(qp);
    let progress = match syndrome {
        Syndrome::Ack { .. } => {
            let p = retire(qp, st, psn);
            let head = meta(st, st.sq.consumer());
            if sq_before(st, st.sq.consumer(), st.req.started_end)
                && head.rd_atomic
                && !head.first_psn.after(psn)
            {
                // Acknowledged past a READ whose responses did not all
                // arrive, or an atomic whose acknowledge was lost: ask
                // again (the responder replays an atomic's result).
                let from = if st.req.comp_psn.before(head.first_psn) {
                    head.first_psn
                } else {
                    st.req.comp_psn
                };
                st.req.comp_psn = from;
                trace::retransmit(
                    qp.device(),
                    qp.qp_num(),
                    from.get(),
                    RetransmitReason::ImpliedNak,
                );
                set_position(st, from);
            } else {
                st.req.comp_psn = psn.next();
                if st.req.psn.before(st.req.comp_psn) {
                    set_position(st, st.req.comp_psn);
                }
            }
            // Even without a retired WQE, the window moved.
            let _ = p;
            true
        }
        Syndrome::RnrNak { timer } => {
            counters.inc(Counter::RcvdRnrErr);
            trace::nak(qp.device(), qp.qp_num(), psn.get(), aeth.syndrome, false);
            let p = retire(qp, st, psn.sub(1));
            st.req.comp_psn = psn;
            match rc::take_retry(st.req.rnr_left, true) {
                Some(n) => {
                    st.req.rnr_left = n;
                    set_position(st, psn);
                    st.req.rnr_wait = true;
                    qp.cancel_timer(QpTimer::Retransmit);
                    st.req.timer_armed = false;
                    qp.arm_timer(
                        QpTimer::Rnr,
                        u64::from(crate::proto::aeth::rnr_timer_usecs(timer)),
                    );
                }
                None => {
                    counters.inc(Counter::RetryRnrExceededErr);
                    fail_head(qp, st, WcStatus::RnrRetryExcErr);
                    return;
                }
            }
            p
        }
        Syndrome::Nak(NakCode::PsnSequenceError) => {
            counters.inc(Counter::RcvdSeqErr);
            // A retry the completer starts, counted as the C driver does.
            counters.inc(Counter::CompleterRetryErr);
            let p = retire(qp, st, psn.sub(1));
            st.req.comp_psn = psn;
            let (dev, qpn) = (qp.device(), qp.qp_num());
            trace::nak(dev, qpn, psn.get(), aeth.syndrome, false);
            trace::retransmit(dev, qpn, psn.get(), RetransmitReason::SequenceNak);
            set_position(st, psn);
            p
        }
        Syndrome::Nak(code) => {
            trace::nak(qp.device(), qp.qp_num(), psn.get(), aeth.syndrome, false);
            retire(qp, st, psn.sub(1));
            st.req.comp_psn = psn;
            let status = match code {
                NakCode::RemoteAccessError => WcStatus::RemAccessErr,
                NakCode::RemoteOperationalError => WcStatus::RemOpErr,
                NakCode::InvalidRdRequest => WcStatus::RemInvRdReqErr,
                _ => WcStatus::RemInvReqErr,
            };
            fail_head(qp, st, status);
            return;
        }
    };
    if progress {
        st.req.retry_left = st.attr.retry_cnt();
        if !st.req.rnr_wait {
            st.req.rnr_left = st.attr.rnr_retry();
        }
    }
    if st.req.rnr_wait {
        return;
    }
    if rc::in_flight(st.req.comp_psn, st.req.sent_end) > 0 {
        arm_retransmit(qp, st);
    } else {
        qp.cancel_timer(QpTimer::Retransmit);
        st.req.timer_armed = false;
    }
    run_requester(qp, st, sq_sig_all);
}

/// Completer: a READ response packet arrived.
fn on_read_response(qp: &Qp<Rrxe>, st: &mut State, pkt: &Packet<'_>, sq_sig_all: bool) {
    let psn = pkt.bth().psn;
    if !rc::ack_in_flight(psn, st.req.comp_psn, st.req.sent_end) {
        return;
    }
    if psn != st.req.comp_psn {
        // A response was lost: ask again from the first missing one, once
        // per gap.
        if !st.req.read_gap {
            st.req.read_gap = true;
            // No NAK was received (`rcvd_seq_err`): the completer retries.
            qp_counts(qp).inc(Counter::CompleterRetryErr);
            let from = st.req.comp_psn;
            let reason = RetransmitReason::ImpliedNak;
            trace::retransmit(qp.device(), qp.qp_num(), from.get(), reason);
            set_position(st, from);
            run_requester(qp, st, sq_sig_all);
        }
        return;
    }
    st.req.read_gap = false;
    // Everything before the READ is implicitly acknowledged.
    retire(qp, st, psn.sub(1));
    let idx = st.sq.consumer();
    let m = meta(st, idx);
    if m.empty_read_response && sq_before(st, idx, st.req.started_end) {
        return on_empty_read_response(qp, st, pkt, m, sq_sig_all);
    }
    if !sq_before(st, idx, st.req.started_end)
        || !m.rd_atomic
        || m.atomic
        || psn.before(m.first_psn)
        || psn.after(m.last_psn)
    {
        return;
    }
    // The responder answers at the MTU the READ was sent with.
    let mtu = m.mtu.bytes();
    let offset = m.first_psn.distance_to(psn).saturating_mul(mtu);
    let expect = m.len.saturating_sub(offset).min(mtu);
    let payload = pkt.payload();
    if payload.len() != expect as usize {
        return;
    }
    if !place_response(qp, st, idx, offset, payload) {
        return;
    }
    st.req.comp_psn = psn.next();
    if psn == m.last_psn {
        complete_head(qp, st, WcStatus::Success);
        st.req.reads_in_flight = st.req.reads_in_flight.saturating_sub(1);
    }
    response_progress(qp, st, sq_sig_all);
}

/// Completer: the READ response that answers the oldest WQE `m`, an ATOMIC
/// WRITE or a FLUSH: one RDMA READ RESPONSE ONLY at the request's PSN, with
/// an AETH and no data.
fn on_empty_read_response(
    qp: &Qp<Rrxe>,
    st: &mut State,
    pkt: &Packet<'_>,
    m: WqeMeta,
    sq_sig_all: bool,
) {
    let psn = pkt.bth().psn;
    let acked = matches!(
        pkt.ext().aeth.map(|a| a.syndrome()),
        Some(Ok(Syndrome::Ack { .. }))
    );
    if psn != m.first_psn || !pkt.payload().is_empty() || !acked {
        return;
    }
    st.req.comp_psn = psn.next();
    complete_head(qp, st, WcStatus::Success);
    st.req.reads_in_flight = st.req.reads_in_flight.saturating_sub(1);
    response_progress(qp, st, sq_sig_all);
}

/// Places `data` at byte `offset` of the local SGE list of the oldest send
/// WQE `idx` (READ response data, an atomic's original value); on a bad
/// WQE or SGE list the WQE completes in error (QP to ERR). `false` if
/// nothing was placed.
fn place_response(qp: &Qp<Rrxe>, st: &mut State, idx: u32, offset: u32, data: &[u8]) -> bool {
    if st.snap_index != Some(idx) {
        let State { sq, sq_snap, .. } = &mut *st;
        if sq.read_slot(idx, sq_snap).is_err() {
            return false;
        }
        st.snap_index = Some(idx);
    }
    let Ok(w) = SendWqe::parse(&st.sq_snap) else {
        fail_head(qp, st, WcStatus::LocQpOpErr);
        return false;
    };
    if let Err(e) = mem::scatter_send(
        qp.device(),
        qp.pd_id(),
        &st.sq_snap,
        w.num_sge,
        offset,
        data,
    ) {
        let status = match e {
            MemError::Length => WcStatus::LocLenErr,
            _ => WcStatus::LocProtErr,
        };
        fail_head(qp, st, status);
        return false;
    }
    true
}

/// After a response moved `req.comp_psn`: the retry count starts over, the
/// retransmit timer follows what is still in flight, and the requester
/// sends what the window now allows.
fn response_progress(qp: &Qp<Rrxe>, st: &mut State, sq_sig_all: bool) {
    st.req.retry_left = st.attr.retry_cnt();
    if rc::in_flight(st.req.comp_psn, st.req.sent_end) > 0 {
        arm_retransmit(qp, st);
    } else {
        qp.cancel_timer(QpTimer::Retransmit);
        st.req.timer_armed = false;
    }
    run_requester(qp, st, sq_sig_all);
}

/// Completer: an atomic acknowledge arrived, carrying the original value
/// of the remote word; it goes to the WQE's local buffer, in host order.
fn on_atomic_ack(qp: &Qp<Rrxe>, st: &mut State, pkt: &Packet<'_>, sq_sig_all: bool) {
    let psn = pkt.bth().psn;
    if !rc::ack_in_flight(psn, st.req.comp_psn, st.req.sent_end) {
        return;
    }
    let Some(AtomicAckEth { orig }) = pkt.ext().atmack else {
        return;
    };
    // Everything before the atomic is implicitly acknowledged.
    retire(qp, st, psn.sub(1));
    let idx = st.sq.consumer();
    let m = meta(st, idx);
    if !sq_before(st, idx, st.req.started_end) || !m.atomic || m.first_psn != psn {
        return;
    }
    if !place_response(qp, st, idx, 0, &orig.to_ne_bytes()) {
        return;
    }
    st.req.comp_psn = psn.next();
    complete_head(qp, st, WcStatus::Success);
    st.req.reads_in_flight = st.req.reads_in_flight.saturating_sub(1);
    response_progress(qp, st, sq_sig_all);
}

/// A timer of the QP fired.
pub(crate) fn on_timer(qp: &Qp<Rrxe>, st: &mut State, t: QpTimer, sq_sig_all: bool) {
    // In SQD the messages in progress still retransmit.
    if !matches!(st.attr.qp_state(), qp_state::RTS | qp_state::SQD) {
        return;
    }
    match t {
        QpTimer::Rnr => {
            st.req.rnr_wait = false;
            let psn = st.req.psn.get();
            trace::retransmit(qp.device(), qp.qp_num(), psn, RetransmitReason::Rnr);
        }
        QpTimer::Retransmit => {
            st.req.timer_armed = false;
            if st.req.rnr_wait {
                return;
            }
            // With nothing in flight the timer was armed for a packet that
            // could not be built (no memory, no route yet): the requester
            // tries again, without using a retry. In SQD nothing else
            // would (no post_send comes while the consumer waits for SQ
            // Drained).
            if rc::in_flight(st.req.comp_psn, st.req.sent_end) != 0 {
                // As the C driver, a `retry_cnt` of 7 retries forever (IBTA
                // gives 7 that meaning for `rnr_retry` only); ibv_rc_pingpong
                // and perftest set 7, and a busy host can delay an ACK past
                // seven local ACK timeouts.
                match rc::take_retry(st.req.retry_left, true) {
                    Some(n) => {
                        st.req.retry_left = n;
                        qp_counts(qp).inc(Counter::CompleterRetryErr);
                        let psn = st.req.comp_psn;
                        let reason = RetransmitReason::Timeout;
                        trace::retransmit(qp.device(), qp.qp_num(), psn.get(), reason);
                        set_position(st, psn);
                    }
                    None => {
                        qp_counts(qp).inc(Counter::RetryExceededErr);
                        fail_head(qp, st, WcStatus::RetryExcErr);
                        return;
                    }
                }
            }
        }
    }
    run_requester(qp, st, sq_sig_all);
}

/// Queues an acknowledge with `syndrome` for `psn`.
fn send_ack(qp: &Qp<Rrxe>, st: &mut State, syndrome: Syndrome, psn: Psn) {
    queue_ack(qp, st, syndrome, psn, None);
}

/// Queues the atomic acknowledge of the request at `psn`, carrying the
/// original value `orig` of the remote word.
fn send_atomic_ack(qp: &Qp<Rrxe>, st: &mut State, psn: Psn, orig: u64) {
    queue_ack(qp, st, ack(), psn, Some(AtomicAckEth { orig }));
}

/// Queues the answer to the ATOMIC WRITE or FLUSH at `psn`: as rdma_rxe, an
/// RDMA READ RESPONSE ONLY with an ACK AETH and no data.
fn send_empty_read_response(qp: &Qp<Rrxe>, st: &mut State, psn: Psn) {
    queue_ack_as(qp, st, Opcode::RC_RDMA_READ_RESPONSE_ONLY, ack(), psn, None);
}

/// Queues an acknowledge (an atomic acknowledge when `atmack` is given).
fn queue_ack(
    qp: &Qp<Rrxe>,
    st: &mut State,
    syndrome: Syndrome,
    psn: Psn,
    atmack: Option<AtomicAckEth>,
) {
    let opcode = if atmack.is_some() {
        Opcode::RC_ATOMIC_ACKNOWLEDGE
    } else {
        Opcode::RC_ACKNOWLEDGE
    };
    queue_ack_as(qp, st, opcode, syndrome, psn, atmack);
}

/// Queues a response packet `opcode` without payload, carrying an AETH
/// (and `atmack` when given).
fn queue_ack_as(
    qp: &Qp<Rrxe>,
    st: &mut State,
    opcode: Opcode,
    syndrome: Syndrome,
    psn: Psn,
    atmack: Option<AtomicAckEth>,
) {
    let msn = st.resp.msn;
    let dest_qpn = st.attr.dest_qp_num();
    let Some(tx) = tx_ctx(qp, st) else {
        return;
    };
    let Ok(aeth) = Aeth::new(syndrome, msn) else {
        return;
    };
    if !matches!(syndrome, Syndrome::Ack { .. }) {
        trace::nak(qp.device(), qp.qp_num(), psn.get(), aeth.syndrome, true);
    }
    let bth = Bth {
        opcode,
        pkey: DEFAULT_PKEY,
        dest_qpn,
        psn,
        ..Bth::default()
    };
    let ext = ExtHeaders {
        aeth: Some(aeth),
        atmack,
        ..ExtHeaders::default()
    };
    match tx.build(&bth, &ext, 0, |_| Ok(())) {
        Ok(skb) => qp.txq.push_back(skb),
        Err(_) => qp_counts(qp).inc(Counter::SendErr),
    }
}

/// An ACK carrying "unlimited credits" (rxe does not do end-to-end credits).
fn ack() -> Syndrome {
    Syndrome::Ack {
        credits: crate::proto::aeth::CREDITS_UNLIMITED,
    }
}

/// Takes the next receive WQE from the QP's receive queue or SRQ into
/// `State::rq_snap`.
fn take_recv(qp: &Qp<Rrxe>, st: &mut State) -> Option<Result<RecvCtx, ()>> {
    let from_srq = match &mut st.rq {
        Some(rq) => {
            let c = rq.consumer();
            if rq.geo.is_empty(rq.producer(), c) {
                return None;
            }
            if rq.read_slot(c, &mut st.rq_snap).is_err() {
                return Some(Err(()));
            }
            false
        }
        None => {
            let srq = qp.srq()?;
            if !RrxeSrq::take(srq, &mut st.rq_snap) {
                return None;
            }
            true
        }
    };
    Some(match RecvWqe::parse(&st.rq_snap) {
        Ok(r) => Ok(RecvCtx {
            wr_id: r.wr_id,
            num_sge: r.num_sge,
            offset: 0,
            from_srq,
        }),
        Err(_) => Err(()),
    })
}

/// The successful receive completion of a connected QP's message: the
/// peer's QPN, and the immediate data if the packet carries one.
fn recv_wc(
    qp: &Qp<Rrxe>,
    st: &State,
    wr_id: u64,
    opcode: u32,
    byte_len: u32,
    pkt: &Packet<'_>,
) -> Wc {
    let mut w = wc(qp, wr_id, WcStatus::Success, opcode, byte_len);
    w.src_qp = st.attr.dest_qp_num();
    if let Some(imm) = pkt.ext().immdt {
        w.ex = u32::from_ne_bytes(imm.imm_data);
        w.wc_flags |= WC_WITH_IMM;
    }
    w
}

/// Completes the held receive WQE.
///
/// A successful one counts in `rdma_recvs` (SEND and WRITE with immediate,
/// RC and UC), as in the C driver.
fn complete_recv(qp: &Qp<Rrxe>, st: &mut State, w: Wc, solicited: bool) {
    if let Some(r) = st.resp.recv.take() {
        if w.status == WcStatus::Success {
            qp_counts(qp).inc(Counter::RdmaRecvs);
        }
        if !r.from_srq {
            if let Some(rq) = &mut st.rq {
                rq.advance();
            }
        }
        let _ = RrxeCq::post(qp.recv_cq(), &w, solicited);
    }
}

/// The RNR NAK of the QP's `min_rnr_timer` ([`Syndrome::rnr_nak`]).
fn rnr_nak(st: &State) -> Syndrome {
    Syndrome::rnr_nak(st.attr.min_rnr_timer())
}

/// A fatal responder error: NAK, complete the held receive WQE with
/// `status` and move the QP to ERR.
fn resp_fail(qp: &Qp<Rrxe>, st: &mut State, code: NakCode, status: Option<WcStatus>, psn: Psn) {
    send_ack(qp, st, Syndrome::Nak(code), psn);
    if let (Some(status), Some(r)) = (status, st.resp.recv) {
        let w = wc(qp, r.wr_id, status, WC_RECV, 0);
        complete_recv(qp, st, w, false);
    }
    to_error(qp, st);
}

/// A request that names memory it may not access (a bad R_Key, range or
/// access right; class C, IBTA Vol 1 §9.9.2.2 and C9-222.1): NAK with a
/// remote access error. A packet with immediate data reports it in the
/// receive completion it consumed; without one, nothing at the responder
/// would, so QP Access Error is raised, as the C driver does
/// (`get_rkey_violation_state`).
fn access_violation(qp: &Qp<Rrxe>, st: &mut State, immediate: bool, psn: Psn) {
    if immediate {
        resp_fail(
            qp,
            st,
            NakCode::RemoteAccessError,
            Some(WcStatus::RemAccessErr),
            psn,
        );
    } else {
        super::qp::RrxeQp::access_error(qp);
        resp_fail(qp, st, NakCode::RemoteAccessError, None, psn);
    }
}

/// [`resp_fail`] for the NAK code a memory check gave.
fn check_fail(qp: &Qp<Rrxe>, st: &mut State, code: NakCode, immediate: bool, psn: Psn) {
    match code {
        NakCode::RemoteAccessError => access_violation(qp, st, immediate, psn),
        _ => resp_fail(qp, st, code, None, psn),
    }
}

/// Checks the memory a READ or the first packet of a WRITE names, before
/// anything is read or placed ([`rc::check_reth`]).
fn check_reth(qp: &Qp<Rrxe>, reth: &Reth, need: Need) -> Result<(), NakCode> {
    rc::check_reth(reth.dma_len, || {
        mem::check_remote(
            qp.device(),
            qp.pd_id(),
            qp.uid,
            reth.rkey,
            need,
            reth.va,
            reth.dma_len,
        )
        .is_ok()
    })
}

/// Accepts a READ request at `psn` for the memory `reth` names: checks the
/// whole range before anything is read, then starts its responses, which
/// [`stream_read`] continues later if the transmit credit runs out. Returns
/// the number of PSNs the responses take.
fn start_read(
    qp: &Qp<Rrxe>,
    st: &mut State,
    psn: Psn,
    reth: &Reth,
    msn: u32,
) -> Result<u32, NakCode> {
    check_reth(qp, reth, Need::RemoteRead)?;
    // The requester reserved the responses' PSNs at the path MTU set at
    // RTR, whatever the net device carries now (`current_mtu`).
    let mtu = path_mtu(st);
    let count = packet_count(reth.dma_len, mtu);
    let r = ReadStream {
        psn,
        va: reth.va,
        rkey: reth.rkey,
        len: reth.dma_len,
        next: 0,
        count,
        msn,
        mtu,
    };
    st.resp.reads.record(r);
    st.resp.read = Some(r);
    stream_read(qp, st);
    Ok(count)
}

/// Answers a duplicate READ for `reth` with the responses `r` that
/// [`ReadHistory::replay`] chose, after checking that the memory is still
/// readable. Otherwise it is dropped: the requester times out.
fn replay_read(qp: &Qp<Rrxe>, st: &mut State, r: ReadStream, reth: &Reth) {
    if reth.dma_len > 0
        && mem::check_remote(
            qp.device(),
            qp.pd_id(),
            qp.uid,
            reth.rkey,
            Need::RemoteRead,
            reth.va,
            reth.dma_len,
        )
        .is_err()
    {
        return;
    }
    st.resp.read = Some(r);
    stream_read(qp, st);
}

/// Queues the next READ responses of the stream in progress, as many as
/// the transmit credit allows; the stream ends with its last response (or
/// when a response cannot be built: the requester asks again after its
/// timeout).
fn stream_read(qp: &Qp<Rrxe>, st: &mut State) {
    let Some(mut r) = st.resp.read else {
        return;
    };
    let dev = qp.device();
    let pd_id = qp.pd_id();
    let pmtu = r.mtu;
    let dest_qpn = st.attr.dest_qp_num();
    let State { tx, resp, .. } = &mut *st;
    let Some(tx) = tx.as_ref() else {
        qp_counts(qp).inc(Counter::SendErr);
        resp.read = None;
        return;
    };
    while r.next < r.count {
        if !super::tx::tx_room(qp) {
            // Resumed from the QP's kick when credit comes back.
            resp.read = Some(r);
            return;
        }
        let Some(seg) = segment_at(r.len, pmtu, r.next) else {
            break;
        };
        let Some(opcode) =
            Opcode::for_message(Transport::Rc, MessageKind::RdmaReadResponse, seg.position)
        else {
            break;
        };
        let mut ext = ExtHeaders::default();
        if !matches!(seg.position, Position::Middle) {
            ext.aeth = Aeth::new(ack(), r.msn).ok();
        }
        let bth = Bth {
            opcode,
            pkey: DEFAULT_PKEY,
            dest_qpn,
            psn: r.psn.add(r.next),
            ..Bth::default()
        };
        let va = r.va.wrapping_add(u64::from(seg.offset));
        let rkey = r.rkey;
        let via = Via::Rkey(qp.uid);
        let built = tx.build(&bth, &ext, seg.len as usize, |buf| {
            mem::read(dev, pd_id, rkey, via, Need::RemoteRead, va, buf).map_err(|_| EFAULT)
        });
        match built {
            Ok(skb) => qp.txq.push_back(skb),
            Err(_) => {
                qp_counts(qp).inc(Counter::SendErr);
                break;
            }
        }
        r.next += 1;
    }
    resp.read = None;
}

/// Most held requests one run of [`resume_responder`] handles; the rest
/// wait for the next kick.
const RESUME_BUDGET: u32 = 64;

/// The responder's part of the QP's kick: continues the READ being
/// answered, then handles, in arrival order, the requests that waited for
/// it (each of which may start another READ).
pub(crate) fn resume_responder(qp: &Qp<Rrxe>, st: &mut State) {
    if qp.qp_type() != qp_type::RC {
        return;
    }
    let mut budget = RESUME_BUDGET;
    loop {
        stream_read(qp, st);
        if st.resp.read.is_some() {
            return;
        }
        if budget == 0 {
            if !qp.rxq.is_empty() {
                qp.kick();
            }
            return;
        }
        let Some(skb) = qp.rxq.pop_front() else {
            return;
        };
        budget -= 1;
        // Checked when it arrived (lengths, ICRC, QP, source): only the
        // headers are parsed again.
        let held = skb
            .data()
            .get(UDP_HDR_LEN..)
            .and_then(|roce| parse_packet(roce).ok());
        if let Some(pkt) = held {
            handle_request(qp, st, &pkt);
        }
        // Freed by the kick once the state lock is released: a received
        // skb's pages may not go back to their page pool with interrupts
        // off.
        qp.rx_done.push_back(skb);
    }
}

/// UC responder: drops the message in progress (a packet was lost or
/// bad); its receive WQE, if any, stays for the next message.
fn uc_drop(st: &mut State, psn: Psn) {
    st.resp.op = InProgress::None;
    if let Some(r) = &mut st.resp.recv {
        r.offset = 0;
    }
    st.resp.epsn = psn.next();
}

/// UC responder (IBTA Vol 1 §9.8.3): no acknowledges; a lost or bad
/// packet drops its message, never the QP.
fn on_uc_request(qp: &Qp<Rrxe>, st: &mut State, pkt: &Packet<'_>) {
    let info = pkt.info();
    if info.transport != Transport::Uc {
        return;
    }
    let bth = pkt.bth();
    let psn = bth.psn;
    // The C driver counts no `out_of_seq_request` on UC: nothing is NAKed.
    if psn != st.resp.epsn {
        st.resp.op = InProgress::None;
        if let Some(r) = &mut st.resp.recv {
            r.offset = 0;
        }
        if !info.position.is_first() {
            return uc_drop(st, psn);
        }
    }
    let Ok(next_op) = rc::check_op_sequence(st.resp.op, info) else {
        return uc_drop(st, psn);
    };
    let payload = pkt.payload();
    let plen = u32::try_from(payload.len()).unwrap_or(u32::MAX);
    if !accept_payload_len(st, info.position, plen) {
        return uc_drop(st, psn);
    }
    let first = info.position.is_first();
    let last = info.position.is_last();
    let dev = qp.device();
    let pd_id = qp.pd_id();
    let needs_recv = matches!(info.operation, Operation::Send) || info.has_immediate();
    if needs_recv && st.resp.recv.is_none() {
        match take_recv(qp, st) {
            Some(Ok(r)) => st.resp.recv = Some(r),
            _ => return uc_drop(st, psn),
        }
    }
    match info.operation {
        Operation::Send => {
            let Some(r) = st.resp.recv else {
                return uc_drop(st, psn);
            };
            let placed = rc::message_len_after(r.offset, plen).ok_or(MemError::Length);
            if let Err(e) = placed
                .and_then(|_| mem::scatter(dev, pd_id, &st.rq_snap, r.num_sge, r.offset, payload))
            {
                let status = match e {
                    MemError::Length => WcStatus::LocLenErr,
                    _ => WcStatus::LocProtErr,
                };
                let w = wc(qp, r.wr_id, status, WC_RECV, 0);
                complete_recv(qp, st, w, false);
                return uc_drop(st, psn);
            }
            let placed = placed.unwrap_or(0);
            if let Some(rr) = &mut st.resp.recv {
                rr.offset = placed;
            }
            if last {
                let w = recv_wc(qp, st, r.wr_id, WC_RECV, placed, pkt);
                complete_recv(qp, st, w, bth.se);
            }
        }
        Operation::RdmaWrite => {
            if st.attr.qp_access_flags() & access::REMOTE_WRITE == 0 {
                return uc_drop(st, psn);
            }
            if first {
                let Some(reth) = pkt.ext().reth else {
                    return uc_drop(st, psn);
                };
                if check_reth(qp, &reth, Need::RemoteWrite).is_err() {
                    return uc_drop(st, psn);
                }
                st.resp.write_va = reth.va;
                st.resp.write_rkey = reth.rkey;
                st.resp.write_resid = reth.dma_len;
                st.resp.write_len = reth.dma_len;
            }
            if plen > st.resp.write_resid || (last && plen != st.resp.write_resid) {
                return uc_drop(st, psn);
            }
            let (rkey, va) = (st.resp.write_rkey, st.resp.write_va);
            let via = Via::Rkey(qp.uid);
            if mem::write(dev, pd_id, rkey, via, Need::RemoteWrite, va, payload).is_err() {
                return uc_drop(st, psn);
            }
            st.resp.write_va = va.wrapping_add(u64::from(plen));
            st.resp.write_resid -= plen;
            if last && info.has_immediate() {
                if let Some(r) = st.resp.recv {
                    let w = recv_wc(
                        qp,
                        st,
                        r.wr_id,
                        WC_RECV_RDMA_WITH_IMM,
                        st.resp.write_len,
                        pkt,
                    );
                    complete_recv(qp, st, w, bth.se);
                }
            }
        }
        _ => return uc_drop(st, psn),
    }
    st.resp.op = next_op;
    st.resp.epsn = psn.next();
}

/// What became of a request packet handed to [`on_request`].
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Taken {
    /// Handled (or dropped).
    Done,
    /// A READ is being answered: the caller must hold the packet on the
    /// QP's `rxq` and kick the QP, which handles it after the READ.
    Hold,
}

/// Responder: a request packet arrived.
pub(crate) fn on_request(qp: &Qp<Rrxe>, st: &mut State, pkt: &Packet<'_>) -> Taken {
    if qp.qp_type() == qp_type::RC && (st.resp.read.is_some() || !qp.rxq.is_empty()) {
        return Taken::Hold;
    }
    handle_request(qp, st, pkt);
    Taken::Done
}

/// Responder: handles a request packet, in PSN order with the responses of
/// earlier ones.
fn handle_request(qp: &Qp<Rrxe>, st: &mut State, pkt: &Packet<'_>) {
    let state = st.attr.qp_state();
    if !matches!(
        state,
        qp_state::RTR | qp_state::RTS | qp_state::SQD | qp_state::SQE
    ) {
        return;
    }
    if qp.qp_type() == qp_type::UC {
        return on_uc_request(qp, st, pkt);
    }
    let info = pkt.info();
    let bth = pkt.bth();
    let psn = bth.psn;
    let counters = qp_counts(qp);
    match psn.region(st.resp.epsn) {
        PsnRegion::Expected => st.resp.nak_sent = false,
        PsnRegion::Duplicate => {
            counters.inc(Counter::DuplicateRequest);
            if matches!(info.operation, Operation::RdmaReadRequest) {
                // The responses were lost: read the memory again (a READ
                // has no side effect to repeat); one not remembered is
                // dropped (`ReadHistory::replay`).
                if let Some(reth) = pkt.ext().reth {
                    if let Some(r) = st.resp.reads.replay(psn, &reth) {
                        replay_read(qp, st, r, &reth);
                    }
                }
                return;
            }
            if matches!(info.operation, Operation::CompareSwap | Operation::FetchAdd) {
                // The acknowledge was lost: send the saved result again; an
                // atomic is never executed twice. Without a saved result
                // (too old), nothing is sent and the requester times out.
                if let Some(orig) = st.resp.atomics.find(psn) {
                    send_atomic_ack(qp, st, psn, orig);
                }
                return;
            }
            if matches!(info.operation, Operation::AtomicWrite | Operation::Flush) {
                // Likewise an ATOMIC WRITE is not stored twice: answered
                // again while it is remembered, dropped after (a FLUSH,
                // as in the C driver's replay).
                if st.resp.atomics.find(psn).is_some() {
                    send_empty_read_response(qp, st, psn);
                }
                return;
            }
            // SEND and WRITE are not executed twice: acknowledge what has
            // been received so far, where the requester asks for it (a
            // retransmitted message of 64 packets gets a few ACKs, not 64).
            if bth.ack_req {
                let last = st.resp.epsn.sub(1);
                send_ack(qp, st, ack(), last);
            }
            return;
        }
        PsnRegion::Ahead => {
            // Counted once per sequence NAK, as the C driver does, not per
            // packet past the gap.
            if !st.resp.nak_sent {
                counters.inc(Counter::OutOfSeqRequest);
                st.resp.nak_sent = true;
                let e = st.resp.epsn;
                send_ack(qp, st, Syndrome::Nak(NakCode::PsnSequenceError), e);
            }
            return;
        }
    }
    let next_op = match rc::check_op_sequence(st.resp.op, info) {
        Ok(op) => op,
        Err(()) => return resp_fail(qp, st, NakCode::InvalidRequest, None, psn),
    };
    let payload = pkt.payload();
    let plen = u32::try_from(payload.len()).unwrap_or(u32::MAX);
    if !accept_payload_len(st, info.position, plen) {
        return resp_fail(qp, st, NakCode::InvalidRequest, None, psn);
    }
    let first = info.position.is_first();
    let last = info.position.is_last();
    let dev = qp.device();
    let pd_id = qp.pd_id();
    let qp_access = st.attr.qp_access_flags();

    match info.operation {
        Operation::Send => {
            if first {
                match take_recv(qp, st) {
                    None => {
                        // Receiver not ready: the requester retries after the timer.
                        counters.inc(Counter::SendRnrErr);
                        send_ack(qp, st, rnr_nak(st), psn);
                        return;
                    }
                    Some(Err(())) => {
                        return resp_fail(qp, st, NakCode::RemoteOperationalError, None, psn)
                    }
                    Some(Ok(r)) => st.resp.recv = Some(r),
                }
            }
            let Some(r) = st.resp.recv else {
                return resp_fail(qp, st, NakCode::InvalidRequest, None, psn);
            };
            let placed = rc::message_len_after(r.offset, plen).ok_or(MemError::Length);
            if let Err(e) = placed
                .and_then(|_| mem::scatter(dev, pd_id, &st.rq_snap, r.num_sge, r.offset, payload))
            {
                let (code, status) = match e {
                    MemError::Length => (NakCode::InvalidRequest, WcStatus::LocLenErr),
                    _ => (NakCode::RemoteOperationalError, WcStatus::LocProtErr),
                };
                return resp_fail(qp, st, code, Some(status), psn);
            }
            let placed = placed.unwrap_or(0);
            if let Some(rr) = &mut st.resp.recv {
                rr.offset = placed;
            }
            if last {
                let Ok(invalidated) = invalidate_for_send(qp, pkt) else {
                    let status = Some(WcStatus::RemInvReqErr);
                    return resp_fail(qp, st, NakCode::InvalidRequest, status, psn);
                };
                let mut w = recv_wc(qp, st, r.wr_id, WC_RECV, placed, pkt);
                if let Some(rkey) = invalidated {
                    w.ex = rkey;
                    w.wc_flags |= WC_WITH_INVALIDATE;
                }
                complete_recv(qp, st, w, bth.se);
            }
        }
        Operation::RdmaWrite => {
            // As the C driver: an operation the QP does not grant is an
            // invalid request (REM_INV_REQ_ERR), not an access error.
            if qp_access & access::REMOTE_WRITE == 0 {
                return resp_fail(qp, st, NakCode::InvalidRequest, None, psn);
            }
            // WRITE with immediate consumes a receive WQE: make sure one is
            // there before any data is placed.
            if info.has_immediate() && st.resp.recv.is_none() {
                match take_recv(qp, st) {
                    None => {
                        counters.inc(Counter::SendRnrErr);
                        send_ack(qp, st, rnr_nak(st), psn);
                        return;
                    }
                    Some(Err(())) => {
                        return resp_fail(qp, st, NakCode::RemoteOperationalError, None, psn)
                    }
                    Some(Ok(r)) => st.resp.recv = Some(r),
                }
            }
            if first {
                let Some(reth) = pkt.ext().reth else {
                    return resp_fail(qp, st, NakCode::InvalidRequest, None, psn);
                };
                if let Err(code) = check_reth(qp, &reth, Need::RemoteWrite) {
                    return check_fail(qp, st, code, info.has_immediate(), psn);
                }
                st.resp.write_va = reth.va;
                st.resp.write_rkey = reth.rkey;
                st.resp.write_resid = reth.dma_len;
                st.resp.write_len = reth.dma_len;
            }
            if plen > st.resp.write_resid || (last && plen != st.resp.write_resid) {
                return resp_fail(qp, st, NakCode::InvalidRequest, None, psn);
            }
            if let Err(e) = mem::write(
                dev,
                pd_id,
                st.resp.write_rkey,
                Via::Rkey(qp.uid),
                Need::RemoteWrite,
                st.resp.write_va,
                payload,
            ) {
                let _ = e;
                return access_violation(qp, st, info.has_immediate(), psn);
            }
            st.resp.write_va = st.resp.write_va.wrapping_add(u64::from(plen));
            st.resp.write_resid -= plen;
            if last && info.has_immediate() {
                if let Some(r) = st.resp.recv {
                    let w = recv_wc(
                        qp,
                        st,
                        r.wr_id,
                        WC_RECV_RDMA_WITH_IMM,
                        st.resp.write_len,
                        pkt,
                    );
                    complete_recv(qp, st, w, bth.se);
                }
            }
        }
        Operation::RdmaReadRequest => {
            let Some(reth) = pkt.ext().reth else {
                return resp_fail(qp, st, NakCode::InvalidRequest, None, psn);
            };
            if qp_access & access::REMOTE_READ == 0 {
                return resp_fail(qp, st, NakCode::InvalidRequest, None, psn);
            }
            let msn = (st.resp.msn + 1) & crate::proto::aeth::MSN_MASK;
            match start_read(qp, st, psn, &reth, msn) {
                Ok(count) => {
                    st.resp.epsn = psn.add(count);
                    st.resp.msn = msn;
                }
                Err(code) => check_fail(qp, st, code, false, psn),
            }
            return;
        }
        Operation::CompareSwap | Operation::FetchAdd => {
            let Some(a) = pkt.ext().atmeth else {
                return resp_fail(qp, st, NakCode::InvalidRequest, None, psn);
            };
            // As the C driver: a QP without remote atomic access is an
            // invalid request; then a bad key or range is a remote access
            // error, and only a valid one at a misaligned address an
            // invalid request (`mem::atomic` checks in that order, as
            // rdma_rxe's check_rkey runs before its atomic op).
            if qp_access & access::REMOTE_ATOMIC == 0 {
                return resp_fail(qp, st, NakCode::InvalidRequest, None, psn);
            }
            let compare_swap = info.operation == Operation::CompareSwap;
            let result = mem::atomic(dev, pd_id, qp.uid, a.rkey, a.va, |v| {
                if compare_swap {
                    (v == a.compare).then_some(a.swap_add)
                } else {
                    Some(v.wrapping_add(a.swap_add))
                }
            });
            let orig = match result {
                Ok(orig) => orig,
                Err(MemError::Misaligned) => {
                    return resp_fail(qp, st, NakCode::InvalidRequest, None, psn)
                }
                Err(_) => return access_violation(qp, st, info.has_immediate(), psn),
            };
            st.resp.atomics.record(psn, orig);
            st.resp.epsn = psn.next();
            st.resp.msn = (st.resp.msn + 1) & crate::proto::aeth::MSN_MASK;
            send_atomic_ack(qp, st, psn, orig);
            return;
        }
        Operation::AtomicWrite => {
            let Some(reth) = pkt.ext().reth else {
                return resp_fail(qp, st, NakCode::InvalidRequest, None, psn);
            };
            // As the C driver: the QP must grant remote write (else an
            // invalid request), the key and range remote write (else an
            // access error); then the payload must be exactly the 8 bytes
            // the RETH names, at an 8-byte aligned address (else an invalid
            // request).
            if qp_access & access::REMOTE_WRITE == 0 {
                return resp_fail(qp, st, NakCode::InvalidRequest, None, psn);
            }
            let (rkey, va, len) = (reth.rkey, reth.va, reth.dma_len);
            if mem::check_remote(dev, pd_id, qp.uid, rkey, Need::RemoteWrite, va, len).is_err() {
                return access_violation(qp, st, info.has_immediate(), psn);
            }
            let Ok(value) = <[u8; wqe::ATOMIC_WRITE_SIZE]>::try_from(payload) else {
                return resp_fail(qp, st, NakCode::InvalidRequest, None, psn);
            };
            if reth.dma_len as usize != wqe::ATOMIC_WRITE_SIZE || reth.va & 7 != 0 {
                return resp_fail(qp, st, NakCode::InvalidRequest, None, psn);
            }
            match mem::atomic_write(dev, pd_id, qp.uid, reth.rkey, reth.va, value) {
                Ok(()) => {}
                Err(MemError::Misaligned) => {
                    return resp_fail(qp, st, NakCode::InvalidRequest, None, psn)
                }
                Err(_) => return access_violation(qp, st, info.has_immediate(), psn),
            }
            // Remembered by PSN so that a retransmission is answered, not
            // stored again (the value saved is unused).
            st.resp.atomics.record(psn, 0);
            st.resp.epsn = psn.next();
            st.resp.msn = (st.resp.msn + 1) & crate::proto::aeth::MSN_MASK;
            send_empty_read_response(qp, st, psn);
            return;
        }
        Operation::Flush => {
            let (Some(feth), Some(reth)) = (pkt.ext().feth, pkt.ext().reth) else {
                return resp_fail(qp, st, NakCode::InvalidRequest, None, psn);
            };
            // As the C driver: the QP must grant the FLUSH access of each
            // placement type asked (else an invalid request), the key the
            // same and, for the range selectivity, the range (else an
            // access error). As there, only the region selectivity skips
            // the range check, and any but the range one flushes the region.
            let need = mem::flush_access(feth.placement_type);
            if qp_access & need != need {
                return resp_fail(qp, st, NakCode::InvalidRequest, None, psn);
            }
            // C9-94, as for every RETH (rdma_rxe's check_length): a DMA
            // length past 2^31 is an invalid request, whatever the
            // selectivity.
            if reth.dma_len > MAX_MSG_SIZE {
                return resp_fail(qp, st, NakCode::InvalidRequest, None, psn);
            }
            let range = (reth.va, u64::from(reth.dma_len));
            if mem::flush(
                dev,
                pd_id,
                qp.uid,
                reth.rkey,
                feth.placement_type,
                feth.selectivity,
                range,
            )
            .is_err()
            {
                return access_violation(qp, st, info.has_immediate(), psn);
            }
            st.resp.atomics.record(psn, 0);
            st.resp.epsn = psn.next();
            st.resp.msn = (st.resp.msn + 1) & crate::proto::aeth::MSN_MASK;
            send_empty_read_response(qp, st, psn);
            return;
        }
        _ => {
            return resp_fail(qp, st, NakCode::InvalidRequest, None, psn);
        }
    }
    st.resp.op = next_op;
    st.resp.epsn = psn.next();
    if last {
        st.resp.msn = (st.resp.msn + 1) & crate::proto::aeth::MSN_MASK;
    }
    if bth.ack_req {
        send_ack(qp, st, ack(), psn);
    }
}

// Local operations (IBTA Vol 1 §10.6.3.6 fast registration, §10.6.5 local
// and remote invalidation, §10.6.7 memory window binding): `IB_WR_REG_MR`,
// `IB_WR_LOCAL_INV` and `IB_WR_BIND_MW` run in the requester when reached
// in send queue order, without packets; SEND with invalidate makes the
// responder invalidate the R_Key its IETH names (a region or a window).

/// The snapshot's WQE, if it is a local operation.
fn local_op_of(snap: &[u8]) -> Option<SendWqe> {
    SendWqe::parse(snap).ok().filter(|w| {
        matches!(
            w.opcode,
            wqe::IB_WR_REG_MR | wqe::IB_WR_LOCAL_INV | wqe::IB_WR_BIND_MW
        )
    })
}

/// Completes the executed local operations at the head of the send queue,
/// in order (everything before them has completed); a failed one completes
/// in error and moves the QP to ERR. `false` if the QP is in ERR now.
fn complete_local_ops(qp: &Qp<Rrxe>, st: &mut State) -> bool {
    while sq_before(st, st.sq.consumer(), st.req.started_end) {
        let m = meta(st, st.sq.consumer());
        if !m.local {
            break;
        }
        if m.failed {
            let status = if m.wc_opcode == WC_BIND_MW {
                WcStatus::MwBindErr
            } else {
                WcStatus::LocQpOpErr
            };
            fail_head(qp, st, status);
            return false;
        }
        complete_head(qp, st, WcStatus::Success);
    }
    true
}

/// Executes the local operation `w` at send queue index `idx` (at
/// `req.next`), as `rxe_do_local_ops`; `true` if the requester may go on
/// with the next WQE.
///
/// LOCAL_INV first waits until every earlier WQE has completed (the C
/// driver makes the local invalidate fence of §10.6.5.1 mandatory);
/// REG_MR and BIND_MW run at once. Each completes once it is the oldest
/// WQE, with `IB_WC_REG_MR` / `IB_WC_LOCAL_INV` / `IB_WC_BIND_MW` (if
/// signaled), or when refused with `IB_WC_LOC_QP_OP_ERR` (BIND_MW:
/// `IB_WC_MW_BIND_ERR`). REG_MR names a region by key index, which only
/// kernel WQEs may do. A retransmission never runs one twice.
fn run_local_op(qp: &Qp<Rrxe>, st: &mut State, idx: u32, w: &SendWqe, sq_sig_all: bool) -> bool {
    if sq_before(st, idx, st.req.started_end) {
        // Executed before the requester was rewound: skip it, unless it
        // failed (nothing after it runs).
        if meta(st, idx).failed {
            return false;
        }
        st.req.next = st.sq.geo.next(idx);
        st.req.offset = 0;
        return true;
    }
    if w.opcode == wqe::IB_WR_LOCAL_INV && idx != st.sq.consumer() {
        return false;
    }
    let dev = qp.device();
    let pd_id = qp.pd_id();
    let (result, wc_opcode) = if w.opcode == wqe::IB_WR_LOCAL_INV {
        (invalidate_key(qp, w.invalidate_rkey, None), WC_LOCAL_INV)
    } else if w.opcode == wqe::IB_WR_BIND_MW {
        let r = RrxeMw::bind(dev, pd_id, qp.uid, &w.mw).map_err(|_| super::mr::LocalOpError);
        (r, WC_BIND_MW)
    } else if qp.is_user() {
        (Err(super::mr::LocalOpError), WC_REG_MR)
    } else {
        (RrxeMr::register(dev, pd_id, &w.reg), WC_REG_MR)
    };
    // No PSN of its own: an empty range after the packets sent so far, so
    // that acknowledges retire it in order and no retransmission lands in it.
    let m = WqeMeta {
        wr_id: w.wr_id,
        wc_opcode,
        signaled: sq_sig_all || w.send_flags & wqe::IB_SEND_SIGNALED != 0,
        len: 0,
        first_psn: st.req.psn,
        last_psn: st.req.psn.sub(1),
        local: true,
        failed: result.is_err(),
        ..WqeMeta::default()
    };
    match st.sq_meta.get_mut(idx as usize) {
        Some(slot) => *slot = m,
        None => return false,
    }
    st.req.started_end = st.sq.geo.next(idx);
    if m.failed {
        complete_local_ops(qp, st);
        return false;
    }
    st.req.next = st.req.started_end;
    st.req.offset = 0;
    complete_local_ops(qp, st)
}

/// The R_Key a SEND with invalidate's last packet names, invalidated for
/// the QP's PD (`invalidate_rkey` in the C responder); `None` for other
/// packets, `Err` if the key names no fast-register region or type 2
/// window (bound to this QP) of the PD, or is not its current key.
fn invalidate_for_send(qp: &Qp<Rrxe>, pkt: &Packet<'_>) -> Result<Option<u32>, ()> {
    let Some(ieth) = pkt.ext().ieth else {
        return Ok(None);
    };
    invalidate_key(qp, ieth.rkey, Some(qp.uid)).map_err(|_| ())?;
    Ok(Some(ieth.rkey))
}

/// Invalidates the fast-register region or the type 2 memory window of
/// `key` for `qp` (`invalidate_rkey`/`rxe_do_local_ops` in the C driver),
/// by LOCAL_INV or, with `remote_qp`, by a SEND with invalidate received.
fn invalidate_key(
    qp: &Qp<Rrxe>,
    key: u32,
    remote_qp: Option<u64>,
) -> Result<(), super::mr::LocalOpError> {
    let (dev, pd_id) = (qp.device(), qp.pd_id());
    if is_mw_key(key) {
        RrxeMw::invalidate(dev, pd_id, key, remote_qp).map_err(|_| super::mr::LocalOpError)
    } else {
        RrxeMr::invalidate(dev, pd_id, key)
    }
}
