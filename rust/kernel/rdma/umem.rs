// SPDX-License-Identifier: GPL-2.0

//! Pinned user memory (`struct ib_umem`).
//!
//! C header: [`include/rdma/ib_umem.h`](srctree/include/rdma/ib_umem.h)

use crate::bindings;
use core::ptr::NonNull;
use kernel::prelude::*;

/// User memory pinned with `ib_umem_get`, with its page table: the
/// `struct page` of every `PAGE_SIZE` page, in address order, so that an
/// iova translates to a page in O(1).
///
/// # Invariants
///
/// `ptr` is a umem returned by `ib_umem_get` and owned by `self`; `pages`
/// holds the pages it pins, which stay valid until it is released.
pub struct Umem {
    ptr: NonNull<bindings::ib_umem>,
    pages: KVec<usize>,
}

// SAFETY: A umem may be released from any thread.
unsafe impl Send for Umem {}
// SAFETY: Only immutable accessors.
unsafe impl Sync for Umem {}

impl Umem {
    /// Pins `length` bytes of the current process at `start` with
    /// `IB_ACCESS_*` flags `access`, for device `ib`.
    pub(crate) fn get(
        ib: *mut bindings::ib_device,
        start: u64,
        length: u64,
        access: i32,
    ) -> Result<Self> {
        let len = usize::try_from(length).map_err(|_| EINVAL)?;
        let addr = usize::try_from(start).map_err(|_| EINVAL)?;
        // SAFETY: `ib` is a valid device (callers pass the device of a live object); the call
        // pins pages of the current process.
        let umem = unsafe { bindings::ib_umem_get_va(ib, addr, len, access) };
        let umem = kernel::error::from_err_ptr(umem)?;
        // INVARIANT: We own the umem from here on; `Drop` releases it.
        let mut this = Self {
            // SAFETY: `from_err_ptr` returned a non-error, non-NULL pointer.
            ptr: unsafe { NonNull::new_unchecked(umem) },
            pages: KVec::new(),
        };
        // SAFETY: The umem is valid.
        let n = unsafe { bindings::umem_num_pages(umem) };
        this.pages = KVec::with_capacity(n, GFP_KERNEL)?;
        this.pages.resize(n, 0, GFP_KERNEL)?;
        // SAFETY: The umem is valid; `pages` has room for `n` entries.
        let got = unsafe { bindings::umem_fill_pages(umem, this.pages.as_mut_ptr().cast(), n) };
        this.pages.truncate(got);
        Ok(this)
    }

    /// Number of pinned pages.
    pub fn page_count(&self) -> usize {
        self.pages.len()
    }

    /// Whether `rereg_user_mr` may change a region over this memory to the
    /// `IB_ACCESS_*` flags `access` (`IB_MR_REREG_*` flags `flags`) without
    /// pinning it again: a writable access needs memory pinned writable
    /// (`EACCES` otherwise).
    pub fn check_rereg(&self, flags: i32, access: i32) -> Result {
        // SAFETY: The umem is valid; the call only reads it.
        kernel::error::to_result(unsafe {
            bindings::ib_umem_check_rereg(self.ptr.as_ptr(), flags, access)
        })
    }

    /// Offset of the user address in its first page.
    pub fn offset(&self) -> usize {
        // SAFETY: The umem is valid.
        unsafe { bindings::ib_umem_offset(self.ptr.as_ptr()) as usize }
    }
}

impl Drop for Umem {
    fn drop(&mut self) {
        // SAFETY: We own the umem by the type invariant.
        unsafe { bindings::ib_umem_release(self.ptr.as_ptr()) };
    }
}
