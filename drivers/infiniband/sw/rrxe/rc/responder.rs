// SPDX-License-Identifier: GPL-2.0

#![forbid(unsafe_code)]

//! RC responder: checks each request packet against the expected PSN,
//! the opcode sequence, lengths, keys and permissions, executes it and
//! acknowledges (IBTA Vol 1 §9.7.4, §9.7.5); answers READs as a stream.

use crate::{
    proto::{
        aeth::{
            Aeth,
            NakCode,
            Syndrome, //
        },
        atmack::AtomicAckEth,
        bth::Bth,
        icrc::UDP_HDR_LEN,
        opcode::{
            Opcode,
            Operation, //
        },
        packet::{
            parse_packet,
            ExtHeaders,
            Packet, //
        },
        psn::Psn,
        rc::{
            self,
            RequestPsn, //
        },
        reth::Reth,
        wqe::{
            self,
            RecvWqe, //
        },
    },
    rdma::{
        access::{
            AccessFlag,
            AccessFlags, //
        },
        qp::{
            Qp,
            QpState,
            QpType, //
        },
        trace,
        wc::{
            Wc,
            WcStatus, //
        },
    },
};
use kernel::prelude::*;

use crate::rrxe::{
    mem::{
        self,
        Access,
        CopyDir,
        MemError,
        Need,
        Sges, //
    },
    odp::{
        self,
        OdpFault, //
    },
    srq::RrxeSrq, //
};

use super::{
    accept_payload_len,
    local_ops::invalidate_for_send,
    qp_counts,
    read::{
        replay_read,
        start_read,
        stream_read, //
    },
    requester::MAX_MSG_SIZE,
    to_error,
    tx_ctx,
    uc::on_uc_request,
    wc,
    Counter,
    RecvCtx,
    Rrxe,
    RrxeCq,
    State, //
};
use crate::{
    proto::wr::wc as wc_op,
    rdma::wc::{
        WC_WITH_IMM,
        WC_WITH_INVALIDATE, //
    },
};

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
    let bth = Bth::new(opcode, dest_qpn, psn);
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
pub(super) fn ack() -> Syndrome {
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
pub(super) fn complete_recv(qp: &Qp<Rrxe>, st: &mut State, w: Wc, solicited: bool) {
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
        let w = wc(qp, r.wr_id, status, wc_op::RECV, 0);
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
pub(super) fn access_violation(qp: &Qp<Rrxe>, st: &mut State, immediate: bool, psn: Psn) {
    if immediate {
        resp_fail(
            qp,
            st,
            NakCode::RemoteAccessError,
            Some(WcStatus::RemAccessErr),
            psn,
        );
    } else {
        crate::rrxe::qp::RrxeQp::access_error(qp);
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
pub(super) fn check_reth(qp: &Qp<Rrxe>, reth: &Reth, need: Need) -> Result<(), NakCode> {
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

/// Most held requests one run of [`resume_responder`] handles; the rest
/// wait for the next kick.
const RESUME_BUDGET: u32 = 64;

/// The responder's part of the QP's kick: continues the READ being
/// answered, then handles, in arrival order, the requests that waited for
/// it (each of which may start another READ).
pub(crate) fn resume_responder(qp: &Qp<Rrxe>, st: &mut State) {
    if !matches!(qp.qp_type(), QpType::Rc | QpType::Uc) {
        return;
    }
    let mut budget = RESUME_BUDGET;
    loop {
        stream_read(qp, st);
        if st.resp.read.is_some() || st.odp.responder_waits {
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
            if handle_request(qp, st, &pkt) == Handled::Wait {
                // First again: it is executed once its memory is mapped.
                qp.rxq.push_front(skb);
                return;
            }
        }
        // Freed by the kick once the state lock is released: a received
        // skb's pages may not go back to their page pool with interrupts
        // off.
        qp.rx_done.push_back(skb);
    }
}

/// What became of a request packet handed to [`on_request`].
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Taken {
    /// Handled (or dropped).
    Done,
    /// A READ is being answered, or on-demand memory faulted in: the
    /// caller must hold the packet on the QP's `rxq` and kick the QP,
    /// which handles it after the READ or the fault.
    Hold,
}

/// What [`handle_request`] did with a request.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum Handled {
    /// Executed, answered or dropped.
    Done,
    /// It waits for on-demand memory to be faulted in: it is to be held
    /// and handled again, first, once the QP's work ran
    /// ([`super::super::odp`]).
    Wait,
}

/// Responder: a request packet arrived.
pub(crate) fn on_request(qp: &Qp<Rrxe>, st: &mut State, pkt: &Packet<'_>) -> Taken {
    let held = (qp.qp_type() == QpType::Rc && st.resp.read.is_some())
        || !qp.rxq.is_empty()
        || st.odp.responder_waits;
    if held || handle_request(qp, st, pkt) == Handled::Wait {
        return Taken::Hold;
    }
    Taken::Done
}

/// Why the responder refuses a request. Each is answered in one place,
/// [`refuse`], after the stage that found it returned.
#[derive(Clone, Copy)]
pub(super) enum Refusal {
    /// NAK with this code and move to ERR; a receive WQE in progress
    /// completes with the status, if one is given ([`resp_fail`]).
    Nak(NakCode, Option<WcStatus>),
    /// No receive WQE is posted: RNR NAK, and the requester retries.
    NotReady,
    /// A memory check gave this NAK code ([`check_fail`]); `bool`: the
    /// request carries immediate data.
    Check(NakCode, bool),
    /// Memory the request names may not be accessed
    /// ([`access_violation`]); `bool`: it carries immediate data.
    Access(bool),
    /// On-demand memory is not mapped: the request waits while it is
    /// faulted in ([`odp::request`]); the refusal [`Unmapped`] names when
    /// it cannot be.
    Fault(OdpFault, Unmapped),
}

/// How a request is refused whose on-demand memory cannot be faulted in:
/// as any access to memory the receiver cannot use.
#[derive(Clone, Copy)]
pub(super) enum Unmapped {
    /// [`Refusal::Access`].
    Access(bool),
    /// A receive WQE's buffer: a remote operational error, and the WQE
    /// completes with a local protection error.
    Receive,
}

impl Refusal {
    /// The refusal of a request whose memory access failed with `e`:
    /// `otherwise` unless on-demand memory needs a fault.
    pub(super) fn of_mem(e: MemError, otherwise: Refusal, unmapped: Unmapped) -> Refusal {
        match e {
            MemError::Fault(f) => Refusal::Fault(f, unmapped),
            _ => otherwise,
        }
    }
}

/// An invalid request (class C, IBTA Vol 1 §9.9.2.2).
pub(super) const INVALID: Refusal = Refusal::Nak(NakCode::InvalidRequest, None);

/// What an executed request leaves to [`handle_request`].
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum Executed {
    /// A packet of a SEND or WRITE was placed: the expected PSN moves on,
    /// and the requester gets an ACK if it asked for one.
    Placed,
    /// The request was answered and the expected PSN moved past it (READ,
    /// atomics, ATOMIC WRITE, FLUSH).
    Answered,
}

/// A request packet, as the execution stages read it.
pub(super) struct Request<'a, 'p> {
    pkt: &'a Packet<'p>,
    psn: Psn,
    payload: &'a [u8],
    plen: u32,
    first: bool,
    last: bool,
    immediate: bool,
    /// The QP's `IB_ACCESS_REMOTE_*` grants.
    qp_access: AccessFlags,
}

impl<'a, 'p> Request<'a, 'p> {
    pub(super) fn new(pkt: &'a Packet<'p>, st: &State) -> Self {
        let info = pkt.info();
        let payload = pkt.payload();
        Request {
            pkt,
            psn: pkt.bth().psn,
            payload,
            plen: u32::try_from(payload.len()).unwrap_or(u32::MAX),
            first: info.position.is_first(),
            last: info.position.is_last(),
            immediate: info.has_immediate(),
            qp_access: st.attr.qp_access_flags(),
        }
    }
}

/// Answers a refused request at `psn`; [`Handled::Wait`] for one that
/// waits for on-demand memory.
pub(super) fn refuse(qp: &Qp<Rrxe>, st: &mut State, r: Refusal, psn: Psn) -> Handled {
    if let Refusal::Fault(f, unmapped) = r {
        if odp::request(qp, &mut st.odp, f) {
            st.odp.responder_waits = true;
            return Handled::Wait;
        }
        // It cannot be faulted in: refused as memory the receiver cannot
        // use.
        let then = match unmapped {
            Unmapped::Access(immediate) => Refusal::Access(immediate),
            Unmapped::Receive => {
                Refusal::Nak(NakCode::RemoteOperationalError, Some(WcStatus::LocProtErr))
            }
        };
        return refuse(qp, st, then, psn);
    }
    match r {
        Refusal::Nak(code, status) => resp_fail(qp, st, code, status, psn),
        Refusal::NotReady => {
            qp_counts(qp).inc(Counter::SendRnrErr);
            let syndrome = rnr_nak(st);
            send_ack(qp, st, syndrome, psn);
        }
        Refusal::Check(code, immediate) => check_fail(qp, st, code, immediate, psn),
        Refusal::Access(immediate) => access_violation(qp, st, immediate, psn),
        Refusal::Fault(..) => {}
    }
    Handled::Done
}

/// Responder: handles a request packet, in PSN order with the responses of
/// earlier ones. The stages: the QP state, the PSN (a duplicate or a gap
/// is answered there), the opcode sequence and the payload length, then
/// the operation's own checks and execution; a refusal is answered once.
fn handle_request(qp: &Qp<Rrxe>, st: &mut State, pkt: &Packet<'_>) -> Handled {
    let state = st.attr.qp_state();
    if !matches!(
        state,
        QpState::Rtr | QpState::Rts | QpState::Sqd | QpState::Sqe
    ) {
        return Handled::Done;
    }
    if qp.qp_type() == QpType::Uc {
        return on_uc_request(qp, st, pkt);
    }
    let info = pkt.info();
    let bth = pkt.bth();
    let psn = bth.psn;
    if !check_psn(qp, st, pkt) {
        return Handled::Done;
    }
    let Ok(next_op) = rc::check_op_sequence(st.resp.op, info) else {
        return refuse(qp, st, INVALID, psn);
    };
    let plen = u32::try_from(pkt.payload().len()).unwrap_or(u32::MAX);
    if !accept_payload_len(st, info.position, plen) {
        return refuse(qp, st, INVALID, psn);
    }
    let rq = Request::new(pkt, st);
    let executed = match info.operation {
        Operation::Send => execute_send(qp, st, &rq),
        Operation::RdmaWrite => execute_write(qp, st, &rq),
        Operation::RdmaReadRequest => execute_read(qp, st, &rq),
        Operation::CompareSwap | Operation::FetchAdd => execute_atomic(qp, st, &rq),
        Operation::AtomicWrite => execute_atomic_write(qp, st, &rq),
        Operation::Flush => execute_flush(qp, st, &rq),
        _ => Err(INVALID),
    };
    match executed {
        Err(r) => return refuse(qp, st, r, psn),
        Ok(Executed::Answered) => {}
        Ok(Executed::Placed) => {
            st.resp.op = next_op;
            st.resp.epsn = psn.next();
            if rq.last {
                st.resp.next_msn();
            }
            if bth.ack_req {
                send_ack(qp, st, ack(), psn);
            }
        }
    }
    Handled::Done
}

/// The PSN stage (IBTA Vol 1 §9.7.5.1): `true` for the expected PSN. A
/// duplicate is answered as what it repeats needs; the first packet past
/// a gap gets a sequence NAK.
fn check_psn(qp: &Qp<Rrxe>, st: &mut State, pkt: &Packet<'_>) -> bool {
    let psn = pkt.bth().psn;
    match rc::classify_request_psn(psn, st.resp.epsn, &mut st.resp.nak_sent) {
        RequestPsn::Execute => true,
        RequestPsn::Duplicate => {
            qp_counts(qp).inc(Counter::DuplicateRequest);
            answer_duplicate(qp, st, pkt);
            false
        }
        RequestPsn::SequenceNak => {
            // Counted once per sequence NAK, as the C driver does, not per
            // packet past the gap.
            qp_counts(qp).inc(Counter::OutOfSeqRequest);
            let e = st.resp.epsn;
            send_ack(qp, st, Syndrome::Nak(NakCode::PsnSequenceError), e);
            false
        }
        RequestPsn::Drop => false,
    }
}

/// Answers a duplicate request (IBTA Vol 1 §9.7.5.1.1) without executing
/// it again.
fn answer_duplicate(qp: &Qp<Rrxe>, st: &mut State, pkt: &Packet<'_>) {
    let psn = pkt.bth().psn;
    match pkt.info().operation {
        Operation::RdmaReadRequest => {
            // The responses were lost: read the memory again (a READ has no
            // side effect to repeat); one not remembered is dropped
            // (`ReadHistory::replay`).
            if let Some(reth) = pkt.ext().reth {
                if let Some(r) = st.resp.reads.replay(psn, &reth) {
                    replay_read(qp, st, r, &reth);
                }
            }
        }
        Operation::CompareSwap | Operation::FetchAdd => {
            // The acknowledge was lost: send the saved result again; an
            // atomic is never executed twice. Without a saved result (too
            // old), nothing is sent and the requester times out.
            if let Some(orig) = st.resp.atomics.find(psn) {
                send_atomic_ack(qp, st, psn, orig);
            }
        }
        Operation::AtomicWrite | Operation::Flush => {
            // Likewise an ATOMIC WRITE is not stored twice: answered again
            // while it is remembered, dropped after (a FLUSH, as in the C
            // driver's replay).
            if st.resp.atomics.find(psn).is_some() {
                send_empty_read_response(qp, st, psn);
            }
        }
        _ => {
            // SEND and WRITE are not executed twice: acknowledge what has
            // been received so far, where the requester asks for it (a
            // retransmitted message of 64 packets gets a few ACKs, not 64).
            if pkt.bth().ack_req {
                let last = st.resp.epsn.sub(1);
                send_ack(qp, st, ack(), last);
            }
        }
    }
}

/// Takes the receive WQE a SEND or a WRITE with immediate consumes.
fn take_recv_for(qp: &Qp<Rrxe>, st: &mut State) -> Result<RecvCtx, Refusal> {
    match take_recv(qp, st) {
        None => Err(Refusal::NotReady),
        Some(Err(())) => Err(Refusal::Nak(NakCode::RemoteOperationalError, None)),
        Some(Ok(r)) => {
            st.resp.recv = Some(r);
            Ok(r)
        }
    }
}

/// A packet of a SEND: scattered into the receive WQE the first packet
/// took; the last completes it.
pub(super) fn execute_send(
    qp: &Qp<Rrxe>,
    st: &mut State,
    rq: &Request<'_, '_>,
) -> Result<Executed, Refusal> {
    // (A UC receive WQE left by a dropped message is used again.)
    if rq.first && st.resp.recv.is_none() {
        take_recv_for(qp, st)?;
    }
    let r = st.resp.recv.ok_or(INVALID)?;
    let placed = rc::message_len_after(r.offset, rq.plen).ok_or(MemError::Length);
    placed
        .and_then(|_| {
            mem::scatter(
                qp.device(),
                qp.pd_id(),
                Sges::Recv(&st.rq_snap),
                r.num_sge,
                r.offset,
                rq.payload,
            )
        })
        .map_err(|e| {
            // A message longer than the receive WQE is the requester's
            // error; memory the receiver cannot use, the receiver's.
            let code = match e {
                MemError::Length => NakCode::InvalidRequest,
                _ => NakCode::RemoteOperationalError,
            };
            Refusal::of_mem(
                e,
                Refusal::Nak(code, Some(e.local_status())),
                Unmapped::Receive,
            )
        })?;
    let placed = placed.unwrap_or(0);
    if let Some(rr) = &mut st.resp.recv {
        rr.offset = placed;
    }
    if rq.last {
        let invalidated = invalidate_for_send(qp, rq.pkt)
            .map_err(|()| Refusal::Nak(NakCode::InvalidRequest, Some(WcStatus::RemInvReqErr)))?;
        let mut w = recv_wc(qp, st, r.wr_id, wc_op::RECV, placed, rq.pkt);
        if let Some(rkey) = invalidated {
            w.ex = rkey;
            w.wc_flags |= WC_WITH_INVALIDATE;
        }
        complete_recv(qp, st, w, rq.pkt.bth().se);
    }
    Ok(Executed::Placed)
}

/// A packet of an RDMA WRITE: placed at the address its message's RETH
/// named; the last of a WRITE with immediate completes a receive WQE.
pub(super) fn execute_write(
    qp: &Qp<Rrxe>,
    st: &mut State,
    rq: &Request<'_, '_>,
) -> Result<Executed, Refusal> {
    // As the C driver: an operation the QP does not grant is an invalid
    // request (REM_INV_REQ_ERR), not an access error.
    if !rq.qp_access.contains(AccessFlag::RemoteWrite) {
        return Err(INVALID);
    }
    // WRITE with immediate consumes a receive WQE: make sure one is there
    // before any data is placed.
    if rq.immediate && st.resp.recv.is_none() {
        take_recv_for(qp, st)?;
    }
    if rq.first {
        let reth = rq.pkt.ext().reth.ok_or(INVALID)?;
        check_reth(qp, &reth, Need::RemoteWrite).map_err(|c| Refusal::Check(c, rq.immediate))?;
        st.resp.write_va = reth.va;
        st.resp.write_rkey = reth.rkey;
        st.resp.write_resid = reth.dma_len;
        st.resp.write_len = reth.dma_len;
    }
    if rq.plen > st.resp.write_resid || (rq.last && rq.plen != st.resp.write_resid) {
        return Err(INVALID);
    }
    let at = Access::rkey(
        qp.uid,
        st.resp.write_rkey,
        Need::RemoteWrite,
        st.resp.write_va,
    );
    mem::copy(qp.device(), qp.pd_id(), at, CopyDir::ToMr(rq.payload)).map_err(|e| match e {
        // The rest of the message is faulted in with this packet's part.
        MemError::Fault(f) => {
            let rest = (st.resp.write_resid - rq.plen) as usize;
            Refusal::Fault(f.and_more(rest), Unmapped::Access(rq.immediate))
        }
        _ => Refusal::Access(rq.immediate),
    })?;
    st.resp.write_va = st.resp.write_va.wrapping_add(u64::from(rq.plen));
    st.resp.write_resid -= rq.plen;
    if rq.last && rq.immediate {
        if let Some(r) = st.resp.recv {
            let len = st.resp.write_len;
            let w = recv_wc(qp, st, r.wr_id, wc_op::RECV_RDMA_WITH_IMM, len, rq.pkt);
            complete_recv(qp, st, w, rq.pkt.bth().se);
        }
    }
    Ok(Executed::Placed)
}

/// An RDMA READ request: checked, then answered as a stream.
fn execute_read(qp: &Qp<Rrxe>, st: &mut State, rq: &Request<'_, '_>) -> Result<Executed, Refusal> {
    let reth = rq.pkt.ext().reth.ok_or(INVALID)?;
    if !rq.qp_access.contains(AccessFlag::RemoteRead) {
        return Err(INVALID);
    }
    // On-demand memory is faulted in before the responses start (their
    // stream also waits, should a page go meanwhile).
    let at = Access::rkey(qp.uid, reth.rkey, Need::RemoteRead, reth.va);
    // Its start: the stream waits for the rest as it gets there.
    let len = (reth.dma_len as usize).min(odp::MAX_FAULT_LEN);
    mem::probe(qp.device(), qp.pd_id(), at, len)
        .map_err(|e| Refusal::of_mem(e, INVALID, Unmapped::Access(false)))?;
    let msn = st.resp.msn_after();
    let count = start_read(qp, st, rq.psn, &reth, msn).map_err(|c| Refusal::Check(c, false))?;
    st.resp.epsn = rq.psn.add(count);
    st.resp.msn = msn;
    Ok(Executed::Answered)
}

/// Moves the expected PSN past the single-packet request at `psn` that
/// was executed, and remembers it with `saved` for a retransmission.
fn executed_once(st: &mut State, psn: Psn, saved: u64) {
    st.resp.atomics.record(psn, saved);
    st.resp.epsn = psn.next();
    st.resp.next_msn();
}

/// CmpSwap or FetchAdd: executed once, its original value kept by PSN.
fn execute_atomic(
    qp: &Qp<Rrxe>,
    st: &mut State,
    rq: &Request<'_, '_>,
) -> Result<Executed, Refusal> {
    let a = rq.pkt.ext().atmeth.ok_or(INVALID)?;
    // As the C driver: a QP without remote atomic access is an invalid
    // request; then a bad key or range is a remote access error, and only
    // a valid one at a misaligned address an invalid request
    // (`mem::atomic` checks in that order, as rdma_rxe's check_rkey runs
    // before its atomic op).
    if !rq.qp_access.contains(AccessFlag::RemoteAtomic) {
        return Err(INVALID);
    }
    let compare_swap = rq.pkt.info().operation == Operation::CompareSwap;
    let orig = mem::atomic(qp.device(), qp.pd_id(), qp.uid, a.rkey, a.va, |v| {
        if compare_swap {
            (v == a.compare).then_some(a.swap_add)
        } else {
            Some(v.wrapping_add(a.swap_add))
        }
    })
    .map_err(|e| match e {
        MemError::Misaligned => INVALID,
        MemError::Fault(f) => Refusal::Fault(f, Unmapped::Access(rq.immediate)),
        _ => Refusal::Access(rq.immediate),
    })?;
    executed_once(st, rq.psn, orig);
    send_atomic_ack(qp, st, rq.psn, orig);
    Ok(Executed::Answered)
}

/// ATOMIC WRITE (IBTA Vol 1 Annex A19): 8 bytes stored once.
fn execute_atomic_write(
    qp: &Qp<Rrxe>,
    st: &mut State,
    rq: &Request<'_, '_>,
) -> Result<Executed, Refusal> {
    let reth = rq.pkt.ext().reth.ok_or(INVALID)?;
    // As the C driver: the QP must grant remote write (else an invalid
    // request), the key and range remote write (else an access error);
    // then the payload must be exactly the 8 bytes the RETH names, at an
    // 8-byte aligned address (else an invalid request).
    if !rq.qp_access.contains(AccessFlag::RemoteWrite) {
        return Err(INVALID);
    }
    let (dev, pd_id) = (qp.device(), qp.pd_id());
    let (rkey, va, len) = (reth.rkey, reth.va, reth.dma_len);
    mem::check_remote(dev, pd_id, qp.uid, rkey, Need::RemoteWrite, va, len)
        .map_err(|_| Refusal::Access(rq.immediate))?;
    let value = <[u8; wqe::ATOMIC_WRITE_SIZE]>::try_from(rq.payload).map_err(|_| INVALID)?;
    if reth.dma_len as usize != wqe::ATOMIC_WRITE_SIZE || reth.va & 7 != 0 {
        return Err(INVALID);
    }
    mem::atomic_write(dev, pd_id, qp.uid, rkey, va, value).map_err(|e| match e {
        MemError::Misaligned => INVALID,
        MemError::Fault(f) => Refusal::Fault(f, Unmapped::Access(rq.immediate)),
        _ => Refusal::Access(rq.immediate),
    })?;
    // Remembered by PSN so that a retransmission is answered, not stored
    // again (the value saved is unused).
    executed_once(st, rq.psn, 0);
    send_empty_read_response(qp, st, rq.psn);
    Ok(Executed::Answered)
}

/// FLUSH (IBTA Vol 1 §9.4.8, as rdma_rxe): the placement types asked, over
/// the region or the range.
fn execute_flush(qp: &Qp<Rrxe>, st: &mut State, rq: &Request<'_, '_>) -> Result<Executed, Refusal> {
    let (Some(feth), Some(reth)) = (rq.pkt.ext().feth, rq.pkt.ext().reth) else {
        return Err(INVALID);
    };
    // As the C driver: the QP must grant the FLUSH access of each placement
    // type asked (else an invalid request), the key the same and, for the
    // range selectivity, the range (else an access error). As there, only
    // the region selectivity skips the range check, and any but the range
    // one flushes the region.
    let need = mem::flush_access(feth.placement_type);
    if !rq.qp_access.contains_all(need) {
        return Err(INVALID);
    }
    // C9-94, as for every RETH (rdma_rxe's check_length): a DMA length past
    // 2^31 is an invalid request, whatever the selectivity.
    if reth.dma_len > MAX_MSG_SIZE {
        return Err(INVALID);
    }
    let range = (reth.va, u64::from(reth.dma_len));
    mem::flush(
        qp.device(),
        qp.pd_id(),
        qp.uid,
        reth.rkey,
        feth.placement_type,
        feth.selectivity,
        range,
    )
    .map_err(|_| Refusal::Access(rq.immediate))?;
    executed_once(st, rq.psn, 0);
    send_empty_read_response(qp, st, rq.psn);
    Ok(Executed::Answered)
}
