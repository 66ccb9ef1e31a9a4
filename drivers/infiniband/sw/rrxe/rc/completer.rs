// SPDX-License-Identifier: GPL-2.0

#![forbid(unsafe_code)]

//! RC completer: retires WQEs on acknowledges, READ responses and atomic
//! acknowledges; retransmits on sequence NAKs and timeouts; waits out RNR
//! NAKs (IBTA Vol 1 §9.7.5, §9.9).

use crate::{
    proto::{
        aeth::{
            Aeth,
            NakCode,
            Syndrome, //
        },
        atmack::AtomicAckEth,
        opcode::Operation,
        packet::Packet,
        psn::Psn,
        rc::{
            self,
            AckAction, //
        },
        wqe::SendWqe, //
    },
    rdma::{
        qp::{
            qp_state,
            Qp,
            QpTimer, //
        },
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
    arm_retransmit,
    complete_head,
    fail_head,
    meta,
    requester::run_requester,
    retire,
    set_position,
    sq_before, //
    WqeMeta,   //
};

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
    let progress = match rc::classify_ack(psn, st.req.comp_psn, st.req.sent_end, syndrome) {
        AckAction::Ignore => return,
        AckAction::Acknowledge => on_positive_ack(qp, st, psn),
        AckAction::RnrWait { timer } => match on_rnr_nak(qp, st, &aeth, psn, timer) {
            Some(p) => p,
            None => return,
        },
        AckAction::Resend => on_sequence_nak(qp, st, &aeth, psn),
        AckAction::Fail(code) => return on_fatal_nak(qp, st, &aeth, psn, code),
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
    follow_window(qp, st, sq_sig_all);
}

/// An ACK of `psn` (IBTA Vol 1 §9.7.5.2.1): retires what it covers. It
/// always counts as progress: even without a retired WQE, the window
/// moved.
fn on_positive_ack(qp: &Qp<Rrxe>, st: &mut State, psn: Psn) -> bool {
    retire(qp, st, psn);
    let head = meta(st, st.sq.consumer());
    if sq_before(st, st.sq.consumer(), st.req.started_end)
        && head.rd_atomic
        && !head.first_psn.after(psn)
    {
        // Acknowledged past a READ whose responses did not all arrive, or
        // an atomic whose acknowledge was lost: ask again (the responder
        // replays an atomic's result).
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
    true
}

/// An RNR NAK at `psn` (IBTA Vol 1 §9.7.5.2.8): what precedes it is
/// acknowledged; the requester waits `timer` and sends again from `psn`,
/// or, its `rnr_retry` spent, the head WQE fails (`None`).
fn on_rnr_nak(qp: &Qp<Rrxe>, st: &mut State, aeth: &Aeth, psn: Psn, timer: u8) -> Option<bool> {
    let counters = qp_counts(qp);
    counters.inc(Counter::RcvdRnrErr);
    trace::nak(qp.device(), qp.qp_num(), psn.get(), aeth.syndrome, false);
    let p = retire(qp, st, psn.sub(1));
    st.req.comp_psn = psn;
    let Some(n) = rc::take_retry(st.req.rnr_left, true) else {
        counters.inc(Counter::RetryRnrExceededErr);
        fail_head(qp, st, WcStatus::RnrRetryExcErr);
        return None;
    };
    st.req.rnr_left = n;
    set_position(st, psn);
    st.req.rnr_wait = true;
    qp.cancel_timer(QpTimer::Retransmit);
    st.req.timer_armed = false;
    qp.arm_timer(
        QpTimer::Rnr,
        u64::from(crate::proto::aeth::rnr_timer_usecs(timer)),
    );
    Some(p)
}

/// A PSN sequence error NAK at `psn` (IBTA Vol 1 §9.7.5.2.4): what
/// precedes it is acknowledged, and the requester sends again from `psn`.
fn on_sequence_nak(qp: &Qp<Rrxe>, st: &mut State, aeth: &Aeth, psn: Psn) -> bool {
    let counters = qp_counts(qp);
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

/// Any other NAK at `psn` (IBTA Vol 1 §9.7.5.2.5–7): what precedes it is
/// acknowledged; the head WQE fails with the matching status and the QP
/// moves to ERR.
fn on_fatal_nak(qp: &Qp<Rrxe>, st: &mut State, aeth: &Aeth, psn: Psn, code: NakCode) {
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
    if let Err(e) = mem::scatter(
        qp.device(),
        qp.pd_id(),
        mem::Sges::Send(&st.sq_snap),
        w.num_sge,
        offset,
        data,
    ) {
        // On-demand memory not mapped (the requester checked it before the
        // request, a page went since): the response is dropped, and the
        // retransmission asks again once it is faulted in.
        if let MemError::Fault(f) = e {
            if odp::request(qp, &mut st.odp, f) {
                return false;
            }
        }
        fail_head(qp, st, e.local_status());
        return false;
    }
    true
}

/// After a response moved `req.comp_psn`: the retry count starts over, the
/// retransmit timer follows what is still in flight, and the requester
/// sends what the window now allows.
fn response_progress(qp: &Qp<Rrxe>, st: &mut State, sq_sig_all: bool) {
    st.req.retry_left = st.attr.retry_cnt();
    follow_window(qp, st, sq_sig_all);
}

/// The retransmit timer runs while packets are in flight (IBTA Vol 1
/// §9.7.6.1.3) and stops when none is; then the requester sends what the
/// window allows.
fn follow_window(qp: &Qp<Rrxe>, st: &mut State, sq_sig_all: bool) {
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
