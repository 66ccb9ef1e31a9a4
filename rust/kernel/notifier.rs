// SPDX-License-Identifier: GPL-2.0

//! Notifier blocks (`struct notifier_block`) registered with a notifier
//! chain, for the registrations of particular chains
//! ([`crate::module_notifier`], [`crate::net::notifier`]).
//!
//! C header: [`include/linux/notifier.h`](srctree/include/linux/notifier.h)

use crate::bindings;
use core::marker::PhantomData;
use kernel::{
    error::to_result,
    prelude::*,
    types::Opaque, //
};

/// A notifier chain, and how its callbacks reach a handler.
///
/// # Safety
///
/// `register` links a block into the chain, after which the chain calls the
/// block's `notifier_call` with the chain's actions and data, as
/// [`Chain::call`] expects them; `unregister` unlinks it and returns only
/// when no call of it runs any more.
pub(crate) unsafe trait Chain {
    /// What receives the chain's calls.
    type Handler: Send + Sync;

    /// Links `nb` into the chain (`register_*_notifier`).
    ///
    /// # Safety
    ///
    /// `nb` is initialised and pinned, not registered, and stays valid
    /// until [`Chain::unregister`] returns for it.
    unsafe fn register(nb: *mut bindings::notifier_block) -> c_int;

    /// Unlinks `nb` from the chain (`unregister_*_notifier`).
    ///
    /// # Safety
    ///
    /// `nb` was registered with [`Chain::register`].
    unsafe fn unregister(nb: *mut bindings::notifier_block);

    /// Passes one call of the chain to `handler`; returns the
    /// `NOTIFY_*` value for the chain.
    ///
    /// # Safety
    ///
    /// `action` and `data` are those of a call of the chain, valid for the
    /// call.
    unsafe fn call(handler: &Self::Handler, action: c_ulong, data: *mut c_void) -> c_int;
}

/// A notifier block registered with chain `C`, with its handler.
///
/// The `struct notifier_block` is linked into the chain, so it lives pinned
/// inside the block and is unlinked when the block is dropped.
///
/// # Invariants
///
/// `nb` is registered with `C`, and `handler` is initialised, for as long as
/// `self` exists.
#[pin_data(PinnedDrop)]
pub(crate) struct NotifierBlock<C: Chain> {
    #[pin]
    handler: C::Handler,
    #[pin]
    nb: Opaque<bindings::notifier_block>,
    _chain: PhantomData<C>,
}

// SAFETY: The notifier block is only touched by the notifier chain under its lock; the handler is
// `Send`.
unsafe impl<C: Chain> Send for NotifierBlock<C> {}

// SAFETY: `&NotifierBlock` only gives shared access to the handler, which is `Sync`.
unsafe impl<C: Chain> Sync for NotifierBlock<C> {}

impl<C: Chain> NotifierBlock<C> {
    /// Initialises `handler` and then registers the block with `C` (a
    /// chain may call the handler at once, replaying events).
    pub(crate) fn new(handler: impl PinInit<C::Handler, Error>) -> impl PinInit<Self, Error> {
        try_pin_init!(Self {
            handler <- handler,
            nb <- Opaque::try_ffi_init(|slot: *mut bindings::notifier_block| {
                // SAFETY: `slot` is valid for writes.
                unsafe {
                    slot.write(bindings::notifier_block {
                        notifier_call: Some(Self::notifier_callback),
                        next: core::ptr::null_mut(),
                        priority: 0,
                    })
                };
                // SAFETY: `slot` is initialised and pinned, and is unregistered in `drop` before
                // its memory goes away. On error the pin-init machinery drops `handler`.
                // INVARIANT: On success `nb` is registered.
                to_result(unsafe { C::register(slot) })
            }),
            _chain: PhantomData,
        })
    }

    /// `notifier_call` of the notifier block.
    ///
    /// # Safety
    ///
    /// Only called by chain `C`, with the block registered in
    /// [`NotifierBlock::new`] and the chain's action and data.
    unsafe extern "C" fn notifier_callback(
        nb: *mut bindings::notifier_block,
        action: c_ulong,
        data: *mut c_void,
    ) -> c_int {
        // CAST: `nb` is the `nb` field of a `NotifierBlock<C>`.
        let nb = Opaque::cast_from(nb);
        // SAFETY: The notifier chain only calls back with the block we registered, which is
        // embedded in a live, pinned `NotifierBlock<C>`.
        let this = unsafe { &*kernel::container_of!(nb, Self, nb) };
        // SAFETY: `action` and `data` are the chain's, by the safety requirements.
        unsafe { C::call(&this.handler, action, data) }
    }
}

#[pinned_drop]
impl<C: Chain> PinnedDrop for NotifierBlock<C> {
    fn drop(self: Pin<&mut Self>) {
        // SAFETY: `nb` is registered by the type invariant. Unregistering returns only when no
        // callback runs any more (the `Chain` contract), so `handler` outlives them all.
        unsafe { C::unregister(self.nb.get()) };
    }
}
