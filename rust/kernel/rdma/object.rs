// SPDX-License-Identifier: GPL-2.0

//! What the RDMA objects of a provider have in common.
//!
//! Every object type (`Pd<T>`, `Ucontext<T>`, `Cq<T>`, `Qp<T>`, `Srq<T>`,
//! `Ah<T>`, `Mw<T>`, `Mr<T>`) is a `#[repr(C)]` struct with the C object in
//! a field `ib: Opaque<bindings::ib_x>` at offset 0 and the driver's state in
//! a field `data`. [`rdma_object!`] writes the parts they share once.

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
use kernel::{
    error::from_result,
    prelude::*, //
};

/// Implements the parts that the RDMA objects of driver `T` share.
///
/// `rdma_object!(Ty: ib_x => XData, opts...)` gives `Ty<T>`:
///
/// - `device()`, the device the object belongs to;
/// - `Deref<Target = T::XData>`, to the driver's state in `data`;
///
/// and, for each option named:
///
/// - `in_place`: `SIZE`, the size `ib_core` allocates (zeroed, with
///   `kzalloc`) for the object, checked at compile time to have `ib` at
///   offset 0 and an alignment that `kzalloc` gives; `container()`, the
///   object of a C struct as a raw pointer; `drop_data()`, which drops
///   `data` in place;
/// - `from_raw`: `from_raw()`, the object whose C struct a callback got;
/// - `destroy_in_place` (with `in_place` and `from_raw`):
///   `destroy_in_place()`, the body of a destroy callback that only asks the
///   driver and drops `data`;
/// - `counted`: `AlwaysRefCounted` and `Published` over the object's
///   `live: Liveness` field;
/// - `send_sync`: `Send` and `Sync`, for an object whose C part the RDMA
///   core synchronises (`Cq` and `Qp` say more, and implement them
///   themselves).
///
/// The type's `# Invariants` must include: `ib` is at offset 0 and is a
/// valid `struct ib_x` of a device of driver `T`, and `data` is
/// initialised, while a reference to the object exists; with `counted`, the
/// memory is not freed before the count of `live` reached zero.
macro_rules! rdma_object {
    ($ty:ident: $raw:ident => $data:ident $(, $opt:ident)* $(,)?) => {
        impl<T: $crate::rdma::device::Driver> $ty<T> {
            /// Returns the device the object belongs to.
            pub fn device(&self) -> &$crate::rdma::device::Device<T> {
                // SAFETY: By the type invariant `ib` is valid and belongs to a device of driver
                // `T`, which outlives its objects.
                unsafe { $crate::rdma::device::Device::from_raw((*self.ib.get()).device) }
            }
        }

        impl<T: $crate::rdma::device::Driver> ::core::ops::Deref for $ty<T> {
            type Target = T::$data;

            fn deref(&self) -> &T::$data {
                &self.data
            }
        }

        $($crate::rdma::object::rdma_object!(@$opt $ty: $raw);)*
    };
    (@in_place $ty:ident: $raw:ident) => {
        impl<T: $crate::rdma::device::Driver> $ty<T> {
            /// Checked when the ops table is built: `ib_core` allocates with `kzalloc`.
            pub(crate) const SIZE: usize = {
                assert!(::core::mem::offset_of!(Self, ib) == 0);
                assert!(
                    ::core::mem::align_of::<Self>() <= $crate::bindings::ARCH_KMALLOC_MINALIGN
                );
                ::core::mem::size_of::<Self>()
            };

            #[doc = concat!("Returns the object whose `", stringify!($raw), "` is `ptr`.")]
            fn container(ptr: *mut $crate::bindings::$raw) -> *mut Self {
                // CAST: `ib` is the first field of the `#[repr(C)]` struct `Self`.
                ptr.cast()
            }

            /// Drops the driver's state of `this`: the end of its destroy or
            /// dealloc callback, or of a creation undone after `data` was
            /// initialised.
            ///
            /// # Safety
            ///
            /// `this` points to an object whose `data` is initialised, and
            /// nothing uses `data` afterwards: it is dropped only here.
            unsafe fn drop_data(this: *mut Self) {
                // SAFETY: By the safety requirements.
                unsafe { ::core::ptr::drop_in_place(&raw mut (*this).data) };
            }
        }
    };
    (@from_raw $ty:ident: $raw:ident) => {
        impl<T: $crate::rdma::device::Driver> $ty<T> {
            #[doc = concat!("Returns the object whose `", stringify!($raw), "` is `ptr`.")]
            ///
            /// # Safety
            ///
            #[doc = concat!(
                "`ptr` must be the `", stringify!($raw), "` of a live `", stringify!($ty),
                "<T>` with initialised data, valid for `'a`."
            )]
            pub(crate) unsafe fn from_raw<'a>(ptr: *mut $crate::bindings::$raw) -> &'a Self {
                // CAST: `ib` is the first field of the `#[repr(C)]` struct `Self`.
                // SAFETY: By the safety requirements.
                unsafe { &*ptr.cast::<Self>() }
            }
        }
    };
    (@destroy_in_place $ty:ident: $raw:ident) => {
        impl<T: $crate::rdma::device::Driver> $ty<T> {
            /// The body of a destroy callback of an object that holds
            /// nothing but the driver's state: `destroy`, the driver's, may
            /// refuse; once it accepts, the state is dropped.
            ///
            /// # Safety
            ///
            #[doc = concat!(
                "`ptr` must be the `", stringify!($raw), "` of a live `", stringify!($ty),
                "<T>` with initialised data, on which nothing else runs during the call and which \
                nothing uses once `destroy` accepted."
            )]
            unsafe fn destroy_in_place(
                ptr: *mut $crate::bindings::$raw,
                destroy: impl FnOnce(&Self) -> ::kernel::error::Result,
            ) -> ::kernel::ffi::c_int {
                ::kernel::error::from_result(|| {
                    // SAFETY: By the safety requirements.
                    destroy(unsafe { Self::from_raw(ptr) })?;
                    // SAFETY: `data` is initialised and, the destroy being accepted, nothing uses
                    // it any more, by the safety requirements.
                    unsafe { Self::drop_data(Self::container(ptr)) };
                    Ok(0)
                })
            }
        }
    };
    (@send_sync $ty:ident: $raw:ident) => {
        // SAFETY: The C part is synchronised by the RDMA core; the data is `Send`.
        unsafe impl<T: $crate::rdma::device::Driver> Send for $ty<T> {}
        // SAFETY: The data is `Sync`.
        unsafe impl<T: $crate::rdma::device::Driver> Sync for $ty<T> {}
    };
    (@counted $ty:ident: $raw:ident) => {
        // SAFETY: References are counted in `live`; by the type invariant the memory is not freed
        // before the count reached zero.
        unsafe impl<T: $crate::rdma::device::Driver> ::kernel::sync::aref::AlwaysRefCounted
            for $ty<T>
        {
            fn inc_ref(&self) {
                self.live.get();
            }

            unsafe fn dec_ref(obj: ::core::ptr::NonNull<Self>) {
                // SAFETY: The caller owns a reference, so the object is valid; it is not touched
                // afterwards.
                unsafe { $crate::rdma::table::Liveness::put(&raw const (*obj.as_ptr()).live) };
            }
        }

        // SAFETY: `liveness` is always `live`, which the `AlwaysRefCounted` implementation uses.
        unsafe impl<T: $crate::rdma::device::Driver> $crate::rdma::table::Published for $ty<T> {
            fn liveness(&self) -> &$crate::rdma::table::Liveness {
                &self.live
            }
        }
    };
}
pub(crate) use rdma_object;

/// The body of an `alloc_*` callback that initialises the driver's state of
/// an object from the device and the udata alone (`alloc_pd`,
/// `alloc_ucontext`): `make` gives the initialiser, which is run on `data`.
///
/// # Safety
///
/// `device` is the `ib_device` of a device of driver `T`, valid for `'a`;
/// `udata` is NULL or valid for `'a`; the call lasts no longer than `'a`.
/// `data` is the uninitialised `data` field of an object that `ib_core`
/// allocated, which does not move until `ib_core` frees it: after the
/// object's dealloc callback, or, when this fails, without calling it.
pub(crate) unsafe fn alloc_data<'a, T: Driver, D, I: PinInit<D, Error>>(
    device: *mut bindings::ib_device,
    udata: *mut bindings::ib_udata,
    data: *mut D,
    make: impl FnOnce(&'a Device<T>, Option<&'a Udata>) -> I,
) -> c_int {
    from_result(|| {
        // SAFETY: A device of driver `T`, valid for `'a`, by the safety requirements.
        let dev = unsafe { Device::<T>::from_raw(device) };
        // SAFETY: `udata` is NULL or valid for `'a`, by the safety requirements.
        let udata = unsafe { Udata::from_raw(udata) };
        // SAFETY: `data` is uninitialised memory that does not move until `ib_core` frees it; on
        // error `ib_core` frees it without calling the dealloc callback, by the safety
        // requirements.
        unsafe { make(dev, udata).__pinned_init(data) }?;
        Ok(0)
    })
}
