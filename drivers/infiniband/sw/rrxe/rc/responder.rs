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
    requester::MAX_MSG_SIZE,
    to_error,
    tx_ctx,
    wc,
    Counter,
    RecvCtx,
    Rrxe,
    RrxeCq,
    State, //
};
use crate::rdma::wc::{
    WcOpcode,
    WC_WITH_IMM,
    WC_WITH_INVALIDATE, //
};

/// The responder of an RC or UC QP at work, with the QP's state locked:
/// what every stage of checking, executing and answering a request reads
/// and changes.
pub(super) struct Responder<'a> {
    pub(super) qp: &'a Qp<Rrxe>,
    pub(super) st: &'a mut State,
}

/// An ACK carrying "unlimited credits" (rxe does not do end-to-end credits).
pub(super) fn ack() -> Syndrome {
    Syndrome::Ack {
        credits: crate::proto::aeth::CREDITS_UNLIMITED,
    }
}

/// The RNR NAK of the QP's `min_rnr_timer` ([`Syndrome::rnr_nak`]).
fn rnr_nak(st: &State) -> Syndrome {
    Syndrome::rnr_nak(st.attr.min_rnr_timer())
}

impl Responder<'_> {
    /// Queues an acknowledge with `syndrome` for `psn`.
    fn send_ack(&mut self, syndrome: Syndrome, psn: Psn) {
        self.queue_ack(syndrome, psn, None);
    }

    /// Queues the atomic acknowledge of the request at `psn`, carrying the
    /// original value `orig` of the remote word.
    fn send_atomic_ack(&mut self, psn: Psn, orig: u64) {
        self.queue_ack(ack(), psn, Some(AtomicAckEth { orig }));
    }

    /// Queues the answer to the ATOMIC WRITE or FLUSH at `psn`: as rdma_rxe, an
    /// RDMA READ RESPONSE ONLY with an ACK AETH and no data.
    fn send_empty_read_response(&mut self, psn: Psn) {
        self.queue_ack_as(Opcode::RC_RDMA_READ_RESPONSE_ONLY, ack(), psn, None);
    }

    /// Queues an acknowledge (an atomic acknowledge when `atmack` is given).
    fn queue_ack(&mut self, syndrome: Syndrome, psn: Psn, atmack: Option<AtomicAckEth>) {
        let opcode = if atmack.is_some() {
            Opcode::RC_ATOMIC_ACKNOWLEDGE
        } else {
            Opcode::RC_ACKNOWLEDGE
        };
        self.queue_ack_as(opcode, syndrome, psn, atmack);
    }

    /// Queues a response packet `opcode` without payload, carrying an AETH
    /// (and `atmack` when given).
    fn queue_ack_as(
        &mut self,
        opcode: Opcode,
        syndrome: Syndrome,
        psn: Psn,
        atmack: Option<AtomicAckEth>,
    ) {
        let msn = self.st.resp.msn;
        let dest_qpn = self.st.attr.dest_qp_num();
        let Some(tx) = tx_ctx(self.qp, self.st) else {
            return;
        };
        let Ok(aeth) = Aeth::new(syndrome, msn) else {
            return;
        };
        if !matches!(syndrome, Syndrome::Ack { .. }) {
            let (dev, qpn) = (self.qp.device(), self.qp.qp_num());
            trace::nak(dev, qpn, psn.get(), aeth.syndrome, true);
        }
        let bth = Bth::new(opcode, dest_qpn, psn);
        let ext = ExtHeaders {
            aeth: Some(aeth),
            atmack,
            ..ExtHeaders::default()
        };
        match tx.build(&bth, &ext, 0, |_| Ok(())) {
            Ok(skb) => {
                self.qp.txq.push_back(skb);
                if opcode == Opcode::RC_ACKNOWLEDGE {
                    qp_counts(self.qp).inc(Counter::SentAcks);
                }
            }
            Err(_) => qp_counts(self.qp).inc(Counter::SendErr),
        }
    }

    /// Takes the next receive WQE from the QP's receive queue or SRQ into
    /// `State::rq_snap`.
    fn take_recv(&mut self) -> Option<Result<RecvCtx, ()>> {
        let from_srq = match &mut self.st.rq {
            Some(rq) => {
                let c = rq.consumer();
                if rq.geo.is_empty(rq.producer(), c) {
                    return None;
                }
                if rq.read_slot(c, &mut self.st.rq_snap).is_err() {
                    return Some(Err(()));
                }
                false
            }
            None => {
                let srq = self.qp.srq()?;
                if !RrxeSrq::take(srq, &mut self.st.rq_snap) {
                    return None;
                }
                true
            }
        };
        Some(match RecvWqe::parse(&self.st.rq_snap) {
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
    fn recv_wc(&self, wr_id: u64, opcode: WcOpcode, byte_len: u32, pkt: &Packet<'_>) -> Wc {
        let mut w = wc(self.qp, wr_id, WcStatus::Success, opcode, byte_len);
        w.src_qp = self.st.attr.dest_qp_num();
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
    pub(super) fn complete_recv(&mut self, w: Wc, solicited: bool) {
        if let Some(r) = self.st.resp.recv.take() {
            if w.status == WcStatus::Success {
                qp_counts(self.qp).inc(Counter::RdmaRecvs);
            }
            if !r.from_srq {
                if let Some(rq) = &mut self.st.rq {
                    rq.advance();
                }
            }
            let _ = RrxeCq::post(self.qp.recv_cq(), &w, solicited);
        }
    }

    /// A fatal responder error: NAK, complete the held receive WQE with
    /// `status` and move the QP to ERR.
    fn resp_fail(&mut self, code: NakCode, status: Option<WcStatus>, psn: Psn) {
        self.send_ack(Syndrome::Nak(code), psn);
        if let (Some(status), Some(r)) = (status, self.st.resp.recv) {
            let w = wc(self.qp, r.wr_id, status, WcOpcode::Recv, 0);
            self.complete_recv(w, false);
        }
        to_error(self.qp, self.st);
    }

    /// A request that names memory it may not access (a bad R_Key, range or
    /// access right; class C, IBTA Vol 1 §9.9.2.2 and C9-222.1): NAK with a
    /// remote access error. A packet with immediate data reports it in the
    /// receive completion it consumed; without one, nothing at the responder
    /// would, so QP Access Error is raised, as the C driver does
    /// (`get_rkey_violation_state`).
    pub(super) fn access_violation(&mut self, immediate: bool, psn: Psn) {
        if immediate {
            self.resp_fail(
                NakCode::RemoteAccessError,
                Some(WcStatus::RemAccessErr),
                psn,
            );
        } else {
            crate::rrxe::qp::RrxeQp::access_error(self.qp);
            self.resp_fail(NakCode::RemoteAccessError, None, psn);
        }
    }

    /// [`Self::resp_fail`] for the NAK code a memory check gave.
    fn check_fail(&mut self, code: NakCode, immediate: bool, psn: Psn) {
        match code {
            NakCode::RemoteAccessError => self.access_violation(immediate, psn),
            _ => self.resp_fail(code, None, psn),
        }
    }

    /// Checks the memory a READ or the first packet of a WRITE names, before
    /// anything is read or placed ([`rc::check_reth`]).
    pub(super) fn check_reth(&self, reth: &Reth, need: Need) -> Result<(), NakCode> {
        rc::check_reth(reth.dma_len, || {
            mem::check_remote(
                self.qp.device(),
                self.qp.pd_id(),
                self.qp.uid,
                reth.rkey,
                need,
                reth.va,
                reth.dma_len,
            )
            .is_ok()
        })
    }
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
    let mut r = Responder { qp, st };
    let mut budget = RESUME_BUDGET;
    loop {
        r.stream_read();
        if r.st.resp.read.is_some() || r.st.odp.responder_waits {
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
            if r.handle_request(&pkt) == Handled::Wait {
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

/// What [`Responder::handle_request`] did with a request.
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
    let mut r = Responder { qp, st };
    let held = (qp.qp_type() == QpType::Rc && r.st.resp.read.is_some())
        || !qp.rxq.is_empty()
        || r.st.odp.responder_waits;
    if held || r.handle_request(pkt) == Handled::Wait {
        return Taken::Hold;
    }
    Taken::Done
}

/// Why the responder refuses a request. Each is answered in one place,
/// [`Responder::refuse`], after the stage that found it returned.
#[derive(Clone, Copy)]
pub(super) enum Refusal {
    /// NAK with this code and move to ERR; a receive WQE in progress
    /// completes with the status, if one is given
    /// ([`Responder::resp_fail`]).
    Nak(NakCode, Option<WcStatus>),
    /// No receive WQE is posted: RNR NAK, and the requester retries.
    NotReady,
    /// A memory check gave this NAK code ([`Responder::check_fail`]);
    /// `bool`: the request carries immediate data.
    Check(NakCode, bool),
    /// Memory the request names may not be accessed
    /// ([`Responder::access_violation`]); `bool`: it carries immediate data.
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

/// What an executed request leaves to [`Responder::handle_request`].
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

impl Responder<'_> {
    /// Answers a refused request at `psn`; [`Handled::Wait`] for one that
    /// waits for on-demand memory.
    pub(super) fn refuse(&mut self, r: Refusal, psn: Psn) -> Handled {
        if let Refusal::Fault(f, unmapped) = r {
            if odp::request(self.qp, &mut self.st.odp, f) {
                self.st.odp.responder_waits = true;
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
            return self.refuse(then, psn);
        }
        match r {
            Refusal::Nak(code, status) => self.resp_fail(code, status, psn),
            Refusal::NotReady => {
                qp_counts(self.qp).inc(Counter::SendRnrErr);
                let syndrome = rnr_nak(self.st);
                self.send_ack(syndrome, psn);
            }
            Refusal::Check(code, immediate) => self.check_fail(code, immediate, psn),
            Refusal::Access(immediate) => self.access_violation(immediate, psn),
            Refusal::Fault(..) => {}
        }
        Handled::Done
    }

    /// Responder: handles a request packet, in PSN order with the responses of
    /// earlier ones. The stages: the QP state, the PSN (a duplicate or a gap
    /// is answered there), the opcode sequence and the payload length, then
    /// the operation's own checks and execution; a refusal is answered once.
    fn handle_request(&mut self, pkt: &Packet<'_>) -> Handled {
        let state = self.st.attr.qp_state();
        if !matches!(
            state,
            QpState::Rtr | QpState::Rts | QpState::Sqd | QpState::Sqe
        ) {
            return Handled::Done;
        }
        if self.qp.qp_type() == QpType::Uc {
            return self.on_uc_request(pkt);
        }
        let info = pkt.info();
        let bth = pkt.bth();
        let psn = bth.psn;
        if !self.check_psn(pkt) {
            return Handled::Done;
        }
        let Ok(next_op) = rc::check_op_sequence(self.st.resp.op, info) else {
            return self.refuse(INVALID, psn);
        };
        let plen = u32::try_from(pkt.payload().len()).unwrap_or(u32::MAX);
        if !accept_payload_len(self.st, info.position, plen) {
            return self.refuse(INVALID, psn);
        }
        let rq = Request::new(pkt, self.st);
        let executed = match info.operation {
            Operation::Send => self.execute_send(&rq),
            Operation::RdmaWrite => self.execute_write(&rq),
            Operation::RdmaReadRequest => self.execute_read(&rq),
            Operation::CompareSwap | Operation::FetchAdd => self.execute_atomic(&rq),
            Operation::AtomicWrite => self.execute_atomic_write(&rq),
            Operation::Flush => self.execute_flush(&rq),
            _ => Err(INVALID),
        };
        match executed {
            Err(r) => return self.refuse(r, psn),
            Ok(Executed::Answered) => {}
            Ok(Executed::Placed) => {
                self.st.resp.op = next_op;
                self.st.resp.epsn = psn.next();
                if rq.last {
                    self.st.resp.next_msn();
                }
                if bth.ack_req {
                    self.send_ack(ack(), psn);
                }
            }
        }
        Handled::Done
    }

    /// The PSN stage (IBTA Vol 1 §9.7.5.1): `true` for the expected PSN. A
    /// duplicate is answered as what it repeats needs; the first packet past
    /// a gap gets a sequence NAK.
    fn check_psn(&mut self, pkt: &Packet<'_>) -> bool {
        let psn = pkt.bth().psn;
        match rc::classify_request_psn(psn, self.st.resp.epsn, &mut self.st.resp.nak_sent) {
            RequestPsn::Execute => true,
            RequestPsn::Duplicate => {
                qp_counts(self.qp).inc(Counter::DuplicateRequest);
                self.answer_duplicate(pkt);
                false
            }
            RequestPsn::SequenceNak => {
                // Counted once per sequence NAK, as the C driver does, not per
                // packet past the gap.
                qp_counts(self.qp).inc(Counter::OutOfSeqRequest);
                let e = self.st.resp.epsn;
                self.send_ack(Syndrome::Nak(NakCode::PsnSequenceError), e);
                false
            }
            RequestPsn::Drop => false,
        }
    }

    /// Answers a duplicate request (IBTA Vol 1 §9.7.5.1.1) without executing
    /// it again.
    fn answer_duplicate(&mut self, pkt: &Packet<'_>) {
        let psn = pkt.bth().psn;
        match pkt.info().operation {
            Operation::RdmaReadRequest => {
                // The responses were lost: read the memory again (a READ has no
                // side effect to repeat); one not remembered is dropped
                // (`ReadHistory::replay`).
                if let Some(reth) = pkt.ext().reth {
                    if let Some(r) = self.st.resp.reads.replay(psn, &reth) {
                        self.replay_read(r, &reth);
                    }
                }
            }
            Operation::CompareSwap | Operation::FetchAdd => {
                // The acknowledge was lost: send the saved result again; an
                // atomic is never executed twice. Without a saved result (too
                // old), nothing is sent and the requester times out.
                if let Some(orig) = self.st.resp.atomics.find(psn) {
                    self.send_atomic_ack(psn, orig);
                }
            }
            Operation::AtomicWrite | Operation::Flush => {
                // Likewise an ATOMIC WRITE is not stored twice: answered again
                // while it is remembered, dropped after (a FLUSH, as in the C
                // driver's replay).
                if self.st.resp.atomics.find(psn).is_some() {
                    self.send_empty_read_response(psn);
                }
            }
            _ => {
                // SEND and WRITE are not executed twice: acknowledge what has
                // been received so far, where the requester asks for it (a
                // retransmitted message of 64 packets gets one ACK, not 64).
                if pkt.bth().ack_req {
                    let last = self.st.resp.epsn.sub(1);
                    self.send_ack(ack(), last);
                }
            }
        }
    }

    /// Takes the receive WQE a SEND or a WRITE with immediate consumes.
    fn take_recv_for(&mut self) -> Result<RecvCtx, Refusal> {
        match self.take_recv() {
            None => Err(Refusal::NotReady),
            Some(Err(())) => Err(Refusal::Nak(NakCode::RemoteOperationalError, None)),
            Some(Ok(r)) => {
                self.st.resp.recv = Some(r);
                Ok(r)
            }
        }
    }

    /// A packet of a SEND: scattered into the receive WQE the first packet
    /// took; the last completes it.
    pub(super) fn execute_send(&mut self, rq: &Request<'_, '_>) -> Result<Executed, Refusal> {
        // (A UC receive WQE left by a dropped message is used again.)
        if rq.first && self.st.resp.recv.is_none() {
            self.take_recv_for()?;
        }
        let r = self.st.resp.recv.ok_or(INVALID)?;
        let placed = rc::message_len_after(r.offset, rq.plen).ok_or(MemError::Length);
        placed
            .and_then(|_| {
                mem::scatter(
                    self.qp.device(),
                    self.qp.pd_id(),
                    Sges::Recv(&self.st.rq_snap),
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
        if let Some(rr) = &mut self.st.resp.recv {
            rr.offset = placed;
        }
        if rq.last {
            let invalidated = invalidate_for_send(self.qp, rq.pkt).map_err(|()| {
                Refusal::Nak(NakCode::InvalidRequest, Some(WcStatus::RemInvReqErr))
            })?;
            let mut w = self.recv_wc(r.wr_id, WcOpcode::Recv, placed, rq.pkt);
            if let Some(rkey) = invalidated {
                w.ex = rkey;
                w.wc_flags |= WC_WITH_INVALIDATE;
            }
            self.complete_recv(w, rq.pkt.bth().se);
        }
        Ok(Executed::Placed)
    }

    /// A packet of an RDMA WRITE: placed at the address its message's RETH
    /// named; the last of a WRITE with immediate completes a receive WQE.
    pub(super) fn execute_write(&mut self, rq: &Request<'_, '_>) -> Result<Executed, Refusal> {
        // As the C driver: an operation the QP does not grant is an invalid
        // request (REM_INV_REQ_ERR), not an access error.
        if !rq.qp_access.contains(AccessFlag::RemoteWrite) {
            return Err(INVALID);
        }
        // WRITE with immediate consumes a receive WQE: make sure one is there
        // before any data is placed.
        if rq.immediate && self.st.resp.recv.is_none() {
            self.take_recv_for()?;
        }
        if rq.first {
            let reth = rq.pkt.ext().reth.ok_or(INVALID)?;
            self.check_reth(&reth, Need::RemoteWrite)
                .map_err(|c| Refusal::Check(c, rq.immediate))?;
            self.st.resp.write_va = reth.va;
            self.st.resp.write_rkey = reth.rkey;
            self.st.resp.write_resid = reth.dma_len;
            self.st.resp.write_len = reth.dma_len;
        }
        if rq.plen > self.st.resp.write_resid || (rq.last && rq.plen != self.st.resp.write_resid) {
            return Err(INVALID);
        }
        let at = Access::rkey(
            self.qp.uid,
            self.st.resp.write_rkey,
            Need::RemoteWrite,
            self.st.resp.write_va,
        );
        let (dev, pd_id) = (self.qp.device(), self.qp.pd_id());
        mem::copy(dev, pd_id, at, CopyDir::ToMr(rq.payload)).map_err(|e| match e {
            // The rest of the message is faulted in with this packet's part.
            MemError::Fault(f) => {
                let rest = (self.st.resp.write_resid - rq.plen) as usize;
                Refusal::Fault(f.and_more(rest), Unmapped::Access(rq.immediate))
            }
            _ => Refusal::Access(rq.immediate),
        })?;
        self.st.resp.write_va = self.st.resp.write_va.wrapping_add(u64::from(rq.plen));
        self.st.resp.write_resid -= rq.plen;
        if rq.last && rq.immediate {
            if let Some(r) = self.st.resp.recv {
                let len = self.st.resp.write_len;
                let w = self.recv_wc(r.wr_id, WcOpcode::RecvRdmaWithImm, len, rq.pkt);
                self.complete_recv(w, rq.pkt.bth().se);
            }
        }
        Ok(Executed::Placed)
    }

    /// An RDMA READ request: checked, then answered as a stream.
    fn execute_read(&mut self, rq: &Request<'_, '_>) -> Result<Executed, Refusal> {
        let reth = rq.pkt.ext().reth.ok_or(INVALID)?;
        if !rq.qp_access.contains(AccessFlag::RemoteRead) {
            return Err(INVALID);
        }
        // On-demand memory is faulted in before the responses start (their
        // stream also waits, should a page go meanwhile).
        let at = Access::rkey(self.qp.uid, reth.rkey, Need::RemoteRead, reth.va);
        // Its start: the stream waits for the rest as it gets there.
        let len = (reth.dma_len as usize).min(odp::MAX_FAULT_LEN);
        mem::probe(self.qp.device(), self.qp.pd_id(), at, len)
            .map_err(|e| Refusal::of_mem(e, INVALID, Unmapped::Access(false)))?;
        let msn = self.st.resp.msn_after();
        let count = self
            .start_read(rq.psn, &reth, msn)
            .map_err(|c| Refusal::Check(c, false))?;
        self.st.resp.epsn = rq.psn.add(count);
        self.st.resp.msn = msn;
        Ok(Executed::Answered)
    }

    /// Moves the expected PSN past the single-packet request at `psn` that
    /// was executed, and remembers it with `saved` for a retransmission.
    fn executed_once(&mut self, psn: Psn, saved: u64) {
        self.st.resp.atomics.record(psn, saved);
        self.st.resp.epsn = psn.next();
        self.st.resp.next_msn();
    }

    /// CmpSwap or FetchAdd: executed once, its original value kept by PSN.
    fn execute_atomic(&mut self, rq: &Request<'_, '_>) -> Result<Executed, Refusal> {
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
        let qp = self.qp;
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
        self.executed_once(rq.psn, orig);
        self.send_atomic_ack(rq.psn, orig);
        Ok(Executed::Answered)
    }

    /// ATOMIC WRITE (IBTA Vol 1 Annex A19): 8 bytes stored once.
    fn execute_atomic_write(&mut self, rq: &Request<'_, '_>) -> Result<Executed, Refusal> {
        let reth = rq.pkt.ext().reth.ok_or(INVALID)?;
        // As the C driver: the QP must grant remote write (else an invalid
        // request), the key and range remote write (else an access error);
        // then the payload must be exactly the 8 bytes the RETH names, at an
        // 8-byte aligned address (else an invalid request).
        if !rq.qp_access.contains(AccessFlag::RemoteWrite) {
            return Err(INVALID);
        }
        let (dev, pd_id) = (self.qp.device(), self.qp.pd_id());
        let (rkey, va, len) = (reth.rkey, reth.va, reth.dma_len);
        mem::check_remote(dev, pd_id, self.qp.uid, rkey, Need::RemoteWrite, va, len)
            .map_err(|_| Refusal::Access(rq.immediate))?;
        let value = <[u8; wqe::ATOMIC_WRITE_SIZE]>::try_from(rq.payload).map_err(|_| INVALID)?;
        if reth.dma_len as usize != wqe::ATOMIC_WRITE_SIZE || reth.va & 7 != 0 {
            return Err(INVALID);
        }
        mem::atomic_write(dev, pd_id, self.qp.uid, rkey, va, value).map_err(|e| match e {
            MemError::Misaligned => INVALID,
            MemError::Fault(f) => Refusal::Fault(f, Unmapped::Access(rq.immediate)),
            _ => Refusal::Access(rq.immediate),
        })?;
        // Remembered by PSN so that a retransmission is answered, not stored
        // again (the value saved is unused).
        self.executed_once(rq.psn, 0);
        self.send_empty_read_response(rq.psn);
        Ok(Executed::Answered)
    }

    /// FLUSH (IBTA Vol 1 §9.4.8, as rdma_rxe): the placement types asked, over
    /// the region or the range.
    fn execute_flush(&mut self, rq: &Request<'_, '_>) -> Result<Executed, Refusal> {
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
            self.qp.device(),
            self.qp.pd_id(),
            self.qp.uid,
            reth.rkey,
            feth.placement_type,
            feth.selectivity,
            range,
        )
        .map_err(|_| Refusal::Access(rq.immediate))?;
        self.executed_once(rq.psn, 0);
        self.send_empty_read_response(rq.psn);
        Ok(Executed::Answered)
    }
}
