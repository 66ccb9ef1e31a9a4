// SPDX-License-Identifier: GPL-2.0

#![forbid(unsafe_code)]

//! Queue pairs: RC, UC, UD and the GSI QP (QP1).
//!
//! User QPs get their send and receive queues as rxe shared queues (user
//! space produces WQEs, the kernel consumes them); kernel QPs keep the work
//! requests of `post_send`/`post_recv` in private rings (they carry no
//! traffic yet). RC QPs run the transport of [`super::rc`]: the doorbell,
//! the move to RTS, received packets and the QP's timers each run it under
//! the state lock, and the packets it builds are sent once the lock is
//! dropped. Moving to ERR completes every outstanding WQE once, in posting
//! order, with `IB_WC_WR_FLUSH_ERR`.

use crate::{
    proto::{
        qp_check::{
            self,
            Caps,
            Limits, //
        },
        queue::{
            self,
            QueueGeometry, //
        },
    },
    net::skbuff::SkbQueue,
    proto::{
        packet::Packet,
        psn::Psn, //
    },
    rdma::{
        eopnotsupp,
        lock::SpinLockIrq,
        qp::{
            mask,
            modify_is_ok,
            qp_state,
            qp_type,
            NewQp,
            Qp,
            QpAttr,
            QpCap,
            QpInitAttr,
            QpTimer,
            RecvWr,
            SendWr, //
        },
        queue::QueueBuf,
        udata::Udata,
        wc::{
            Wc,
            WcStatus, //
        },
    },
};
use kernel::{
    prelude::*,
    sync::atomic::{
        Atomic,
        Full,
        Relaxed, //
    }, //
};

use super::{
    cq::RrxeCq,
    mr::access,
    param,
    rc::{
        self,
        Req,
        Resp,
        WqeMeta, //
    },
    tx::{
        self,
        Path,
        TxCtx, //
    },
    verbs::Rrxe, //
};

/// Largest inline data of a send WR (`sizeof(struct ib_sge) * RXE_MAX_SGE`).
pub(crate) const MAX_INLINE_DATA: u32 = 512;
/// QP number of the GSI QP.
const GSI_QPN: u32 = 1;
/// Size of `struct rxe_create_qp_resp`.
const CREATE_QP_RESP_SIZE: usize = 32;

/// A work queue: the ring and, for kernel QPs, the posted ids.
pub(crate) enum Ring {
    /// Shared with user space: user space owns the producer index.
    User(QueueBuf),
    /// Kernel consumer: the ids of posted WRs and the producer index.
    Kernel { ids: KVec<u64>, producer: u32 },
}

/// A work queue of a QP or SRQ.
pub(crate) struct Wq {
    pub(crate) geo: QueueGeometry,
    /// Kernel-owned consumer index.
    consumer: u32,
    ring: Ring,
}

impl Wq {
    /// A queue of at least `num` WQEs of `elem` bytes; exported to user
    /// space when `udata` is given (the `struct mminfo` is returned).
    pub(crate) fn new(num: u32, elem: u32, udata: Option<&Udata>) -> Result<(Self, [u8; 16])> {
        let geo = QueueGeometry::new(num, elem as usize).ok_or(EINVAL)?;
        let (ring, mi) = match udata {
            Some(udata) => {
                let mut buf = QueueBuf::new(geo.buf_size())?;
                buf.store(queue::OFF_LOG2_ELEM_SIZE, geo.log2_elem_size);
                buf.store(queue::OFF_INDEX_MASK, geo.index_mask);
                let mi = buf.export(udata)?;
                (Ring::User(buf), mi.to_bytes())
            }
            None => {
                let mut ids = KVec::with_capacity(geo.slots() as usize, GFP_KERNEL)?;
                ids.resize(geo.slots() as usize, 0, GFP_KERNEL)?;
                (Ring::Kernel { ids, producer: 0 }, [0u8; 16])
            }
        };
        Ok((
            Self {
                geo,
                consumer: 0,
                ring,
            },
            mi,
        ))
    }

    /// Number of posted WQEs not consumed yet.
    pub(crate) fn count(&self) -> u32 {
        self.geo.count(self.producer(), self.consumer)
    }

    /// Copies the pending WQEs of a user queue into `new` (resize), which
    /// then holds them from index 0.
    pub(crate) fn copy_pending_into(&self, new: &mut Wq) -> Result {
        let n = self.count();
        if n > new.geo.capacity() {
            return Err(EINVAL);
        }
        let (Ring::User(old), Ring::User(buf)) = (&self.ring, &new.ring) else {
            return Err(EINVAL);
        };
        // Called under the queue's spinlock: copy through a small stack buffer, no allocation.
        let len = self.geo.elem_size().min(new.geo.elem_size());
        let mut tmp = [0u8; 64];
        for i in 0..n {
            let from = self.geo.slot_offset(self.consumer.wrapping_add(i));
            let to = new.geo.slot_offset(i);
            let mut off = 0;
            while off < len {
                let k = (len - off).min(tmp.len());
                let chunk = tmp.get_mut(..k).ok_or(EINVAL)?;
                old.read(from + off, chunk)?;
                buf.write(to + off, chunk)?;
                off += k;
            }
        }
        buf.store_release(queue::OFF_PRODUCER, n);
        buf.store_release(queue::OFF_CONSUMER, 0);
        new.consumer = 0;
        Ok(())
    }

    /// Whether user space produces this queue.
    pub(crate) fn is_user(&self) -> bool {
        matches!(self.ring, Ring::User(_))
    }

    /// The kernel's consumer index.
    pub(crate) fn consumer(&self) -> u32 {
        self.consumer
    }

    /// Copies slot `index` of a user queue into `buf` (as much as fits):
    /// the snapshot the kernel acts on.
    pub(crate) fn read_slot(&self, index: u32, buf: &mut [u8]) -> Result {
        let Ring::User(q) = &self.ring else {
            return Err(EINVAL);
        };
        let n = buf.len().min(self.geo.elem_size());
        let dst = buf.get_mut(..n).ok_or(EINVAL)?;
        q.read(self.geo.slot_offset(self.geo.mask(index)), dst)
    }

    /// The producer index (user space's, masked into the queue).
    pub(crate) fn producer(&self) -> u32 {
        match &self.ring {
            // Untrusted: masked into the queue.
            Ring::User(buf) => self.geo.mask(buf.load_acquire(queue::OFF_PRODUCER)),
            Ring::Kernel { producer, .. } => *producer,
        }
    }

    /// Posts a kernel WR; `ENOMEM` when full, as the C driver.
    fn post(&mut self, wr_id: u64) -> Result {
        let c = self.consumer;
        let geo = self.geo;
        let Ring::Kernel { ids, producer } = &mut self.ring else {
            return Err(EINVAL);
        };
        if geo.is_full(*producer, c) {
            return Err(ENOMEM);
        }
        if let Some(slot) = ids.get_mut(*producer as usize) {
            *slot = wr_id;
        }
        *producer = geo.next(*producer);
        Ok(())
    }

    /// The wr_id of the WQE at the consumer index, if any. Both
    /// `struct rxe_send_wqe` and `struct rxe_recv_wqe` start with it.
    fn head(&self) -> Option<u64> {
        if self.geo.is_empty(self.producer(), self.consumer) {
            return None;
        }
        match &self.ring {
            Ring::User(buf) => {
                let mut b = [0u8; 8];
                buf.read(self.geo.slot_offset(self.consumer), &mut b).ok()?;
                Some(u64::from_ne_bytes(b))
            }
            Ring::Kernel { ids, .. } => ids.get(self.consumer as usize).copied(),
        }
    }

    /// Consumes the WQE at the consumer index.
    pub(crate) fn advance(&mut self) {
        self.consumer = self.geo.next(self.consumer);
        if let Ring::User(buf) = &self.ring {
            buf.store_release(queue::OFF_CONSUMER, self.consumer);
        }
    }

    /// Discards every WQE (RESET).
    fn reset(&mut self) {
        match &mut self.ring {
            Ring::User(buf) => {
                buf.store_release(queue::OFF_PRODUCER, 0);
                buf.store_release(queue::OFF_CONSUMER, 0);
            }
            Ring::Kernel { producer, .. } => *producer = 0,
        }
        self.consumer = 0;
    }
}

/// Mutable state of a QP.
pub(crate) struct State {
    pub(crate) attr: QpAttr,
    pub(crate) sq: Wq,
    /// `None` with an SRQ.
    pub(crate) rq: Option<Wq>,
    /// What the completer needs of each started send WQE, by slot.
    pub(crate) sq_meta: KVec<WqeMeta>,
    /// Snapshot of the send WQE being sent.
    pub(crate) sq_snap: KVec<u8>,
    /// Slot of the snapshot in `sq_snap`.
    pub(crate) snap_index: Option<u32>,
    /// Snapshot of the receive WQE being filled.
    pub(crate) rq_snap: KVec<u8>,
    /// The primary path, from `modify_qp`.
    pub(crate) path: Path,
    /// The resolved route and headers; dropped when the path changes.
    pub(crate) tx: Option<TxCtx>,
    pub(crate) req: Req,
    pub(crate) resp: Resp,
}

/// State of a queue pair.
#[pin_data]
pub(crate) struct RrxeQp {
    #[pin]
    pub(crate) state: SpinLockIrq<State>,
    /// Packets built, waiting to be sent.
    #[pin]
    pub(crate) txq: SkbQueue,
    /// A context is sending `txq`.
    sending: Atomic<bool>,
    /// Index from the QP pool (`None` for the GSI QP).
    index: Option<u32>,
    sq_sig_all: bool,
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

fn zeroed_vec<T: Clone + Default>(n: usize) -> Result<KVec<T>> {
    let mut v = KVec::with_capacity(n, GFP_KERNEL)?;
    v.resize(n, T::default(), GFP_KERNEL)?;
    Ok(v)
}

fn flush_wc(qp: &Qp<Rrxe>, wr_id: u64, opcode: u32) -> Wc {
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

use super::rc::WC_RECV;

impl RrxeQp {
    /// Creates a QP (`rxe_create_qp`).
    pub(crate) fn create(
        new: &NewQp<Rrxe>,
        attr: &mut QpInitAttr,
        udata: Option<&Udata>,
    ) -> Result<(impl PinInit<Self, Error>, u32)> {
        if let Some(udata) = udata {
            if udata.inlen() != 0 || udata.outlen() < CREATE_QP_RESP_SIZE {
                return Err(EINVAL);
            }
        }
        if attr.create_flags != 0 {
            return Err(eopnotsupp());
        }
        match attr.qp_type {
            qp_type::GSI | qp_type::RC | qp_type::UC | qp_type::UD => {}
            _ => return Err(eopnotsupp()),
        }
        if !attr.has_cqs || !qp_check::check_caps(&caps_of(&attr.cap), &limits(), attr.has_srq) {
            return Err(EINVAL);
        }
        let dev = new.device();
        let (scq, rcq) = match (new.send_cq(), new.recv_cq()) {
            (Some(s), Some(r)) => (s, r),
            _ => return Err(EINVAL),
        };

        let (index, qpn) = if attr.qp_type == qp_type::GSI {
            if attr.port_num != 1 || dev.gsi_created.xchg(true, Relaxed) {
                return Err(EINVAL);
            }
            (None, GSI_QPN)
        } else {
            let i = dev.qp_pool.alloc()?;
            (Some(i), i)
        };
        let release = |dev: &crate::rdma::device::Device<Rrxe>| match index {
            Some(i) => dev.qp_pool.free(i),
            None => dev.gsi_created.store(false, Relaxed),
        };

        let result = (|| -> Result<(Wq, Option<Wq>, QpCap)> {
            let mut cap = attr.cap;
            let (wqe, sge, inline) =
                qp_check::send_wqe_layout(cap.max_send_sge, cap.max_inline_data);
            let (sq, sq_mi) = Wq::new(cap.max_send_wr, wqe, udata)?;
            cap.max_send_wr = sq.geo.capacity();
            cap.max_send_sge = sge;
            cap.max_inline_data = inline;
            let (rq, rq_mi) = if attr.has_srq {
                (None, [0u8; 16])
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
                let mut resp = [0u8; CREATE_QP_RESP_SIZE];
                resp[..16].copy_from_slice(&rq_mi);
                resp[16..].copy_from_slice(&sq_mi);
                udata.copy_to(&resp)?;
            }
            Ok((sq, rq, cap))
        })();
        let (sq, rq, cap) = match result {
            Ok(v) => v,
            Err(e) => {
                release(dev);
                return Err(e);
            }
        };
        attr.cap = cap;

        let mut qattr = QpAttr::new();
        qattr.set_qp_state(qp_state::RESET);
        qattr.set_cur_qp_state(qp_state::RESET);
        qattr.set_cap(&cap);
        qattr.set_port_num(1);
        scq.num_wq.fetch_add(1, Relaxed);
        rcq.num_wq.fetch_add(1, Relaxed);
        let sq_sig_all = attr.sq_sig_all;
        let bufs = (|| -> Result<_> {
            Ok((
                zeroed_vec::<WqeMeta>(sq.geo.slots() as usize)?,
                zeroed_vec::<u8>(sq.geo.elem_size())?,
                zeroed_vec::<u8>(qp_check::recv_wqe_size(param::MAX_SGE as u32) as usize)?,
            ))
        })();
        let (sq_meta, sq_snap, rq_snap) = match bufs {
            Ok(b) => b,
            Err(e) => {
                release(dev);
                return Err(e);
            }
        };
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
                    resp: Resp::default(),
                },
                "RrxeQp::state"
            ),
            txq <- SkbQueue::new(),
            sending: Atomic::new(false),
            index,
            sq_sig_all,
        });
        Ok((init, qpn))
    }

    /// Flushes every outstanding WQE of both queues with
    /// `IB_WC_WR_FLUSH_ERR`, in posting order, each exactly once.
    pub(crate) fn flush(qp: &Qp<Rrxe>, st: &mut State) {
        if let Some(wr_id) = st.resp.take_srq_recv() {
            let _ = RrxeCq::post(qp.recv_cq(), &flush_wc(qp, wr_id, WC_RECV), false);
        }
        while let Some(wr_id) = st.sq.head() {
            if RrxeCq::post(qp.send_cq(), &flush_wc(qp, wr_id, 0), false).is_err() {
                break;
            }
            st.sq.advance();
        }
        if let Some(rq) = &mut st.rq {
            while let Some(wr_id) = rq.head() {
                if RrxeCq::post(qp.recv_cq(), &flush_wc(qp, wr_id, WC_RECV), false).is_err() {
                    break;
                }
                rq.advance();
            }
        }
    }

    /// Modifies the QP (`rxe_modify_qp`).
    pub(crate) fn modify(qp: &Qp<Rrxe>, new: &QpAttr, m: u32) -> Result {
        if m & !mask::STANDARD_BITS != 0 {
            return Err(eopnotsupp());
        }
        if m & mask::PORT != 0 && new.port_num() != 1 {
            return Err(EINVAL);
        }
        if m & mask::CAP != 0 {
            let has_srq = qp.state.lock().rq.is_none();
            if !qp_check::check_caps(&caps_of(&new.cap()), &limits(), has_srq) {
                return Err(EINVAL);
            }
        }
        if m & mask::ACCESS_FLAGS != 0 {
            if !matches!(qp.qp_type(), qp_type::RC | qp_type::UC)
                || new.qp_access_flags() & !access::SUPPORTED_MR != 0
            {
                return Err(EINVAL);
            }
        }
        if m & mask::ALT_PATH != 0
            && (new.alt_port_num() != 1 || !qp_check::timeout_ok(new.alt_timeout()))
        {
            return Err(EINVAL);
        }
        if m & mask::PATH_MTU != 0 && !qp_check::path_mtu_ok(new.path_mtu()) {
            return Err(EINVAL);
        }
        if m & mask::MAX_QP_RD_ATOMIC != 0 && new.max_rd_atomic() > 128 {
            return Err(EINVAL);
        }
        if m & mask::TIMEOUT != 0 && !qp_check::timeout_ok(new.timeout()) {
            return Err(EINVAL);
        }

        let mut st = qp.state.lock();
        let cur = if m & mask::CUR_STATE != 0 {
            new.cur_qp_state()
        } else {
            st.attr.qp_state()
        };
        if m & mask::STATE != 0 {
            let next = new.qp_state();
            if !modify_is_ok(cur, next, qp.qp_type(), m) {
                return Err(EINVAL);
            }
            if cur == qp_state::SQD && st.attr.sq_draining() != 0 && next != qp_state::ERR {
                return Err(EINVAL);
            }
        }
        let keep_cap = st.attr.cap();
        st.attr.merge(new, m);
        // The work queues are not resized.
        st.attr.set_cap(&keep_cap);
        if m & mask::MAX_QP_RD_ATOMIC != 0 {
            let v = qp_check::round_rd_atomic(new.max_rd_atomic());
            st.attr.set_max_rd_atomic(v);
        }
        if m & mask::MAX_DEST_RD_ATOMIC != 0 {
            let v = qp_check::round_rd_atomic(new.max_dest_rd_atomic());
            st.attr.set_max_dest_rd_atomic(v);
        }
        if m & mask::SQ_PSN != 0 {
            let v = new.sq_psn() & 0x00ff_ffff;
            st.attr.set_sq_psn(v);
            st.req.reset(Psn::new(v));
        }
        if m & mask::RQ_PSN != 0 {
            let v = new.rq_psn() & 0x00ff_ffff;
            st.attr.set_rq_psn(v);
            st.resp.reset(Psn::new(v));
        }
        if m & (mask::RETRY_CNT | mask::RNR_RETRY) != 0 {
            let retry = (m & mask::RETRY_CNT != 0).then(|| new.retry_cnt());
            let rnr = (m & mask::RNR_RETRY != 0).then(|| new.rnr_retry());
            st.req.set_retries(retry, rnr);
        }
        if m & mask::AV != 0 {
            let av = new.av();
            st.path = Path {
                dgid: av.dgid,
                sgid_index: av.sgid_index,
                flow_label: av.flow_label,
                traffic_class: av.traffic_class,
                hop_limit: av.hop_limit,
            };
        }
        if m & (mask::AV | mask::DEST_QPN) != 0 {
            // Resolved again on the next packet.
            st.tx = None;
        }
        let mut run = false;
        if m & mask::STATE != 0 {
            let next = new.qp_state();
            st.attr.set_qp_state(next);
            st.attr.set_cur_qp_state(next);
            match next {
                qp_state::RESET => {
                    st.sq.reset();
                    if let Some(rq) = &mut st.rq {
                        rq.reset();
                    }
                    st.req.reset(Psn::new(0));
                    st.resp.reset(Psn::new(0));
                    st.snap_index = None;
                    st.tx = None;
                }
                qp_state::ERR => {
                    qp.cancel_timer(QpTimer::Retransmit);
                    qp.cancel_timer(QpTimer::Rnr);
                    Self::flush(qp, &mut st);
                }
                qp_state::RTS => run = true,
                _ => {}
            }
        }
        if run {
            // WQEs posted before RTS go out now.
            rc::run_requester(qp, &mut st, qp.sq_sig_all);
        }
        drop(st);
        if run {
            tx::send_queued(qp);
        }
        Ok(())
    }

    /// Claims the transmit queue for sending; `false` if another context
    /// sends it.
    pub(crate) fn start_sending(&self) -> bool {
        self.sending.cmpxchg(false, true, Full).is_ok()
    }

    /// Releases the transmit queue; `true` if packets arrived meanwhile
    /// and the caller should try again.
    pub(crate) fn stop_sending(&self) -> bool {
        self.sending.xchg(false, Full);
        !self.txq.is_empty()
    }

    /// A packet for this QP passed the receive checks. `src` is the
    /// sender's address as a GID.
    pub(crate) fn rcv(qp: &Qp<Rrxe>, pkt: &Packet<'_>, src: &[u8; 16]) {
        if qp.qp_type() != qp_type::RC {
            // UC, UD and the GSI QP come with the next issue.
            return;
        }
        {
            let mut st = qp.state.lock();
            // RC packets come from the connected peer only.
            if st.path.dgid != *src {
                return;
            }
            if pkt.info().is_request() {
                rc::on_request(qp, &mut st, pkt);
            } else {
                rc::on_ack(qp, &mut st, pkt, qp.sq_sig_all);
            }
        }
        tx::send_queued(qp);
    }

    /// A timer of the QP fired.
    pub(crate) fn timer(qp: &Qp<Rrxe>, t: QpTimer) {
        {
            let mut st = qp.state.lock();
            rc::on_timer(qp, &mut st, t, qp.sq_sig_all);
        }
        tx::send_queued(qp);
    }

    /// Reports the attributes.
    pub(crate) fn query(&self) -> (QpAttr, bool) {
        (self.state.lock().attr.clone(), self.sq_sig_all)
    }

    /// Destroys the QP: detaches from the CQs and frees the QPN.
    pub(crate) fn destroy(qp: &Qp<Rrxe>) -> Result {
        qp.send_cq().num_wq.fetch_sub(1, Relaxed);
        qp.recv_cq().num_wq.fetch_sub(1, Relaxed);
        match qp.index {
            Some(i) => qp.device().qp_pool.free(i),
            None => qp.device().gsi_created.store(false, Relaxed),
        }
        Ok(())
    }

    /// `post_send`: queues a kernel WR or handles a user doorbell.
    pub(crate) fn post_send(qp: &Qp<Rrxe>, wr: Option<&SendWr>) -> Result {
        let mut st = qp.state.lock();
        let state = st.attr.qp_state();
        match wr {
            None => {
                // User doorbell: send what was posted. In ERR the new WQEs are flushed now.
                if state == qp_state::ERR {
                    Self::flush(qp, &mut st);
                    return Ok(());
                }
                if qp.qp_type() == qp_type::RC {
                    rc::run_requester(qp, &mut st, qp.sq_sig_all);
                }
                drop(st);
                tx::send_queued(qp);
                Ok(())
            }
            Some(wr) => {
                if state < qp_state::RTS {
                    return Err(EINVAL);
                }
                if wr.num_sge > st.attr.cap().max_send_sge {
                    return Err(EINVAL);
                }
                st.sq.post(wr.wr_id)?;
                if state == qp_state::ERR {
                    Self::flush(qp, &mut st);
                }
                Ok(())
            }
        }
    }

    /// `post_recv` of a kernel consumer.
    pub(crate) fn post_recv(qp: &Qp<Rrxe>, wr: &RecvWr) -> Result {
        let mut st = qp.state.lock();
        let state = st.attr.qp_state();
        if state == qp_state::RESET {
            return Err(EINVAL);
        }
        if wr.num_sge > st.attr.cap().max_recv_sge {
            return Err(EINVAL);
        }
        match &mut st.rq {
            Some(rq) => rq.post(wr.wr_id)?,
            None => return Err(EINVAL),
        }
        if state == qp_state::ERR {
            Self::flush(qp, &mut st);
        }
        Ok(())
    }
}
