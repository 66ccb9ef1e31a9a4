// SPDX-License-Identifier: GPL-2.0

//! A spinlock that disables interrupts while held (`spin_lock_irqsave`).
//!
//! The kernel crate of 7.2 only has a plain [`kernel::sync::SpinLock`], which
//! must not be taken from softirq or hard-irq context when process context
//! also takes it. Completion queues and work queues are touched from the
//! receive softirq and from consumers' interrupt handlers, so they use
//! [`SpinLockIrq`].
//!
//! C header: [`include/linux/spinlock.h`](srctree/include/linux/spinlock.h)

use crate::bindings;
use kernel::sync::lock::{
    Backend,
    Lock, //
};

/// A spinlock whose guard saves and restores the interrupt state.
pub type SpinLockIrq<T> = Lock<T, SpinLockIrqBackend>;

/// Creates a [`SpinLockIrq`] initialiser with the given name and a new lock
/// class.
#[macro_export]
macro_rules! new_spinlock_irq {
    ($inner:expr, $name:literal $(,)?) => {
        $crate::rdma::lock::SpinLockIrq::new(
            $inner,
            ::kernel::c_str!($name),
            ::kernel::static_lock_class!(),
        )
    };
}
pub use new_spinlock_irq;

/// The backend of [`SpinLockIrq`]: `spin_lock_irqsave` /
/// `spin_unlock_irqrestore` on a `spinlock_t`.
pub struct SpinLockIrqBackend;

// SAFETY: `spin_lock_irqsave` gives mutual exclusion; the saved flags are
// restored by the owner in `unlock`.
unsafe impl Backend for SpinLockIrqBackend {
    type State = bindings::spinlock_t;
    type GuardState = kernel::ffi::c_ulong;

    unsafe fn init(
        ptr: *mut Self::State,
        name: *const kernel::ffi::c_char,
        key: *mut bindings::lock_class_key,
    ) {
        // SAFETY: `ptr` is valid for writes, `name` and `key` live forever, by the safety
        // requirements.
        unsafe { bindings::__spin_lock_init(ptr, name, key) }
    }

    unsafe fn lock(ptr: *mut Self::State) -> Self::GuardState {
        // SAFETY: `ptr` is an initialised spinlock by the safety requirements.
        unsafe { bindings::spin_lock_irqsave(ptr) }
    }

    unsafe fn try_lock(ptr: *mut Self::State) -> Option<Self::GuardState> {
        let mut flags = 0;
        // SAFETY: `ptr` is an initialised spinlock by the safety requirements; `flags` is valid
        // for writes.
        if unsafe { bindings::spin_trylock_irqsave(ptr, &mut flags) } {
            Some(flags)
        } else {
            None
        }
    }

    unsafe fn unlock(ptr: *mut Self::State, guard_state: &Self::GuardState) {
        // SAFETY: The caller owns the lock; `guard_state` are the flags its `lock` saved.
        unsafe { bindings::spin_unlock_irqrestore(ptr, *guard_state) }
    }

    unsafe fn assert_is_held(ptr: *mut Self::State) {
        // SAFETY: `ptr` is an initialised spinlock by the safety requirements.
        unsafe { bindings::spin_assert_is_held(ptr) }
    }
}
