// SPDX-License-Identifier: GPL-2.0

//! Protection domains (`struct ib_pd`).
//!
//! C header: [`include/rdma/ib_verbs.h`](srctree/include/rdma/ib_verbs.h)

use crate::{
    bindings,
    rdma::{
        access::AccessFlags,
        device::Driver,
        object::{
            alloc_data,
            rdma_object, //
        }, //
    },
};
use kernel::{
    prelude::*,
    types::Opaque, //
};

/// A protection domain of a device of driver `T`, with the driver's state in
/// place.
///
/// `ib_core` allocates `size_of::<Pd<T>>()` zeroed bytes, fills the C part and
/// calls `alloc_pd`, which initialises `data`; `data` is dropped in
/// `dealloc_pd`, before `ib_core` frees the memory.
///
/// # Invariants
///
/// - `ib` is at offset 0 and is a valid `struct ib_pd` of a device of driver
///   `T` while a reference to `Self` exists.
/// - `data` is initialised while a reference to `Self` exists.
#[repr(C)]
pub struct Pd<T: Driver> {
    ib: Opaque<bindings::ib_pd>,
    data: T::PdData,
}

rdma_object!(Pd: ib_pd => PdData, in_place, from_raw);

impl<T: Driver> Pd<T> {
    /// Pins `length` bytes of user memory at `start` for a region of this
    /// PD's device.
    pub fn umem_get(
        &self,
        start: u64,
        length: u64,
        access: AccessFlags,
    ) -> Result<crate::rdma::umem::Umem> {
        crate::rdma::umem::Umem::get(self.device().as_raw(), start, length, access)
    }

    /// Registers `length` bytes of user memory at `start` for on-demand
    /// paging, for a region of this PD's device.
    pub fn umem_odp_get(
        &self,
        start: u64,
        length: u64,
        access: AccessFlags,
    ) -> Result<crate::rdma::umem_odp::UmemOdp> {
        crate::rdma::umem_odp::UmemOdp::get(self.device().as_raw(), start, length, access)
    }

    /// `alloc_pd` callback.
    ///
    /// # Safety
    ///
    /// Called by `ib_core` with a fresh, zeroed protection domain of a device of driver `T` and
    /// a valid or NULL `udata`.
    pub(crate) unsafe extern "C" fn alloc_callback(
        ptr: *mut bindings::ib_pd,
        udata: *mut bindings::ib_udata,
    ) -> c_int {
        let this = Self::container(ptr);
        // SAFETY: `device` was set by `ib_core` to a device of driver `T`, alive for the call;
        // `udata` is valid or NULL for the call. `data` is uninitialised memory inside the
        // allocation, which does not move until `ib_core` frees it after `dealloc_callback`; on
        // error `ib_core` frees the memory without calling `dealloc_callback`.
        unsafe { alloc_data((*ptr).device, udata, &raw mut (*this).data, T::alloc_pd) }
    }

    /// `dealloc_pd` callback.
    ///
    /// # Safety
    ///
    /// Called by `ib_core` once, for a protection domain whose `alloc_callback` succeeded.
    pub(crate) unsafe extern "C" fn dealloc_callback(
        ptr: *mut bindings::ib_pd,
        _udata: *mut bindings::ib_udata,
    ) -> c_int {
        // SAFETY: `data` was initialised by `alloc_callback` and is dropped only here; nothing
        // uses the protection domain after this call.
        unsafe { Self::drop_data(Self::container(ptr)) };
        0
    }
}
