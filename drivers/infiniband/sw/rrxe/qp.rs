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
//! and the packets it builds are sent once the lock is dropped. Moving to ERR completes every outstanding WQE once, in posting
//! order, with `IB_WC_WR_FLUSH_ERR`.

use crate::{
    net::{
        skbuff::{
            xmit_allowed,
            SkbQueue, //
        },
        SkBuff,
    },
    proto::{
        packet::Packet,
        psn::Psn, //
    },
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
        wqe::{
            self as wqe_abi,
            RecvWqe,
            RegMr,
            SendWqe, //
        },
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
            QpEvent,
            QpInitAttr,
            QpTimer,
            RecvWr,
            ResDetails,
            SendWr,
            Sge, //
        },
        queue::QueueBuf,
        trace,
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
    hw_counters::Counters,
    mr::access,
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
/// Size of `struct rxe_create_qp_resp`.
const CREATE_QP_RESP_SIZE: usize = 32;
/// Most requests held while a READ is being answered (the requester has at
/// most `max_rd_atomic` READs and a window of packets outstanding).
const MAX_HELD: usize = 512;

/// Most WQEs one run of the UD requester or of a flush handles with
/// interrupts off (RC and UC runs are bounded by the PSN window and the
/// transmit credit); the QP's kick, BH work, continues past it (the C
/// driver's tasks stop after `RXE_MAX_ITERATIONS`, 1024, and reschedule, in
/// process context).
pub(crate) const MAX_WQES_PER_RUN: u32 = 256;

/// A work queue's slots.
pub(crate) enum Ring {
    /// Shared with user space: user space owns the producer index.
    User(QueueBuf),
    /// Kernel consumer: the slots (as in a user queue, without its header)
    /// and the producer index, both kernel-owned.
    Kernel { slots: KVVec<u8>, producer: u32 },
}

/// A work queue of a QP or SRQ.
pub(crate) struct Wq {
    pub(crate) geo: QueueGeometry,
    /// Kernel-owned consumer index.
    consumer: u32,
    ring: Ring,
    /// WQEs consumed and (kernel queue) posted over the queue's life,
    /// unmasked: a resize ([`Resize`]) measures what moved between its
    /// steps with them, which masked indices cannot do once they wrap.
    taken: u64,
    posted: u64,
}

/// A resize of a work queue in progress ([`Wq::resize_step`]). WQE `j`
/// (counted from the old queue's consumer index `start` when the resize
/// began) is the old ring's slot `start + j` and the new ring's slot `j`
/// (each masked by its own ring).
pub(crate) struct Resize {
    new: Wq,
    start: u32,
    /// The old queue's `taken` and `posted` when the resize began.
    taken0: u64,
    posted0: u64,
    /// WQEs pending when the resize began.
    pending0: u32,
    /// `[0, copied)` is in the new ring; `[consumed, ..)` still pending.
    copied: u64,
    consumed: u64,
    /// Most WQEs a step copies (but a kernel queue's last).
    budget: u32,
    steps_left: u32,
}

impl Resize {
    /// A resize of `old` (under its lock) into `new`, in steps of `budget`.
    pub(crate) fn new(old: &Wq, new: Wq, budget: u32) -> Self {
        Self {
            new,
            start: old.consumer,
            taken0: old.taken,
            posted0: old.posted,
            pending0: old.count(),
            copied: 0,
            consumed: 0,
            budget,
            steps_left: (old.geo.slots() / budget.max(1)).saturating_add(8),
        }
    }

    /// The new queue, holding the WQEs still pending at the last step.
    pub(crate) fn finish(self) -> Wq {
        let mut new = self.new;
        // CAST: the new ring's indices are masked to its 32-bit index mask.
        let c = new.geo.mask(self.consumed as u32);
        let p = new.geo.mask(self.copied as u32);
        match &mut new.ring {
            Ring::User(buf) => {
                buf.store_release(queue::OFF_PRODUCER, p);
                buf.store_release(queue::OFF_CONSUMER, c);
            }
            Ring::Kernel { producer, .. } => *producer = p,
        }
        new.consumer = c;
        new
    }
}

/// Largest message (`RXE_PORT_MAX_MSG_SZ`, IBTA: 2^31 bytes).
const MAX_MSG_SIZE: u64 = 1 << 31;

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
                let len = (geo.slots() as usize)
                    .checked_mul(geo.elem_size())
                    .ok_or(EINVAL)?;
                let slots = KVVec::from_elem(0u8, len, GFP_KERNEL)?;
                (Ring::Kernel { slots, producer: 0 }, [0u8; 16])
            }
        };
        Ok((
            Self {
                geo,
                consumer: 0,
                ring,
                taken: 0,
                posted: 0,
            },
            mi,
        ))
    }

    /// Byte range of slot `index` in a kernel ring.
    fn kernel_slot(&self, index: u32) -> core::ops::Range<usize> {
        let off = (self.geo.mask(index) as usize) << self.geo.log2_elem_size;
        off..off + self.geo.elem_size()
    }

    /// Number of posted WQEs not consumed yet.
    pub(crate) fn count(&self) -> u32 {
        self.geo.count(self.producer(), self.consumer)
    }

    /// Copies `buf.len()` bytes at byte `off` of slot `index` into `buf`.
    fn read_at(&self, index: u32, off: usize, buf: &mut [u8]) -> Result {
        match &self.ring {
            Ring::User(q) => q.read(self.geo.slot_offset(index) + off, buf),
            Ring::Kernel { slots, .. } => {
                let r = self.kernel_slot(index);
                let from = r.start + off;
                let src = slots.get(from..from + buf.len()).ok_or(EINVAL)?;
                buf.copy_from_slice(src);
                Ok(())
            }
        }
    }

    /// Copies `src` to byte `off` of slot `index`.
    fn write_at(&mut self, index: u32, off: usize, src: &[u8]) -> Result {
        let at = self.kernel_slot(index).start + off;
        match &mut self.ring {
            Ring::User(q) => q.write(self.geo.slot_offset(index) + off, src),
            Ring::Kernel { slots, .. } => {
                let dst = slots.get_mut(at..at + src.len()).ok_or(EINVAL)?;
                dst.copy_from_slice(src);
                Ok(())
            }
        }
    }

    /// One bounded step of a resize ([`Resize`]), under the queue's lock:
    /// copies at most the resize's budget of the pending WQEs not copied yet into the
    /// new queue. `true` once every pending WQE is there (or the resize's
    /// steps are spent): the caller then swaps in [`Resize::finish`]
    /// within the same critical section.
    ///
    /// Between steps the lock is dropped, so that one resize of a ring of
    /// up to `max_srq_wr` large WQEs does not keep interrupts off for the
    /// whole copy (review suspicion S5; rdma_rxe copies the whole ring
    /// under its irq-off lock). Meanwhile the receive path may take WQEs
    /// and a kernel ULP post more: the unmasked counts say how many.
    pub(crate) fn resize_step(&self, r: &mut Resize) -> Result<bool> {
        if self.is_user() != r.new.is_user() {
            return Err(EINVAL);
        }
        let last = r.steps_left <= 1;
        r.steps_left = r.steps_left.saturating_sub(1);
        let step = queue::resize_step(
            r.pending0,
            self.taken.wrapping_sub(r.taken0),
            (!self.is_user()).then_some(self.posted.wrapping_sub(r.posted0)),
            r.copied,
            r.budget,
            r.new.geo.capacity(),
            last,
        )
        .ok_or(EINVAL)?;
        let len = self.geo.elem_size().min(r.new.geo.elem_size());
        let mut tmp = [0u8; 64];
        for j in step.from..step.to {
            // CAST: both rings mask the index; only its low bits matter.
            let j = j as u32;
            let mut off = 0;
            while off < len {
                let k = (len - off).min(tmp.len());
                let chunk = tmp.get_mut(..k).ok_or(EINVAL)?;
                self.read_at(r.start.wrapping_add(j), off, chunk)?;
                r.new.write_at(j, off, chunk)?;
                off += k;
            }
        }
        r.copied = step.to;
        r.consumed = step.consumed;
        Ok(step.done)
    }

    /// Whether user space produces this queue.
    pub(crate) fn is_user(&self) -> bool {
        matches!(self.ring, Ring::User(_))
    }

    /// The kernel's consumer index.
    pub(crate) fn consumer(&self) -> u32 {
        self.consumer
    }

    /// Copies slot `index` into `buf` (as much as fits): the snapshot the
    /// kernel acts on.
    pub(crate) fn read_slot(&self, index: u32, buf: &mut [u8]) -> Result {
        let n = buf.len().min(self.geo.elem_size());
        let dst = buf.get_mut(..n).ok_or(EINVAL)?;
        self.read_at(index, 0, dst)
    }

    /// The producer index (user space's, masked into the queue).
    pub(crate) fn producer(&self) -> u32 {
        match &self.ring {
            // Untrusted: masked into the queue.
            Ring::User(buf) => self.geo.mask(buf.load_acquire(queue::OFF_PRODUCER)),
            Ring::Kernel { producer, .. } => *producer,
        }
    }

    /// Posts a kernel WQE: `write` encodes it into the free slot at the
    /// producer index, which then advances. `ENOMEM` when full, as the C
    /// driver; `EINVAL` for a user queue.
    pub(crate) fn post(&mut self, write: impl FnOnce(&mut [u8]) -> Result) -> Result {
        let c = self.consumer;
        let geo = self.geo;
        let r = self.kernel_slot(self.producer());
        let Ring::Kernel { slots, producer } = &mut self.ring else {
            return Err(EINVAL);
        };
        if geo.is_full(*producer, c) {
            return Err(ENOMEM);
        }
        write(slots.get_mut(r).ok_or(EINVAL)?)?;
        *producer = geo.next(*producer);
        self.posted = self.posted.wrapping_add(1);
        Ok(())
    }

    /// The `wr_id` of the WQE at the consumer index, if it comes before
    /// `producer` (a snapshot of the producer index).
    fn head_before(&self, producer: u32) -> Option<u64> {
        if self.geo.is_empty(producer, self.consumer) {
            return None;
        }
        let mut b = [0u8; 8];
        self.read_at(self.consumer, 0, &mut b).ok()?;
        Some(u64::from_ne_bytes(b))
    }

    /// Consumes the WQE at the consumer index.
    pub(crate) fn advance(&mut self) {
        self.consumer = self.geo.next(self.consumer);
        self.taken = self.taken.wrapping_add(1);
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

/// What an `IB_WR_*` opcode is, for a QP type (`rxe_wr_opcode_info`).
#[derive(Clone, Copy)]
struct WrKind {
    /// May carry inline data.
    inline: bool,
    /// Reads from or writes to remote memory (`rdma` member).
    read_or_write: bool,
    /// An atomic: 8 bytes at an aligned remote address (`atomic` member).
    atomic: bool,
    /// Local operation, without data (`LOCAL_INV`, `REG_MR`, `BIND_MW`).
    local: bool,
}

/// The kind of `opcode` on a QP of type `ty`; `None` when rxe does not
/// support it there (`EINVAL`).
fn wr_kind(opcode: u32, ty: u32) -> Option<WrKind> {
    let k = |inline, read_or_write, atomic, local| {
        Some(WrKind {
            inline,
            read_or_write,
            atomic,
            local,
        })
    };
    let connected = matches!(ty, qp_type::RC | qp_type::UC);
    let rc = ty == qp_type::RC;
    match opcode {
        wqe_abi::IB_WR_RDMA_WRITE | wqe_abi::IB_WR_RDMA_WRITE_WITH_IMM if connected => {
            k(true, true, false, false)
        }
        wqe_abi::IB_WR_SEND | wqe_abi::IB_WR_SEND_WITH_IMM
            if connected || matches!(ty, qp_type::UD | qp_type::GSI) =>
        {
            k(true, false, false, false)
        }
        // rxe's table allows it on UD too, but `init_send_wr` refuses it there.
        wqe_abi::IB_WR_SEND_WITH_INV if connected => k(true, false, false, false),
        wqe_abi::IB_WR_RDMA_READ | wqe_abi::IB_WR_RDMA_READ_WITH_INV if rc => {
            k(false, true, false, false)
        }
        wqe_abi::IB_WR_ATOMIC_CMP_AND_SWP | wqe_abi::IB_WR_ATOMIC_FETCH_AND_ADD if rc => {
            k(false, false, true, false)
        }
        wqe_abi::IB_WR_LOCAL_INV | wqe_abi::IB_WR_REG_MR if rc => k(false, false, false, true),
        wqe_abi::IB_WR_BIND_MW if connected => k(false, false, false, true),
        wqe_abi::IB_WR_FLUSH | wqe_abi::IB_WR_ATOMIC_WRITE if rc => k(false, false, false, false),
        _ => None,
    }
}

fn to_wqe_sge(s: &Sge) -> wqe_abi::Sge {
    wqe_abi::Sge {
        addr: s.addr,
        length: s.length,
        lkey: s.lkey,
    }
}

/// Checks a kernel send WR as `validate_send_wr` and `init_send_wr` do
/// (`EINVAL`) and returns its WQE header and kind.
fn check_send_wr(qp: &Qp<Rrxe>, cap: &QpCap, wr: &SendWr<'_, Rrxe>) -> Result<(SendWqe, WrKind)> {
    let ty = qp.qp_type();
    let opcode = wr.opcode();
    let kind = wr_kind(opcode, ty).ok_or(EINVAL)?;
    let num_sge = wr.num_sge();
    if num_sge > cap.max_send_sge {
        return Err(EINVAL);
    }
    let mut length = 0u64;
    for i in 0..num_sge {
        length += u64::from(wr.sge(i).ok_or(EINVAL)?.length);
    }
    if length > MAX_MSG_SIZE {
        return Err(EINVAL);
    }
    let atomic = if kind.atomic {
        let a = wr.atomic().ok_or(EINVAL)?;
        if length != 8 || a.remote_addr & 7 != 0 {
            return Err(EINVAL);
        }
        Some(a)
    } else {
        None
    };
    let inline = wr.send_flags() & wqe_abi::IB_SEND_INLINE != 0;
    if inline && (!kind.inline || length > u64::from(cap.max_inline_data)) {
        return Err(EINVAL);
    }
    let mut w = SendWqe {
        wr_id: wr.wr_id(),
        opcode,
        send_flags: wr.send_flags(),
        ..SendWqe::default()
    };
    match opcode {
        wqe_abi::IB_WR_SEND_WITH_IMM | wqe_abi::IB_WR_RDMA_WRITE_WITH_IMM => {
            w.imm_data = wr.imm_data();
        }
        wqe_abi::IB_WR_SEND_WITH_INV
        | wqe_abi::IB_WR_RDMA_READ_WITH_INV
        | wqe_abi::IB_WR_LOCAL_INV => w.invalidate_rkey = wr.invalidate_rkey(),
        _ => {}
    }
    if matches!(ty, qp_type::UD | qp_type::GSI) {
        let ud = wr.ud().ok_or(EINVAL)?;
        // The transport looks the AH up by number, as for user WQEs.
        w.ah_num = ud.ah.num();
        w.remote_qpn = ud.remote_qpn;
        w.remote_qkey = ud.remote_qkey;
        if ty == qp_type::GSI {
            w.pkey_index = ud.pkey_index;
        }
    } else if kind.read_or_write {
        let r = wr.rdma().ok_or(EINVAL)?;
        w.remote_addr = r.remote_addr;
        w.rkey = r.rkey;
        w.iova = r.remote_addr;
    } else if let Some(a) = atomic {
        w.remote_addr = a.remote_addr;
        w.compare_add = a.compare_add;
        w.swap = a.swap;
        w.rkey = a.rkey;
        w.iova = a.remote_addr;
    } else if opcode == wqe_abi::IB_WR_REG_MR {
        let r = wr.reg().ok_or(EINVAL)?;
        w.reg = RegMr {
            mr_index: r.mr.index(),
            key: r.key,
            // CAST: `IB_ACCESS_*` bits.
            access: r.access as u32,
            iova: r.iova,
            length: r.length,
        };
    }
    if !kind.local {
        // CAST: at most `MAX_MSG_SIZE`, checked above.
        w.length = length as u32;
        w.num_sge = num_sge;
    }
    Ok((w, kind))
}

/// Encodes a checked kernel send WR into `slot` (`init_send_wqe`): the
/// header, then its inline data or its SGEs.
fn write_send_wqe(wr: &SendWr<'_, Rrxe>, w: &SendWqe, kind: WrKind, slot: &mut [u8]) -> Result {
    w.write(slot).map_err(|_| EINVAL)?;
    if kind.local {
        return Ok(());
    }
    if w.has_inline() {
        let area = wqe_abi::send_inline_mut(slot, w.length as usize).map_err(|_| EINVAL)?;
        if wr.copy_inline(area)? != area.len() {
            return Err(EINVAL);
        }
        return Ok(());
    }
    for i in 0..w.num_sge {
        let sge = wr.sge(i).ok_or(EINVAL)?;
        wqe_abi::write_send_sge(slot, i, &to_wqe_sge(&sge)).map_err(|_| EINVAL)?;
    }
    Ok(())
}

/// Checks a kernel receive WR (`post_one_recv`) and encodes it into
/// `slot`.
pub(crate) fn write_recv_wqe(wr: &RecvWr<'_>, slot: &mut [u8]) -> Result {
    let num_sge = wr.num_sge();
    let mut length = 0u64;
    for i in 0..num_sge {
        let sge = wr.sge(i).ok_or(EINVAL)?;
        length += u64::from(sge.length);
        wqe_abi::write_recv_sge(slot, i, &to_wqe_sge(&sge)).map_err(|_| EINVAL)?;
    }
    if length > MAX_MSG_SIZE {
        return Err(EINVAL);
    }
    let r = RecvWqe {
        wr_id: wr.wr_id(),
        // CAST: at most `MAX_MSG_SIZE`, checked above.
        length: length as u32,
        num_sge,
    };
    r.write(slot).map_err(|_| EINVAL)
}

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
}

/// State of a queue pair.
#[pin_data]
pub(crate) struct RrxeQp {
    #[pin]
    pub(crate) state: SpinLockIrq<State>,
    /// Packets built, waiting to be sent.
    #[pin]
    pub(crate) txq: SkbQueue,
    /// Request packets received while a READ is being answered, handled
    /// after it in arrival order ([`rc::resume_responder`]).
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
    /// What the QP counted ([`super::hw_counters::qp_counts`]), for QP
    /// counters.
    pub(crate) own_counts: Counters,
    /// Index from the QP pool (`None` for the GSI QP).
    index: Option<u32>,
    /// Identity no other QP of the device ever has (QPNs are reused): what
    /// a type 2 memory window is bound to.
    pub(crate) uid: u64,
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

fn zeroed_vec<T: Clone + Default>(n: usize) -> Result<KVVec<T>> {
    let mut v = KVVec::with_capacity(n, GFP_KERNEL)?;
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
        // Counted once nothing can fail any more (C11-17: a CQ with work
        // queues cannot be destroyed): every field of the init below is
        // infallible, so it cannot fail after this either.
        scq.num_wq.fetch_add(1, Relaxed);
        rcq.num_wq.fetch_add(1, Relaxed);
        let uid = dev.next_qp_uid.fetch_add(1, Relaxed);
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
                    ud_route_tries: 0,
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
            let _ = RrxeCq::post(qp.recv_cq(), &flush_wc(qp, wr_id, WC_RECV), false);
        }
        // Both producer indices are read once (user space may move them
        // all the time), and one call flushes a bounded number of WQEs
        // with interrupts off; the QP's kick flushes the rest.
        let mut budget = MAX_WQES_PER_RUN;
        let producer = st.sq.producer();
        while let Some(wr_id) = st.sq.head_before(producer) {
            if budget == 0 {
                return qp.kick();
            }
            budget -= 1;
            if RrxeCq::post(qp.send_cq(), &flush_wc(qp, wr_id, 0), false).is_err() {
                break;
            }
            st.sq.advance();
        }
        if let Some(rq) = &mut st.rq {
            let producer = rq.producer();
            while let Some(wr_id) = rq.head_before(producer) {
                if budget == 0 {
                    return qp.kick();
                }
                budget -= 1;
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
        // As the C driver (`__qp_chk_state`), the transition is checked
        // with or without a new state: attributes a state does not take
        // (an SQ PSN in RTS, say) are refused, not applied mid-flight.
        let next = if m & mask::STATE != 0 {
            new.qp_state()
        } else {
            cur
        };
        if !modify_is_ok(cur, next, qp.qp_type(), m) {
            return Err(EINVAL);
        }
        if m & mask::STATE != 0
            && cur == qp_state::SQD
            && st.attr.sq_draining() != 0
            && next != qp_state::ERR
        {
            return Err(EINVAL);
        }
        let keep_cap = st.attr.cap();
        st.attr.merge(new, m);
        // The work queues are not resized.
        st.attr.set_cap(&keep_cap);
        if m & mask::PATH_MTU != 0 {
            // A path MTU above what the netdev carries would send packets
            // the link drops at every retry: a black hole that ends in
            // RETRY_EXC_ERR (rdma_rxe's behaviour). Clamped to the port's
            // active MTU instead, the most the connection manager would
            // have chosen.
            let active = qp.device().active_mtu().to_ib_mtu();
            if st.attr.path_mtu() > active {
                st.attr.set_path_mtu(active);
            }
        }
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
            qp.tx_ready.store(false, Relaxed);
        }
        let mut run = false;
        if m & mask::STATE != 0 {
            let next = new.qp_state();
            trace::qp_state(qp.device(), qp.qp_num(), st.attr.qp_state(), next);
            st.attr.set_qp_state(next);
            st.attr.set_cur_qp_state(next);
            match next {
                qp_state::RESET => {
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
                    Self::retire_held(qp);
                    st.snap_index = None;
                    st.tx = None;
                    st.attr.set_sq_draining(0);
                    // Nothing of the old life is reported in the new one.
                    qp.sq_drained_event.store(false, Relaxed);
                    qp.access_err_event.store(false, Relaxed);
                    qp.tx_ready.store(false, Relaxed);
                }
                qp_state::ERR => {
                    st.attr.set_sq_draining(0);
                    qp.cancel_timer(QpTimer::Retransmit);
                    qp.cancel_timer(QpTimer::Rnr);
                    Self::flush(qp, &mut st);
                    Self::last_wqe_reached(qp);
                }
                qp_state::RTS => run = true,
                qp_state::SQD => {
                    // IBTA Vol 1 §10.3.1: no new message starts; the ones in
                    // progress finish, then SQ Drained is reported (the C
                    // driver reports it whether or not the consumer asked
                    // with `en_sqd_async_notify`, and so for each move to
                    // SQD). The requester decides when it is drained.
                    st.attr.set_sq_draining(1);
                    run = true;
                }
                _ => {}
            }
        }
        let connected = st.attr.qp_state() >= qp_state::RTR;
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

    /// Reports the asynchronous events that became pending under the state
    /// lock: the SRQ's limit ([`super::srq::RrxeSrq::report_limit`]), SQ
    /// Drained, QP Access Error and Last WQE Reached. Called without locks, from the receive path, the
    /// timers and the kick (softirq): the consumers' handlers may call
    /// verbs of the QP or SRQ.
    pub(crate) fn report_events(qp: &Qp<Rrxe>) {
        if !qp.rx_done.is_empty() {
            qp.rx_done.purge();
        }
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

    /// Has the kick report an event that a verb (`modify_qp`, `post_send`)
    /// made pending: their callers may hold locks that their own event
    /// handlers take, so the handlers do not run in the verb's context but
    /// soon after, in softirq, as a device's interrupt would run them.
    fn defer_events(qp: &Qp<Rrxe>) {
        if qp.last_wqe_event.load(Relaxed)
            || qp.sq_drained_event.load(Relaxed)
            || qp.access_err_event.load(Relaxed)
        {
            qp.kick();
        }
    }

    /// Resolves the route of a connected QP whose path is set, outside the
    /// state lock: a route lookup cannot run with interrupts disabled. A
    /// no-op when it is resolved already or interrupts are disabled here.
    pub(crate) fn prepare_tx(qp: &Qp<Rrxe>) {
        if qp.tx_ready.load(Relaxed)
            || !matches!(qp.qp_type(), qp_type::RC | qp_type::UC)
            || !xmit_allowed()
        {
            return;
        }
        let (path, rqpn) = {
            let st = qp.state.lock();
            let s = st.attr.qp_state();
            if st.tx.is_some() || s < qp_state::RTR || s == qp_state::ERR {
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

    /// The QP's kick ([`Qp::kick`]), in softirq with interrupts enabled:
    /// resolves the route of the AH a UD WQE waits for, continues the READ
    /// responses and held requests of a connected QP, runs the requester
    /// and sends what is queued; in ERR, goes on flushing. Also run when
    /// transmit credit comes back.
    pub(crate) fn kick(qp: &Qp<Rrxe>) {
        {
            let mut st = qp.state.lock();
            if st.attr.qp_state() == qp_state::ERR {
                Self::flush(qp, &mut st);
            }
        }
        if matches!(qp.qp_type(), qp_type::RC | qp_type::UC) {
            Self::prepare_tx(qp);
            {
                let mut st = qp.state.lock();
                rc::resume_responder(qp, &mut st);
                Self::run_send(qp, &mut st);
            }
        }
        if matches!(qp.qp_type(), qp_type::UD | qp_type::GSI) {
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
            qp_type::RC | qp_type::UC => rc::run_requester(qp, st, qp.sq_sig_all),
            qp_type::UD | qp_type::GSI => ud::run_requester(qp, st, qp.sq_sig_all),
            _ => {}
        }
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
        if matches!(ty, qp_type::RC | qp_type::UC)
            && st.tx.as_ref().is_some_and(|t| !t.route_is_current())
        {
            drop(st);
            Self::revalidate_route(qp);
            st = qp.state.lock();
        }
        let mut taken = Taken::Done;
        match ty {
            qp_type::RC | qp_type::UC => {
                // Connected services take packets from the peer only.
                match super::recv::src_gid(protocol, ip) {
                    Some(src) if src == st.path.dgid => {
                        if pkt.info().is_request() {
                            taken = rc::on_request(qp, &mut st, pkt);
                        } else {
                            rc::on_ack(qp, &mut st, pkt, qp.sq_sig_all);
                        }
                    }
                    _ => {}
                }
            }
            qp_type::UD | qp_type::GSI => ud::on_request(qp, &mut st, pkt, ip, protocol, vlan_id),
            _ => {}
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
            rc::on_timer(qp, &mut st, t, qp.sq_sig_all);
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
        if state < qp_state::RTS {
            return Err(EINVAL);
        }
        if let Some(wr) = wr {
            let (w, kind) = check_send_wr(qp, &st.attr.cap(), wr)?;
            st.sq.post(|slot| write_send_wqe(wr, &w, kind, slot))?;
        }
        // In ERR the new WQEs are flushed now.
        if state == qp_state::ERR {
            Self::flush(qp, &mut st);
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
        if state == qp_state::RESET {
            return Err(EINVAL);
        }
        if wr.num_sge() > st.attr.cap().max_recv_sge {
            return Err(EINVAL);
        }
        match &mut st.rq {
            Some(rq) => rq.post(|slot| write_recv_wqe(wr, slot))?,
            None => return Err(EINVAL),
        }
        if state == qp_state::ERR {
            Self::flush(qp, &mut st);
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
            // Freed once the lock is released (`Drop` reports events).
            self.qp.rx_done.push_back(skb);
        }
        self.held = true;
    }
}

impl Drop for Received<'_> {
    fn drop(&mut self) {
        drop(self.st.take());
        RrxeQp::report_events(self.qp);
        tx::send_queued(self.qp);
        if self.held {
            self.qp.kick();
        }
    }
}
