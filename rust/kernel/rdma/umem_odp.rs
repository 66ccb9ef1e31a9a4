// SPDX-License-Identifier: GPL-2.0

//! User memory mapped on demand (`struct ib_umem_odp`): nothing is pinned;
//! pages are faulted in when the device needs them and forgotten when the
//! process's mapping changes (an MMU interval notifier).
//!
//! The core keeps the pages in `map.pfn_list`, which `hmm_range_fault`
//! writes without a lock and whose readers must hold `umem_mutex`, a mutex:
//! the data path of a software device runs in softirq and can take
//! neither. So this type keeps its own page table under a spinlock: pages
//! are copied into it after a fault, with `umem_mutex` held and the
//! notifier's sequence checked, and removed from it by the invalidation
//! callback before the core unmaps them. A copy holds the spinlock while it
//! touches the pages, so an invalidation waits for it, and no copy starts
//! on a page being invalidated.
//!
//! C header: [`include/rdma/ib_umem_odp.h`](srctree/include/rdma/ib_umem_odp.h)

use crate::{
    bindings, new_spinlock_irq,
    rdma::{
        access::AccessFlags,
        lock::SpinLockIrq,
        umem::{
            c_request,
            PageChunk,
            PageSpan, //
        },
    },
};
use core::ptr::NonNull;
use kernel::{
    alloc::KVVec,
    ffi::{
        c_ulong,
        c_void, //
    },
    page::PAGE_SIZE,
    prelude::*, //
};

/// A table entry's bit for a page mapped writable; `struct page` pointers
/// are at least word aligned.
const WRITABLE: usize = 1;
/// A table entry's bit for a page the device wrote: it is marked dirty
/// when it leaves the table (`set_page_dirty`, as the core does for pages
/// a device wrote through DMA), or reclaim could drop what was written.
/// Not at the write itself: that runs in softirq, and marking a file page
/// dirty takes locks that may not be taken there.
const WRITTEN: usize = 2;
/// The bits of an entry that are not the page pointer.
const FLAGS: usize = WRITABLE | WRITTEN;
/// Most table entries handled with the table's lock held (interrupts off).
const STEP: usize = 512;

/// Why on-demand memory could not be accessed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OdpError {
    /// The range is outside the registered memory.
    Range,
    /// A page of the range is not mapped (or not writable, for a write),
    /// the first at this offset from the first user byte: [`UmemOdp::fault`]
    /// the rest of the range in, from a context that may sleep, and retry.
    NotPresent(usize),
    /// A write to memory registered read-only.
    ReadOnly,
}

/// The page table the data path reads: per `PAGE_SIZE` page from
/// `ib_umem_start`, the `struct page` pointer (with [`WRITABLE`]), or 0.
#[pin_data]
struct PageTable {
    #[pin]
    pages: SpinLockIrq<KVVec<usize>>,
}

/// User memory registered for on-demand paging.
///
/// # Invariants
///
/// `ptr` is a umem returned by `ib_umem_odp_get` with [`ODP_OPS`] and owned
/// by `self`; its `private` points to `table` from the end of
/// [`UmemOdp::get`] until the umem is released. Every non-zero entry of
/// `table` is a page the core has mapped for the umem, and stays mapped
/// until the invalidation callback cleared the entry.
pub struct UmemOdp {
    ptr: NonNull<bindings::ib_umem_odp>,
    table: Pin<KBox<PageTable>>,
    /// Offset of the first user byte in the first page.
    first: usize,
    /// Length in bytes from the first user byte.
    len: usize,
    /// Registered with write access: pages may be faulted in writable.
    writable: bool,
}

// SAFETY: The umem may be released from any thread; the table is under its lock.
unsafe impl Send for UmemOdp {}
// SAFETY: Shared accessors take the table's lock or call the core's thread-safe functions.
unsafe impl Sync for UmemOdp {}

/// The notifier operations of every on-demand umem of this module.
static ODP_OPS: bindings::mmu_interval_notifier_ops = bindings::mmu_interval_notifier_ops {
    invalidate: Some(invalidate_callback),
    // SAFETY: The other members are optional function pointers, for which zero is `None`.
    ..unsafe { core::mem::zeroed() }
};

/// The process's mapping of part of the range changes: the pages go from
/// the table before the core unmaps them (`mmu_interval_notifier_ops`).
///
/// # Safety
///
/// Called by the MMU notifier core for the notifier of a umem created by
/// [`UmemOdp::get`], not yet released.
unsafe extern "C" fn invalidate_callback(
    mni: *mut bindings::mmu_interval_notifier,
    range: *const bindings::mmu_notifier_range,
    cur_seq: c_ulong,
) -> bool {
    let (mut first, mut end) = (0usize, 0usize);
    let mut private: *mut c_void = core::ptr::null_mut();
    // SAFETY: `mni` and `range` are valid for the call by the safety requirements; the
    // out-pointers are valid for writes.
    let odp = unsafe {
        bindings::odp_invalidate_begin(mni, range, cur_seq, &mut first, &mut end, &mut private)
    };
    if odp.is_null() {
        // It may not sleep: refused, the core retries from a blockable context.
        return false;
    }
    if !private.is_null() {
        // SAFETY: A non-NULL `private` is the table of the live `UmemOdp` owning the umem
        // (type invariant); `umem_mutex` is held, so it is not being set.
        let table = unsafe { &*private.cast::<PageTable>() };
        // The pages are still mapped until the callback returns.
        table.forget(first, end);
    }
    // SAFETY: `odp` is the umem `odp_invalidate_begin` locked; `range` is valid.
    unsafe { bindings::odp_invalidate_end(odp, range) };
    true
}

impl PageTable {
    /// Removes the entries `[first, end)` from the table, a step at a time,
    /// and marks the pages written through them dirty, outside the lock.
    /// Called with `umem_mutex` held (no entry is added meanwhile) while
    /// the pages are still mapped (an invalidation that has not returned,
    /// or a release).
    fn forget(&self, first: usize, end: usize) {
        let mut index = first;
        loop {
            let mut dirty = [0usize; 32];
            let mut n = 0;
            {
                let mut pages = self.pages.lock();
                let end = end.min(pages.len());
                let stop = end.min(index.saturating_add(STEP));
                while index < stop && n < dirty.len() {
                    if let Some(e) = pages.get_mut(index) {
                        if *e & WRITTEN != 0 {
                            dirty[n] = *e & !FLAGS;
                            n += 1;
                        }
                        *e = 0;
                    }
                    index += 1;
                }
                if index >= end && n == 0 {
                    return;
                }
            }
            for &p in &dirty[..n] {
                // SAFETY: The page was in the table, so it is mapped for the umem, and stays so
                // until the caller returns (see above).
                unsafe { bindings::odp_set_page_dirty(p as *mut bindings::page) };
            }
        }
    }
}

impl UmemOdp {
    /// Registers `length` bytes of the current process at `start` with
    /// `IB_ACCESS_*` flags `access` (which include `IB_ACCESS_ON_DEMAND`)
    /// for device `ib`, and takes the pages already mapped (without
    /// faulting any in), as the C driver does.
    pub(crate) fn get(
        ib: *mut bindings::ib_device,
        start: u64,
        length: u64,
        access: AccessFlags,
    ) -> Result<Self> {
        let (addr, len, access) = c_request(start, length, access)?;
        // SAFETY: `ib` is a valid device (callers pass the device of a live object); the call
        // registers a notifier on the current process's memory.
        let odp = unsafe { bindings::ib_umem_odp_get(ib, addr, len, access, &ODP_OPS) };
        let odp = kernel::error::from_err_ptr(odp)?;
        // SAFETY: `from_err_ptr` returned a non-error, non-NULL pointer.
        let ptr = unsafe { NonNull::new_unchecked(odp) };
        let release = |e: Error| {
            // SAFETY: We own the umem and nothing else refers to it.
            unsafe { bindings::ib_umem_odp_release(odp) };
            e
        };
        // SAFETY: The umem is valid.
        let n = unsafe { bindings::odp_page_count(odp) };
        // Charged to the process's memory cgroup, as its pages would be.
        let mut pages =
            KVVec::with_capacity(n, GFP_KERNEL_ACCOUNT).map_err(|e| release(e.into()))?;
        pages
            .resize(n, 0, GFP_KERNEL)
            .map_err(|e| release(e.into()))?;
        let table = KBox::pin_init(
            pin_init!(PageTable {
                pages <- new_spinlock_irq!(pages, "rrxe_odp_pages"),
            }),
            GFP_KERNEL,
        )
        .map_err(release)?;
        // INVARIANT: The umem is ours from here on (`Drop` releases it); its `private` is set
        // to the table, which lives as long as `self`.
        let this = Self {
            ptr,
            // SAFETY: The umem is valid.
            first: unsafe { bindings::odp_first(odp) },
            // SAFETY: The umem is valid.
            len: unsafe { bindings::odp_length(odp) },
            // SAFETY: The umem is valid.
            writable: unsafe { bindings::odp_writable(odp) },
            table,
        };
        let private: *const PageTable = &*this.table;
        // SAFETY: The umem is valid; the table is pinned and outlives the umem's release.
        unsafe { bindings::odp_set_private(odp, private.cast_mut().cast()) };
        // The pages already mapped, a bounded step at a time (the core
        // counts pages in an `int`).
        let mut at = 0;
        while at < this.len {
            let n = (this.len - at).min(1 << 30);
            this.map(at, n, false, false)?;
            at += n;
        }
        Ok(this)
    }

    /// Length in bytes of the registered range.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the registered range is empty.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Offset of the first user byte in its page.
    pub fn offset(&self) -> usize {
        self.first
    }

    /// Whether the range was registered writable.
    pub fn is_writable(&self) -> bool {
        self.writable
    }

    /// Faults `[offset, offset + len)` (from the first user byte) in, writable
    /// if `write`, and enters its pages in the table. Process context: may
    /// sleep. `EFAULT` if the process has no such mapping (or a read-only
    /// one, for a write), `EINVAL` if its memory is gone.
    pub fn fault(&self, offset: usize, len: usize, write: bool) -> Result {
        if write && !self.writable {
            return Err(EACCES);
        }
        self.map(offset, len, write, true)
    }

    /// Enters the pages of `[offset, offset + len)` that are mapped already
    /// in the table, faulting none in. Process context: may sleep.
    pub fn snapshot(&self, offset: usize, len: usize) -> Result {
        self.map(offset, len, false, false)
    }

    /// `ib_umem_odp_map_dma_and_lock` of the range, then its mapped pages
    /// into the table.
    fn map(&self, offset: usize, len: usize, write: bool, fault: bool) -> Result {
        let end = offset.checked_add(len).ok_or(EINVAL)?;
        if len == 0 || end > self.len {
            return Err(EINVAL);
        }
        let odp = self.ptr.as_ptr();
        // CAST: usize fits in u64.
        let (off, n) = (offset as u64, len as u64);
        // SAFETY: The umem is valid; the range is inside it (checked above).
        let ret = unsafe { bindings::odp_map_and_lock(odp, off, n, write, fault) };
        kernel::error::to_result(ret)?;
        // `umem_mutex` is held from here: the core's page list is stable,
        // and no invalidation runs, so the table's lock may be dropped
        // between steps.
        let first_page = (self.first + offset) / PAGE_SIZE;
        let last_page = (self.first + end - 1) / PAGE_SIZE;
        let mut index = first_page;
        while index <= last_page {
            let mut pages = self.table.pages.lock();
            let stop = last_page.min(index + STEP - 1);
            while index <= stop {
                let mut writable = false;
                // SAFETY: `umem_mutex` is held after a successful map; `index` is below the
                // umem's page count (the range is inside the umem).
                let page = unsafe { bindings::odp_page(odp, index, &mut writable) };
                if let Some(e) = pages.get_mut(index) {
                    *e = if page.is_null() {
                        0
                    } else {
                        // A page mapped again keeps its mark of being written.
                        let written = if *e & !FLAGS == page as usize {
                            *e & WRITTEN
                        } else {
                            0
                        };
                        page as usize | written | if writable { WRITABLE } else { 0 }
                    };
                }
                index += 1;
            }
        }
        // SAFETY: `odp_map_and_lock` succeeded, so we hold `umem_mutex`.
        unsafe { bindings::odp_unlock(odp) };
        Ok(())
    }

    /// Whether every page of `[offset, offset + len)` is in the table
    /// (writable, if `write`). Any context; the table's lock is taken for
    /// [`STEP`] pages at a time.
    pub fn is_present(&self, offset: usize, len: usize, write: bool) -> Result<(), OdpError> {
        let end = offset.checked_add(len).ok_or(OdpError::Range)?;
        let mut at = offset;
        loop {
            let n = (end - at).min(STEP * PAGE_SIZE);
            self.check(&self.table.pages.lock(), at, n, write)?;
            at += n;
            if at >= end {
                return Ok(());
            }
        }
    }

    fn check(
        &self,
        pages: &[usize],
        offset: usize,
        len: usize,
        write: bool,
    ) -> Result<(), OdpError> {
        if write && !self.writable {
            return Err(OdpError::ReadOnly);
        }
        let span = PageSpan::new(self.first, offset, len, self.len).map_err(|_| OdpError::Range)?;
        let mut at = offset;
        for c in span {
            let e = pages.get(c.page).copied().unwrap_or(0);
            if e == 0 || (write && e & WRITABLE == 0) {
                return Err(OdpError::NotPresent(at));
            }
            at += c.len;
        }
        Ok(())
    }

    /// Calls `f(page, chunk, done)` for each per-page piece of `[offset,
    /// offset + len)`, `done` bytes into it, with the table's lock held,
    /// once every page is known to be mapped (writable, if `write`).
    fn for_each_page(
        &self,
        offset: usize,
        len: usize,
        write: bool,
        mut f: impl FnMut(*mut bindings::page, &PageChunk, usize) -> Result<(), OdpError>,
    ) -> Result<(), OdpError> {
        let mut pages = self.table.pages.lock();
        self.check(&pages, offset, len, write)?;
        let span = PageSpan::new(self.first, offset, len, self.len).map_err(|_| OdpError::Range)?;
        let mut done = 0;
        for c in span {
            let e = pages.get_mut(c.page).ok_or(OdpError::Range)?;
            if write {
                *e |= WRITTEN;
            }
            f((*e & !FLAGS) as *mut bindings::page, &c, done)?;
            done += c.len;
        }
        Ok(())
    }

    /// Copies `src` into the range at byte `offset` from its first user
    /// byte, if every page it touches is mapped writable. Any context,
    /// including softirq.
    pub fn copy_to(&self, offset: usize, src: &[u8]) -> Result<(), OdpError> {
        self.for_each_page(offset, src.len(), true, |page, c, done| {
            let from = src.get(done..done + c.len).ok_or(OdpError::Range)?;
            // SAFETY: `page` is non-NULL (`check` found every entry set) and mapped for the umem
            // while its entry is in the table, which cannot change while `for_each_page` holds
            // its lock (type invariant); `c.offset + c.len <= PAGE_SIZE`; `from` holds `c.len`
            // bytes.
            unsafe { bindings::memcpy_to_page(page, c.offset, from.as_ptr(), c.len) };
            Ok(())
        })
    }

    /// Copies from the range at byte `offset` from its first user byte into
    /// `dst`, if every page it touches is mapped; the same rules as
    /// [`UmemOdp::copy_to`].
    pub fn copy_from(&self, offset: usize, dst: &mut [u8]) -> Result<(), OdpError> {
        self.for_each_page(offset, dst.len(), false, |page, c, done| {
            let to = dst.get_mut(done..done + c.len).ok_or(OdpError::Range)?;
            // SAFETY: As in `copy_to`; `to` has room for `c.len` bytes.
            unsafe { bindings::memcpy_from_page(to.as_mut_ptr(), page, c.offset, c.len) };
            Ok(())
        })
    }
}

impl Drop for UmemOdp {
    fn drop(&mut self) {
        let odp = self.ptr.as_ptr();
        // The pages left in the table are mapped (an invalidation would have taken them out);
        // those written are marked dirty before the umem goes.
        // SAFETY: The umem is valid; the lock is released below.
        unsafe { bindings::odp_lock(odp) };
        self.table.forget(0, usize::MAX);
        // SAFETY: We took `umem_mutex` above.
        unsafe { bindings::odp_unlock(odp) };
        // SAFETY: We own the umem by the type invariant. Releasing it removes the notifier
        // and waits for a running invalidation, so the table (dropped after this) is no
        // longer reachable from the callback.
        unsafe { bindings::ib_umem_odp_release(odp) };
    }
}
