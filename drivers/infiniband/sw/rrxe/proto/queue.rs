// SPDX-License-Identifier: GPL-2.0

//! Arithmetic of the rxe shared queues (`include/uapi/rdma/rdma_user_rxe.h`,
//! `struct rxe_queue_buf`).
//!
//! A queue is a 384-byte header (element size, index mask, producer index,
//! consumer index, each index in its own 128-byte block) followed by a
//! power-of-two number of slots of a power-of-two size of at least a cache
//! line. Indices are kept masked; one slot always stays free, so a queue of
//! `n` slots holds at most `n - 1` elements (empty: `producer == consumer`,
//! full: `producer + 1 == consumer`, modulo `n`).
//!
//! The side that does not own an index reads it from memory the other side
//! writes at any time (user space for the send, receive and shared receive
//! queues, the kernel for completion queues); [`QueueGeometry::mask`] keeps
//! every index read from there inside the queue.

#![forbid(unsafe_code)]

/// Size of `struct rxe_queue_buf` without its data, in bytes.
pub const HEADER_SIZE: usize = 384;
/// Offset of `log2_elem_size` in the header.
pub const OFF_LOG2_ELEM_SIZE: usize = 0;
/// Offset of `index_mask` in the header.
pub const OFF_INDEX_MASK: usize = 4;
/// Offset of `producer_index` in the header.
pub const OFF_PRODUCER: usize = 128;
/// Offset of `consumer_index` in the header.
pub const OFF_CONSUMER: usize = 256;
/// Minimum slot size: one cache line (`cache_line_size()` on x86-64).
pub const MIN_ELEM_SIZE: usize = 64;

/// Size and shape of one queue buffer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct QueueGeometry {
    /// log2 of the slot size in bytes.
    pub log2_elem_size: u32,
    /// Number of slots minus one; also the capacity in elements.
    pub index_mask: u32,
}

impl QueueGeometry {
    /// The geometry of a queue that holds at least `num_elem` elements of
    /// `elem_size` bytes, as `rxe_queue_init` computes it.
    ///
    /// Returns `None` when the sizes overflow.
    pub fn new(num_elem: u32, elem_size: usize) -> Option<Self> {
        let elem = elem_size.max(MIN_ELEM_SIZE).checked_next_power_of_two()?;
        let slots = num_elem.checked_add(1)?.checked_next_power_of_two()?;
        let g = Self {
            log2_elem_size: elem.trailing_zeros(),
            index_mask: slots - 1,
        };
        // Check the total size is representable.
        g.buf_size_checked()?;
        Some(g)
    }

    /// Number of slots.
    pub fn slots(&self) -> u32 {
        self.index_mask.wrapping_add(1)
    }

    /// Number of elements the queue can hold (`slots - 1`).
    pub fn capacity(&self) -> u32 {
        self.index_mask
    }

    /// Slot size in bytes.
    pub fn elem_size(&self) -> usize {
        1usize << self.log2_elem_size
    }

    fn buf_size_checked(&self) -> Option<usize> {
        (self.slots() as usize)
            .checked_mul(self.elem_size())?
            .checked_add(HEADER_SIZE)
    }

    /// Size of the whole buffer (header and slots) in bytes.
    pub fn buf_size(&self) -> usize {
        self.buf_size_checked().unwrap_or(usize::MAX)
    }

    /// Keeps an untrusted index inside the queue.
    pub fn mask(&self, index: u32) -> u32 {
        index & self.index_mask
    }

    /// The index after `index`.
    pub fn next(&self, index: u32) -> u32 {
        self.mask(index.wrapping_add(1))
    }

    /// Number of elements between `consumer` and `producer`.
    pub fn count(&self, producer: u32, consumer: u32) -> u32 {
        self.mask(producer.wrapping_sub(consumer))
    }

    /// Whether the queue is empty.
    pub fn is_empty(&self, producer: u32, consumer: u32) -> bool {
        self.mask(producer) == self.mask(consumer)
    }

    /// Whether the queue is full.
    pub fn is_full(&self, producer: u32, consumer: u32) -> bool {
        self.next(producer) == self.mask(consumer)
    }

    /// Byte offset of slot `index` in the buffer.
    pub fn slot_offset(&self, index: u32) -> usize {
        HEADER_SIZE + ((self.mask(index) as usize) << self.log2_elem_size)
    }
}

/// What one step of a stepwise resize copies ([`resize_step`]). WQEs are
/// numbered from the old queue's consumer index when the resize began.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ResizeStep {
    /// Copy WQEs `from..to` (old ring slot `start + j`, new ring slot `j`).
    pub from: u64,
    /// End (exclusive) of the WQEs to copy; at least what was copied.
    pub to: u64,
    /// WQEs consumed since the resize began (the new consumer index).
    pub consumed: u64,
    /// Every pending WQE is copied after this step (or the steps are spent).
    pub done: bool,
}

/// One step of a work-queue resize done in bounded steps, the queue's lock
/// dropped between them (rrxe's SRQ; review suspicion S5). `pending0`
/// WQEs were pending when the resize began; since then `taken` were
/// consumed and, for a kernel queue, `posted` posted (a user queue's
/// producer is the user's, and what it posts meanwhile is not copied:
/// `None`). The counts are exact, not masked indices, which wrap once a
/// full queue under traffic moves by its size between two steps. `copied`
/// WQEs are in the new queue; at most `budget` more are copied, all on a
/// kernel queue's `last` step. `None` if the WQEs pending now do not fit
/// `capacity`.
pub fn resize_step(
    pending0: u32,
    taken: u64,
    posted: Option<u64>,
    copied: u64,
    budget: u32,
    capacity: u32,
    last: bool,
) -> Option<ResizeStep> {
    let total = u64::from(pending0).saturating_add(posted.unwrap_or(0));
    if total.saturating_sub(taken) > u64::from(capacity) {
        return None;
    }
    let budget = if last && posted.is_some() {
        u64::MAX
    } else {
        u64::from(budget)
    };
    let from = copied.max(taken);
    let to = total.min(from.saturating_add(budget)).max(copied);
    Some(ResizeStep {
        from,
        to,
        consumed: taken.min(to.max(copied)),
        done: to >= total || last,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resize_steps() {
        // 1000 pending, steps of 256, nothing moving: 4 steps, then done.
        let s = resize_step(1000, 0, Some(0), 0, 256, 2047, false).unwrap();
        assert_eq!((s.from, s.to, s.consumed, s.done), (0, 256, 0, false));
        let s = resize_step(1000, 0, Some(0), 768, 256, 2047, false).unwrap();
        assert_eq!((s.from, s.to, s.consumed, s.done), (768, 1000, 0, true));
        // Consumed past what was copied: those are skipped, not copied.
        let s = resize_step(1000, 300, Some(0), 256, 256, 2047, false).unwrap();
        assert_eq!((s.from, s.to, s.consumed, s.done), (300, 556, 300, false));
        // All consumed: nothing to copy, done, the new queue is empty.
        let s = resize_step(1000, 1000, Some(0), 256, 256, 2047, false).unwrap();
        assert_eq!((s.from, s.to, s.consumed, s.done), (1000, 1000, 1000, true));
    }

    #[test]
    fn resize_full_queue_under_traffic() {
        // A full kernel queue of 1024 slots (1023 pending): after a first
        // step of 256, the receive path takes one WQE and the ULP posts one.
        // Masked from the start, the producer has moved by 1024 = 0: with
        // masked indices the resize ended here with 255 WQEs of 1023.
        let s = resize_step(1023, 1, Some(1), 256, 256, 2047, false).unwrap();
        assert_eq!((s.from, s.to, s.consumed, s.done), (256, 512, 1, false));
        let s = resize_step(1023, 1, Some(1), 768, 256, 2047, false).unwrap();
        assert_eq!((s.from, s.to, s.consumed, s.done), (768, 1024, 1, true));
        // 1023 pending at the end, none lost.
        assert_eq!(s.to - s.consumed, 1023);
    }

    #[test]
    fn resize_bounds() {
        // Shrinking: what is pending now must fit, not what was pending.
        assert!(resize_step(600, 0, Some(0), 0, 256, 511, false).is_none());
        assert!(resize_step(600, 100, Some(0), 0, 256, 511, false).is_some());
        // A ULP that keeps posting: the last step takes the rest at once.
        let s = resize_step(100, 0, Some(5000), 256, 256, 8191, true).unwrap();
        assert_eq!((s.from, s.to, s.done), (256, 5100, true));
        // A user queue: posts are not counted; its last step stays bounded.
        let s = resize_step(100_000, 0, None, 0, 256, 131071, true).unwrap();
        assert_eq!((s.from, s.to, s.done), (0, 256, true));
        // Consumed more than was pending (a hostile user posted and the
        // receive path took them): nothing copied, no wrap.
        let s = resize_step(10, 50, None, 10, 256, 1023, false).unwrap();
        assert_eq!((s.from, s.to, s.consumed, s.done), (50, 10, 10, true));
    }

    #[test]
    fn geometry_matches_rxe_queue_init() {
        // CQ of 1: 2 slots; of 3: 4 slots; of 4: 8 slots.
        let g = QueueGeometry::new(1, 48).unwrap();
        assert_eq!((g.slots(), g.capacity(), g.elem_size()), (2, 1, 64));
        assert_eq!(QueueGeometry::new(3, 48).unwrap().capacity(), 3);
        assert_eq!(QueueGeometry::new(4, 48).unwrap().capacity(), 7);
        // Maximum CQ: 32767 elements fit 32768 slots exactly.
        assert_eq!(QueueGeometry::new(32767, 48).unwrap().slots(), 32768);
        // 0 elements is allowed: one slot, capacity 0.
        assert_eq!(QueueGeometry::new(0, 48).unwrap().capacity(), 0);
        // Element sizes round up to a power of two.
        let g = QueueGeometry::new(16, 208 + 32 * 16).unwrap();
        assert_eq!(g.elem_size(), 1024);
        assert_eq!(g.buf_size(), 384 + 32 * 1024);
        assert_eq!(g.slot_offset(1), 384 + 1024);
        assert_eq!(g.slot_offset(33), 384 + 1024);
    }

    #[test]
    fn overflow_is_rejected() {
        assert!(QueueGeometry::new(u32::MAX, 64).is_none());
        assert!(QueueGeometry::new(1 << 31, 64).is_none());
        assert!(QueueGeometry::new(16, usize::MAX / 2 + 2).is_none());
    }

    #[test]
    fn empty_full_count() {
        let g = QueueGeometry::new(3, 64).unwrap();
        assert!(g.is_empty(0, 0));
        assert!(!g.is_full(0, 0));
        assert_eq!(g.count(3, 0), 3);
        assert!(g.is_full(3, 0));
        assert!(g.is_full(1, 2));
        assert_eq!(g.count(1, 2), 3);
        assert_eq!(g.next(3), 0);
        // Untrusted indices beyond the mask are folded into the queue.
        assert_eq!(g.count(0xffff_ff01, 0), 1);
        assert!(g.is_empty(4, 0));
    }
}
