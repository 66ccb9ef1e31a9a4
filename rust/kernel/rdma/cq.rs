// SPDX-License-Identifier: GPL-2.0

//! Completion queues (`struct ib_cq`).
//!
//! C header: [`include/rdma/ib_verbs.h`](srctree/include/rdma/ib_verbs.h)

use crate::{
    bindings,
    rdma::{
        device::{
            Device,
            Driver, //
        },
        object::rdma_object,
        udata::Udata,
        wc::Wc, //
    },
};
use kernel::{
    error::from_result,
    prelude::*,
    types::Opaque, //
};

/// Creation attributes of a CQ (`struct ib_cq_init_attr`).
#[derive(Clone, Copy, Debug)]
pub struct CqInitAttr {
    /// Minimum number of entries requested.
    pub cqe: u32,
    /// Completion vector.
    pub comp_vector: u32,
    /// `IB_UVERBS_CQ_FLAGS_*` creation flags.
    pub flags: u32,
}

/// Flags of `req_notify_cq` (`enum ib_cq_notify_flags`).
#[derive(Clone, Copy, Debug)]
pub struct NotifyFlags(pub u32);

impl NotifyFlags {
    /// `IB_CQ_SOLICITED`.
    pub const SOLICITED: u32 = bindings::ib_cq_notify_flags_IB_CQ_SOLICITED;
    /// `IB_CQ_NEXT_COMP`.
    pub const NEXT_COMP: u32 = bindings::ib_cq_notify_flags_IB_CQ_NEXT_COMP;
    /// `IB_CQ_SOLICITED_MASK`.
    pub const SOLICITED_MASK: u32 = bindings::ib_cq_notify_flags_IB_CQ_SOLICITED_MASK;
    /// `IB_CQ_REPORT_MISSED_EVENTS`.
    pub const REPORT_MISSED_EVENTS: u32 = bindings::ib_cq_notify_flags_IB_CQ_REPORT_MISSED_EVENTS;
}

/// A completion queue of a device of driver `T`, with the driver's state in
/// place.
///
/// # Invariants
///
/// - `ib` is at offset 0 and is a valid `struct ib_cq` of a device of driver
///   `T` while a reference to `Self` exists.
/// - `data` is initialised while a reference to `Self` exists.
#[repr(C)]
pub struct Cq<T: Driver> {
    ib: Opaque<bindings::ib_cq>,
    data: T::CqData,
}

// SAFETY: The C part is synchronised by the RDMA core; `T::CqData` is `Send`.
unsafe impl<T: Driver> Send for Cq<T> {}
// SAFETY: Shared access only touches the C fields the RDMA core allows concurrently (handlers)
// and `T::CqData`, which is `Sync`.
unsafe impl<T: Driver> Sync for Cq<T> {}

rdma_object!(Cq: ib_cq => CqData, in_place, from_raw, destroy_in_place);

impl<T: Driver> Cq<T> {
    /// Returns the C struct.
    pub(crate) fn as_raw(&self) -> *mut bindings::ib_cq {
        self.ib.get()
    }

    /// Sets the number of entries reported to the consumer (`ib_cq.cqe`).
    pub fn set_cqe(&self, cqe: u32) {
        // SAFETY: `cqe` is only written by the driver (create and resize, which the RDMA core
        // serialises with respect to each other).
        unsafe { (*self.ib.get()).cqe = cqe as c_int };
    }

    /// Calls the consumer's completion handler. Must be called without
    /// driver locks that the consumer's re-arming can take.
    pub fn comp_handler(&self) {
        // SAFETY: The CQ is valid.
        unsafe { bindings::cq_comp_handler(self.as_raw()) }
    }

    /// Whether a CQ overrun may be logged now (`__ratelimit`: a few
    /// messages every few seconds, for all CQs). Any context.
    pub fn overrun_message_allowed() -> bool {
        // SAFETY: No arguments; the helper's rate-limit state is its own static.
        unsafe { bindings::cq_overrun_ratelimit() }
    }

    /// Reports a CQ overrun (`IB_EVENT_CQ_ERR`) to the consumer.
    pub fn report_overrun(&self) {
        // SAFETY: The CQ is valid.
        unsafe { bindings::cq_event(self.as_raw(), bindings::ib_event_type_IB_EVENT_CQ_ERR) }
    }

    /// Builds a completion of a kernel QP on this CQ: fills the QP pointer
    /// kernel consumers expect in `ib_wc.qp`.
    pub fn set_wc_qp(wc: &mut Wc, qp: usize) {
        wc.qp = qp;
    }

    /// `create_cq` callback.
    ///
    /// # Safety
    ///
    /// Called by `ib_core` with a fresh, zeroed CQ of a device of driver `T`.
    pub(crate) unsafe extern "C" fn create_callback(
        ptr: *mut bindings::ib_cq,
        attr: *const bindings::ib_cq_init_attr,
        attrs: *mut bindings::uverbs_attr_bundle,
    ) -> c_int {
        from_result(|| {
            // SAFETY: `ptr` is valid and belongs to a device of driver `T`.
            let dev = unsafe { Device::<T>::from_raw((*ptr).device) };
            // SAFETY: `attr` is valid for the call.
            let a = unsafe { &*attr };
            let init_attr = CqInitAttr {
                cqe: a.cqe,
                comp_vector: a.comp_vector,
                flags: a.flags,
            };
            // SAFETY: `attrs` is NULL or valid for the call.
            let udata = unsafe { Udata::from_raw(bindings::attrs_udata(attrs)) };
            let (init, cqe) = T::create_cq(dev, &init_attr, udata)?;
            let this = Self::container(ptr);
            // SAFETY: `data` is uninitialised memory inside the allocation, which does not move
            // until `ib_core` frees it after `destroy_callback`. On error `ib_core` frees the
            // memory without calling `destroy_callback`.
            unsafe { init.__pinned_init(&raw mut (*this).data) }?;
            // SAFETY: No one else accesses the new CQ yet.
            unsafe { (*ptr).cqe = cqe as c_int };
            Ok(0)
        })
    }

    /// `destroy_cq` callback.
    ///
    /// # Safety
    ///
    /// Called by `ib_core` for a CQ whose `create_callback` succeeded, with no
    /// concurrent operation on it.
    pub(crate) unsafe extern "C" fn destroy_callback(
        ptr: *mut bindings::ib_cq,
        _udata: *mut bindings::ib_udata,
    ) -> c_int {
        // SAFETY: A live CQ with initialised data and nothing else running on it, which the core
        // does not use after an accepted destroy, by the safety requirements.
        unsafe { Self::destroy_in_place(ptr, T::destroy_cq) }
    }

    /// `resize_user_cq` callback.
    ///
    /// # Safety
    ///
    /// Called by `ib_core` for a live CQ.
    pub(crate) unsafe extern "C" fn resize_callback(
        ptr: *mut bindings::ib_cq,
        cqe: c_uint,
        udata: *mut bindings::ib_udata,
    ) -> c_int {
        from_result(|| {
            // SAFETY: By the safety requirements.
            let cq = unsafe { Self::from_raw(ptr) };
            // SAFETY: `udata` is NULL or valid for the call.
            let udata = unsafe { Udata::from_raw(udata) };
            T::resize_cq(cq, cqe, udata)?;
            Ok(0)
        })
    }

    /// `poll_cq` callback.
    ///
    /// # Safety
    ///
    /// Called by `ib_core` for a live CQ with `wc` valid for `num` entries.
    pub(crate) unsafe extern "C" fn poll_callback(
        ptr: *mut bindings::ib_cq,
        num: c_int,
        wc: *mut bindings::ib_wc,
    ) -> c_int {
        // SAFETY: By the safety requirements.
        let cq = unsafe { Self::from_raw(ptr) };
        let mut n = 0usize;
        let max = usize::try_from(num).unwrap_or(0);
        T::poll_cq(cq, max, &mut |w: &Wc| {
            if n < max {
                // SAFETY: The first `max` entries of `wc` are valid for writes, and `n < max`.
                let slot = unsafe { &mut *wc.add(n) };
                w.write_raw(slot);
                n += 1;
            }
        });
        n as c_int
    }

    /// `peek_cq` callback.
    ///
    /// # Safety
    ///
    /// Called by `ib_core` for a live CQ.
    pub(crate) unsafe extern "C" fn peek_callback(ptr: *mut bindings::ib_cq, n: c_int) -> c_int {
        // SAFETY: By the safety requirements.
        let cq = unsafe { Self::from_raw(ptr) };
        let count = T::peek_cq(cq);
        count.min(u32::try_from(n).unwrap_or(0)) as c_int
    }

    /// `req_notify_cq` callback.
    ///
    /// # Safety
    ///
    /// Called by `ib_core` for a live CQ.
    pub(crate) unsafe extern "C" fn req_notify_callback(
        ptr: *mut bindings::ib_cq,
        flags: bindings::ib_cq_notify_flags,
    ) -> c_int {
        // SAFETY: By the safety requirements.
        let cq = unsafe { Self::from_raw(ptr) };
        c_int::from(T::req_notify_cq(cq, NotifyFlags(flags)))
    }
}
