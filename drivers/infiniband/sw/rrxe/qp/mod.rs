// SPDX-License-Identifier: GPL-2.0

#![forbid(unsafe_code)]

//! Queue pairs: RC, UC, UD and the GSI QP (QP1).
//!
//! User QPs get their send and receive queues as rxe shared queues (user
//! space produces WQEs, the kernel consumes them); kernel QPs get private
//! rings of the same geometry, into which `post_send`/`post_recv` encode
//! each work request as the same rxe WQE (`init_send_wqe`,
//! `post_one_recv` in the C driver), so that the transport reads both
//! alike. RC QPs run the transport of [`super::rc`], UD and GSI QPs that
//! of [`super::ud`]: the doorbell or a kernel post, the move to RTS,
//! received packets and the QP's timers each run it under the state lock,
//! and the packets it builds are sent once the lock is dropped. Moving to
//! ERR completes every outstanding WQE once, in posting order, with
//! `IB_WC_WR_FLUSH_ERR`.

use crate::{
    net::{
        skbuff::{
            xmit_allowed,
            BhDisabled,
            SkbQueue, //
        },
        SkBuff, //
    },
    proto::packet::Packet,
    proto::qp_check::{
        self,
        Caps,
        Limits, //
    },
    rdma::{
        eopnotsupp,
        lock::SpinLockIrq,
        qp::{
            NewQp,
            Qp,
            QpAttr,
            QpCap,
            QpEvent,
            QpInitAttr,
            QpState,
            QpTimer,
            QpType,
            RecvWr,
            ResDetails,
            SendWr, //
        },
        queue,
        udata::Udata,
        wc::{
            Wc,
            WcOpcode,
            WcStatus, //
        },
    },
};

mod modify;
mod wq;
mod wr;

use kernel::{
    prelude::*,
    sync::atomic::{
        Acquire,
        Atomic,
        Full,
        Relaxed,
        Release, //
    }, //
};
pub(crate) use wq::{
    Resize,
    Wq, //
};
use wr::check_send_wr;
pub(crate) use wr::write_recv_wqe;
use wr::write_send_wqe;

use super::{
    cq::RrxeCq,
    hw_counters::{
        qp_counts,
        Counter,
        Counters, //
    },
    param,
    rc::{
        self,
        Req,
        Resp,
        Taken,
        WqeMeta, //
    },
    tx::{
        self,
        Path,
        TxCtx, //
    },
    ud,
    verbs::Rrxe, //
};

/// Largest inline data of a send WR (`sizeof(struct ib_sge) * RXE_MAX_SGE`).
pub(crate) const MAX_INLINE_DATA: u32 = 512;
/// QP number of the GSI QP.
const GSI_QPN: u32 = 1;
/// Most requests held while a READ is being answered or on-demand memory
/// faulted in (the requester has at most `max_rd_atomic` READs and a
/// window of packets outstanding; a UC requester has no window, and what
/// comes past this is lost, as UC loses a message).
const MAX_HELD: usize = 512;

/// Most WQEs one run of the UD requester or of a flush handles with
/// interrupts off (RC and UC runs are bounded by the PSN window and the
/// transmit credit); [`RrxeQp::go_on`] continues past it (the C driver's
/// tasks stop after `RXE_MAX_ITERATIONS`, 1024, and reschedule, in process
/// context). On the debug kernel under TCG, runs of 256 failing UD sends
/// kept a real-time thread of the CPU waiting up to 39 ms of host time;
/// runs of 64, up to 16 ms.
pub(crate) const MAX_WQES_PER_RUN: u32 = 64;

/// Mutable state of a QP.
pub(crate) struct State {
    pub(crate) attr: QpAttr,
    pub(crate) sq: Wq,
    /// `None` with an SRQ.
    pub(crate) rq: Option<Wq>,
    /// What the completer needs of each started send WQE, by slot.
    pub(crate) sq_meta: KVVec<WqeMeta>,
    /// Snapshot of the send WQE being sent.
    pub(crate) sq_snap: KVVec<u8>,
    /// Slot of the snapshot in `sq_snap`.
    pub(crate) snap_index: Option<u32>,
    /// Snapshot of the receive WQE being filled.
    pub(crate) rq_snap: KVVec<u8>,
    /// The primary path, from `modify_qp`.
    pub(crate) path: Path,
    /// The resolved route and headers; dropped when the path changes.
    pub(crate) tx: Option<TxCtx>,
    pub(crate) req: Req,
    pub(crate) resp: Resp,
    /// Kicks asked for to resolve the route of the head UD WQE's AH.
    pub(crate) ud_route_tries: u8,
    /// On-demand memory the QP waits for ([`super::odp`]).
    pub(crate) odp: super::odp::OdpState,
}

/// State of a queue pair.
#[pin_data]
pub(crate) struct RrxeQp {
    #[pin]
    pub(crate) state: SpinLockIrq<State>,
    /// Packets built, waiting to be sent.
    #[pin]
    pub(crate) txq: SkbQueue,
    /// Request packets received while a READ is being answered or
    /// on-demand memory faulted in, handled after it in arrival order
    /// ([`rc::resume_responder`]).
    #[pin]
    pub(crate) rxq: SkbQueue,
    /// Received packets finished with while the state lock (interrupts
    /// off) was held: freed by [`RrxeQp::report_events`], once it is not.
    /// A received skb may hold page-pool pages, which must not be returned
    /// with interrupts disabled (`page_pool_put_unrefed_netmem` warns).
    #[pin]
    pub(crate) rx_done: SkbQueue,
    /// A context is sending `txq`.
    sending: Atomic<bool>,
    /// Multicast groups the QP is attached to.
    pub(crate) mcast_count: Atomic<u32>,
    /// The QP receives from an SRQ and entered ERR: the Last WQE Reached
    /// event is still to be reported, once no lock is held
    /// ([`RrxeQp::report_events`]).
    last_wqe_event: Atomic<bool>,
    /// The send queue drained in SQD: the SQ Drained event is to be
    /// reported.
    sq_drained_event: Atomic<bool>,
    /// The responder met an access violation no receive completion
    /// reports: the QP Access Error event is to be reported.
    access_err_event: Atomic<bool>,
    /// `State::tx` is resolved: lets `prepare_tx` skip the state lock on
    /// every packet (written under the lock, read without it).
    tx_ready: Atomic<bool>,
    /// A run reached its bound: the sleepable work goes on with it
    /// ([`RrxeQp::go_on`]).
    go_on_due: Atomic<bool>,
    /// What the QP counted ([`super::hw_counters::qp_counts`]), for QP
    /// counters.
    pub(crate) own_counts: Counters,
    /// Index from the QP pool (`None` for the GSI QP).
    index: Option<u32>,
    /// Identity no other QP of the device ever has (QPNs are reused): what
    /// a type 2 memory window is bound to.
    pub(crate) uid: u64,
    /// `IB_SIGNAL_ALL_WR`: every send WQE completes with a CQE, signaled or
    /// not (fixed at creation).
    pub(crate) sq_sig_all: bool,
}

fn limits() -> Limits {
    Limits {
        max_wr: param::MAX_QP_WR,
        max_sge: param::MAX_SGE as u32,
        max_inline: MAX_INLINE_DATA,
    }
}

fn caps_of(c: &QpCap) -> Caps {
    Caps {
        max_send_wr: c.max_send_wr,
        max_recv_wr: c.max_recv_wr,
        max_send_sge: c.max_send_sge,
        max_recv_sge: c.max_recv_sge,
        max_inline_data: c.max_inline_data,
    }
}

fn zeroed_vec<T: Clone + Default>(n: usize) -> Result<KVVec<T>> {
    let mut v = KVVec::with_capacity(n, GFP_KERNEL)?;
    v.resize(n, T::default(), GFP_KERNEL)?;
    Ok(v)
}

fn flush_wc(qp: &Qp<Rrxe>, wr_id: u64, opcode: WcOpcode) -> Wc {
    Wc {
        wr_id,
        status: WcStatus::WrFlushErr,
        opcode,
        byte_len: 0,
        ex: 0,
        qp_num: qp.qp_num(),
        src_qp: 0,
        wc_flags: 0,
        pkey_index: 0,
        port_num: 0,
        network_hdr_type: None,
        vlan_id: None,
        qp: if qp.is_user() { 0 } else { qp.wc_qp() },
    }
}

/// The checks of `create_qp` that need no allocation (`rxe_qp_chk_init`).
fn check_create(attr: &QpInitAttr, udata: Option<&Udata>) -> Result {
    if let Some(udata) = udata {
        if udata.inlen() != 0 || udata.outlen() < queue::CREATE_QP_RESP_SIZE {
            return Err(EINVAL);
        }
    }
    if attr.create_flags != 0 {
        return Err(eopnotsupp());
    }
    match attr.qp_type {
        Some(QpType::Gsi | QpType::Rc | QpType::Uc | QpType::Ud) => {}
        Some(QpType::Smi) | None => return Err(eopnotsupp()),
    }
    if !attr.has_cqs || !qp_check::check_caps(&caps_of(&attr.cap), &limits(), attr.has_srq) {
        return Err(EINVAL);
    }
    Ok(())
}

/// The QP number a QP being created holds: an index of the QP pool, or
/// the device's one GSI QP. Given back when dropped, unless kept.
struct QpnClaim<'a> {
    dev: &'a crate::rdma::device::Device<Rrxe>,
    /// The pool index; `None` for the GSI QP.
    index: Option<u32>,
    kept: bool,
}

impl<'a> QpnClaim<'a> {
    fn new(dev: &'a crate::rdma::device::Device<Rrxe>, attr: &QpInitAttr) -> Result<Self> {
        let index = if attr.qp_type == Some(QpType::Gsi) {
            if attr.port_num != 1 || dev.gsi_created.xchg(true, Relaxed) {
                return Err(EINVAL);
            }
            None
        } else {
            Some(dev.qp_pool.alloc()?)
        };
        Ok(Self {
            dev,
            index,
            kept: false,
        })
    }

    /// Keeps the number for the QP: its pool index and its QPN.
    fn keep(mut self) -> (Option<u32>, u32) {
        self.kept = true;
        (self.index, self.index.unwrap_or(GSI_QPN))
    }
}

impl Drop for QpnClaim<'_> {
    fn drop(&mut self) {
        if self.kept {
            return;
        }
        match self.index {
            Some(i) => self.dev.qp_pool.free(i),
            None => self.dev.gsi_created.store(false, Relaxed),
        }
    }
}

/// The send queue and, without an SRQ, the receive queue of a QP being
/// created, with the capabilities they give; a user QP gets their
/// `struct mminfo`s in its `create_qp` response.
fn make_queues(attr: &QpInitAttr, udata: Option<&Udata>) -> Result<(Wq, Option<Wq>, QpCap)> {
    let mut cap = attr.cap;
    let (wqe, sge, inline) = qp_check::send_wqe_layout(cap.max_send_sge, cap.max_inline_data);
    let (sq, sq_mi) = Wq::new(cap.max_send_wr, wqe, udata)?;
    cap.max_send_wr = sq.geo.capacity();
    cap.max_send_sge = sge;
    cap.max_inline_data = inline;
    let (rq, rq_mi) = if attr.has_srq {
        (None, [0u8; queue::MMINFO_SIZE])
    } else {
        let (rq, mi) = Wq::new(
            cap.max_recv_wr,
            qp_check::recv_wqe_size(cap.max_recv_sge),
            udata,
        )?;
        cap.max_recv_wr = rq.geo.capacity();
        (Some(rq), mi)
    };
    if let Some(udata) = udata {
        udata.copy_to(&queue::create_qp_resp(&rq_mi, &sq_mi))?;
    }
    Ok((sq, rq, cap))
}

impl RrxeQp {
    /// Creates a QP (`rxe_create_qp`).
    pub(crate) fn create(
        new: &NewQp<Rrxe>,
        attr: &mut QpInitAttr,
        udata: Option<&Udata>,
    ) -> Result<(impl PinInit<Self, Error>, u32)> {
        check_create(attr, udata)?;
        let dev = new.device();
        let (scq, rcq) = match (new.send_cq(), new.recv_cq()) {
            (Some(s), Some(r)) => (s, r),
            _ => return Err(EINVAL),
        };
        // Released on every error return below.
        let claim = QpnClaim::new(dev, attr)?;
        let (sq, rq, cap) = make_queues(attr, udata)?;
        attr.cap = cap;
        let mut qattr = QpAttr::new();
        qattr.set_qp_state(QpState::Reset);
        qattr.set_cur_qp_state(QpState::Reset);
        qattr.set_cap(&cap);
        qattr.set_port_num(1);
        let sq_meta = zeroed_vec::<WqeMeta>(sq.geo.slots() as usize)?;
        let sq_snap = zeroed_vec::<u8>(sq.geo.elem_size())?;
        let rq_snap = zeroed_vec::<u8>(qp_check::recv_wqe_size(param::MAX_SGE as u32) as usize)?;
        let resp_storage = Resp::storage(attr.qp_type == Some(QpType::Rc))?;
        // Counted once nothing can fail any more (C11-17: a CQ with work
        // queues cannot be destroyed): every field of the init below is
        // infallible, so it cannot fail after this either.
        let (index, qpn) = claim.keep();
        scq.num_wq.fetch_add(1, Relaxed);
        rcq.num_wq.fetch_add(1, Relaxed);
        let uid = dev.next_qp_uid.fetch_add(1, Relaxed);
        let sq_sig_all = attr.sq_sig_all;
        let init = try_pin_init!(Self {
            state <- crate::rdma::lock::new_spinlock_irq!(
                State {
                    attr: qattr,
                    sq,
                    rq,
                    sq_meta,
                    sq_snap,
                    snap_index: None,
                    rq_snap,
                    path: Path::default(),
                    tx: None,
                    req: Req::default(),
                    resp: Resp::new(resp_storage),
                    ud_route_tries: 0,
                    odp: Default::default(),
                },
                "RrxeQp::state"
            ),
            txq <- SkbQueue::new(),
            rxq <- SkbQueue::new(),
            rx_done <- SkbQueue::new(),
            sending: Atomic::new(false),
            mcast_count: Atomic::new(0),
            last_wqe_event: Atomic::new(false),
            sq_drained_event: Atomic::new(false),
            access_err_event: Atomic::new(false),
            tx_ready: Atomic::new(false),
            go_on_due: Atomic::new(false),
            own_counts: Counters::new(),
            index,
            uid,
            sq_sig_all,
        });
        Ok((init, qpn))
    }

    /// Flushes every outstanding WQE of both queues with
    /// `IB_WC_WR_FLUSH_ERR`, in posting order, each exactly once.
    pub(crate) fn flush(qp: &Qp<Rrxe>, st: &mut State) {
        // No more responses: requests waiting for a READ's go too.
        st.resp.drop_read();
        Self::retire_held(qp);
        if let Some(wr_id) = st.resp.take_srq_recv() {
            let _ = RrxeCq::post(qp.recv_cq(), &flush_wc(qp, wr_id, WcOpcode::Recv), false);
        }
        // Both producer indices are read once (user space may move them
        // all the time), and one call flushes a bounded number of WQEs
        // with interrupts off; the QP's kick flushes the rest.
        let mut budget = MAX_WQES_PER_RUN;
        let producer = st.sq.producer();
        while let Some(wr_id) = st.sq.head_before(producer) {
            if budget == 0 {
                return Self::go_on(qp);
            }
            budget -= 1;
            // Zero, `IB_WC_SEND`, whatever the WQE was, as the C driver
            // leaves it: a flushed completion's opcode means nothing (a
            // flushed receive says RECV, where the C driver leaves 0).
            let w = flush_wc(qp, wr_id, WcOpcode::Send);
            if RrxeCq::post(qp.send_cq(), &w, false).is_err() {
                break;
            }
            st.sq.advance();
        }
        if let Some(rq) = &mut st.rq {
            let producer = rq.producer();
            while let Some(wr_id) = rq.head_before(producer) {
                if budget == 0 {
                    return Self::go_on(qp);
                }
                budget -= 1;
                let w = flush_wc(qp, wr_id, WcOpcode::Recv);
                if RrxeCq::post(qp.recv_cq(), &w, false).is_err() {
                    break;
                }
                rq.advance();
            }
        }
    }

    /// Goes on with a run that reached [`MAX_WQES_PER_RUN`] from the QP's
    /// sleepable work, in process context, one run per call: there the
    /// scheduler may run a waiting task between two runs. Going on from
    /// the kick instead chained runs in one softirq (the BH workqueue
    /// runs up to 10 items a turn whatever `need_resched()` says, and its
    /// 2 ms limit counts jiffies, which miss ticks while interrupts are
    /// off): behind a 2^16-WQE ring of failing UD sends a real-time thread
    /// of the CPU waited up to 136 ms (the hostile-user suite's
    /// doorbell-ud, 120–150 ms of host time on the debug kernel).
    pub(crate) fn go_on(qp: &Qp<Rrxe>) {
        qp.go_on_due.store(true, Release);
        qp.queue_sleepable();
    }

    /// The sleepable work's part: one more run, with bottom halves off as
    /// in the kick (the completion handlers it calls expect softirq
    /// context, as a device's interrupt would give them).
    pub(crate) fn go_on_run(qp: &Qp<Rrxe>) {
        if qp.go_on_due.xchg(false, Acquire) {
            let _bh = BhDisabled::new();
            Self::kick(qp);
        }
    }

    /// Marks `IB_EVENT_QP_LAST_WQE_REACHED` pending for a QP that receives
    /// from an SRQ and has just entered ERR, where it takes no more WQEs
    /// from the SRQ (the one it held was flushed): `ib_drain_qp` waits for
    /// the event (up to a minute) before it polls the CQ. Called under the
    /// state lock; [`RrxeQp::report_events`] reports it once the lock is
    /// dropped. The C driver reports it whenever its responder task runs
    /// in ERR.
    pub(crate) fn last_wqe_reached(qp: &Qp<Rrxe>) {
        if qp.has_srq() {
            qp.last_wqe_event.store(true, Relaxed);
        }
    }

    /// Marks SQ Drained pending: the QP is in SQD and its send queue has no
    /// message in progress. Called under the state lock; reported once it
    /// is dropped.
    pub(crate) fn sq_drained(qp: &Qp<Rrxe>) {
        qp.sq_drained_event.store(true, Relaxed);
    }

    /// Marks QP Access Error pending: the responder of an RC QP met an
    /// access violation (a bad R_Key, range or access right) in a request
    /// without immediate data, so no receive completion carries it (IBTA
    /// Vol 1 C9-222.1; the C driver's `RESPST_ERR_RKEY_VIOLATION_EVENT`).
    /// Called under the state lock; reported once it is dropped.
    pub(crate) fn access_error(qp: &Qp<Rrxe>) {
        qp.access_err_event.store(true, Relaxed);
    }

    /// Makes the calls to the consumer that became owed under the state
    /// lock: the CQs' completion handlers and overrun events
    /// ([`RrxeCq::run_due`]), the SRQ's limit
    /// ([`super::srq::RrxeSrq::report_limit`]), SQ Drained, QP Access
    /// Error and Last WQE Reached. Called without locks, from the receive
    /// path, the timers and the kick (softirq): the consumers' handlers may
    /// call verbs of the QP, its CQs or its SRQ.
    pub(crate) fn report_events(qp: &Qp<Rrxe>) {
        if !qp.rx_done.is_empty() {
            qp.rx_done.purge();
        }
        // Completions first: they were posted before any event below
        // became pending.
        RrxeCq::run_due(qp.send_cq());
        RrxeCq::run_due(qp.recv_cq());
        if let Some(srq) = qp.srq() {
            super::srq::RrxeSrq::report_limit(srq);
        }
        // In the order they became pending: an access error moves the QP
        // to ERR, which reaches the last WQE.
        if qp.sq_drained_event.xchg(false, Relaxed) {
            qp.report_event(QpEvent::SqDrained);
        }
        if qp.access_err_event.xchg(false, Relaxed) {
            qp.report_event(QpEvent::AccessErr);
        }
        if qp.last_wqe_event.xchg(false, Relaxed) {
            qp.report_event(QpEvent::LastWqeReached);
        }
    }

    /// Gives the held requests up (the QP is flushed or reset): they go to
    /// `rx_done`, which the kick frees once the state lock is released.
    /// Called with the state lock held.
    fn retire_held(qp: &Qp<Rrxe>) {
        if qp.rxq.is_empty() {
            return;
        }
        while let Some(skb) = qp.rxq.pop_front() {
            qp.rx_done.push_back(skb);
        }
        qp.kick();
    }

    /// Has the kick report an event or a completion handler call that a
    /// verb (`modify_qp`, `post_send`, `post_recv`) made pending: their
    /// callers may hold locks that their own handlers take, so the
    /// handlers do not run in the verb's context but soon after, in
    /// softirq, as a device's interrupt would run them.
    fn defer_events(qp: &Qp<Rrxe>) {
        if qp.last_wqe_event.load(Relaxed)
            || qp.sq_drained_event.load(Relaxed)
            || qp.access_err_event.load(Relaxed)
            || qp.send_cq().is_due()
            || qp.recv_cq().is_due()
        {
            qp.kick();
        }
    }

    /// Resolves the route of a connected QP whose path is set, outside the
    /// state lock: a route lookup cannot run with interrupts disabled. A
    /// no-op when it is resolved already or interrupts are disabled here.
    pub(crate) fn prepare_tx(qp: &Qp<Rrxe>) {
        if qp.tx_ready.load(Relaxed)
            || !matches!(qp.qp_type(), QpType::Rc | QpType::Uc)
            || !xmit_allowed()
        {
            return;
        }
        let (path, rqpn) = {
            let st = qp.state.lock();
            let s = st.attr.qp_state();
            if st.tx.is_some() || s < QpState::Rtr || s == QpState::Err {
                return;
            }
            (st.path, st.attr.dest_qp_num())
        };
        let Ok(ctx) = TxCtx::resolve(qp.device(), &path, qp.qp_num(), rqpn) else {
            return;
        };
        let mut st = qp.state.lock();
        if st.tx.is_none() && st.path == path && st.attr.dest_qp_num() == rqpn {
            st.tx = Some(ctx);
            qp.tx_ready.store(true, Relaxed);
        }
    }

    /// Replaces the connected QP's cached route once it went stale
    /// (`dst_check`: a route, address or device change) by a new lookup.
    /// Run at each doorbell, when a timer fires (lost packets may mean a
    /// changed route) and when a packet arrives on a stale route (a QP
    /// that only responds); the C driver checks its cached route for every
    /// packet. When the new lookup fails (the link is down, say) the old
    /// route stays: the retransmit timer keeps running, so the QP recovers
    /// or exhausts its retries instead of waiting for nothing.
    fn revalidate_route(qp: &Qp<Rrxe>) {
        if !qp.tx_ready.load(Relaxed) || !xmit_allowed() {
            return;
        }
        let (path, rqpn) = {
            let st = qp.state.lock();
            match &st.tx {
                Some(t) if !t.route_is_current() => (st.path, st.attr.dest_qp_num()),
                _ => return,
            }
        };
        let Ok(ctx) = TxCtx::resolve(qp.device(), &path, qp.qp_num(), rqpn) else {
            return;
        };
        let mut st = qp.state.lock();
        if st.tx.is_some() && st.path == path && st.attr.dest_qp_num() == rqpn {
            // The old context is dropped here, under the lock: releasing a
            // route reference does not sleep.
            st.tx = Some(ctx);
        }
    }

    /// The QP's kick ([`Qp::kick`]), in softirq with interrupts enabled
    /// (or from the sleepable work with bottom halves off, [`Self::go_on`]):
    /// resolves the route of the AH a UD WQE waits for, continues the READ
    /// responses and held requests of a connected QP, runs the requester
    /// and sends what is queued; in ERR, goes on flushing. Also run when
    /// transmit credit comes back.
    pub(crate) fn kick(qp: &Qp<Rrxe>) {
        {
            let mut st = qp.state.lock();
            if st.attr.qp_state() == QpState::Err {
                Self::flush(qp, &mut st);
            }
        }
        if matches!(qp.qp_type(), QpType::Rc | QpType::Uc) {
            Self::prepare_tx(qp);
            {
                let mut st = qp.state.lock();
                rc::resume_responder(qp, &mut st);
                Self::run_send(qp, &mut st);
            }
        }
        if matches!(qp.qp_type(), QpType::Ud | QpType::Gsi) {
            let ah_num = {
                let mut st = qp.state.lock();
                let c = st.sq.consumer();
                let mut num = None;
                if !st.sq.geo.is_empty(st.sq.producer(), c) {
                    let State { sq, sq_snap, .. } = &mut *st;
                    if sq.read_slot(c, sq_snap).is_ok() {
                        num = crate::proto::wqe::SendWqe::parse(sq_snap)
                            .ok()
                            .map(|w| w.ah_num);
                    }
                    st.snap_index = None;
                }
                num
            };
            let ah = ah_num.and_then(|n| qp.device().lookup_ah(n));
            if let Some(ah) = ah.filter(|ah| ah.pd_id() == qp.pd_id()) {
                super::ah::RrxeAh::resolve(&ah);
            }
            Self::run_send(qp, &mut qp.state.lock());
        }
        tx::send_queued(qp);
        // A held SEND may have taken a receive WQE from the SRQ, or an error
        // moved the QP to ERR.
        Self::report_events(qp);
    }

    /// Runs the requester of the QP's service.
    fn run_send(qp: &Qp<Rrxe>, st: &mut State) {
        match qp.qp_type() {
            QpType::Rc | QpType::Uc => rc::run_requester(qp, st),
            QpType::Ud | QpType::Gsi => ud::run_requester(qp, st),
            QpType::Smi => {}
        }
    }

    /// Claims the transmit queue for sending; `false` if another context
    /// sends it.
    pub(crate) fn start_sending(&self) -> bool {
        // `xchg`, not `cmpxchg`: a failed cmpxchg orders nothing, and the
        // holder's `stop_sending` must see a packet queued before this.
        !self.sending.xchg(true, Full)
    }

    /// Releases the transmit queue; `true` if packets arrived meanwhile
    /// and the caller should try again.
    pub(crate) fn stop_sending(&self) -> bool {
        self.sending.xchg(false, Full);
        !self.txq.is_empty()
    }

    /// A packet for this QP passed the receive checks. `ip` is its IP
    /// header and `protocol` the EtherType. The QP's state stays locked in
    /// the returned [`Received`] until it is dropped; on [`Taken::Hold`]
    /// the caller hands the packet's skb to [`Received::hold`] first, so
    /// that the decision to hold and the queueing are one critical
    /// section: a packet received meanwhile on another CPU cannot be
    /// handled before the held one (review suspicion S1).
    pub(crate) fn rcv<'q>(
        qp: &'q Qp<Rrxe>,
        pkt: &Packet<'_>,
        ip: &[u8],
        protocol: u16,
        vlan_id: Option<u16>,
    ) -> Received<'q> {
        Self::prepare_tx(qp);
        let ty = qp.qp_type();
        let mut st = qp.state.lock();
        // Acknowledges and READ responses go out through the cached route
        // too: for a QP that only responds, a route found stale here
        // (`dst_check`) is looked up again before the answer is built.
        if matches!(ty, QpType::Rc | QpType::Uc)
            && st.tx.as_ref().is_some_and(|t| !t.route_is_current())
        {
            drop(st);
            Self::revalidate_route(qp);
            st = qp.state.lock();
        }
        let mut taken = Taken::Done;
        match ty {
            QpType::Rc | QpType::Uc => {
                // Connected services take packets from the peer only.
                match super::recv::src_gid(protocol, ip) {
                    Some(src) if src == st.path.dgid => {
                        if pkt.info().is_request() {
                            taken = rc::on_request(qp, &mut st, pkt);
                        } else {
                            rc::on_ack(qp, &mut st, pkt);
                        }
                    }
                    _ => {}
                }
            }
            QpType::Ud | QpType::Gsi => ud::on_request(qp, &mut st, pkt, ip, protocol, vlan_id),
            QpType::Smi => {}
        }
        Received {
            qp,
            st: Some(st),
            taken,
            held: false,
        }
    }

    /// A timer of the QP fired.
    pub(crate) fn timer(qp: &Qp<Rrxe>, t: QpTimer) {
        Self::revalidate_route(qp);
        Self::prepare_tx(qp);
        {
            let mut st = qp.state.lock();
            rc::on_timer(qp, &mut st, t);
        }
        tx::send_queued(qp);
        // Retries exhausted move the QP to ERR.
        Self::report_events(qp);
    }

    /// Adds the transport state to a `rdma res show qp` answer: that of
    /// [`rc::details`] and the packets queued for the IP stack.
    pub(crate) fn fill_res_entry(&self, out: &mut ResDetails<'_>) -> Result {
        let details = rc::details(&self.state.lock());
        for (name, v, hex) in details {
            if hex {
                out.put_u32_hex(name, v)?;
            } else {
                out.put_u32(name, v)?;
            }
        }
        // CAST: a queue of packets bounded by the transmit credit.
        out.put_u32(c"txq", self.txq.len() as u32)
    }

    /// Reports the attributes: the path MTU new messages use, lower than
    /// the one set while the net device carries less.
    pub(crate) fn query(qp: &Qp<Rrxe>) -> (QpAttr, bool) {
        let st = qp.state.lock();
        let mut attr = st.attr.clone();
        attr.set_path_mtu(super::rc::current_mtu(qp, &st).to_ib_mtu());
        (attr, qp.sq_sig_all)
    }

    /// Destroys the QP: detaches from the CQs and frees the QPN.
    pub(crate) fn destroy(qp: &Qp<Rrxe>) -> Result {
        // The kick is cancelled by now (the QP is unpublished): a handler
        // call a flush left to it (`modify_qp` to ERR just before) is made
        // here, or a consumer waiting for its flushed completions would
        // wait for ever. No driver lock is held.
        RrxeCq::run_due(qp.send_cq());
        RrxeCq::run_due(qp.recv_cq());
        // As the C driver: detach from every multicast group first.
        if qp.mcast_count.load(Relaxed) != 0 {
            return Err(EBUSY);
        }
        qp.send_cq().num_wq.fetch_sub(1, Relaxed);
        qp.recv_cq().num_wq.fetch_sub(1, Relaxed);
        match qp.index {
            Some(i) => qp.device().qp_pool.free(i),
            None => qp.device().gsi_created.store(false, Relaxed),
        }
        Ok(())
    }

    /// `post_send`: queues a kernel WR or handles a user doorbell, then
    /// runs the requester.
    pub(crate) fn post_send(qp: &Qp<Rrxe>, wr: Option<&SendWr<'_, Rrxe>>) -> Result {
        Self::revalidate_route(qp);
        Self::prepare_tx(qp);
        let mut st = qp.state.lock();
        let state = st.attr.qp_state();
        // Posting (or ringing the doorbell) before RTS is refused, as the C
        // driver does.
        if state < QpState::Rts {
            return Err(EINVAL);
        }
        if let Some(wr) = wr {
            let (w, kind) = check_send_wr(qp, &st.attr.cap(), wr)?;
            st.sq.post(|slot| write_send_wqe(wr, &w, kind, slot))?;
        }
        // In ERR the new WQEs are flushed now.
        if state == QpState::Err {
            Self::flush(qp, &mut st);
            drop(st);
            Self::defer_events(qp);
            return Ok(());
        }
        Self::run_send(qp, &mut st);
        drop(st);
        tx::send_queued(qp);
        // A WQE in error moves the QP to ERR.
        Self::defer_events(qp);
        Ok(())
    }

    /// `post_recv` of a kernel consumer.
    pub(crate) fn post_recv(qp: &Qp<Rrxe>, wr: &RecvWr<'_>) -> Result {
        let mut st = qp.state.lock();
        let state = st.attr.qp_state();
        if state == QpState::Reset {
            return Err(EINVAL);
        }
        if wr.num_sge() > st.attr.cap().max_recv_sge {
            return Err(EINVAL);
        }
        match &mut st.rq {
            Some(rq) => rq.post(|slot| write_recv_wqe(wr, slot))?,
            None => return Err(EINVAL),
        }
        if state == QpState::Err {
            Self::flush(qp, &mut st);
            drop(st);
            Self::defer_events(qp);
        }
        Ok(())
    }
}

/// A received packet's QP with its state still locked, from
/// [`RrxeQp::rcv`]. Dropping it unlocks the state, then reports the events
/// the packet caused (a receive WQE taken from the SRQ may have crossed its
/// limit, or an error moved the QP to ERR) and sends what it queued.
#[must_use]
pub(crate) struct Received<'q> {
    qp: &'q Qp<Rrxe>,
    st: Option<kernel::sync::lock::Guard<'q, State, crate::rdma::lock::SpinLockIrqBackend>>,
    taken: Taken,
    held: bool,
}

impl Received<'_> {
    /// What became of the packet.
    pub(crate) fn taken(&self) -> Taken {
        self.taken
    }

    /// Holds the packet's skb, which arrived while a READ is being answered
    /// ([`Taken::Hold`]), behind the requests held before it; the kick
    /// handles them once the READ's responses are out. Beyond
    /// [`MAX_HELD`] requests the packet is dropped, as a full receive
    /// queue would: the requester sends it again.
    pub(crate) fn hold(mut self, mut skb: SkBuff) {
        // The route of a received packet may be valid only in this softirq.
        skb.drop_dst();
        if self.qp.rxq.len() < MAX_HELD {
            self.qp.rxq.push_back(skb);
        } else {
            qp_counts(self.qp).inc(Counter::RcvdDropOther);
            // Freed once the lock is released (`Drop` reports events).
            self.qp.rx_done.push_back(skb);
        }
        self.held = true;
    }
}

/// Local deliveries in progress past which a receiving QP leaves its own
/// packets to its kick. A packet to a QP of this host is delivered from
/// the sender's context, and the receiver then sends what it queued (an
/// ACK, a READ response), which may be delivered locally in turn: an RC
/// exchange nests two deep, but a ring of UD QPs with packets queued could
/// nest once per QP and run off the kernel stack (16 KiB without a guard
/// page). The count is the device's, all CPUs together, so it errs towards
/// the kick.
const MAX_LOCAL_NESTING: u32 = 4;

impl Drop for Received<'_> {
    fn drop(&mut self) {
        drop(self.st.take());
        RrxeQp::report_events(self.qp);
        if self.qp.device().local_deliveries.load(Relaxed) < MAX_LOCAL_NESTING {
            tx::send_queued(self.qp);
        } else {
            self.qp.kick();
        }
        if self.held {
            self.qp.kick();
        }
    }
}
