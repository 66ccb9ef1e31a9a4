// SPDX-License-Identifier: GPL-2.0

//! One-shot timers embedded in RDMA objects (`struct timer_list`), and
//! the tick clock they run on.
//!
//! The QP's retransmit and RNR timers: armed and cancelled from any
//! context, their callbacks run in softirq, and the object's destroy shuts
//! them down synchronously (`timer_shutdown_sync`), after which arming is a
//! no-op.
//!
//! C header: [`include/linux/timer.h`](srctree/include/linux/timer.h)

use crate::bindings;
use kernel::types::Opaque;

/// A `struct timer_list` at a fixed place in its object.
///
/// # Invariants
///
/// Once a reference to `Self` is handed out, the timer has been set up
/// (`timer_setup`) and stays where it is until it is shut down.
#[repr(transparent)]
pub(crate) struct Timer(Opaque<bindings::timer_list>);

// SAFETY: The timer core serialises all operations on a `timer_list`.
unsafe impl Send for Timer {}
// SAFETY: As above.
unsafe impl Sync for Timer {}

/// A timer callback; it receives the `struct timer_list` that expired.
pub(crate) type TimerFn = unsafe extern "C" fn(*mut bindings::timer_list);

impl Timer {
    /// Sets up the timer at `ptr` to call `f` (in softirq) when it expires.
    ///
    /// # Safety
    ///
    /// `ptr` is valid for writes and the timer at it is not pending; it does
    /// not move until shut down with [`Timer::shutdown_sync`]. `f` may be
    /// called with `ptr` until then.
    pub(crate) unsafe fn setup(ptr: *mut Self, f: TimerFn) {
        // SAFETY: By the safety requirements.
        unsafe { bindings::timer_setup(Opaque::cast_into(&raw const (*ptr).0), Some(f)) };
    }

    fn raw(&self) -> *mut bindings::timer_list {
        self.0.get()
    }

    /// (Re)arms the timer to expire once after `usecs` microseconds, at
    /// least one tick from now. A no-op once it was shut down. Any context.
    pub(crate) fn arm_usecs(&self, usecs: u64) {
        // SAFETY: The timer is set up by the type invariant.
        unsafe { bindings::mod_timer_usecs(self.raw(), usecs) };
    }

    /// Disarms the timer without waiting for a running callback. Any
    /// context.
    pub(crate) fn cancel(&self) {
        // SAFETY: The timer is set up by the type invariant.
        unsafe { bindings::timer_delete(self.raw()) };
    }

    /// Disarms the timer for good and waits for a running callback.
    /// Sleeps; must not be called from the callback or with a lock the
    /// callback takes.
    pub(crate) fn shutdown_sync(&self) {
        // SAFETY: The timer is set up by the type invariant; process context.
        unsafe { bindings::timer_shutdown_sync(self.raw()) };
    }
}

/// The tick clock in microseconds: monotonic, advancing once per tick
/// (`jiffies_64`), and cheap (no clock source is read); for measuring
/// against what an object's timer was armed with, which has the same
/// resolution.
pub(crate) fn tick_usecs() -> u64 {
    // SAFETY: Reads `jiffies_64`; no precondition.
    unsafe { bindings::tick_usecs() }
}
