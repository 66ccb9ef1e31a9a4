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
//!   value is kept with its PSN ([`AtomicReplies`]) and a retransmitted request
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
        ack,
        opcode::Position,
        psn::Psn,
        rc::{
            self,
            AtomicReplies,
            InProgress,
            ReadHistory,
            ReadStream, //
            ATOMIC_REPLIES,
            READ_HISTORY,
        },
        segment::PathMtu,
        wr::WcKind, //
    },
    rdma::{
        qp::{
            Qp,
            QpState,
            QpTimer, //
        },
        trace,
        wc::{
            Wc,
            WcOpcode,
            WcStatus, //
        },
    },
};

mod completer;
mod local_ops;
mod read;
mod requester;
mod responder;
mod uc;

pub(crate) use completer::{
    on_ack,
    on_timer, //
};
use kernel::prelude::*;
pub(crate) use requester::run_requester;
pub(crate) use responder::{
    on_request,
    resume_responder,
    Taken, //
};

use super::{
    cq::RrxeCq,
    hw_counters::{
        qp_counts,
        Counter, //
    },
    qp::State,
    tx::TxCtx,
    verbs::Rrxe, //
};

/// What the completer needs of a started send WQE, kept out of user reach.
#[derive(Clone, Copy, Default)]
pub(crate) struct WqeMeta {
    wr_id: u64,
    wc_opcode: WcKind,
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
    /// completes once it is the oldest WQE
    /// ([`requester::Requester::complete_local_ops`]).
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
    /// The window, retry counts and timers the completer's rules
    /// ([`ack`]) keep.
    win: ack::Window,
    /// RDMA READs and atomics started and not completed.
    reads_in_flight: u32,
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
    /// Original values of the atomics executed recently, for replay; on
    /// the heap, so that the state is small enough to build on the stack.
    atomics: AtomicReplies<KVec<Option<(Psn, u64)>>>,
    /// The READ whose responses are being sent; requests that arrive
    /// meanwhile wait on the QP's `rxq`, so that they are answered after
    /// it, in PSN order.
    read: Option<ReadStream>,
    /// The READs accepted last, for duplicates; on the heap, as the
    /// atomics.
    reads: ReadHistory<KVec<Option<ReadStream>>>,
}

/// The heap storage of a responder's histories, allocated where the QP is
/// created, before its lock is taken ([`Resp::new`]).
pub(crate) struct RespStorage {
    atomics: KVec<Option<(Psn, u64)>>,
    reads: KVec<Option<ReadStream>>,
}

impl Req {
    /// Resets the requester to `psn` with the retry counts of the QP.
    pub(crate) fn reset(&mut self, psn: Psn) {
        *self = Req {
            psn,
            win: ack::Window {
                comp_psn: psn,
                sent_end: psn,
                retry_left: self.win.retry_left,
                rnr_left: self.win.rnr_left,
                ..ack::Window::default()
            },
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
            self.win.retry_left = r;
        }
        if let Some(r) = rnr {
            self.win.rnr_left = r;
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
        (c"sq_unacked_psn", r.win.comp_psn.get(), true),
        (
            c"sq_unacked",
            rc::in_flight(r.win.comp_psn, r.win.sent_end),
            false,
        ),
        (c"retry_left", u32::from(r.win.retry_left), false),
        (c"rnr_retry_left", u32::from(r.win.rnr_left), false),
        (c"rnr_wait", u32::from(r.win.rnr_wait), false),
        (c"ack_timer", u32::from(r.win.timer_armed), false),
        (c"rd_atomic_in_flight", r.reads_in_flight, false),
        (c"rq_expected_psn", st.resp.epsn.get(), true),
        (c"msn", st.resp.msn, false),
    ]
}

impl Resp {
    /// The storage of a responder's atomic replies and READ history
    /// ([`Resp::new`]), for an RC QP (`rc`); other services have no READs
    /// or atomics, and get none (about 10 KiB a QP saved). The READ
    /// history is sized for the largest `max_dest_rd_atomic` rather than
    /// the QP's own, so that a later modify_qp, under the QP's lock, never
    /// has to grow it.
    pub(crate) fn storage(rc: bool) -> Result<RespStorage> {
        let (atomics, reads) = if rc {
            (ATOMIC_REPLIES, READ_HISTORY)
        } else {
            (0, 0)
        };
        Ok(RespStorage {
            atomics: KVec::from_elem(None, atomics, GFP_KERNEL)?,
            reads: KVec::from_elem(None, reads, GFP_KERNEL)?,
        })
    }

    /// A responder in its reset state, its histories kept in `storage`
    /// ([`Resp::storage`]).
    pub(crate) fn new(storage: RespStorage) -> Self {
        Resp {
            epsn: Psn::default(),
            msn: 0,
            op: InProgress::None,
            msg_mtu: 0,
            nak_sent: false,
            recv: None,
            write_va: 0,
            write_rkey: 0,
            write_resid: 0,
            write_len: 0,
            atomics: AtomicReplies::new(storage.atomics),
            read: None,
            reads: ReadHistory::new(storage.reads),
        }
    }

    /// Resets the responder to expect `psn`.
    pub(crate) fn reset(&mut self, psn: Psn) {
        // Field by field, in place: `*self = Resp { .. }` built two copies
        // of the histories on the stack (6 KiB frames in modify_qp), and
        // the atomics' storage is kept.
        let Resp {
            epsn,
            msn,
            op,
            msg_mtu,
            nak_sent,
            recv,
            write_va,
            write_rkey,
            write_resid,
            write_len,
            atomics,
            read,
            reads,
        } = self;
        *epsn = psn;
        *msn = 0;
        *op = InProgress::None;
        *msg_mtu = 0;
        *nak_sent = false;
        *recv = None;
        *write_va = 0;
        *write_rkey = 0;
        *write_resid = 0;
        *write_len = 0;
        atomics.clear();
        *read = None;
        reads.clear();
    }

    /// The MSN once the message now ending is counted (it wraps at 24
    /// bits, the width of the AETH field that carries it).
    pub(crate) fn msn_after(&self) -> u32 {
        (self.msn + 1) & crate::proto::aeth::MSN_MASK
    }

    /// Counts a message the responder finished.
    pub(crate) fn next_msn(&mut self) {
        self.msn = self.msn_after();
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
pub(crate) fn wc(
    qp: &Qp<Rrxe>,
    wr_id: u64,
    status: WcStatus,
    opcode: WcOpcode,
    byte_len: u32,
) -> Wc {
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
        let w = wc(qp, m.wr_id, status, m.wc_opcode.into(), m.len);
        // An overrun is reported as a CQ error event by the CQ.
        let _ = RrxeCq::post(qp.send_cq(), &w, false);
    }
    st.sq.advance();
}

/// Moves the QP to ERR after an error completion: every other WQE is
/// flushed and the timers stop.
pub(crate) fn to_error(qp: &Qp<Rrxe>, st: &mut State) {
    trace::qp_state(qp.device(), qp.qp_num(), st.attr.qp_state(), QpState::Err);
    st.attr.set_qp_state(QpState::Err);
    st.attr.set_cur_qp_state(QpState::Err);
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
    ack::arm_retransmit(&mut completer::Completer::new(qp, st, 0));
}
