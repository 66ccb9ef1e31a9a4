// SPDX-License-Identifier: GPL-2.0

//! Per network namespace state (`struct pernet_operations` with
//! `net_generic` storage).
//!
//! A module that keeps state for every namespace implements [`PernetData`]
//! for the type of that state and keeps a [`Registration`] alive while
//! namespaces may use it. The state is created in place, in memory the
//! network core allocates, for every existing namespace at registration and
//! for every new one, and dropped when a namespace goes away or the
//! registration is dropped.
//!
//! C header: [`include/net/netns/generic.h`](srctree/include/net/netns/generic.h)

use crate::{
    bindings,
    net::Namespace, //
};
use core::marker::PhantomData;
use kernel::{
    error::{
        from_result,
        to_result, //
    },
    prelude::*,
    sync::atomic::{
        Acquire,
        Atomic,
        Relaxed,
        Release, //
    },
    types::Opaque, //
};

/// The `net_generic` slot of a [`PernetData`] type: a `static` of the
/// module, which the network core fills in at registration.
pub struct Id {
    id: Opaque<c_uint>,
    registered: Atomic<u32>,
}

// SAFETY: `id` is written only by `register_pernet_subsys`, before `registered` is set with
// release ordering, and read only after `registered` is seen set with acquire ordering.
unsafe impl Sync for Id {}

impl Id {
    /// Creates an unassigned slot.
    pub const fn new() -> Self {
        Self {
            id: Opaque::new(0),
            registered: Atomic::new(0),
        }
    }
}

impl Default for Id {
    fn default() -> Self {
        Self::new()
    }
}

/// State kept for every network namespace.
pub trait PernetData: Sized + Send + Sync + 'static {
    /// The slot of this type: a `static` of the module.
    fn id() -> &'static Id;

    /// Initialises the state of namespace `net`.
    fn init(net: &Namespace) -> impl PinInit<Self, Error>;

    /// Returns the state of `net`, or `None` if the type is not registered.
    fn get(net: &Namespace) -> Option<&Self> {
        if Self::id().registered.load(Acquire) == 0 {
            return None;
        }
        // SAFETY: `id` was assigned before `registered` was set.
        let id = unsafe { *Self::id().id.get() };
        // SAFETY: `net` is alive and the type is registered, so slot `id` holds an initialised
        // `Self`, which lives until the namespace is dismantled or the registration dropped.
        let p = unsafe { bindings::net_generic(net.as_raw(), id) };
        // CAST: The slot was allocated with the size of `Self` and initialised as `Self`.
        // SAFETY: See above; `&Self` does not outlive `net`.
        Some(unsafe { &*p.cast::<Self>() })
    }
}

/// The registration of a [`PernetData`] type (`register_pernet_subsys`).
///
/// # Invariants
///
/// `ops` is registered with the network core for as long as `self` exists.
#[pin_data(PinnedDrop)]
pub struct Registration<T: PernetData> {
    #[pin]
    ops: Opaque<bindings::pernet_operations>,
    _t: PhantomData<T>,
}

// SAFETY: The ops are only touched by the network core under its own lock.
unsafe impl<T: PernetData> Send for Registration<T> {}

// SAFETY: `&Registration` exposes nothing.
unsafe impl<T: PernetData> Sync for Registration<T> {}

impl<T: PernetData> Registration<T> {
    /// Size of the state, checked against the allocator's alignment.
    const SIZE: usize = {
        assert!(core::mem::align_of::<T>() <= bindings::ARCH_KMALLOC_MINALIGN);
        core::mem::size_of::<T>()
    };

    /// Registers `T`: creates its state in every namespace.
    ///
    /// Only one registration of a given `T` may exist at a time.
    pub fn new() -> impl PinInit<Self, Error> {
        try_pin_init!(Self {
            ops <- Opaque::try_ffi_init(|slot: *mut bindings::pernet_operations| {
                // SAFETY: All-zero is a valid `pernet_operations` (no callbacks, empty list).
                let mut ops: bindings::pernet_operations = unsafe { core::mem::zeroed() };
                ops.init = Some(Self::init_callback);
                ops.exit = Some(Self::exit_callback);
                ops.id = T::id().id.get();
                ops.size = Self::SIZE;
                // SAFETY: `slot` is valid for writes.
                unsafe { slot.write(ops) };
                // SAFETY: `slot` is initialised and pinned, and unregistered in `drop`.
                to_result(unsafe { bindings::register_pernet_subsys(slot) })?;
                // INVARIANT: The ops are registered.
                T::id().registered.store(1, Release);
                Ok::<(), Error>(())
            }),
            _t: PhantomData,
        })
    }

    /// `init` callback: initialises the state in the slot the core allocated.
    ///
    /// # Safety
    ///
    /// Called by the network core for a namespace being set up, after it allocated (zeroed)
    /// `SIZE` bytes for slot `T::id()`.
    unsafe extern "C" fn init_callback(net: *mut bindings::net) -> c_int {
        from_result(|| {
            // SAFETY: The namespace is being set up and lives for the call.
            let ns = unsafe { Namespace::from_raw(net) };
            // SAFETY: `id` is assigned before any callback.
            let id = unsafe { *T::id().id.get() };
            // SAFETY: The slot was allocated for this namespace.
            let slot = unsafe { bindings::net_generic(net, id) }.cast::<T>();
            // SAFETY: `slot` is valid, suitably aligned (checked in `SIZE`), uninitialised
            // memory that does not move until the core frees it after `exit`. On error the core
            // frees it without calling `exit`.
            unsafe { T::init(ns).__pinned_init(slot) }?;
            Ok(0)
        })
    }

    /// `exit` callback: drops the state.
    ///
    /// # Safety
    ///
    /// Called by the network core once for every namespace whose `init` succeeded.
    unsafe extern "C" fn exit_callback(net: *mut bindings::net) {
        // SAFETY: `id` is assigned before any callback.
        let id = unsafe { *T::id().id.get() };
        // SAFETY: The slot holds the `T` that `init_callback` initialised; nothing uses it after
        // the namespace is dismantled.
        unsafe { core::ptr::drop_in_place(bindings::net_generic(net, id).cast::<T>()) };
    }
}

#[pinned_drop]
impl<T: PernetData> PinnedDrop for Registration<T> {
    fn drop(self: Pin<&mut Self>) {
        T::id().registered.store(0, Relaxed);
        // SAFETY: The ops are registered by the type invariant; this calls `exit` for every
        // namespace.
        unsafe { bindings::unregister_pernet_subsys(self.ops.get()) };
    }
}
