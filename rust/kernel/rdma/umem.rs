// SPDX-License-Identifier: GPL-2.0

//! Pinned user memory (`struct ib_umem`).
//!
//! C header: [`include/rdma/ib_umem.h`](srctree/include/rdma/ib_umem.h)

use crate::{
    bindings,
    rdma::access::AccessFlags, //
};
use core::ptr::NonNull;
use kernel::{
    page::PAGE_SIZE,
    prelude::*, //
};

/// A request for `length` bytes of user memory at `start` with `IB_ACCESS_*`
/// flags `access`, as the C getters take it: `(addr, len, access)`.
/// `EINVAL` for a range the address space cannot hold.
pub(crate) fn c_request(
    start: u64,
    length: u64,
    access: AccessFlags,
) -> Result<(usize, usize, i32)> {
    let addr = usize::try_from(start).map_err(|_| EINVAL)?;
    let len = usize::try_from(length).map_err(|_| EINVAL)?;
    // CAST: the C parameter is an `int` holding flag bits.
    Ok((addr, len, access.raw() as i32))
}

/// User memory pinned with `ib_umem_get`, with its page table: the
/// `struct page` of every `PAGE_SIZE` page, in address order, so that an
/// iova translates to a page in O(1).
///
/// # Invariants
///
/// `ptr` is a umem returned by `ib_umem_get` and owned by `self`; `pages`
/// holds the pages it pins, which stay valid until it is released; `len` is
/// its length in bytes (`ib_umem->length`).
pub struct Umem {
    ptr: NonNull<bindings::ib_umem>,
    pages: KVec<usize>,
    len: usize,
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
        access: AccessFlags,
    ) -> Result<Self> {
        let (addr, len, access) = c_request(start, length, access)?;
        // SAFETY: `ib` is a valid device (callers pass the device of a live object); the call
        // pins pages of the current process.
        let umem = unsafe { bindings::ib_umem_get_va(ib, addr, len, access) };
        let umem = kernel::error::from_err_ptr(umem)?;
        // INVARIANT: We own the umem from here on; `Drop` releases it.
        let mut this = Self {
            // SAFETY: `from_err_ptr` returned a non-error, non-NULL pointer.
            ptr: unsafe { NonNull::new_unchecked(umem) },
            pages: KVec::new(),
            // SAFETY: The umem is valid.
            len: unsafe { (*umem).length },
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
    pub fn check_rereg(&self, flags: i32, access: AccessFlags) -> Result {
        // CAST: the C parameter is an `int` holding flag bits.
        let access = access.raw() as i32;
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

    /// Length in bytes of the pinned range.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the pinned range is empty.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The pinned page at `index` (from the page of the first user byte).
    fn page(&self, index: usize) -> Result<*mut bindings::page> {
        // CAST: The table holds `struct page` pointers (see `get`).
        self.pages
            .get(index)
            .map(|&p| p as *mut bindings::page)
            .ok_or(EINVAL)
    }

    /// Copies `src` into the pinned range at byte `offset` from its first
    /// user byte (user address = start + `offset`). `EINVAL` if
    /// `[offset, offset + src.len())` is not inside the pinned length.
    ///
    /// Any context, including softirq: each page is mapped with
    /// `kmap_local_page` for its part of the copy. The caller checks that
    /// the region allows writing (`IB_ACCESS_LOCAL_WRITE` or
    /// `IB_ACCESS_REMOTE_WRITE`): only then are the pages pinned writable.
    pub fn copy_to(&self, offset: usize, src: &[u8]) -> Result {
        let mut done = 0;
        for c in PageSpan::new(self.offset(), offset, src.len(), self.len)? {
            let page = self.page(c.page)?;
            let from = src.get(done..done + c.len).ok_or(EINVAL)?;
            // SAFETY: `page` is pinned while `self` exists; `c.offset + c.len` is at most
            // `PAGE_SIZE` (`PageSpan` never crosses a page); `from` holds `c.len` bytes.
            unsafe { bindings::memcpy_to_page(page, c.offset, from.as_ptr(), c.len) };
            done += c.len;
        }
        Ok(())
    }

    /// Copies from the pinned range at byte `offset` from its first user
    /// byte into `dst`; the same rules as [`Umem::copy_to`].
    pub fn copy_from(&self, offset: usize, dst: &mut [u8]) -> Result {
        let mut done = 0;
        for c in PageSpan::new(self.offset(), offset, dst.len(), self.len)? {
            let page = self.page(c.page)?;
            let to = dst.get_mut(done..done + c.len).ok_or(EINVAL)?;
            // SAFETY: As in `copy_to`; `to` has room for `c.len` bytes.
            unsafe { bindings::memcpy_from_page(to.as_mut_ptr(), page, c.offset, c.len) };
            done += c.len;
        }
        Ok(())
    }
}

impl Umem {
    /// Whether every pinned page is persistent memory (`rxe`'s
    /// `is_pmem_page`): a region may grant `IB_ACCESS_FLUSH_PERSISTENT`
    /// only then.
    pub fn is_pmem(&self) -> bool {
        self.pages.iter().all(|&p| {
            // SAFETY: Each entry is a pinned `struct page` pointer (see `get`), alive while
            // `self` exists; the helper only reads its physical address.
            unsafe { bindings::page_is_pmem(p as *mut bindings::page) }
        })
    }

    /// Writes the CPU cache lines of `[offset, offset + len)` (from the first
    /// user byte) back to memory, as a FLUSH to persistence asks (IBTA Vol 1
    /// Annex A19); the same range rules as [`Umem::copy_to`]. Any context.
    pub fn wb_cache_pmem(&self, offset: usize, len: usize) -> Result {
        for c in PageSpan::new(self.offset(), offset, len, self.len)? {
            let page = self.page(c.page)?;
            // SAFETY: `page` is pinned while `self` exists; `c.offset + c.len` is at most
            // `PAGE_SIZE`; the helper maps the page with `kmap_local_page` and only writes its
            // cache lines back, changing no byte.
            unsafe { bindings::wb_cache_pmem_page(page, c.offset, c.len) };
        }
        Ok(())
    }
}

/// The part of one page a copy touches.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct PageChunk {
    /// Index of the page in the pinned range (0 is the page of the first
    /// user byte).
    pub(crate) page: usize,
    /// Offset in the page, in bytes.
    pub(crate) offset: usize,
    /// Length, in bytes; `offset + len <= PAGE_SIZE`.
    pub(crate) len: usize,
}

/// The split of a byte range of pinned memory into per-page chunks.
///
/// The pinned pages start at the page of the first user byte, which lies
/// `first` bytes into it; a byte at `offset` from the first user byte is
/// byte `(first + offset) % PAGE_SIZE` of page `(first + offset) / PAGE_SIZE`.
pub(crate) struct PageSpan {
    /// Position of the next byte, counted from the start of page 0.
    pos: usize,
    /// Bytes left.
    left: usize,
}

impl PageSpan {
    /// The chunks of `[offset, offset + len)` in a pinned range of `total`
    /// bytes whose first user byte is at `first` in its page; `EINVAL` if
    /// the range is not inside `[0, total)`.
    pub(crate) fn new(first: usize, offset: usize, len: usize, total: usize) -> Result<Self> {
        let end = offset.checked_add(len).ok_or(EINVAL)?;
        if end > total || first >= PAGE_SIZE {
            return Err(EINVAL);
        }
        Ok(Self {
            pos: first.checked_add(offset).ok_or(EINVAL)?,
            left: len,
        })
    }
}

impl Iterator for PageSpan {
    type Item = PageChunk;

    fn next(&mut self) -> Option<PageChunk> {
        if self.left == 0 {
            return None;
        }
        let offset = self.pos % PAGE_SIZE;
        let len = self.left.min(PAGE_SIZE - offset);
        let c = PageChunk {
            page: self.pos / PAGE_SIZE,
            offset,
            len,
        };
        self.pos += len;
        self.left -= len;
        Some(c)
    }
}

impl Drop for Umem {
    fn drop(&mut self) {
        // SAFETY: We own the umem by the type invariant.
        unsafe { bindings::ib_umem_release(self.ptr.as_ptr()) };
    }
}

#[kunit_tests(rrxe_rdma_umem)]
mod tests {
    use super::*;

    fn chunks(first: usize, offset: usize, len: usize, total: usize) -> Result<KVec<PageChunk>> {
        let mut v = KVec::new();
        for c in PageSpan::new(first, offset, len, total)? {
            v.push(c, GFP_KERNEL)?;
        }
        Ok(v)
    }

    fn chunk(page: usize, offset: usize, len: usize) -> PageChunk {
        PageChunk { page, offset, len }
    }

    #[test]
    fn inside_one_page() -> Result {
        assert_eq!(chunks(0, 0, 16, 4 * PAGE_SIZE)?[..], [chunk(0, 0, 16)]);
        // The first user byte is 100 bytes into page 0.
        assert_eq!(chunks(100, 8, 16, PAGE_SIZE)?[..], [chunk(0, 108, 16)]);
        // Offsets past the first page's user part land in later pages.
        let off = PAGE_SIZE - 100 + 5;
        assert_eq!(chunks(100, off, 10, 2 * PAGE_SIZE)?[..], [chunk(1, 5, 10)]);
        Ok(())
    }

    #[test]
    fn across_pages() -> Result {
        // Two bytes each side of the first page boundary.
        let off = PAGE_SIZE - 100 - 2;
        assert_eq!(
            chunks(100, off, 4, 2 * PAGE_SIZE)?[..],
            [chunk(0, PAGE_SIZE - 2, 2), chunk(1, 0, 2)]
        );
        // A whole middle page.
        assert_eq!(
            chunks(0, PAGE_SIZE - 1, PAGE_SIZE + 2, 3 * PAGE_SIZE)?[..],
            [
                chunk(0, PAGE_SIZE - 1, 1),
                chunk(1, 0, PAGE_SIZE),
                chunk(2, 0, 1)
            ]
        );
        Ok(())
    }

    #[test]
    fn bounds() -> Result {
        // Up to the last byte is fine, one more is not.
        assert_eq!(chunks(7, 90, 10, 100)?[..], [chunk(0, 97, 10)]);
        assert!(chunks(7, 90, 11, 100).is_err());
        assert!(chunks(7, 101, 0, 100).is_err());
        assert!(chunks(0, usize::MAX, 2, 100).is_err());
        // Empty copies at the end are fine and touch nothing.
        assert!(chunks(7, 100, 0, 100)?.is_empty());
        Ok(())
    }
}
