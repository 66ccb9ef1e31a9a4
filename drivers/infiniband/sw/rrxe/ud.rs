// SPDX-License-Identifier: GPL-2.0

#![forbid(unsafe_code)]

//! The unreliable datagram service (IBTA Vol 1 §9.8.4), for UD QPs and the
//! GSI QP (QP1) that carries the connection manager's MADs over RoCE
//! (Annex A17).
//!
//! - Requester: each SEND WQE is one packet with a DETH, addressed through
//!   the address handle its `ah_num` names; it completes as soon as it is
//!   handed to the IP stack (there is no acknowledge). A message longer
//!   than the path MTU completes with `IB_WC_LOC_LEN_ERR`.
//! - Responder: a packet whose Q_Key matches the QP's takes the next
//!   receive WQE and fills it with the 40-byte GRH area followed by the
//!   payload; the GRH area holds the IPv6 header, or 20 zero bytes and the
//!   IPv4 header, as the C driver fills it. Without a receive WQE the
//!   packet is dropped; a receive WQE too small completes with
//!   `IB_WC_LOC_LEN_ERR`.

use crate::proto::wr::{
    self,
    Service,
    Work, //
};
use crate::{
    net::skbuff::ETH_P_IP,
    proto::{
        bth::Bth,
        deth::Deth,
        opcode::{
            MessageKind,
            Opcode,
            Position,
            Transport, //
        },
        packet::{
            ExtHeaders,
            Packet, //
        },
        wqe::{
            RecvWqe,
            SendWqe, //
        },
    },
    rdma::{
        ah::NetworkType,
        qp::{
            Qp,
            QpState,
            QKEY_USE_QP, //
        },
        wc::{
            WcOpcode,
            WcStatus,
            WC_GRH,
            WC_WITH_IMM, //
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
        Sges, //
    },
    odp,
    qp::{
        State,
        MAX_WQES_PER_RUN, //
    },
    rc::wc,
    srq::RrxeSrq,
    verbs::Rrxe, //
};

/// Bytes of the GRH area at the start of a UD receive buffer.
pub(crate) const GRH_LEN: usize = 40;

/// The path MTU of a UD QP: the port's active MTU.
fn mtu(qp: &Qp<Rrxe>) -> u32 {
    qp.device().active_mtu().bytes()
}

/// Completes the oldest send WQE.
///
/// `send` says the WQE is a SEND (with or without immediate), counted in
/// `rdma_sends` whatever its status, as the C driver's completer counts
/// them; a WQE of no or another opcode is not.
fn complete_send(
    qp: &Qp<Rrxe>,
    st: &mut State,
    wr_id: u64,
    signaled: bool,
    status: WcStatus,
    len: u32,
    send: bool,
) {
    if send {
        qp_counts(qp).inc(Counter::RdmaSends);
    }
    if status != WcStatus::Success || signaled {
        let _ = RrxeCq::post(
            qp.send_cq(),
            &wc(qp, wr_id, status, WcOpcode::Send, len),
            false,
        );
    }
    st.sq.advance();
}

/// Sends every posted WQE: one packet each, completed once queued.
pub(crate) fn run_requester(qp: &Qp<Rrxe>, st: &mut State) {
    if st.attr.qp_state() == QpState::Sqd && st.attr.sq_draining() != 0 {
        // A UD WQE completes once its packet is queued: nothing is in
        // progress in SQD, so the send queue is drained at once.
        st.attr.set_sq_draining(0);
        super::qp::RrxeQp::sq_drained(qp);
    }
    if st.attr.qp_state() != QpState::Rts {
        return;
    }
    let max = mtu(qp);
    // The user may move its producer index at any time: it is read once,
    // and one run does at most a bounded number of WQEs with interrupts
    // off (WQEs that fail use no transmit credit, so credit alone does not
    // bound it); the QP's sleepable work (process context, with interrupts
    // enabled between runs) does the rest.
    let producer = st.sq.producer();
    let mut budget = MAX_WQES_PER_RUN;
    loop {
        let idx = st.sq.consumer();
        if st.sq.geo.is_empty(producer, idx) {
            break;
        }
        if budget == 0 {
            super::qp::RrxeQp::go_on(qp);
            break;
        }
        budget -= 1;
        // Resumed from the QP's kick when transmit credit comes back.
        if !super::tx::tx_room(qp) {
            break;
        }
        {
            let State { sq, sq_snap, .. } = &mut *st;
            if sq.read_slot(idx, sq_snap).is_err() {
                break;
            }
        }
        st.snap_index = Some(idx);
        let Some((w, kind, signaled)) = checked_wqe(qp, st, max) else {
            continue;
        };
        if !send_datagram(qp, st, &w, kind, signaled) {
            break;
        }
    }
}

/// The snapshot's WQE, with its message kind and whether it is signaled,
/// if UD can send it; otherwise it completes in error here.
fn checked_wqe(qp: &Qp<Rrxe>, st: &mut State, max: u32) -> Option<(SendWqe, MessageKind, bool)> {
    let Ok(w) = SendWqe::parse(&st.sq_snap) else {
        let wr_id = st
            .sq_snap
            .first_chunk::<8>()
            .map_or(0, |b| u64::from_ne_bytes(*b));
        complete_send(qp, st, wr_id, true, WcStatus::LocQpOpErr, 0, false);
        return None;
    };
    let signaled = qp.sq_sig_all || w.is_signaled();
    let kind = match wr::info(w.opcode).and_then(|e| e.work_on(Service::Ud)) {
        Some(Work::Msg(kind)) => kind,
        _ => {
            complete_send(qp, st, w.wr_id, signaled, WcStatus::LocQpOpErr, 0, false);
            return None;
        }
    };
    if w.length > max {
        complete_send(qp, st, w.wr_id, signaled, WcStatus::LocLenErr, 0, true);
        return None;
    }
    Some((w, kind, signaled))
}

/// The headers of the datagram of `w`; it takes the next PSN.
fn datagram_headers(
    qp: &Qp<Rrxe>,
    st: &mut State,
    w: &SendWqe,
    kind: MessageKind,
) -> Option<(Bth, ExtHeaders)> {
    let opcode = Opcode::for_message(Transport::Ud, kind, Position::Only)?;
    let qkey = if w.remote_qkey & QKEY_USE_QP != 0 {
        st.attr.qkey()
    } else {
        w.remote_qkey
    };
    let bth = Bth {
        se: w.is_solicited(),
        ..Bth::new(opcode, w.remote_qpn, st.req.take_psn())
    };
    let mut ext = ExtHeaders {
        deth: Some(Deth {
            qkey,
            src_qpn: qp.qp_num(),
        }),
        ..ExtHeaders::default()
    };
    if kind == MessageKind::SendWithImm {
        ext.immdt = Some(w.immdt());
    }
    Some((bth, ext))
}

/// Builds and queues the datagram of `w` and completes it; `false` if the
/// requester must stop (the kick resolves the AH's route first).
fn send_datagram(
    qp: &Qp<Rrxe>,
    st: &mut State,
    w: &SendWqe,
    kind: MessageKind,
    signaled: bool,
) -> bool {
    let dev = qp.device();
    // An AH of another PD (another process's, or the kernel's) is never
    // used: as the C driver's `rxe_get_av`, the WQE fails.
    let Some(ah) = dev
        .lookup_ah(w.ah_num)
        .filter(|ah| ah.pd_id() == qp.pd_id())
    else {
        complete_send(qp, st, w.wr_id, signaled, WcStatus::LocQpOpErr, 0, true);
        return true;
    };
    let mut route = ah.route.lock();
    // A route that changed since it was cached (`dst_check`) is looked up
    // again by the kick, as a missing one: rdma_rxe looks up a UD route for
    // every packet. On the last try (routes changing under every lookup)
    // the stale one is used rather than the datagram lost.
    if st.ud_route_tries < 2 && route.tx.as_ref().is_some_and(|t| !t.route_is_current()) {
        route.tx = None;
    }
    let Some(tx) = route.tx.as_ref() else {
        // The AH was created or modified where no route lookup could
        // run: the QP's kick resolves it and sends this WQE then.
        drop(route);
        if st.ud_route_tries < 2 {
            st.ud_route_tries += 1;
            qp.kick();
            return false;
        }
        // No route even so: the datagram is lost, as on a wire.
        st.ud_route_tries = 0;
        qp_counts(qp).inc(Counter::SendErr);
        complete_send(qp, st, w.wr_id, signaled, WcStatus::Success, w.length, true);
        return true;
    };
    st.ud_route_tries = 0;
    let Some((bth, ext)) = datagram_headers(qp, st, w, kind) else {
        return false;
    };
    let mut fault = None;
    let built = tx.build_datagram(
        qp.qp_num(),
        w.remote_qpn,
        &bth,
        &ext,
        w.length as usize,
        |buf| {
            mem::gather(dev, qp.pd_id(), &st.sq_snap, w, 0, buf).map_err(|e| {
                if let MemError::Fault(f) = e {
                    fault = Some(f);
                }
                EFAULT
            })
        },
    );
    // On-demand memory not mapped: the WQE waits for the QP's kick once
    // it is faulted in ([`super::odp`]).
    if let (Err(_), Some(f)) = (&built, fault) {
        if odp::request(qp, &mut st.odp, f) {
            return false;
        }
    }
    match built {
        Ok(skb) => {
            qp.txq.push_back(skb);
            complete_send(qp, st, w.wr_id, signaled, WcStatus::Success, w.length, true);
        }
        Err(e) if e == EFAULT => {
            complete_send(qp, st, w.wr_id, signaled, WcStatus::LocProtErr, 0, true);
        }
        Err(_) => {
            qp_counts(qp).inc(Counter::SendErr);
            complete_send(qp, st, w.wr_id, signaled, WcStatus::Success, w.length, true);
        }
    }
    true
}

/// The next receive WQE, from the QP or its SRQ, into the receive
/// snapshot, for a datagram of `len` bytes (GRH area included); `None`
/// when none is posted (the datagram is dropped). One of the QP's own
/// receive queue stays there until [`consume_ud_recv`]: a datagram for
/// on-demand memory not mapped yet leaves it for the next. One of an SRQ
/// is taken only if its on-demand memory is mapped (or cannot be).
fn take_ud_recv(qp: &Qp<Rrxe>, st: &mut State, len: usize) -> Option<()> {
    let State {
        rq, rq_snap, odp, ..
    } = &mut *st;
    match rq {
        Some(rq) => {
            let c = rq.consumer();
            if rq.geo.is_empty(rq.producer(), c) || rq.read_slot(c, rq_snap).is_err() {
                return None;
            }
        }
        None => {
            let (dev, pd_id) = (qp.device(), qp.pd_id());
            let mapped = |wqe: &[u8]| {
                if !odp::any_regions() {
                    return true;
                }
                let Ok(r) = RecvWqe::parse(wqe) else {
                    return true;
                };
                match mem::probe_sges(dev, pd_id, Sges::Recv(wqe), r.num_sge, len) {
                    Err(MemError::Fault(f)) => !odp::request(qp, odp, f),
                    _ => true,
                }
            };
            if !RrxeSrq::take_if(qp.srq()?, rq_snap, mapped) {
                return None;
            }
        }
    }
    Some(())
}

/// Consumes the receive WQE [`take_ud_recv`] read from the QP's own queue.
fn consume_ud_recv(st: &mut State) {
    if let Some(rq) = &mut st.rq {
        rq.advance();
    }
}

/// Responder: a UD SEND arrived. `ip` is the packet's IP header,
/// `protocol` its EtherType and `vlan_id` the VLAN it came through.
pub(crate) fn on_request(
    qp: &Qp<Rrxe>,
    st: &mut State,
    pkt: &Packet<'_>,
    ip: &[u8],
    protocol: u16,
    vlan_id: Option<u16>,
) {
    if !matches!(
        st.attr.qp_state(),
        QpState::Rtr | QpState::Rts | QpState::Sqd | QpState::Sqe
    ) {
        return;
    }
    let info = pkt.info();
    if info.transport != Transport::Ud {
        return;
    }
    let Some(deth) = pkt.ext().deth else {
        return;
    };
    // GSI traffic must carry the well-known Q_Key; others the QP's.
    if deth.qkey != st.attr.qkey() {
        qp_counts(qp).inc(Counter::RcvdDropBadQkey);
        return;
    }
    if take_ud_recv(qp, st, GRH_LEN + pkt.payload().len()).is_none() {
        return;
    }
    let Ok(r) = RecvWqe::parse(&st.rq_snap) else {
        consume_ud_recv(st);
        let wr_id = st
            .rq_snap
            .first_chunk::<8>()
            .map_or(0, |b| u64::from_ne_bytes(*b));
        let _ = RrxeCq::post(
            qp.recv_cq(),
            &wc(qp, wr_id, WcStatus::LocQpOpErr, WcOpcode::Recv, 0),
            false,
        );
        return;
    };
    // The GRH area: the IPv6 header, or the IPv4 header in its last 20 bytes.
    let mut grh = [0u8; GRH_LEN];
    let (dst, hdr_len) = if protocol == ETH_P_IP {
        (grh.get_mut(20..), 20)
    } else {
        (grh.get_mut(..), 40)
    };
    if let (Some(dst), Some(src)) = (dst, ip.get(..hdr_len)) {
        dst.copy_from_slice(src);
    }
    let (dev, pd_id) = (qp.device(), qp.pd_id());
    let payload = pkt.payload();
    let sges = Sges::Recv(&st.rq_snap);
    let placed = mem::scatter(dev, pd_id, sges, r.num_sge, 0, &grh)
        .and_then(|()| mem::scatter(dev, pd_id, sges, r.num_sge, GRH_LEN as u32, payload));
    // On-demand memory not mapped yet: the datagram is lost (UD is
    // unreliable), its pages are faulted in, and a WQE of the QP's own
    // queue waits for the next one. One taken from an SRQ was found mapped
    // by `take_ud_recv` and cannot go back: should a page have gone since,
    // it completes in error.
    if let Err(MemError::Fault(f)) = placed {
        if odp::request(qp, &mut st.odp, f) && st.rq.is_some() {
            qp_counts(qp).inc(Counter::RcvdDropOther);
            return;
        }
    }
    consume_ud_recv(st);
    let mut w = wc(qp, r.wr_id, WcStatus::Success, WcOpcode::Recv, 0);
    match placed {
        Ok(()) => {
            // CAST: one packet's payload.
            w.byte_len = (GRH_LEN + payload.len()) as u32;
            w.src_qp = deth.src_qpn;
            w.wc_flags = WC_GRH;
            w.network_hdr_type = Some(if protocol == ETH_P_IP {
                NetworkType::Ipv4
            } else {
                NetworkType::Ipv6
            });
            if let Some(imm) = pkt.ext().immdt {
                w.ex = u32::from_ne_bytes(imm.imm_data);
                w.wc_flags |= WC_WITH_IMM;
            }
            // Kernel consumers (the CM's MADs on QP1) find the GID of the
            // reply from it (`ib_init_ah_attr_from_wc`), as with the C
            // driver; the user CQE has no such field.
            w.vlan_id = vlan_id;
        }
        Err(e) => w.status = e.local_status(),
    }
    // As the C driver: receives completed successfully.
    if w.status == WcStatus::Success {
        qp_counts(qp).inc(Counter::RdmaRecvs);
    }
    let _ = RrxeCq::post(qp.recv_cq(), &w, pkt.bth().se);
}
