// SPDX-License-Identifier: GPL-2.0

//! User contexts (`struct ib_ucontext`): one per open of the uverbs device.
//!
//! C header: [`include/rdma/ib_verbs.h`](srctree/include/rdma/ib_verbs.h)

use crate::{
    bindings,
    rdma::{
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

rdma_object!(Ucontext: ib_ucontext => UcontextData, in_place);

impl<T: Driver> Ucontext<T> {
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
        let this = Self::container(ptr);
        // SAFETY: `device` was set by `ib_core` to a device of driver `T`, alive for the call;
        // `udata` is valid or NULL for the call. `data` is uninitialised memory inside the
        // allocation, which does not move until `ib_core` frees it after `dealloc_callback`; on
        // error `ib_core` frees the memory without calling `dealloc_callback`.
        unsafe {
            alloc_data(
                (*ptr).device,
                udata,
                &raw mut (*this).data,
                T::alloc_ucontext,
            )
        }
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
        // SAFETY: `data` was initialised by `alloc_callback` and is dropped only here; nothing
        // uses the context after this call.
        unsafe { Self::drop_data(Self::container(ptr)) };
    }
}
