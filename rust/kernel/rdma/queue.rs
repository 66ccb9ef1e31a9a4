// SPDX-License-Identifier: GPL-2.0

//! Queue buffers shared with user space (`struct rxe_queue_buf` of
//! `include/uapi/rdma/rdma_user_rxe.h`).
//!
//! A [`QueueBuf`] is zeroed `vmalloc_user` memory. For user objects it is
//! exported through an `rdma_user_mmap_entry`: user space maps it with the
//! returned offset, and the memory stays alive until both the object and
//! every mapping are gone. Everything in the buffer may be written by user
//! space at any time, so it is only accessed through copies and atomic
//! loads/stores, never through references.
//!
//! C header: [`include/rdma/ib_verbs.h`](srctree/include/rdma/ib_verbs.h)

use crate::{
    bindings,
    rdma::udata::Udata, //
};
use core::{
    mem::offset_of,
    ptr::NonNull,
    sync::atomic::{
        AtomicU32,
        Ordering, //
    },
};
use kernel::prelude::*;

/// Size of the rxe ABI's `struct mminfo`, where user space finds a queue.
pub const MMINFO_SIZE: usize = size_of::<bindings::mminfo>();
/// Size of `struct rxe_create_qp_resp`, the answer to a user `create_qp`.
pub const CREATE_QP_RESP_SIZE: usize = size_of::<bindings::rxe_create_qp_resp>();
/// Size of `struct rxe_create_srq_resp`, the answer to a user
/// `create_srq`.
pub const CREATE_SRQ_RESP_SIZE: usize = size_of::<bindings::rxe_create_srq_resp>();

/// Size of `struct rxe_modify_srq_cmd`, what user space passes to a
/// `modify_srq` that resizes the queue.
pub const MODIFY_SRQ_CMD_SIZE: usize = size_of::<bindings::rxe_modify_srq_cmd>();

/// The `mmap_info_addr` of a `struct rxe_modify_srq_cmd`: the user address
/// where the resized queue's `struct mminfo` goes.
pub fn modify_srq_cmd_mmap_info_addr(cmd: &[u8; MODIFY_SRQ_CMD_SIZE]) -> u64 {
    // The field lies within the struct.
    let a = offset_of!(bindings::rxe_modify_srq_cmd, mmap_info_addr);
    let mut v = [0u8; 8];
    v.copy_from_slice(&cmd[a..a + 8]);
    u64::from_ne_bytes(v)
}

/// `struct rxe_create_qp_resp`: the `struct mminfo` of the receive queue
/// (zero with an SRQ) and of the send queue.
pub fn create_qp_resp(
    rq_mi: &[u8; MMINFO_SIZE],
    sq_mi: &[u8; MMINFO_SIZE],
) -> [u8; CREATE_QP_RESP_SIZE] {
    // Each field lies within the struct, so no range below is out of
    // bounds.
    let rq = offset_of!(bindings::rxe_create_qp_resp, rq_mi);
    let sq = offset_of!(bindings::rxe_create_qp_resp, sq_mi);
    let mut b = [0u8; CREATE_QP_RESP_SIZE];
    b[rq..rq + MMINFO_SIZE].copy_from_slice(rq_mi);
    b[sq..sq + MMINFO_SIZE].copy_from_slice(sq_mi);
    b
}

/// `struct rxe_create_srq_resp`: the `struct mminfo` of the SRQ's queue and
/// its number.
pub fn create_srq_resp(mi: &[u8; MMINFO_SIZE], srq_num: u32) -> [u8; CREATE_SRQ_RESP_SIZE] {
    // As above: the fields lie within the struct.
    let m = offset_of!(bindings::rxe_create_srq_resp, mi);
    let n = offset_of!(bindings::rxe_create_srq_resp, srq_num);
    let mut b = [0u8; CREATE_SRQ_RESP_SIZE];
    b[m..m + MMINFO_SIZE].copy_from_slice(mi);
    b[n..n + 4].copy_from_slice(&srq_num.to_ne_bytes());
    b
}

/// Where user space finds a queue: `struct mminfo` of the rxe ABI.
#[derive(Clone, Copy, Default, Debug)]
pub struct MmapInfo {
    /// Offset to pass to `mmap()` on the uverbs file.
    pub offset: u64,
    /// Size of the buffer in bytes.
    pub size: u32,
}

impl MmapInfo {
    /// The `struct mminfo`.
    pub fn to_bytes(self) -> [u8; MMINFO_SIZE] {
        let o = offset_of!(bindings::mminfo, offset);
        let s = offset_of!(bindings::mminfo, size);
        let mut b = [0u8; MMINFO_SIZE];
        b[o..o + 8].copy_from_slice(&self.offset.to_ne_bytes());
        b[s..s + 4].copy_from_slice(&self.size.to_ne_bytes());
        b
    }
}

/// A zeroed, page-backed buffer that can be mapped into user space.
///
/// # Invariants
///
/// - `buf` points to `size` bytes of `vmalloc_user` memory, 4-byte aligned
///   (page aligned in fact).
/// - If `entry` is non-NULL, the mmap entry owns the memory and `self` holds
///   the entry's insertion reference; otherwise `self` owns the memory.
pub struct QueueBuf {
    buf: NonNull<u8>,
    size: usize,
    entry: *mut bindings::rdma_user_mmap_entry,
}

// SAFETY: The buffer is plain memory; the entry reference may be dropped from any thread.
unsafe impl Send for QueueBuf {}
// SAFETY: All accesses through `&self` are copies or atomics.
unsafe impl Sync for QueueBuf {}

impl QueueBuf {
    /// Allocates `size` zeroed bytes.
    pub fn new(size: usize) -> Result<Self> {
        // SAFETY: FFI call with no preconditions.
        let buf = unsafe { bindings::vmalloc_user(size) };
        let buf = NonNull::new(buf.cast::<u8>()).ok_or(ENOMEM)?;
        // INVARIANT: Fresh zeroed memory owned by `self`.
        Ok(Self {
            buf,
            size,
            entry: core::ptr::null_mut(),
        })
    }

    /// Size of the buffer in bytes.
    pub fn size(&self) -> usize {
        self.size
    }

    /// Makes the buffer mappable by the user context of the command `udata`
    /// belongs to, and returns where user space finds it.
    pub fn export(&mut self, udata: &Udata) -> Result<MmapInfo> {
        if !self.entry.is_null() {
            return Err(EINVAL);
        }
        let size = u32::try_from(self.size).map_err(|_| EINVAL)?;
        // SAFETY: `udata` is valid for the command, which runs with its user context.
        let uctx = unsafe { bindings::udata_ucontext(udata.as_raw()) };
        if uctx.is_null() {
            return Err(EINVAL);
        }
        let mut offset = 0u64;
        // SAFETY: `uctx` is valid; the memory is `vmalloc_user` memory of `size` bytes, whose
        // ownership passes to the entry on success.
        let entry = unsafe {
            bindings::qbuf_insert(uctx, self.buf.as_ptr().cast(), self.size, &mut offset)
        };
        let entry = kernel::error::from_err_ptr(entry)?;
        // INVARIANT: The entry owns the memory now; we hold its insertion reference.
        self.entry = entry;
        Ok(MmapInfo { offset, size })
    }

    fn check(&self, off: usize, len: usize) -> Result {
        match off.checked_add(len) {
            Some(end) if end <= self.size => Ok(()),
            _ => Err(EINVAL),
        }
    }

    /// Returns the 32-bit word at byte offset `off` as an atomic.
    ///
    /// Panics if `off` is not inside the buffer or not 4-byte aligned.
    fn word(&self, off: usize) -> &AtomicU32 {
        assert!(off % 4 == 0 && off + 4 <= self.size);
        // SAFETY: In bounds and aligned (checked above; the buffer is page aligned); the memory
        // lives as long as `self` and is only accessed atomically or by copies.
        unsafe { AtomicU32::from_ptr(self.buf.as_ptr().add(off).cast()) }
    }

    /// Loads the word at `off` with acquire ordering (an index the other side
    /// publishes).
    pub fn load_acquire(&self, off: usize) -> u32 {
        self.word(off).load(Ordering::Acquire)
    }

    /// Stores `v` at `off` with release ordering (publishes an index).
    pub fn store_release(&self, off: usize, v: u32) {
        self.word(off).store(v, Ordering::Release)
    }

    /// Stores `v` at `off` without ordering (header fields).
    pub fn store(&self, off: usize, v: u32) {
        self.word(off).store(v, Ordering::Relaxed)
    }

    /// Copies `dst.len()` bytes from offset `off` (a snapshot of memory user
    /// space may be changing).
    pub fn read(&self, off: usize, dst: &mut [u8]) -> Result {
        self.check(off, dst.len())?;
        // SAFETY: In bounds (checked); `dst` is a distinct kernel buffer. Concurrent user writes
        // can only make the snapshot inconsistent, which callers validate.
        unsafe {
            core::ptr::copy_nonoverlapping(self.buf.as_ptr().add(off), dst.as_mut_ptr(), dst.len())
        };
        Ok(())
    }

    /// Copies `src` to offset `off`.
    pub fn write(&self, off: usize, src: &[u8]) -> Result {
        self.check(off, src.len())?;
        // SAFETY: In bounds (checked); the buffer is not borrowed as a Rust reference anywhere.
        unsafe {
            core::ptr::copy_nonoverlapping(src.as_ptr(), self.buf.as_ptr().add(off), src.len())
        };
        Ok(())
    }
}

impl Drop for QueueBuf {
    fn drop(&mut self) {
        if self.entry.is_null() {
            // SAFETY: We own the memory by the type invariant.
            unsafe { bindings::vfree(self.buf.as_ptr().cast()) };
        } else {
            // SAFETY: We hold the insertion reference; the last reference frees the memory
            // through `mmap_free`.
            unsafe { bindings::qbuf_remove(self.entry) };
        }
    }
}

/// `mmap` op: maps a queue buffer exported with [`QueueBuf::export`].
///
/// # Safety
///
/// Called by the RDMA core with a valid user context and VMA.
pub(crate) unsafe extern "C" fn mmap_callback(
    uctx: *mut bindings::ib_ucontext,
    vma: *mut bindings::vm_area_struct,
) -> c_int {
    // SAFETY: Valid by the safety requirements.
    unsafe { bindings::qbuf_mmap(uctx, vma) }
}

/// `mmap_free` op: frees a buffer once its last reference is gone.
///
/// # Safety
///
/// Called by the RDMA core once per entry inserted by [`QueueBuf::export`].
pub(crate) unsafe extern "C" fn mmap_free_callback(entry: *mut bindings::rdma_user_mmap_entry) {
    // SAFETY: All entries of rrxe's contexts are queue buffer entries.
    unsafe { bindings::qbuf_mmap_free(entry) }
}
