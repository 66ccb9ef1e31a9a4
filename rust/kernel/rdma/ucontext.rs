// SPDX-License-Identifier: GPL-2.0

//! User contexts (`struct ib_ucontext`): one per open of the uverbs device.
//!
//! C header: [`include/rdma/ib_verbs.h`](srctree/include/rdma/ib_verbs.h)

use crate::{
    bindings,
    rdma::{
        device::{
            Device,
            Driver, //
        },
        udata::Udata, //
    },
};
use core::ops::Deref;
use kernel::{
    error::from_result,
    prelude::*,
    types::Opaque, //
};

/// A user context of a device of driver `T`, with the driver's state in place.
///
/// `ib_core` allocates `size_of::<Ucontext<T>>()` zeroed bytes, fills the C
/// part and calls `alloc_ucontext`, which initialises `data`; `data` is
/// dropped in `dealloc_ucontext`, before `ib_core` frees the memory.
///
/// # Invariants
///
/// - `ib` is at offset 0 and is a valid `struct ib_ucontext` of a device of
///   driver `T` while a reference to `Self` exists.
/// - `data` is initialised while a reference to `Self` exists.
#[repr(C)]
pub struct Ucontext<T: Driver> {
    ib: Opaque<bindings::ib_ucontext>,
    data: T::UcontextData,
}

impl<T: Driver> Ucontext<T> {
    /// Checked when the ops table is built: `ib_core` allocates with `kzalloc`.
    pub(crate) const SIZE: usize = {
        assert!(core::mem::offset_of!(Self, ib) == 0);
        assert!(core::mem::align_of::<Self>() <= bindings::ARCH_KMALLOC_MINALIGN);
        core::mem::size_of::<Self>()
    };

    /// Returns the device this context belongs to.
    pub fn device(&self) -> &Device<T> {
        // SAFETY: By the type invariant `ib` is valid and belongs to a device of driver `T`,
        // which outlives its contexts.
        unsafe { Device::from_raw((*self.ib.get()).device) }
    }

    /// # Safety
    ///
    /// `ptr` must point to the `ib_ucontext` of a `Ucontext<T>`.
    unsafe fn container(ptr: *mut bindings::ib_ucontext) -> *mut Self {
        // CAST: `ib` is the first field of the `#[repr(C)]` struct `Self`.
        ptr.cast()
    }

    /// `alloc_ucontext` callback.
    ///
    /// # Safety
    ///
    /// Called by `ib_core` with a fresh, zeroed context of a device of driver `T` and a valid or
    /// NULL `udata`.
    pub(crate) unsafe extern "C" fn alloc_callback(
        ptr: *mut bindings::ib_ucontext,
        udata: *mut bindings::ib_udata,
    ) -> c_int {
        from_result(|| {
            // SAFETY: `ptr` is the `ib_ucontext` of a `Ucontext<T>` by the safety requirements.
            let this = unsafe { Self::container(ptr) };
            // SAFETY: `device` was set by `ib_core` to a device of driver `T`, alive for the call.
            let dev = unsafe { Device::<T>::from_raw((*ptr).device) };
            // SAFETY: `udata` is valid or NULL for the call.
            let udata = unsafe { Udata::from_raw(udata) };
            let init = T::alloc_ucontext(dev, udata);
            // SAFETY: `data` is uninitialised memory inside the allocation, which does not move
            // until `ib_core` frees it after `dealloc_callback`. On error `ib_core` frees the
            // memory without calling `dealloc_callback`.
            unsafe { init.__pinned_init(&raw mut (*this).data) }?;
            Ok(0)
        })
    }

    /// `disassociate_ucontext` callback.
    ///
    /// # Safety
    ///
    /// Called by `ib_core` for a context whose `alloc_callback` succeeded,
    /// before `dealloc_callback`.
    pub(crate) unsafe extern "C" fn disassociate_callback(ptr: *mut bindings::ib_ucontext) {
        // SAFETY: `ptr` is the `ib_ucontext` of a `Ucontext<T>` whose data is initialised, by the
        // safety requirements.
        let this = unsafe { &*Self::container(ptr) };
        T::disassociate_ucontext(this);
    }

    /// `dealloc_ucontext` callback.
    ///
    /// # Safety
    ///
    /// Called by `ib_core` once, for a context whose `alloc_callback` succeeded.
    pub(crate) unsafe extern "C" fn dealloc_callback(ptr: *mut bindings::ib_ucontext) {
        // SAFETY: `ptr` is the `ib_ucontext` of a `Ucontext<T>` by the safety requirements.
        let this = unsafe { Self::container(ptr) };
        // SAFETY: `data` was initialised by `alloc_callback` and is dropped only here; nothing
        // uses the context after this call.
        unsafe { core::ptr::drop_in_place(&raw mut (*this).data) };
    }
}

impl<T: Driver> Deref for Ucontext<T> {
    type Target = T::UcontextData;

    fn deref(&self) -> &Self::Target {
        &self.data
    }
}
