// SPDX-License-Identifier: GPL-2.0

//! QP counters (`struct rdma_counter`), which `rdma statistic qp` binds QPs
//! to, by hand or automatically (`rdma statistic qp set link DEV/1 auto
//! type on`), and reads.
//!
//! The RDMA core allocates a counter with room for the driver's
//! [`Driver::CounterData`] after it, takes the counter's mutex around
//! binding, unbinding and reading, and frees it once no QP is bound. Its
//! statistics block has the port's counter descriptions: the core adds a
//! counter's values to the port's, index by index, when it goes.
//!
//! C header: [`include/rdma/rdma_counter.h`](srctree/include/rdma/rdma_counter.h).

use crate::{
    bindings,
    rdma::{
        device::{
            Device,
            Driver, //
        },
        hw_counters,
        qp::Qp,
    },
};
use core::{
    cell::UnsafeCell,
    ptr, //
};
use kernel::{
    error::from_result,
    prelude::*,
    types::Opaque, //
};

/// A counter of driver `T`: the C counter followed by the driver's data.
///
/// # Invariants
///
/// `ib` is at offset 0. `data` is initialised from `counter_init` until
/// `counter_dealloc`; the RDMA core calls the ops that reach it in between,
/// and those that may change it (bind, unbind, update) with the counter's
/// mutex held.
#[repr(C)]
pub struct Counter<T: Driver> {
    ib: Opaque<bindings::rdma_counter>,
    data: UnsafeCell<T::CounterData>,
}

/// A counter during one of the calls the core makes with its mutex held:
/// the driver's data may be changed.
pub struct CounterGuard<'a, T: Driver> {
    counter: &'a Counter<T>,
}

impl<'a, T: Driver> CounterGuard<'a, T> {
    /// The driver's data of the counter.
    pub fn data(&mut self) -> &mut T::CounterData {
        // SAFETY: The core holds the counter's mutex for the life of the
        // guard (type invariant of `Counter`), and only guards reach the
        // data mutably; `data` is initialised.
        unsafe { &mut *self.counter.data.get() }
    }

    /// A number that identifies the counter while it exists (its address).
    pub fn key(&self) -> usize {
        core::ptr::from_ref(self.counter) as usize
    }

    /// The device.
    pub fn device(&self) -> &'a Device<T> {
        // SAFETY: `device` is set before `counter_init` and the device
        // outlives its counters.
        unsafe { Device::from_raw((*self.counter.ib.get()).device) }
    }
}

impl<T: Driver> Counter<T> {
    /// Checked when the ops table is built: the core allocates with `kzalloc`.
    pub(crate) const SIZE: usize = {
        assert!(core::mem::offset_of!(Self, ib) == 0);
        assert!(core::mem::align_of::<Self>() <= bindings::ARCH_KMALLOC_MINALIGN);
        core::mem::size_of::<Self>()
    };

    /// `counter_init` callback: the driver's data starts as its default.
    ///
    /// # Safety
    ///
    /// Called by the core once, on a counter it allocated with
    /// `size_rdma_counter` bytes.
    pub(crate) unsafe extern "C" fn init_callback(counter: *mut bindings::rdma_counter) {
        let c = counter.cast::<Self>();
        // SAFETY: The allocation holds a `Self` (`SIZE`); `data` is not
        // initialised yet and nothing reads it before this write.
        unsafe { ptr::write((*c).data.get(), T::CounterData::default()) };
    }

    /// `counter_dealloc` callback.
    ///
    /// # Safety
    ///
    /// Called by the core once, when no QP is bound and no op runs.
    pub(crate) unsafe extern "C" fn dealloc_callback(
        counter: *mut bindings::rdma_counter,
    ) -> c_int {
        let c = counter.cast::<Self>();
        // SAFETY: `data` was initialised by `init_callback` and is not used
        // after this call.
        unsafe { ptr::drop_in_place((*c).data.get()) };
        0
    }

    /// `counter_alloc_stats` callback: a block with the port's counter
    /// descriptions.
    ///
    /// # Safety
    ///
    /// Called by the core after `counter_init`, with `device` and `port` set.
    pub(crate) unsafe extern "C" fn alloc_stats_callback(
        counter: *mut bindings::rdma_counter,
    ) -> *mut bindings::rdma_hw_stats {
        // SAFETY: `device` and `port` are set by the core before this call.
        let (dev, port) = unsafe { (Device::<T>::from_raw((*counter).device), (*counter).port) };
        match T::alloc_hw_port_stats(dev, port) {
            Ok(descs) => hw_counters::alloc_stats(descs),
            Err(_) => ptr::null_mut(),
        }
    }

    /// `counter_bind_qp` callback.
    ///
    /// # Safety
    ///
    /// Called by the core with the counter's mutex held, for a live QP of
    /// the counter's device not bound to any counter.
    pub(crate) unsafe extern "C" fn bind_qp_callback(
        counter: *mut bindings::rdma_counter,
        ibqp: *mut bindings::ib_qp,
        _port: u32,
    ) -> c_int {
        from_result(|| {
            // SAFETY: By the safety requirements (type invariant of `Counter`).
            let c = unsafe { &*counter.cast::<Self>() };
            let mut g = CounterGuard { counter: c };
            // SAFETY: A live QP of our device.
            let qp = unsafe { Qp::<T>::from_raw(ibqp) };
            T::counter_bind_qp(&mut g, qp)?;
            // The driver records the binding, as the hardware drivers do.
            // SAFETY: `counter` is only written under the counter's mutex.
            unsafe { (*ibqp).counter = counter };
            Ok(0)
        })
    }

    /// `counter_unbind_qp` callback.
    ///
    /// # Safety
    ///
    /// Called by the core for a live QP bound to a counter, with that
    /// counter's mutex held.
    pub(crate) unsafe extern "C" fn unbind_qp_callback(
        ibqp: *mut bindings::ib_qp,
        _port: u32,
    ) -> c_int {
        from_result(|| {
            // SAFETY: By the safety requirements.
            let counter = unsafe { (*ibqp).counter };
            if counter.is_null() {
                return Err(EINVAL);
            }
            // SAFETY: A bound QP's counter lives while it is bound, and its
            // mutex is held.
            let c = unsafe { &*counter.cast::<Self>() };
            let mut g = CounterGuard { counter: c };
            // SAFETY: A live QP of our device.
            let qp = unsafe { Qp::<T>::from_raw(ibqp) };
            T::counter_unbind_qp(&mut g, qp)?;
            // SAFETY: As in `bind_qp_callback`.
            unsafe { (*ibqp).counter = ptr::null_mut() };
            Ok(0)
        })
    }

    /// `counter_update_stats` callback: fills the counter's values.
    ///
    /// # Safety
    ///
    /// Called by the core with the counter's mutex held, after
    /// `counter_alloc_stats` succeeded.
    pub(crate) unsafe extern "C" fn update_stats_callback(
        counter: *mut bindings::rdma_counter,
    ) -> c_int {
        from_result(|| {
            // SAFETY: By the safety requirements.
            let stats = unsafe { (*counter).stats };
            if stats.is_null() {
                return Err(EINVAL);
            }
            // SAFETY: `stats` came from `alloc_stats_callback`; the mutex
            // held keeps other writers out.
            let values = unsafe { hw_counters::values(stats) };
            // SAFETY: By the safety requirements (type invariant of `Counter`).
            let c = unsafe { &*counter.cast::<Self>() };
            let mut g = CounterGuard { counter: c };
            T::counter_update_stats(&mut g, values)?;
            Ok(0)
        })
    }
}
