// SPDX-License-Identifier: GPL-2.0

//! Memory windows (`struct ib_mw`).
//!
//! C header: [`include/rdma/ib_verbs.h`](srctree/include/rdma/ib_verbs.h)

use crate::{
    bindings,
    rdma::{
        device::{
            Device,
            Driver, //
        },
        object::rdma_object,
        table::Liveness,
        udata::Udata, //
    },
};
use kernel::{
    error::from_result,
    prelude::*,
    types::Opaque, //
};

/// `IB_MW_TYPE_1`: bound by `ibv_bind_mw`, to any QP of the PD.
pub const TYPE_1: u32 = bindings::ib_mw_type_IB_MW_TYPE_1;
/// `IB_MW_TYPE_2`: bound by a BIND_MW work request, to the QP that posted it.
pub const TYPE_2: u32 = bindings::ib_mw_type_IB_MW_TYPE_2;

/// A memory window of a device of driver `T`, with the driver's state in
/// place.
///
/// `ib_core` allocates `size_of::<Mw<T>>()` zeroed bytes, fills the C part
/// (device, PD, type, user object) and calls `alloc_mw`; the window is
/// published by the index part of its R_Key (`rkey >> 8`) until
/// `dealloc_mw`, for [`Device::lookup_mw`], which the responder uses for
/// R_Keys in the window range.
///
/// # Invariants
///
/// - `ib` is at offset 0 and is a valid `struct ib_mw` of a device of
///   driver `T`; `live`, `index` and `data` are initialised while a
///   reference to `Self` exists.
/// - The memory is not freed before the count of `live` reached zero.
#[repr(C)]
pub struct Mw<T: Driver> {
    ib: Opaque<bindings::ib_mw>,
    live: Liveness,
    /// The index part of the R_Key, under which the window is published.
    index: u32,
    data: T::MwData,
}

rdma_object!(Mw: ib_mw => MwData, in_place, counted, send_sync);

impl<T: Driver> Mw<T> {
    /// The window type, [`TYPE_1`] or [`TYPE_2`].
    pub fn mw_type(&self) -> u32 {
        // SAFETY: Set by the RDMA core before `alloc_mw`; constant afterwards.
        unsafe { (*self.ib.get()).type_ }
    }

    /// Identity of the PD, to compare with a QP's
    /// ([`crate::rdma::qp::Qp::pd_id`]).
    pub fn pd_id(&self) -> usize {
        // SAFETY: Set by the RDMA core before `alloc_mw`; constant afterwards.
        unsafe { (*self.ib.get()).pd as usize }
    }

    /// The index part of the R_Key, under which the window is published.
    pub fn index(&self) -> u32 {
        self.index
    }

    /// `alloc_mw` callback.
    ///
    /// # Safety
    ///
    /// Called by `ib_core` with a fresh, zeroed window of a device of driver
    /// `T` whose device, PD and type are set, and a valid or NULL `udata`.
    pub(crate) unsafe extern "C" fn alloc_callback(
        ptr: *mut bindings::ib_mw,
        udata: *mut bindings::ib_udata,
    ) -> c_int {
        from_result(|| {
            let this = Self::container(ptr);
            // SAFETY: `device` is set by the core to a device of driver `T`.
            let dev = unsafe { Device::<T>::from_raw((*ptr).device) };
            // SAFETY: `udata` is NULL or valid for the call.
            let udata = unsafe { Udata::from_raw(udata) };
            // SAFETY: Set by the core before the call.
            let (ty, pd_id) = unsafe { ((*ptr).type_, (*ptr).pd as usize) };
            let (init, rkey) = T::alloc_mw(dev, ty, pd_id, udata)?;
            let index = rkey >> 8;
            // SAFETY: `live` and `index` are zeroed memory inside the allocation, which does not
            // move until `ib_core` frees it; the count is only waited on in `dealloc_callback`.
            // `rkey` is ours to set: the core returns it to user space.
            unsafe {
                let Ok(()) = Liveness::new().__pinned_init(&raw mut (*this).live);
                (&raw mut (*this).index).write(index);
                (*ptr).rkey = rkey;
            }
            // SAFETY: Uninitialised memory in the allocation; on error the core frees it
            // without another callback (`Driver::alloc_mw`'s initialiser does not fail).
            unsafe { init.__pinned_init(&raw mut (*this).data) }?;
            // SAFETY: The window holds its initial reference; `dealloc_callback` removes it
            // before dropping that reference, and `ib_core` frees the memory only after that.
            if let Err(e) = unsafe { dev.mws.insert(index, this) } {
                // SAFETY: Fully initialised above.
                let mw = unsafe { &*this };
                T::dealloc_mw(mw);
                // SAFETY: Not published, so we hold the only reference; dropped only here,
                // and `ib_core` frees the memory without another callback.
                unsafe { Self::drop_data(this) };
                return Err(e);
            }
            Ok(0)
        })
    }

    /// `dealloc_mw` callback.
    ///
    /// # Safety
    ///
    /// Called by `ib_core` once, in process context, for a window whose
    /// `alloc_callback` succeeded.
    pub(crate) unsafe extern "C" fn dealloc_callback(ptr: *mut bindings::ib_mw) -> c_int {
        let this = Self::container(ptr);
        // SAFETY: Valid by the safety requirements.
        let mw = unsafe { &*this };
        // Order: no new lookups, then wait for the references held elsewhere (a bind or an
        // access that found it before), then the driver, then drop the state: nothing acts on
        // the window once the driver releases what it holds.
        mw.device().mws.remove(mw.index, this);
        // SAFETY: We own the initial reference; the window is valid for the call.
        unsafe { mw.live.put_initial_and_wait() };
        T::dealloc_mw(mw);
        // SAFETY: No reference is left; dropped only here, and the core frees the memory after
        // this call.
        unsafe { Self::drop_data(this) };
        0
    }
}
