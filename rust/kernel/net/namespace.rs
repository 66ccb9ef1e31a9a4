// SPDX-License-Identifier: GPL-2.0

//! Network namespaces (`struct net`).
//!
//! C header: [`include/net/net_namespace.h`](srctree/include/net/net_namespace.h)

use crate::{
    bindings,
    net::Device, //
};
use core::ptr::NonNull;
use kernel::{
    sync::aref::AlwaysRefCounted,
    types::Opaque, //
};

/// A network namespace.
///
/// `ARef<Namespace>` holds a reference (`get_net`) that keeps the namespace
/// alive. (Modules cannot hold passive references: with `CONFIG_NET_NS`,
/// `net_passive_dec` is not exported.)
///
/// # Invariants
///
/// `self.0` is a valid `struct net` that is alive (its reference count is
/// non-zero) while a reference to `Self` exists.
#[repr(transparent)]
pub struct Namespace(Opaque<bindings::net>);

// SAFETY: `struct net` is synchronised by the C side; references may be dropped on any thread.
unsafe impl Send for Namespace {}

// SAFETY: `&Namespace` only allows thread-safe operations.
unsafe impl Sync for Namespace {}

impl Namespace {
    /// Creates a reference from a raw pointer.
    ///
    /// # Safety
    ///
    /// `ptr` must point to a live namespace that stays alive for `'a`.
    pub(crate) unsafe fn from_raw<'a>(ptr: *mut bindings::net) -> &'a Self {
        // CAST: `Self` is a transparent wrapper of `struct net`.
        // SAFETY: By the safety requirements.
        unsafe { &*ptr.cast::<Self>() }
    }

    /// Returns the C pointer.
    pub(crate) fn as_raw(&self) -> *mut bindings::net {
        self.0.get()
    }
}

// SAFETY: `get_net` and `put_net` maintain the namespace's reference count.
unsafe impl AlwaysRefCounted for Namespace {
    fn inc_ref(&self) {
        // SAFETY: The namespace is alive by the type invariant.
        unsafe { bindings::get_net(self.as_raw()) };
    }

    unsafe fn dec_ref(obj: NonNull<Self>) {
        // SAFETY: The caller owns one reference.
        unsafe { bindings::put_net(obj.as_ptr().cast()) };
    }
}

impl Device {
    /// The namespace the device is in (`dev_net`).
    ///
    /// A device moves between namespaces only under RTNL; the namespace it is
    /// in outlives it.
    pub fn net(&self) -> &Namespace {
        // SAFETY: `self` is valid; a device's namespace is alive while the device is in it.
        unsafe { Namespace::from_raw(bindings::dev_net(self.as_raw())) }
    }
}
