// SPDX-License-Identifier: GPL-2.0

//! Objects published by number for lookups from any context: QPs by QPN,
//! memory regions by the index part of their keys, address handles by
//! their AH number.
//!
//! The receive path finds the object a packet addresses in softirq, with a
//! counted reference ([`ARef`]), while `destroy_qp` or `dereg_mr` may run on
//! another CPU. Each published object carries a [`Liveness`] (a `refcount_t`
//! and a `struct completion`); its table ([`Table`]) is an xarray with an
//! irq-safe lock. Teardown is:
//!
//! 1. [`Table::remove`]: no new lookups. Lookups take the count under the
//!    table lock, so none that found the object can still be about to.
//! 2. The driver's destroy, which may still fail (the object is then
//!    published again) and sees references held elsewhere.
//! 3. [`Liveness::put_initial_and_wait`]: drops the reference the object was
//!    published with and sleeps until the last [`ARef`] is gone.
//! 4. The driver's state is dropped, then the memory goes.
//!
//! The driver's destroy runs before the wait, while the count is still
//! non-zero, because it receives a reference to the object: turning that
//! into an [`ARef`] must keep the object alive.
//!
//! This is the scheme of `rxe_pool.c` (xarray plus `kref_get_unless_zero`
//! and a completion), with the lookup under the xarray lock instead of RCU:
//! the RDMA core frees a QP without an RCU grace period.
//!
//! C headers: [`include/linux/xarray.h`](srctree/include/linux/xarray.h),
//! [`include/linux/refcount.h`](srctree/include/linux/refcount.h),
//! [`include/linux/completion.h`](srctree/include/linux/completion.h)

use crate::bindings;
use core::{
    marker::PhantomData,
    ptr::NonNull, //
};
use kernel::{
    error::to_result,
    prelude::*,
    sync::aref::{
        ARef,
        AlwaysRefCounted, //
    },
    types::Opaque, //
};

/// The reference count of a published object and the completion its
/// destroyer waits on.
///
/// The count starts at one: the reference the object is published with,
/// owned by the RDMA core's handle and dropped at destroy. When the count
/// reaches zero the completion is signalled.
///
/// # Invariants
///
/// `refs` and `gone` are initialised; `gone` is signalled once, when the
/// count reaches zero.
#[pin_data]
pub(crate) struct Liveness {
    refs: Opaque<bindings::refcount_t>,
    #[pin]
    gone: Opaque<bindings::completion>,
}

// SAFETY: `refcount_t` and `struct completion` are made for concurrent use.
unsafe impl Send for Liveness {}
// SAFETY: As above.
unsafe impl Sync for Liveness {}

impl Liveness {
    /// A count of one and an unsignalled completion.
    pub(crate) fn new() -> impl PinInit<Self> {
        pin_init!(Self {
            refs: Opaque::new(
                // SAFETY: Builds a value, no preconditions.
                unsafe { bindings::REFCOUNT_INIT(1) }
            ),
            gone <- Opaque::ffi_init(|slot: *mut bindings::completion| {
                // SAFETY: `slot` is valid for writes and will not move.
                unsafe { bindings::init_completion(slot) };
            }),
        })
    }

    /// Takes a reference unless the count already reached zero (the
    /// object is being destroyed).
    fn try_get(&self) -> bool {
        // SAFETY: `refs` is initialised by the type invariant.
        unsafe { bindings::refcount_inc_not_zero(self.refs.get()) }
    }

    /// Takes one more reference; the caller holds one.
    pub(crate) fn get(&self) {
        // SAFETY: `refs` is initialised by the type invariant.
        unsafe { bindings::refcount_inc(self.refs.get()) };
    }

    /// Drops a reference; the last one wakes the destroyer.
    ///
    /// # Safety
    ///
    /// `this` points to a valid `Liveness` on which the caller owns a
    /// reference. After the call the object may be freed at any time: the
    /// caller must not touch it again.
    pub(crate) unsafe fn put(this: *const Self) {
        // SAFETY: Valid by the safety requirements; our reference keeps it alive until here.
        let refs = unsafe { (*this).refs.get() };
        // SAFETY: `refs` is initialised; we own a reference.
        if unsafe { bindings::refcount_dec_and_test(refs) } {
            // SAFETY: The destroyer frees the object only after `wait_for_completion` returned,
            // which is after `complete` released the completion's lock; `complete` touches
            // nothing else.
            unsafe { bindings::complete((*this).gone.get()) };
        }
    }

    /// Whether the count reached zero (the completion is signalled). Any
    /// context.
    pub(crate) fn is_done(&self) -> bool {
        // SAFETY: `gone` is initialised by the type invariant.
        unsafe { bindings::completion_done(self.gone.get()) }
    }

    /// Drops the reference the object was published with and waits until
    /// every other reference is gone. Sleeps.
    ///
    /// # Safety
    ///
    /// The caller owns the initial reference (the object was unpublished
    /// first, and this is called once per life); the object must stay
    /// valid for the call.
    pub(crate) unsafe fn put_initial_and_wait(&self) {
        // SAFETY: The caller owns the initial reference; `self` stays valid for the call by the
        // safety requirements, so the completion outlives `put`.
        unsafe { Self::put(self) };
        // SAFETY: `gone` is initialised; it is signalled when the count reaches zero.
        unsafe { bindings::wait_for_completion(self.gone.get()) };
    }
}

/// The xarray index of number `index`.
fn slot(index: u32) -> usize {
    // CAST: Lossless: `usize` has at least 32 bits on every architecture with Rust support.
    index as usize
}

/// An object that can be published in a [`Table`].
///
/// # Safety
///
/// `liveness` returns the same [`Liveness`] for the object's whole life, and
/// the object's [`AlwaysRefCounted`] implementation takes and drops
/// references on it ([`Liveness::get`], [`Liveness::put`]); the object stays
/// valid until its count reached zero and its destroyer waited for it.
pub(crate) unsafe trait Published: AlwaysRefCounted {
    /// The reference count of the object.
    fn liveness(&self) -> &Liveness;
}

/// Published objects of type `O` by number (`struct xarray` with
/// `XA_FLAGS_LOCK_IRQ`).
///
/// The table does not own references: an entry is valid because the object
/// is removed before its initial reference is dropped (see the module
/// documentation).
///
/// # Invariants
///
/// `xa` is initialised; every entry points to a valid `O` whose initial
/// reference has not been dropped yet.
#[pin_data]
pub(crate) struct Table<O: Published> {
    #[pin]
    xa: Opaque<bindings::xarray>,
    _p: PhantomData<O>,
}

// SAFETY: The xarray has its own lock; entries are `O`, which is shared across threads only
// when `Sync`.
unsafe impl<O: Published + Send + Sync> Send for Table<O> {}
// SAFETY: As above.
unsafe impl<O: Published + Send + Sync> Sync for Table<O> {}

impl<O: Published> Table<O> {
    /// An empty table.
    pub(crate) fn new() -> impl PinInit<Self> {
        pin_init!(Self {
            xa <- Opaque::ffi_init(|slot: *mut bindings::xarray| {
                // SAFETY: `slot` is valid for writes and will not move.
                unsafe { bindings::xa_init_irq(slot) };
            }),
            _p: PhantomData,
        })
    }

    fn raw(&self) -> *mut bindings::xarray {
        self.xa.get()
    }

    /// Publishes `obj` as number `index`; `EBUSY` if the number is taken.
    ///
    /// # Safety
    ///
    /// `obj` is a valid `O` that holds its initial reference; it stays valid
    /// until it has been [removed](Table::remove), and its initial reference
    /// is dropped only after that.
    pub(crate) unsafe fn insert(&self, index: u32, obj: *const O) -> Result {
        // INVARIANT: `obj` satisfies the invariant by the safety requirements.
        // SAFETY: `xa` is initialised; called from process context (the xarray may allocate).
        to_result(unsafe {
            bindings::xa_insert_irq(self.raw(), slot(index), obj.cast_mut().cast())
        })
    }

    /// As [`Table::insert`], from any context: the allocation does not
    /// sleep (and fails sooner).
    ///
    /// # Safety
    ///
    /// As for [`Table::insert`].
    pub(crate) unsafe fn insert_atomic(&self, index: u32, obj: *const O) -> Result {
        // INVARIANT: `obj` satisfies the invariant by the safety requirements.
        // SAFETY: `xa` is initialised; the helper saves the interrupt state and does not sleep.
        to_result(unsafe {
            bindings::xa_insert_atomic(self.raw(), slot(index), obj.cast_mut().cast())
        })
    }

    /// As [`Table::remove`], from any context.
    pub(crate) fn remove_atomic(&self, index: u32, obj: *const O) {
        // SAFETY: `xa` is initialised; the entry is only erased if it is `obj`; the helper saves
        // the interrupt state and does not sleep.
        unsafe { bindings::xa_erase_entry_atomic(self.raw(), slot(index), obj.cast_mut().cast()) };
    }

    /// Unpublishes `obj` from number `index`, if it is published there. No
    /// lookup returns it afterwards. Process context.
    pub(crate) fn remove(&self, index: u32, obj: *const O) {
        // SAFETY: `xa` is initialised; the entry is only erased if it is `obj`.
        unsafe { bindings::xa_erase_entry_irq(self.raw(), slot(index), obj.cast_mut().cast()) };
    }

    /// The object published as `index`, with a reference, unless there is
    /// none or its destruction began. Any context.
    pub(crate) fn get(&self, index: u32) -> Option<ARef<O>> {
        // SAFETY: `xa` is initialised.
        let flags = unsafe { bindings::xa_lock_irqsave(self.raw()) };
        // SAFETY: `xa` is initialised; `xa_load` takes the RCU read lock itself.
        let p = unsafe { bindings::xa_load(self.raw(), slot(index)) }.cast::<O>();
        let found = NonNull::new(p).and_then(|p| {
            // SAFETY: Entries point to valid objects that still hold their initial reference
            // (type invariant), and cannot be removed while we hold the table lock.
            let obj = unsafe { p.as_ref() };
            if obj.liveness().try_get() {
                // SAFETY: We took a reference above, which the `ARef` now owns.
                Some(unsafe { ARef::from_raw(p) })
            } else {
                None
            }
        });
        // SAFETY: We hold the lock with these flags.
        unsafe { bindings::xa_unlock_irqrestore(self.raw(), flags) };
        found
    }

    /// Frees the table's internal nodes; it must be empty (every object was
    /// removed).
    ///
    /// # Safety
    ///
    /// Called once, when no other use of the table can happen.
    pub(crate) unsafe fn destroy(&self) {
        // SAFETY: `xa` is initialised and unused by anyone else.
        unsafe { bindings::xa_destroy(self.raw()) };
    }
}
