// SPDX-License-Identifier: GPL-2.0

#![forbid(unsafe_code)]

//! RC completer: retires WQEs on acknowledges, READ responses and atomic
//! acknowledges; retransmits on sequence NAKs and timeouts; waits out RNR
//! NAKs (IBTA Vol 1 §9.7.5, §9.9).

use crate::{
    proto::{
        ack::{
            self,
            Then, //
        },
        aeth::{
            NakCode,
            Syndrome, //
        },
        atmack::AtomicAckEth,
        opcode::Operation,
        packet::Packet,
        psn::Psn,
        wqe::SendWqe, //
    },
    rdma::{
        qp::{
            Qp,
            QpState,
            QpTimer, //
        },
        timer,
        trace::{
            self,
            RetransmitReason, //
        },
        wc::WcStatus, //
    },
};

use crate::rrxe::{
    hw_counters::{
        qp_counts,
        Counter, //
    },
    mem::{
        self,
        MemError, //
    },
    odp,
    qp::State,
    verbs::Rrxe, //
};

use super::{
    complete_head,
    fail_head,
    meta,
    requester::run_requester,
    retire,
    set_position,
    sq_before, //
    WqeMeta,   //
};

/// The completer's rules ([`ack`]) acting on a QP: its state, timers,
/// counters, tracepoints and send CQ.
pub(super) struct Completer<'a> {
    qp: &'a Qp<Rrxe>,
    st: &'a mut State,
    /// The AETH syndrome byte of the acknowledge being handled, for the
    /// NAK tracepoint.
    syndrome: u8,
}

impl<'a> Completer<'a> {
    pub(super) fn new(qp: &'a Qp<Rrxe>, st: &'a mut State, syndrome: u8) -> Self {
        Completer { qp, st, syndrome }
    }
}

impl ack::Effects for Completer<'_> {
    fn window(&mut self) -> &mut ack::Window {
        &mut self.st.req.win
    }

    fn limits(&self) -> ack::Limits {
        ack::Limits {
            retry_cnt: self.st.attr.retry_cnt(),
            rnr_retry: self.st.attr.rnr_retry(),
            timeout: self.st.attr.timeout(),
        }
    }

    fn now(&self) -> u64 {
        timer::tick_usecs()
    }

    fn queued(&self) -> bool {
        !self.qp.txq.is_empty()
    }

    fn retire(&mut self, upto: Psn) -> bool {
        retire(self.qp, self.st, upto)
    }

    fn oldest_rd_atomic(&mut self) -> Option<Psn> {
        let st = &*self.st;
        let head = meta(st, st.sq.consumer());
        (sq_before(st, st.sq.consumer(), st.req.started_end) && head.rd_atomic)
            .then_some(head.first_psn)
    }

    fn position(&mut self) -> Psn {
        self.st.req.psn
    }

    fn set_position(&mut self, psn: Psn) {
        set_position(self.st, psn);
    }

    fn retransmit(&mut self, from: Psn, why: ack::Retransmit) {
        let reason = match why {
            ack::Retransmit::SequenceNak => RetransmitReason::SequenceNak,
            ack::Retransmit::Timeout => RetransmitReason::Timeout,
            ack::Retransmit::Rnr => RetransmitReason::Rnr,
            ack::Retransmit::ImpliedNak => RetransmitReason::ImpliedNak,
        };
        trace::retransmit(self.qp.device(), self.qp.qp_num(), from.get(), reason);
    }

    fn nak(&mut self, psn: Psn) {
        let (dev, qpn) = (self.qp.device(), self.qp.qp_num());
        trace::nak(dev, qpn, psn.get(), self.syndrome, false);
    }

    fn arm(&mut self, timer: ack::Timer, usecs: u64) {
        self.qp.arm_timer(qp_timer(timer), usecs);
    }

    fn cancel(&mut self, timer: ack::Timer) {
        self.qp.cancel_timer(qp_timer(timer));
    }

    fn count(&mut self, event: ack::Event) {
        qp_counts(self.qp).inc(match event {
            ack::Event::RnrNak => Counter::RcvdRnrErr,
            ack::Event::RnrRetryExceeded => Counter::RetryRnrExceededErr,
            ack::Event::SequenceNak => Counter::RcvdSeqErr,
            ack::Event::Retry => Counter::CompleterRetryErr,
            ack::Event::RetryExceeded => Counter::RetryExceededErr,
        });
    }

    fn fail_head(&mut self, why: ack::Failure) {
        let status = match why {
            ack::Failure::RnrRetryExceeded => WcStatus::RnrRetryExcErr,
            ack::Failure::RetryExceeded => WcStatus::RetryExcErr,
            ack::Failure::Nak(NakCode::RemoteAccessError) => WcStatus::RemAccessErr,
            ack::Failure::Nak(NakCode::RemoteOperationalError) => WcStatus::RemOpErr,
            ack::Failure::Nak(NakCode::InvalidRdRequest) => WcStatus::RemInvRdReqErr,
            ack::Failure::Nak(_) => WcStatus::RemInvReqErr,
        };
        fail_head(self.qp, self.st, status);
    }
}

fn qp_timer(t: ack::Timer) -> QpTimer {
    match t {
        ack::Timer::Retransmit => QpTimer::Retransmit,
        ack::Timer::Rnr => QpTimer::Rnr,
    }
}

/// Completer: an acknowledge (ACK, RNR NAK or NAK) arrived.
pub(crate) fn on_ack(qp: &Qp<Rrxe>, st: &mut State, pkt: &Packet<'_>) {
    let state = st.attr.qp_state();
    if !matches!(state, QpState::Rts | QpState::Sqd | QpState::Sqe) {
        return;
    }
    // `ack_deferred` is the C driver's count of responses handed to its
    // completer task (`RXE_CNT_SENDER_SCHED`): every response received.
    qp_counts(qp).inc(Counter::AckDeferred);
    match pkt.info().operation {
        Operation::RdmaReadResponse => return Completer::new(qp, st, 0).on_read_response(pkt),
        Operation::AtomicAcknowledge => return Completer::new(qp, st, 0).on_atomic_ack(pkt),
        Operation::Acknowledge => qp_counts(qp).inc(Counter::RcvdAcks),
        _ => return,
    }
    let Some(aeth) = pkt.ext().aeth else {
        return;
    };
    let Ok(syndrome) = aeth.syndrome() else {
        return;
    };
    let mut c = Completer::new(qp, st, aeth.syndrome);
    let next = ack::acknowledge(&mut c, pkt.bth().psn, syndrome);
    c.then(next);
}

/// A timer of the QP fired.
pub(crate) fn on_timer(qp: &Qp<Rrxe>, st: &mut State, t: QpTimer) {
    // In SQD the messages in progress still retransmit.
    if !matches!(st.attr.qp_state(), QpState::Rts | QpState::Sqd) {
        return;
    }
    let timer = match t {
        QpTimer::Rnr => ack::Timer::Rnr,
        QpTimer::Retransmit => ack::Timer::Retransmit,
    };
    let mut c = Completer::new(qp, st, 0);
    let next = ack::timer_fired(&mut c, timer);
    c.then(next);
}

impl Completer<'_> {
    /// Runs the requester if the rule asked for it.
    fn then(&mut self, then: Then) {
        if then == Then::RunRequester {
            run_requester(self.qp, self.st);
        }
    }

    /// Completer: a READ response packet arrived.
    fn on_read_response(&mut self, pkt: &Packet<'_>) {
        let psn = pkt.bth().psn;
        if let ack::Response::Skip(next) = ack::read_response(self, psn) {
            return self.then(next);
        }
        let idx = self.st.sq.consumer();
        let m = meta(self.st, idx);
        if m.empty_read_response && sq_before(self.st, idx, self.st.req.started_end) {
            return self.on_empty_read_response(pkt, m);
        }
        if !sq_before(self.st, idx, self.st.req.started_end)
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
        if !self.place_response(idx, offset, payload) {
            return;
        }
        if psn == m.last_psn {
            complete_head(self.qp, self.st, WcStatus::Success);
            self.st.req.reads_in_flight = self.st.req.reads_in_flight.saturating_sub(1);
        }
        self.response_placed(psn);
    }

    /// Completer: the READ response that answers the oldest WQE `m`, an ATOMIC
    /// WRITE or a FLUSH: one RDMA READ RESPONSE ONLY at the request's PSN, with
    /// an AETH and no data.
    fn on_empty_read_response(&mut self, pkt: &Packet<'_>, m: WqeMeta) {
        let psn = pkt.bth().psn;
        let acked = matches!(
            pkt.ext().aeth.map(|a| a.syndrome()),
            Some(Ok(Syndrome::Ack { .. }))
        );
        if psn != m.first_psn || !pkt.payload().is_empty() || !acked {
            return;
        }
        complete_head(self.qp, self.st, WcStatus::Success);
        self.st.req.reads_in_flight = self.st.req.reads_in_flight.saturating_sub(1);
        self.response_placed(psn);
    }

    /// Places `data` at byte `offset` of the local SGE list of the oldest send
    /// WQE `idx` (READ response data, an atomic's original value); on a bad
    /// WQE or SGE list the WQE completes in error (QP to ERR). `false` if
    /// nothing was placed.
    fn place_response(&mut self, idx: u32, offset: u32, data: &[u8]) -> bool {
        if self.st.snap_index != Some(idx) {
            let State { sq, sq_snap, .. } = &mut *self.st;
            if sq.read_slot(idx, sq_snap).is_err() {
                return false;
            }
            self.st.snap_index = Some(idx);
        }
        let Ok(w) = SendWqe::parse(&self.st.sq_snap) else {
            fail_head(self.qp, self.st, WcStatus::LocQpOpErr);
            return false;
        };
        if let Err(e) = mem::scatter(
            self.qp.device(),
            self.qp.pd_id(),
            mem::Sges::Send(&self.st.sq_snap),
            w.num_sge,
            offset,
            data,
        ) {
            // On-demand memory not mapped (the requester checked it before the
            // request, a page went since): the response is dropped, and the
            // retransmission asks again once it is faulted in.
            if let MemError::Fault(f) = e {
                if odp::request(self.qp, &mut self.st.odp, f) {
                    return false;
                }
            }
            fail_head(self.qp, self.st, e.local_status());
            return false;
        }
        true
    }

    /// A response up to `psn` was placed and its WQE, if it was the last
    /// response, completed: the window moves on.
    fn response_placed(&mut self, psn: Psn) {
        let next = ack::response_placed(self, psn);
        self.then(next);
    }

    /// Completer: an atomic acknowledge arrived, carrying the original value
    /// of the remote word; it goes to the WQE's local buffer, in host order.
    fn on_atomic_ack(&mut self, pkt: &Packet<'_>) {
        let psn = pkt.bth().psn;
        let Some(AtomicAckEth { orig }) = pkt.ext().atmack else {
            return;
        };
        if let ack::Response::Skip(next) = ack::atomic_ack(self, psn) {
            return self.then(next);
        }
        let idx = self.st.sq.consumer();
        let m = meta(self.st, idx);
        if !sq_before(self.st, idx, self.st.req.started_end) || !m.atomic || m.first_psn != psn {
            return;
        }
        if !self.place_response(idx, 0, &orig.to_ne_bytes()) {
            return;
        }
        complete_head(self.qp, self.st, WcStatus::Success);
        self.st.req.reads_in_flight = self.st.req.reads_in_flight.saturating_sub(1);
        self.response_placed(psn);
    }
}
