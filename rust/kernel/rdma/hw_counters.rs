// SPDX-License-Identifier: GPL-2.0

//! Hardware counters exposed through sysfs `hw_counters` and
//! `rdma statistic` (`struct rdma_hw_stats`).
//!
//! C header: [`include/rdma/ib_verbs.h`](srctree/include/rdma/ib_verbs.h)

use crate::bindings;
use kernel::prelude::*;

/// The description of one counter (`struct rdma_stat_desc`).
///
/// A driver lists its counters in a `const` slice; the RDMA core keeps a
/// pointer to it for as long as the device exists, so the slice must be
/// `'static`.
///
/// # Invariants
///
/// `self.0.name` points to a NUL-terminated string that lives forever.
#[repr(transparent)]
pub struct StatDesc(bindings::rdma_stat_desc);

// SAFETY: `StatDesc` is immutable; the name it points to is a `'static` string, which may be read
// from any thread.
unsafe impl Sync for StatDesc {}

impl StatDesc {
    /// Describes a counter called `name` (the sysfs file name).
    pub const fn new(name: &'static CStr) -> Self {
        // INVARIANT: `name` is `'static` and NUL-terminated.
        Self(bindings::rdma_stat_desc {
            name: kernel::str::as_char_ptr_in_const_context(name),
            flags: 0,
            priv_: core::ptr::null(),
        })
    }
}

/// Allocates the C statistics block for `descs`, or returns NULL.
pub(crate) fn alloc_stats(descs: &'static [StatDesc]) -> *mut bindings::rdma_hw_stats {
    let Ok(num) = i32::try_from(descs.len()) else {
        return core::ptr::null_mut();
    };
    // CAST: `StatDesc` is a transparent wrapper of `rdma_stat_desc`, so a slice of it is an
    // array of `rdma_stat_desc`.
    let descs = descs.as_ptr().cast::<bindings::rdma_stat_desc>();
    // SAFETY: `descs` points to `num` descriptors that live forever (`'static`).
    unsafe {
        bindings::rdma_alloc_hw_stats_struct(
            descs,
            num,
            // CAST: a small number of jiffies, widened to `unsigned long`.
            bindings::RDMA_HW_STATS_DEFAULT_LIFESPAN as c_ulong,
        )
    }
}

/// Returns the value array of a statistics block.
///
/// # Safety
///
/// `stats` must be a valid statistics block allocated by [`alloc_stats`],
/// which the caller may write to for the lifetime `'a` (the RDMA core holds
/// its lock during `get_hw_stats`).
pub(crate) unsafe fn values<'a>(stats: *mut bindings::rdma_hw_stats) -> &'a mut [u64] {
    // SAFETY: `stats` is valid by the safety requirements.
    let num = unsafe { (*stats).num_counters };
    // SAFETY: `value` is a flexible array of `num_counters` elements that follows the header in
    // the same allocation; the caller has exclusive access to it.
    unsafe {
        core::slice::from_raw_parts_mut(
            (*stats).value.as_mut_ptr(),
            usize::try_from(num).unwrap_or(0),
        )
    }
}
