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
    sync::aref::{
        ARef,
        AlwaysRefCounted, //
    },
    types::Opaque, //
};

/// A network namespace.
///
/// `ARef<Namespace>` holds a reference (`get_net`) that keeps the namespace
/// alive; [`PassiveRef`] only keeps its memory.
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

/// A passive reference to a namespace (`net_passive_inc`): the `struct net`
/// stays allocated, but the namespace may be dismantled.
///
/// It does not keep the namespace's per-namespace state alive and does not
/// delay its teardown; [`PassiveRef::get`] returns the namespace while it
/// is alive.
///
/// # Invariants
///
/// `ptr` is a `struct net` on which `self` holds a passive reference.
pub struct PassiveRef {
    ptr: NonNull<bindings::net>,
}

// SAFETY: The passive reference may be dropped on any thread.
unsafe impl Send for PassiveRef {}

// SAFETY: `&PassiveRef` only allows `get`, which is thread-safe.
unsafe impl Sync for PassiveRef {}

impl PassiveRef {
    /// Takes a passive reference on `net`.
    pub fn new(net: &Namespace) -> Self {
        // SAFETY: `net` is alive by its type invariant.
        unsafe { bindings::net_passive_inc(net.as_raw()) };
        // INVARIANT: We took a passive reference.
        Self {
            // SAFETY: `as_raw` of a reference is not NULL.
            ptr: unsafe { NonNull::new_unchecked(net.as_raw()) },
        }
    }

    /// Returns whether `net` is the namespace referenced.
    pub fn is(&self, net: &Namespace) -> bool {
        core::ptr::eq(self.ptr.as_ptr(), net.as_raw())
    }

    /// Returns a reference to the namespace if it is still alive
    /// (`maybe_get_net`).
    pub fn get(&self) -> Option<ARef<Namespace>> {
        // SAFETY: The passive reference keeps the `struct net` allocated.
        let net = NonNull::new(unsafe { bindings::maybe_get_net(self.ptr.as_ptr()) })?;
        // SAFETY: `maybe_get_net` took a reference, which the `ARef` now owns.
        Some(unsafe { ARef::from_raw(net.cast::<Namespace>()) })
    }
}

impl Drop for PassiveRef {
    fn drop(&mut self) {
        // SAFETY: We hold a passive reference by the type invariant.
        unsafe { bindings::net_passive_dec(self.ptr.as_ptr()) };
    }
}
