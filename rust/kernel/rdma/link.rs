// SPDX-License-Identifier: GPL-2.0

//! RDMA link types (`struct rdma_link_ops`): devices created by
//! `rdma link add NAME type TYPE netdev DEV`.
//!
//! The RDMA core loads the module of an unknown link type through the module
//! alias `rdma-link-TYPE`; declare it with `alias: ["rdma-link-TYPE"]` in
//! `module!`.
//!
//! C header: [`include/rdma/rdma_netlink.h`](srctree/include/rdma/rdma_netlink.h)

use crate::{
    bindings,
    net, //
};
use core::marker::PhantomData;
use kernel::{
    error::from_result,
    prelude::*,
    types::Opaque, //
};

/// A link type.
pub trait LinkOps {
    /// The type name, as given to `rdma link add … type`.
    const TYPE: &'static CStr;

    /// Creates and registers a device called `ibdev_name` on top of `netdev`.
    ///
    /// Called by the RDMA core for `rdma link add`, which has already checked
    /// that `netdev` exists in the caller's network namespace.
    fn newlink(ibdev_name: &CStr, netdev: &net::Device) -> Result;
}

/// The registration of a link type.
///
/// The `struct rdma_link_ops` is linked into a list of the RDMA core, so it
/// lives pinned inside the registration, and is unlinked when the
/// registration is dropped.  `rdma link delete` needs no callback here: the
/// RDMA core unregisters the device, which drops the driver's device state.
///
/// # Invariants
///
/// `ops` is initialised and is linked into the RDMA core's list of link
/// types, or is an empty list head if the core refused a duplicate type.
#[pin_data(PinnedDrop)]
pub struct Registration<T: LinkOps> {
    #[pin]
    ops: Opaque<bindings::rdma_link_ops>,
    _t: PhantomData<T>,
}

// SAFETY: The registration is only touched by the RDMA core under its own lock, and unregistration
// may happen on any thread.
unsafe impl<T: LinkOps> Send for Registration<T> {}

// SAFETY: `&Registration` exposes nothing.
unsafe impl<T: LinkOps> Sync for Registration<T> {}

impl<T: LinkOps> Registration<T> {
    /// Registers link type `T`.
    pub fn new() -> impl PinInit<Self, Error> {
        try_pin_init!(Self {
            ops <- Opaque::ffi_init(|slot: *mut bindings::rdma_link_ops| {
                // SAFETY: `slot` is valid for writes. The list head points to itself until it is
                // linked, so that unlinking is harmless even if the core refuses the type (it
                // warns and skips a duplicate type name).
                unsafe {
                    slot.write(bindings::rdma_link_ops {
                        list: bindings::list_head {
                            next: &raw mut (*slot).list,
                            prev: &raw mut (*slot).list,
                        },
                        type_: T::TYPE.as_char_ptr(),
                        newlink: Some(Self::newlink_callback),
                        dellink: None,
                    })
                };
                // SAFETY: `slot` is initialised and pinned; it is unlinked in `drop` before its
                // memory goes away.
                // INVARIANT: `ops` is now linked into the core's list.
                unsafe { bindings::rdma_link_register(slot) };
            }),
            _t: PhantomData,
        })
    }

    /// `newlink` callback.
    ///
    /// # Safety
    ///
    /// Only called by the RDMA core, with a NUL-terminated name and a net device it holds a
    /// reference on, both valid for the call.
    unsafe extern "C" fn newlink_callback(
        ibdev_name: *const c_char,
        ndev: *mut bindings::net_device,
    ) -> c_int {
        from_result(|| {
            // SAFETY: The RDMA core passes a NUL-terminated name that lives for the call.
            let name = unsafe { CStr::from_char_ptr(ibdev_name) };
            // SAFETY: The RDMA core holds a reference on `ndev` for the call.
            let ndev = unsafe { net::Device::from_raw(ndev) };
            T::newlink(name, ndev)?;
            Ok(0)
        })
    }
}

#[pinned_drop]
impl<T: LinkOps> PinnedDrop for Registration<T> {
    fn drop(self: Pin<&mut Self>) {
        // SAFETY: `ops` is linked (or self-linked) by the type invariant.
        unsafe { bindings::rdma_link_unregister(self.ops.get()) };
    }
}
