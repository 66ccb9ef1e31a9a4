// SPDX-License-Identifier: GPL-2.0

#![forbid(unsafe_code)]

//! `modify_qp`: the QP state machine (IBTA Vol 1 §10.3.1, checked by
//! `ib_modify_qp_is_ok`) and the attributes each transition takes.

use crate::{
    proto::psn::Psn,
    proto::qp_check,
    proto::rc,
    rdma::{
        eopnotsupp,
        qp::{
            modify_is_ok,
            Qp,
            QpAttr,
            QpAttrBit,
            QpAttrMask,
            QpState,
            QpTimer,
            QpType, //
        },
        trace, //
    },
};

use kernel::{
    prelude::*,
    sync::atomic::Relaxed, //
};

use crate::rrxe::{
    mr::ACCESS_SUPPORTED_MR,
    tx::{
        self,
        Path, //
    },
    verbs::Rrxe, //
};

use super::{
    caps_of,
    limits,
    RrxeQp,
    State, //
};

impl RrxeQp {
    /// Modifies the QP (`rxe_modify_qp`).
    pub(crate) fn modify(qp: &Qp<Rrxe>, new: &QpAttr, m: QpAttrMask) -> Result {
        check_attrs(qp, new, m)?;
        let mut st = qp.state.lock();
        // A state outside `enum ib_qp_state` is refused: uverbs does so
        // before calling, and a kernel caller's would otherwise index
        // `ib_modify_qp_is_ok`'s table out of bounds.
        let cur = if m.contains(QpAttrBit::CurState) {
            new.requested_cur_state().ok_or(EINVAL)?
        } else {
            st.attr.qp_state()
        };
        // As the C driver (`__qp_chk_state`), the transition is checked
        // with or without a new state: attributes a state does not take
        // (an SQ PSN in RTS, say) are refused, not applied mid-flight.
        let next = if m.contains(QpAttrBit::State) {
            new.requested_state().ok_or(EINVAL)?
        } else {
            cur
        };
        if !modify_is_ok(cur, next, qp.qp_type(), m) {
            return Err(EINVAL);
        }
        if m.contains(QpAttrBit::State)
            && cur == QpState::Sqd
            && st.attr.sq_draining() != 0
            && next != QpState::Err
        {
            return Err(EINVAL);
        }
        apply_attrs(qp, &mut st, new, m);
        let run = m.contains(QpAttrBit::State) && Self::enter_state(qp, &mut st, next);
        let connected = st.attr.qp_state() >= QpState::Rtr;
        drop(st);
        if connected {
            Self::prepare_tx(qp);
        }
        if run {
            // WQEs posted before RTS go out now.
            Self::run_send(qp, &mut qp.state.lock());
            tx::send_queued(qp);
        }
        Self::defer_events(qp);
        Ok(())
    }

    /// Moves the QP to state `next`; `true` if the send queue is to run.
    fn enter_state(qp: &Qp<Rrxe>, st: &mut State, next: QpState) -> bool {
        trace::qp_state(qp.device(), qp.qp_num(), st.attr.qp_state(), next);
        st.attr.set_qp_state(next);
        st.attr.set_cur_qp_state(next);
        match next {
            QpState::Reset => {
                // Nothing of the QP's old life may reach its next one: a
                // pending retransmit timer or packets built before.
                qp.cancel_timer(QpTimer::Retransmit);
                qp.cancel_timer(QpTimer::Rnr);
                qp.txq.purge();
                st.sq.reset();
                if let Some(rq) = &mut st.rq {
                    rq.reset();
                }
                st.req.reset(Psn::new(0));
                st.resp.reset(Psn::new(0));
                st.odp.clear();
                Self::retire_held(qp);
                st.snap_index = None;
                st.tx = None;
                st.attr.set_sq_draining(0);
                // Nothing of the old life is reported in the new one.
                qp.sq_drained_event.store(false, Relaxed);
                qp.access_err_event.store(false, Relaxed);
                qp.tx_ready.store(false, Relaxed);
                false
            }
            QpState::Err => {
                st.attr.set_sq_draining(0);
                qp.cancel_timer(QpTimer::Retransmit);
                qp.cancel_timer(QpTimer::Rnr);
                Self::flush(qp, st);
                Self::last_wqe_reached(qp);
                false
            }
            QpState::Rts => true,
            QpState::Sqd => {
                // IBTA Vol 1 §10.3.1: no new message starts; the ones in
                // progress finish, then SQ Drained is reported (the C
                // driver reports it whether or not the consumer asked with
                // `en_sqd_async_notify`, and so for each move to SQD). The
                // requester decides when it is drained.
                st.attr.set_sq_draining(1);
                true
            }
            QpState::Init | QpState::Rtr | QpState::Sqe => false,
        }
    }
}

/// The checks of `modify_qp`'s attributes that need no QP state
/// (`rxe_qp_chk_attr`).
fn check_attrs(qp: &Qp<Rrxe>, new: &QpAttr, m: QpAttrMask) -> Result {
    if !m.is_standard() {
        return Err(eopnotsupp());
    }
    if m.contains(QpAttrBit::Port) && new.port_num() != 1 {
        return Err(EINVAL);
    }
    if m.contains(QpAttrBit::Cap) {
        let has_srq = qp.state.lock().rq.is_none();
        if !qp_check::check_caps(&caps_of(&new.cap()), &limits(), has_srq) {
            return Err(EINVAL);
        }
    }
    if m.contains(QpAttrBit::AccessFlags)
        && (!matches!(qp.qp_type(), QpType::Rc | QpType::Uc)
            || !ACCESS_SUPPORTED_MR.contains_all(new.qp_access_flags()))
    {
        return Err(EINVAL);
    }
    if m.contains(QpAttrBit::AltPath)
        && (new.alt_port_num() != 1 || !qp_check::timeout_ok(new.alt_timeout()))
    {
        return Err(EINVAL);
    }
    if m.contains(QpAttrBit::PathMtu) && !qp_check::path_mtu_ok(new.path_mtu()) {
        return Err(EINVAL);
    }
    if m.contains(QpAttrBit::MaxQpRdAtomic) && u32::from(new.max_rd_atomic()) > rc::MAX_QP_RD_ATOM {
        return Err(EINVAL);
    }
    if m.contains(QpAttrBit::Timeout) && !qp_check::timeout_ok(new.timeout()) {
        return Err(EINVAL);
    }
    Ok(())
}

/// Applies the attributes `m` names, but the state.
fn apply_attrs(qp: &Qp<Rrxe>, st: &mut State, new: &QpAttr, m: QpAttrMask) {
    let keep_cap = st.attr.cap();
    st.attr.merge(new, m);
    // The work queues are not resized.
    st.attr.set_cap(&keep_cap);
    if m.contains(QpAttrBit::PathMtu) {
        // A path MTU above what the netdev carries would send packets the
        // link drops at every retry: a black hole that ends in
        // RETRY_EXC_ERR (rdma_rxe's behaviour). Clamped to the port's active
        // MTU instead, the most the connection manager would have chosen.
        let active = qp.device().active_mtu().to_ib_mtu();
        if st.attr.path_mtu() > active {
            st.attr.set_path_mtu(active);
        }
    }
    if m.contains(QpAttrBit::MaxQpRdAtomic) {
        let v = qp_check::round_rd_atomic(new.max_rd_atomic());
        st.attr.set_max_rd_atomic(v);
    }
    if m.contains(QpAttrBit::MaxDestRdAtomic) {
        let v = qp_check::round_rd_atomic(new.max_dest_rd_atomic());
        st.attr.set_max_dest_rd_atomic(v);
    }
    if m.contains(QpAttrBit::SqPsn) {
        let v = new.sq_psn() & 0x00ff_ffff;
        st.attr.set_sq_psn(v);
        st.req.reset(Psn::new(v));
    }
    if m.contains(QpAttrBit::RqPsn) {
        let v = new.rq_psn() & 0x00ff_ffff;
        st.attr.set_rq_psn(v);
        st.resp.reset(Psn::new(v));
    }
    if m.contains_any(QpAttrBit::RetryCnt | QpAttrBit::RnrRetry) {
        let retry = (m.contains(QpAttrBit::RetryCnt)).then(|| new.retry_cnt());
        let rnr = (m.contains(QpAttrBit::RnrRetry)).then(|| new.rnr_retry());
        st.req.set_retries(retry, rnr);
    }
    if m.contains(QpAttrBit::Av) {
        let av = new.av();
        st.path = Path {
            dgid: av.dgid,
            sgid_index: av.sgid_index,
            flow_label: av.flow_label,
            traffic_class: av.traffic_class,
            hop_limit: av.hop_limit,
        };
    }
    if m.contains_any(QpAttrBit::Av | QpAttrBit::DestQpn) {
        // Resolved again on the next packet.
        st.tx = None;
        qp.tx_ready.store(false, Relaxed);
    }
}
