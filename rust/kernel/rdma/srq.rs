// SPDX-License-Identifier: GPL-2.0

//! Shared receive queues (`struct ib_srq`).
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
        qp::post_recv_list,
        udata::Udata, //
    },
};
use kernel::{
    error::from_result,
    prelude::*,
    types::Opaque, //
};

/// Attributes of an SRQ (`struct ib_srq_attr`).
#[derive(Clone, Copy, Debug, Default)]
pub struct SrqAttr {
    /// Queue depth.
    pub max_wr: u32,
    /// SGEs per WR.
    pub max_sge: u32,
    /// Limit that raises `IB_EVENT_SRQ_LIMIT_REACHED` once armed.
    pub srq_limit: u32,
}

/// `IB_SRQ_MAX_WR`.
pub const SRQ_MAX_WR: u32 = bindings::ib_srq_attr_mask_IB_SRQ_MAX_WR;
/// `IB_SRQ_LIMIT`.
pub const SRQ_LIMIT: u32 = bindings::ib_srq_attr_mask_IB_SRQ_LIMIT;

impl SrqAttr {
    fn from_raw(a: &bindings::ib_srq_attr) -> Self {
        Self {
            max_wr: a.max_wr,
            max_sge: a.max_sge,
            srq_limit: a.srq_limit,
        }
    }

    fn write_raw(&self, a: &mut bindings::ib_srq_attr) {
        a.max_wr = self.max_wr;
        a.max_sge = self.max_sge;
        a.srq_limit = self.srq_limit;
    }
}

/// An SRQ of a device of driver `T`, with the driver's state in place.
///
/// # Invariants
///
/// `ib` is at offset 0 and is a valid `struct ib_srq` of a device of driver
/// `T`; `data` is initialised while a reference to `Self` exists.
#[repr(C)]
pub struct Srq<T: Driver> {
    ib: Opaque<bindings::ib_srq>,
    data: T::SrqData,
}

rdma_object!(Srq: ib_srq => SrqData, in_place, from_raw, destroy_in_place, send_sync);

impl<T: Driver> Srq<T> {
    /// Whether the consumer gave an event handler (`ib_srq.event_handler`;
    /// user SRQs always have the uverbs one).
    pub fn has_event_handler(&self) -> bool {
        // SAFETY: Set by the RDMA core before `create_srq` and constant afterwards.
        unsafe { (*self.ib.get()).event_handler.is_some() }
    }

    /// Reports `IB_EVENT_SRQ_LIMIT_REACHED` (IBTA Vol 1 §10.2.9.4, §11.6.3)
    /// to the SRQ's event handler, if it has one.
    ///
    /// The handler runs in the caller's context (softirq for the receive
    /// path): uverbs queues the event for user space, kernel consumers
    /// typically re-arm the limit with `ib_modify_srq`. So it must be called
    /// without any lock that the SRQ's verbs take.
    pub fn report_limit_reached(&self) {
        let ib = self.ib.get();
        // SAFETY: As in `has_event_handler`; the context is the consumer's.
        let (handler, context) = unsafe { ((*ib).event_handler, (*ib).srq_context) };
        let Some(handler) = handler else {
            return;
        };
        let mut ev = bindings::ib_event {
            // SAFETY: `device` is set by the RDMA core at creation and constant.
            device: unsafe { (*ib).device },
            element: bindings::ib_event__bindgen_ty_1::default(),
            event: bindings::ib_event_type_IB_EVENT_SRQ_LIMIT_REACHED,
        };
        // SAFETY: Writing a pointer member of a union the event owns.
        unsafe { *ev.element.srq.as_mut() = ib };
        // SAFETY: The handler and its context are the consumer's, for events of this live SRQ;
        // `ev` is valid for the call.
        unsafe { handler(&mut ev, context) };
    }

    /// `create_srq` callback.
    ///
    /// # Safety
    ///
    /// Called by `ib_core` with a fresh, zeroed SRQ of a device of driver `T`.
    pub(crate) unsafe extern "C" fn create_callback(
        ptr: *mut bindings::ib_srq,
        init: *mut bindings::ib_srq_init_attr,
        udata: *mut bindings::ib_udata,
    ) -> c_int {
        from_result(|| {
            // SAFETY: Valid for the call.
            let ia = unsafe { &mut *init };
            // SAFETY: `device` is set by the core.
            let dev = unsafe { Device::<T>::from_raw((*ptr).device) };
            if ia.srq_type != bindings::ib_srq_type_IB_SRQT_BASIC {
                return Err(crate::rdma::eopnotsupp());
            }
            // SAFETY: `udata` is NULL or valid for the call.
            let udata = unsafe { Udata::from_raw(udata) };
            let mut attr = SrqAttr::from_raw(&ia.attr);
            let dinit = T::create_srq(dev, &mut attr, udata)?;
            let this = Self::container(ptr);
            // SAFETY: Uninitialised memory in the allocation; on error the core frees it
            // without calling `destroy_callback`.
            unsafe { dinit.__pinned_init(&raw mut (*this).data) }?;
            attr.write_raw(&mut ia.attr);
            Ok(0)
        })
    }

    /// `modify_srq` callback.
    ///
    /// # Safety
    ///
    /// Called by `ib_core` for a live SRQ.
    pub(crate) unsafe extern "C" fn modify_callback(
        ptr: *mut bindings::ib_srq,
        attr: *mut bindings::ib_srq_attr,
        mask: bindings::ib_srq_attr_mask,
        udata: *mut bindings::ib_udata,
    ) -> c_int {
        from_result(|| {
            // SAFETY: By the safety requirements.
            let srq = unsafe { Self::from_raw(ptr) };
            // SAFETY: Valid for the call.
            let a = SrqAttr::from_raw(unsafe { &*attr });
            // SAFETY: `udata` is NULL or valid for the call.
            let udata = unsafe { Udata::from_raw(udata) };
            T::modify_srq(srq, &a, mask, udata)?;
            Ok(0)
        })
    }

    /// `query_srq` callback.
    ///
    /// # Safety
    ///
    /// Called by `ib_core` for a live SRQ.
    pub(crate) unsafe extern "C" fn query_callback(
        ptr: *mut bindings::ib_srq,
        attr: *mut bindings::ib_srq_attr,
    ) -> c_int {
        from_result(|| {
            // SAFETY: By the safety requirements.
            let srq = unsafe { Self::from_raw(ptr) };
            // SAFETY: Valid for writes for the call.
            T::query_srq(srq).write_raw(unsafe { &mut *attr });
            Ok(0)
        })
    }

    /// `post_srq_recv` callback: each WR of the list goes to
    /// [`Driver::post_srq_recv`], in order, up to the first it refuses.
    ///
    /// Kernel consumers call it through `ib_post_srq_recv`; the uverbs
    /// `POST_SRQ_RECV` command calls it too, for a user SRQ, with WRs it
    /// copied from user space (the rxe provider of rdma-core never sends
    /// that command: it writes receive WQEs into the SRQ's mmapped queue).
    ///
    /// # Safety
    ///
    /// Called by `ib_core` for a live SRQ with a valid list; `bad` is valid
    /// for writes.
    pub(crate) unsafe extern "C" fn post_recv_callback(
        ptr: *mut bindings::ib_srq,
        wr: *const bindings::ib_recv_wr,
        bad: *mut *const bindings::ib_recv_wr,
    ) -> c_int {
        // SAFETY: By the safety requirements.
        let srq = unsafe { Self::from_raw(ptr) };
        // SAFETY: The RDMA core passes a valid list and a `bad` valid for writes.
        unsafe { post_recv_list(wr, bad, |r| T::post_srq_recv(srq, r)) }
    }

    /// `destroy_srq` callback.
    ///
    /// # Safety
    ///
    /// Called by `ib_core` once for an SRQ whose creation succeeded, with no
    /// concurrent operation on it.
    pub(crate) unsafe extern "C" fn destroy_callback(
        ptr: *mut bindings::ib_srq,
        _udata: *mut bindings::ib_udata,
    ) -> c_int {
        // SAFETY: A live SRQ with initialised data, destroyed once with nothing else running on
        // it, which the core does not use after an accepted destroy, by the safety requirements.
        unsafe { Self::destroy_in_place(ptr, T::destroy_srq) }
    }
}
