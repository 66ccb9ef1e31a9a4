// SPDX-License-Identifier: GPL-2.0

#![forbid(unsafe_code)]

//! Completion queues.
//!
//! A user CQ is an rxe shared queue of `struct ib_uverbs_wc` slots that user
//! space polls without system calls: the kernel owns the producer index,
//! user space the consumer index. A kernel CQ keeps the same ring
//! arithmetic over a private array of completions.

use crate::{
    proto::queue::{
        self,
        QueueGeometry, //
    },
    rdma::{
        cq::{
            Cq,
            CqInitAttr,
            NotifyFlags, //
        },
        device::Device,
        eopnotsupp,
        lock::SpinLockIrq,
        queue::{
            QueueBuf,
            MMINFO_SIZE, //
        },
        trace,
        udata::Udata,
        wc::{
            Wc,
            WcStatus,
            KERNEL_WC_SIZE,
            UVERBS_WC_SIZE, //
        },
    },
};
use kernel::{
    prelude::*,
    sync::atomic::{
        Atomic,
        Full,
        Relaxed,
        Release, //
    }, //
};

use super::verbs::Rrxe;

/// Size of a CQ slot before rounding: it holds either completion layout,
/// as the C driver's `struct rxe_cqe` does.
const CQE_SIZE: usize = if KERNEL_WC_SIZE > UVERBS_WC_SIZE {
    KERNEL_WC_SIZE
} else {
    UVERBS_WC_SIZE
};

/// Where the completions live.
enum Ring {
    /// Shared with user space; the consumer index is in the buffer.
    User(QueueBuf),
    /// Kernel consumer: `slots` completions and a private consumer index.
    Kernel {
        wcs: KVec<Option<Wc>>,
        consumer: u32,
    },
}

struct Inner {
    geo: QueueGeometry,
    /// Producer index (kernel-owned, published to user CQs).
    producer: u32,
    ring: Ring,
    /// Armed `IB_CQ_SOLICITED` / `IB_CQ_NEXT_COMP`.
    notify: u32,
    /// An overrun was reported and no completion fitted since: a user who
    /// keeps its CQ full gets one `IB_EVENT_CQ_ERR` (each allocates an
    /// event on its async file), not one per lost completion.
    overrun: bool,
}

/// State of a completion queue.
#[pin_data]
pub(crate) struct RrxeCq {
    #[pin]
    inner: SpinLockIrq<Inner>,
    /// Number of work queues (SQ, RQ) attached (IBA C11-17).
    pub(crate) num_wq: Atomic<u32>,
    /// A completion matched the armed notification: the consumer's
    /// completion handler is owed a call ([`RrxeCq::run_due`]).
    handler_due: Atomic<bool>,
    /// The CQ overflowed: `IB_EVENT_CQ_ERR` is owed to the consumer.
    overrun_due: Atomic<bool>,
}

fn new_ring(
    geo: &QueueGeometry,
    udata: Option<&Udata>,
) -> Result<(Ring, Option<[u8; MMINFO_SIZE]>)> {
    match udata {
        Some(udata) => {
            let mut buf = QueueBuf::new(geo.buf_size())?;
            buf.store(queue::OFF_LOG2_ELEM_SIZE, geo.log2_elem_size);
            buf.store(queue::OFF_INDEX_MASK, geo.index_mask);
            let mi = buf.export(udata)?;
            Ok((Ring::User(buf), Some(mi.to_bytes())))
        }
        None => {
            let mut wcs = KVec::with_capacity(geo.slots() as usize, GFP_KERNEL)?;
            for _ in 0..geo.slots() {
                wcs.push(None, GFP_KERNEL)?;
            }
            Ok((Ring::Kernel { wcs, consumer: 0 }, None))
        }
    }
}

impl Inner {
    fn consumer(&self) -> u32 {
        match &self.ring {
            Ring::User(buf) => self.geo.mask(buf.load_acquire(queue::OFF_CONSUMER)),
            Ring::Kernel { consumer, .. } => *consumer,
        }
    }

    fn count(&self) -> u32 {
        self.geo.count(self.producer, self.consumer())
    }

    /// The completion at `index` (kernel rings) or its bytes (user rings).
    fn read(&self, index: u32) -> Option<Wc> {
        match &self.ring {
            Ring::Kernel { wcs, .. } => wcs.get(index as usize).copied().flatten(),
            Ring::User(_) => None,
        }
    }

    fn push(&mut self, wc: &Wc) -> Result {
        if self.geo.is_full(self.producer, self.consumer()) {
            return Err(EBUSY);
        }
        let p = self.producer;
        match &mut self.ring {
            Ring::User(buf) => {
                buf.write(self.geo.slot_offset(p), &wc.to_uverbs())?;
                self.producer = self.geo.next(p);
                buf.store_release(queue::OFF_PRODUCER, self.producer);
            }
            Ring::Kernel { wcs, .. } => {
                if let Some(slot) = wcs.get_mut(p as usize) {
                    *slot = Some(*wc);
                }
                self.producer = self.geo.next(p);
            }
        }
        Ok(())
    }
}

impl RrxeCq {
    /// Creates a CQ of at least `attr.cqe` entries.
    pub(crate) fn create(
        dev: &Device<Rrxe>,
        attr: &CqInitAttr,
        udata: Option<&Udata>,
    ) -> Result<(impl PinInit<Self, Error>, u32)> {
        if let Some(udata) = udata {
            if udata.outlen() < 16 {
                return Err(EINVAL);
            }
        }
        if attr.flags != 0 {
            return Err(eopnotsupp());
        }
        if i64::from(attr.cqe) > i64::from(dev.attr().max_cqe) {
            return Err(EINVAL);
        }
        let geo = QueueGeometry::new(attr.cqe, CQE_SIZE).ok_or(EINVAL)?;
        let (ring, resp) = new_ring(&geo, udata)?;
        if let (Some(udata), Some(resp)) = (udata, resp) {
            udata.copy_to(&resp)?;
        }
        let inner = Inner {
            geo,
            producer: 0,
            ring,
            notify: 0,
            overrun: false,
        };
        let init = try_pin_init!(Self {
            inner <- crate::rdma::lock::new_spinlock_irq!(inner, "RrxeCq::inner"),
            num_wq: Atomic::new(0),
            handler_due: Atomic::new(false),
            overrun_due: Atomic::new(false),
        });
        Ok((init, geo.capacity()))
    }

    /// Whether the CQ may be destroyed: no work queue uses it (IBA C11-17).
    pub(crate) fn check_destroy(&self) -> Result {
        if self.num_wq.load(Relaxed) != 0 {
            return Err(EINVAL);
        }
        Ok(())
    }

    /// Resizes to at least `cqe` entries, keeping pending completions in
    /// order.
    pub(crate) fn resize(cq: &Cq<Rrxe>, cqe: u32, udata: Option<&Udata>) -> Result {
        if let Some(udata) = udata {
            if udata.outlen() < 16 {
                return Err(EINVAL);
            }
        }
        if i64::from(cqe) > i64::from(cq.device().attr().max_cqe) {
            return Err(EINVAL);
        }
        let geo = QueueGeometry::new(cqe, CQE_SIZE).ok_or(EINVAL)?;
        {
            let inner = cq.inner.lock();
            if cqe < inner.count() {
                return Err(EINVAL);
            }
        }
        // Allocate (and export) outside the lock; user space holds its own CQ lock across
        // resize, so the user consumer index does not move meanwhile.
        let (mut ring, resp) = new_ring(&geo, udata)?;
        // Answer before taking the lock (the copy may fault); on a later error user space
        // ignores the answer and keeps the old queue.
        if let (Some(udata), Some(resp)) = (udata, resp) {
            udata.copy_to(&resp)?;
        }
        let mut inner = cq.inner.lock();
        let n = inner.count();
        if n > geo.capacity() {
            return Err(EINVAL);
        }
        let c = inner.consumer();
        for i in 0..n {
            let from = inner.geo.mask(c.wrapping_add(i));
            match (&inner.ring, &mut ring) {
                (Ring::User(old), Ring::User(new)) => {
                    let mut b = [0u8; UVERBS_WC_SIZE];
                    old.read(inner.geo.slot_offset(from), &mut b)?;
                    new.write(geo.slot_offset(i), &b)?;
                }
                (Ring::Kernel { .. }, Ring::Kernel { wcs, .. }) => {
                    if let Some(slot) = wcs.get_mut(i as usize) {
                        *slot = inner.read(from);
                    }
                }
                _ => return Err(EINVAL),
            }
        }
        if let Ring::User(new) = &ring {
            new.store_release(queue::OFF_PRODUCER, n);
        }
        inner.geo = geo;
        inner.producer = n;
        let old = core::mem::replace(&mut inner.ring, ring);
        drop(inner);
        // Releasing the old mmap entry takes a mutex: not under the CQ lock.
        drop(old);
        cq.set_cqe(geo.capacity());
        Ok(())
    }

    /// Posts a completion. A full CQ returns `EBUSY` and owes the
    /// consumer `IB_EVENT_CQ_ERR`; a completion that matches the armed
    /// notification owes it a call of its completion handler. Posts run
    /// under the QP's state lock, so neither is made here: the QP makes
    /// them once it holds no lock ([`RrxeCq::run_due`]), as the C driver
    /// calls `comp_handler` from its tasks with no QP lock held. A
    /// consumer's handler may post to or poll the QP and the CQ.
    pub(crate) fn post(cq: &Cq<Rrxe>, wc: &Wc, solicited: bool) -> Result {
        if wc.status != WcStatus::Success {
            // CAST: `enum ib_wc_status`, as the event shows it.
            let status = wc.status as u32;
            trace::wc_error(cq.device(), wc.qp_num, wc.wr_id, status, wc.opcode.raw());
        }
        let mut inner = cq.inner.lock();
        if let Err(e) = inner.push(wc) {
            let first = !inner.overrun;
            inner.overrun = true;
            drop(inner);
            if first {
                cq.overrun_due.store(true, Release);
            }
            // User space can empty one slot and overrun again at every
            // doorbell: the message is rate-limited besides.
            if Cq::<Rrxe>::overrun_message_allowed() {
                pr_err!("rrxe: CQ overrun\n");
            }
            return Err(e);
        }
        inner.overrun = false;
        let fire = inner.notify & NotifyFlags::NEXT_COMP != 0
            || (inner.notify & NotifyFlags::SOLICITED != 0 && solicited);
        if fire {
            inner.notify = 0;
            cq.handler_due.store(true, Release);
        }
        Ok(())
    }

    /// Whether the consumer is owed a call ([`RrxeCq::run_due`]).
    pub(crate) fn is_due(&self) -> bool {
        self.handler_due.load(Relaxed) || self.overrun_due.load(Relaxed)
    }

    /// Makes the calls [`RrxeCq::post`] owes the consumer: the overrun
    /// event, then the completion handler, each once. Called with no
    /// driver lock held. Any QP of the CQ may make them, on another CPU
    /// than the post's: a flag is set (release) after the completion is in
    /// the ring and taken with a full barrier, so a consumer the handler
    /// wakes finds the completion.
    pub(crate) fn run_due(cq: &Cq<Rrxe>) {
        // Run after every received packet, and mostly nothing is owed: a
        // plain load first keeps locked instructions off that path (the
        // QP that set a flag runs this itself afterwards).
        if !cq.is_due() {
            return;
        }
        if cq.overrun_due.xchg(false, Full) {
            cq.report_overrun();
        }
        if cq.handler_due.xchg(false, Full) {
            cq.comp_handler();
        }
    }

    /// Kernel poll.
    pub(crate) fn poll(&self, max: usize, out: &mut dyn FnMut(&Wc)) {
        let mut inner = self.inner.lock();
        let mut done = 0;
        while done < max {
            let (p, geo) = (inner.producer, inner.geo);
            let Ring::Kernel { wcs, consumer } = &mut inner.ring else {
                return;
            };
            if geo.is_empty(p, *consumer) {
                break;
            }
            if let Some(wc) = wcs.get_mut(*consumer as usize).and_then(Option::take) {
                out(&wc);
            }
            *consumer = geo.next(*consumer);
            done += 1;
        }
    }

    /// Number of pending completions.
    pub(crate) fn count(&self) -> u32 {
        self.inner.lock().count()
    }

    /// Arms the CQ.
    pub(crate) fn req_notify(&self, flags: NotifyFlags) -> bool {
        let mut inner = self.inner.lock();
        inner.notify |= flags.0 & NotifyFlags::SOLICITED_MASK;
        flags.0 & NotifyFlags::REPORT_MISSED_EVENTS != 0 && inner.count() != 0
    }
}
