// SPDX-License-Identifier: GPL-2.0

#![forbid(unsafe_code)]

//! The send and receive work queues: rxe shared queues for user QPs,
//! private rings of the same geometry for kernel QPs, and their resize.

use crate::{
    proto::queue::{
        self,
        QueueGeometry, //
    },
    rdma::{
        queue::{
            QueueBuf,
            MMINFO_SIZE, //
        },
        udata::Udata,
    },
};
use kernel::prelude::*;

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

impl Wq {
    /// A queue of at least `num` WQEs of `elem` bytes; exported to user
    /// space when `udata` is given (the `struct mminfo` is returned).
    pub(crate) fn new(
        num: u32,
        elem: u32,
        udata: Option<&Udata>,
    ) -> Result<(Self, [u8; MMINFO_SIZE])> {
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
                (Ring::Kernel { slots, producer: 0 }, [0u8; MMINFO_SIZE])
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
    pub(super) fn head_before(&self, producer: u32) -> Option<u64> {
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
    pub(super) fn reset(&mut self) {
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
