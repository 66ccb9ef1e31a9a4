// SPDX-License-Identifier: GPL-2.0

//! The `struct ib_device_ops` of a driver, built at compile time from its
//! [`Driver`] implementation, and the device-level trampolines.

use super::{
    Device,
    Driver, //
};
use crate::{
    bindings,
    rdma::{
        ah::Ah,
        attr::DeviceModify,
        counter::Counter,
        cq::Cq,
        hw_counters,
        mad::MAD_SIZE,
        mr::Mr,
        mw::Mw,
        pd::Pd,
        port::PortModify,
        qp::Qp,
        queue,
        srq::Srq,
        ucontext::Ucontext,
        udata::Udata, //
    },
};
use core::{
    marker::PhantomData,
    ptr, //
};
use kernel::{
    error::from_result,
    prelude::*,
    sync::atomic::Release, //
};

/// The `ib_device_ops` table of driver `T`, built at compile time.
///
/// # Callback contract
///
/// The RDMA core calls the ops of a device only while the device is valid, and only devices
/// allocated by [`UnregisteredDevice::new`](super::UnregisteredDevice::new) carry this table;
/// their data is initialised before the table is installed and dropped by `dealloc_driver`,
/// the last op called. Hence every `ib_device` pointer passed to a callback is the `ib` field
/// of a valid `Device<T>` with initialised data, and the other pointers are valid for the
/// duration of the call as the C prototypes in `struct ib_device_ops` document.
pub(crate) struct OpsTable<T: Driver>(PhantomData<T>);

impl<T: Driver> OpsTable<T> {
    /// The ops; `owner` is filled in at allocation.
    pub(crate) const VTABLE: bindings::ib_device_ops = bindings::ib_device_ops {
        driver_id: T::DRIVER_ID.as_raw(),
        uverbs_abi_ver: T::UVERBS_ABI_VER,
        query_device: Some(Self::query_device_callback),
        query_port: Some(Self::query_port_callback),
        get_port_immutable: Some(Self::get_port_immutable_callback),
        get_link_layer: if T::HAS_GET_LINK_LAYER {
            Some(Self::get_link_layer_callback)
        } else {
            None
        },
        query_pkey: if T::HAS_QUERY_PKEY {
            Some(Self::query_pkey_callback)
        } else {
            None
        },
        query_gid: if T::HAS_QUERY_GID {
            Some(Self::query_gid_callback)
        } else {
            None
        },
        modify_device: if T::HAS_MODIFY_DEVICE {
            Some(Self::modify_device_callback)
        } else {
            None
        },
        modify_port: if T::HAS_MODIFY_PORT {
            Some(Self::modify_port_callback)
        } else {
            None
        },
        process_mad: if T::HAS_PROCESS_MAD {
            Some(Self::process_mad_callback)
        } else {
            None
        },
        enable_driver: if T::HAS_ENABLE_DRIVER {
            Some(Self::enable_driver_callback)
        } else {
            None
        },
        dealloc_driver: Some(Self::dealloc_driver_callback),
        alloc_ucontext: Some(Ucontext::<T>::alloc_callback),
        dealloc_ucontext: Some(Ucontext::<T>::dealloc_callback),
        disassociate_ucontext: if T::HAS_DISASSOCIATE_UCONTEXT {
            Some(Ucontext::<T>::disassociate_callback)
        } else {
            None
        },
        alloc_pd: Some(Pd::<T>::alloc_callback),
        dealloc_pd: Some(Pd::<T>::dealloc_callback),
        alloc_hw_port_stats: if T::HAS_ALLOC_HW_PORT_STATS {
            Some(Self::alloc_hw_port_stats_callback)
        } else {
            None
        },
        get_hw_stats: if T::HAS_GET_HW_STATS {
            Some(Self::get_hw_stats_callback)
        } else {
            None
        },
        create_cq: Some(Cq::<T>::create_callback),
        destroy_cq: Some(Cq::<T>::destroy_callback),
        resize_user_cq: Some(Cq::<T>::resize_callback),
        poll_cq: Some(Cq::<T>::poll_callback),
        peek_cq: Some(Cq::<T>::peek_callback),
        req_notify_cq: Some(Cq::<T>::req_notify_callback),
        get_dma_mr: Some(Mr::<T>::get_dma_callback),
        reg_user_mr: Some(Mr::<T>::reg_user_callback),
        rereg_user_mr: if T::HAS_REREG_USER_MR {
            Some(Mr::<T>::rereg_user_callback)
        } else {
            None
        },
        dereg_mr: Some(Mr::<T>::dereg_callback),
        advise_mr: if T::HAS_ADVISE_MR {
            Some(Mr::<T>::advise_callback)
        } else {
            None
        },
        attach_mcast: if T::HAS_ATTACH_MCAST {
            Some(Qp::<T>::attach_mcast_callback)
        } else {
            None
        },
        detach_mcast: if T::HAS_DETACH_MCAST {
            Some(Qp::<T>::detach_mcast_callback)
        } else {
            None
        },
        alloc_mr: if T::HAS_ALLOC_MR {
            Some(Mr::<T>::alloc_callback)
        } else {
            None
        },
        map_mr_sg: if T::HAS_MAP_MR_SG {
            Some(Mr::<T>::map_sg_callback)
        } else {
            None
        },
        create_qp: Some(Qp::<T>::create_callback),
        modify_qp: Some(Qp::<T>::modify_callback),
        query_qp: Some(Qp::<T>::query_callback),
        destroy_qp: Some(Qp::<T>::destroy_callback),
        post_send: Some(Qp::<T>::post_send_callback),
        post_recv: Some(Qp::<T>::post_recv_callback),
        size_ib_qp: Qp::<T>::SIZE,
        create_srq: Some(Srq::<T>::create_callback),
        modify_srq: Some(Srq::<T>::modify_callback),
        query_srq: Some(Srq::<T>::query_callback),
        destroy_srq: Some(Srq::<T>::destroy_callback),
        post_srq_recv: if T::HAS_POST_SRQ_RECV {
            Some(Srq::<T>::post_recv_callback)
        } else {
            None
        },
        size_ib_srq: Srq::<T>::SIZE,
        create_ah: Some(Ah::<T>::create_callback),
        create_user_ah: Some(Ah::<T>::create_callback),
        query_ah: Some(Ah::<T>::query_callback),
        modify_ah: Some(Ah::<T>::modify_callback),
        destroy_ah: Some(Ah::<T>::destroy_callback),
        size_ib_ah: Ah::<T>::SIZE,
        alloc_mw: if T::HAS_ALLOC_MW {
            Some(Mw::<T>::alloc_callback)
        } else {
            None
        },
        dealloc_mw: if T::HAS_ALLOC_MW {
            Some(Mw::<T>::dealloc_callback)
        } else {
            None
        },
        size_ib_mw: Mw::<T>::SIZE,
        counter_bind_qp: if T::HAS_COUNTER_BIND_QP {
            Some(Counter::<T>::bind_qp_callback)
        } else {
            None
        },
        counter_unbind_qp: if T::HAS_COUNTER_BIND_QP {
            Some(Counter::<T>::unbind_qp_callback)
        } else {
            None
        },
        counter_dealloc: if T::HAS_COUNTER_BIND_QP {
            Some(Counter::<T>::dealloc_callback)
        } else {
            None
        },
        counter_alloc_stats: if T::HAS_COUNTER_BIND_QP {
            Some(Counter::<T>::alloc_stats_callback)
        } else {
            None
        },
        counter_update_stats: if T::HAS_COUNTER_BIND_QP {
            Some(Counter::<T>::update_stats_callback)
        } else {
            None
        },
        counter_init: if T::HAS_COUNTER_BIND_QP {
            Some(Counter::<T>::init_callback)
        } else {
            None
        },
        size_rdma_counter: Counter::<T>::SIZE,
        fill_res_qp_entry: if T::HAS_FILL_RES_QP_ENTRY {
            Some(Qp::<T>::fill_res_entry_callback)
        } else {
            None
        },
        mmap: Some(queue::mmap_callback),
        mmap_free: Some(queue::mmap_free_callback),
        size_ib_cq: Cq::<T>::SIZE,
        size_ib_ucontext: Ucontext::<T>::SIZE,
        size_ib_pd: Pd::<T>::SIZE,
        // SAFETY: All other fields are pointers, optional callbacks, integers and bitfields,
        // for which all-zero is valid and means "not provided".
        ..unsafe { core::mem::MaybeUninit::<bindings::ib_device_ops>::zeroed().assume_init() }
    };

    /// `query_device` callback.
    ///
    /// # Safety
    ///
    /// Only called by the RDMA core, as described in the callback contract of [`OpsTable`].
    unsafe extern "C" fn query_device_callback(
        ib: *mut bindings::ib_device,
        attr: *mut bindings::ib_device_attr,
        udata: *mut bindings::ib_udata,
    ) -> c_int {
        from_result(|| {
            // SAFETY: By the callback contract of `OpsTable`.
            let dev = unsafe { Device::<T>::from_raw(ib) };
            // SAFETY: `udata` is NULL or valid for the call.
            let udata = unsafe { Udata::from_raw(udata) };
            let a = T::query_device(dev, udata)?;
            // SAFETY: `attr` is valid for writes for the call.
            a.write_raw(unsafe { &mut *attr });
            Ok(0)
        })
    }

    /// `query_port` callback.
    ///
    /// # Safety
    ///
    /// Only called by the RDMA core, as described in the callback contract of [`OpsTable`].
    unsafe extern "C" fn query_port_callback(
        ib: *mut bindings::ib_device,
        port: u32,
        attr: *mut bindings::ib_port_attr,
    ) -> c_int {
        from_result(|| {
            // SAFETY: By the callback contract of `OpsTable`.
            let dev = unsafe { Device::<T>::from_raw(ib) };
            let a = T::query_port(dev, port)?;
            // SAFETY: `attr` is valid for writes for the call.
            a.write_raw(unsafe { &mut *attr });
            Ok(0)
        })
    }

    /// `get_port_immutable` callback.
    ///
    /// # Safety
    ///
    /// Only called by the RDMA core, as described in the callback contract of [`OpsTable`].
    unsafe extern "C" fn get_port_immutable_callback(
        ib: *mut bindings::ib_device,
        port: u32,
        imm: *mut bindings::ib_port_immutable,
    ) -> c_int {
        from_result(|| {
            // SAFETY: By the callback contract of `OpsTable`.
            let dev = unsafe { Device::<T>::from_raw(ib) };
            let a = T::get_port_immutable(dev, port)?;
            // SAFETY: `imm` is valid for writes for the call.
            a.write_raw(unsafe { &mut *imm });
            Ok(0)
        })
    }

    /// `get_link_layer` callback.
    ///
    /// # Safety
    ///
    /// Only called by the RDMA core, as described in the callback contract of [`OpsTable`].
    unsafe extern "C" fn get_link_layer_callback(
        ib: *mut bindings::ib_device,
        port: u32,
    ) -> bindings::rdma_link_layer {
        // SAFETY: By the callback contract of `OpsTable`.
        let dev = unsafe { Device::<T>::from_raw(ib) };
        T::get_link_layer(dev, port).as_raw()
    }

    /// `query_pkey` callback.
    ///
    /// # Safety
    ///
    /// Only called by the RDMA core, as described in the callback contract of [`OpsTable`].
    unsafe extern "C" fn query_pkey_callback(
        ib: *mut bindings::ib_device,
        port: u32,
        index: u16,
        pkey: *mut u16,
    ) -> c_int {
        from_result(|| {
            // SAFETY: By the callback contract of `OpsTable`.
            let dev = unsafe { Device::<T>::from_raw(ib) };
            let v = T::query_pkey(dev, port, index)?;
            // SAFETY: `pkey` is valid for writes for the call.
            unsafe { pkey.write(v) };
            Ok(0)
        })
    }

    /// `query_gid` callback.
    ///
    /// # Safety
    ///
    /// Only called by the RDMA core, as described in the callback contract of [`OpsTable`].
    unsafe extern "C" fn query_gid_callback(
        ib: *mut bindings::ib_device,
        port: u32,
        index: c_int,
        gid: *mut bindings::ib_gid,
    ) -> c_int {
        from_result(|| {
            // SAFETY: By the callback contract of `OpsTable`.
            let dev = unsafe { Device::<T>::from_raw(ib) };
            let v = T::query_gid(dev, port, index)?;
            // SAFETY: `gid` is valid for writes for the call; `raw` covers the whole union.
            unsafe { *(*gid).raw.as_mut() = v.0 };
            Ok(0)
        })
    }

    /// `enable_driver` callback.
    ///
    /// # Safety
    ///
    /// Only called by the RDMA core, as described in the callback contract of [`OpsTable`].
    unsafe extern "C" fn enable_driver_callback(ib: *mut bindings::ib_device) -> c_int {
        from_result(|| {
            // SAFETY: By the callback contract of `OpsTable`.
            let dev = unsafe { Device::<T>::from_raw(ib) };
            T::enable_driver(dev)?;
            Ok(0)
        })
    }

    /// `modify_device` callback.
    ///
    /// # Safety
    ///
    /// Only called by the RDMA core, as described in the callback contract of [`OpsTable`].
    unsafe extern "C" fn modify_device_callback(
        ib: *mut bindings::ib_device,
        mask: c_int,
        attr: *mut bindings::ib_device_modify,
    ) -> c_int {
        from_result(|| {
            // SAFETY: By the callback contract of `OpsTable`.
            let dev = unsafe { Device::<T>::from_raw(ib) };
            // CAST: a mask of flag bits.
            // SAFETY: By the callback contract of `OpsTable`, `attr` is valid for the call.
            let modify = unsafe { DeviceModify::from_raw(mask as u32, attr) };
            T::modify_device(dev, &modify)?;
            Ok(0)
        })
    }

    /// `modify_port` callback.
    ///
    /// # Safety
    ///
    /// Only called by the RDMA core, as described in the callback contract of [`OpsTable`].
    unsafe extern "C" fn modify_port_callback(
        ib: *mut bindings::ib_device,
        port: u32,
        mask: c_int,
        attr: *mut bindings::ib_port_modify,
    ) -> c_int {
        from_result(|| {
            // SAFETY: By the callback contract of `OpsTable`.
            let dev = unsafe { Device::<T>::from_raw(ib) };
            // CAST: a mask of flag bits.
            // SAFETY: By the callback contract of `OpsTable`, `attr` is valid for the call.
            let modify = unsafe { PortModify::from_raw(mask as u32, attr) };
            T::modify_port(dev, port, &modify)?;
            Ok(0)
        })
    }

    /// `process_mad` callback.
    ///
    /// # Safety
    ///
    /// Only called by the RDMA core, as described in the callback contract of [`OpsTable`]; its
    /// callers (sysfs `get_perf_mad`, the MAD layer's receive path and its local directed-route
    /// SMPs) pass two distinct buffers of at least `sizeof(struct ib_mad)` bytes.
    #[allow(clippy::too_many_arguments)]
    unsafe extern "C" fn process_mad_callback(
        ib: *mut bindings::ib_device,
        _flags: c_int,
        port: u32,
        _in_wc: *const bindings::ib_wc,
        _in_grh: *const bindings::ib_grh,
        in_mad: *const bindings::ib_mad,
        out_mad: *mut bindings::ib_mad,
        _out_mad_size: *mut usize,
        _out_mad_pkey_index: *mut u16,
    ) -> c_int {
        // SAFETY: By the callback contract of `OpsTable`.
        let dev = unsafe { Device::<T>::from_raw(ib) };
        // SAFETY: `in_mad` is valid for reading `MAD_SIZE` bytes (its size, asserted in `mad`)
        // for the call and not written meanwhile; a MAD is plain bytes.
        let mad = unsafe { &*in_mad.cast::<[u8; MAD_SIZE]>() };
        // SAFETY: `out_mad` is valid for writing `MAD_SIZE` bytes for the call and is not
        // `in_mad`.
        let out = unsafe { &mut *out_mad.cast::<[u8; MAD_SIZE]>() };
        // CAST: `enum ib_mad_result` values, 0 to 7.
        T::process_mad(dev, port, mad, out).as_raw() as c_int
    }

    /// `dealloc_driver` callback.
    ///
    /// # Safety
    ///
    /// Only called by the RDMA core, as described in the callback contract of [`OpsTable`].
    pub(super) unsafe extern "C" fn dealloc_driver_callback(ib: *mut bindings::ib_device) {
        // CAST: `ib` is the first field of the `#[repr(C)]` struct `Device<T>`.
        let dev = ib.cast::<Device<T>>();
        // SAFETY: By the callback contract of `OpsTable`; this is the last op, called once, and
        // nothing reads the data afterwards.
        unsafe { ptr::drop_in_place(&raw mut (*dev).data) };
        // SAFETY: Every QP, MR, AH and MW was destroyed before (the RDMA core destroys all objects
        // before `dealloc_driver`), so the tables are empty and unused.
        unsafe {
            (*dev).qps.destroy();
            (*dev).mrs.destroy();
            (*dev).ahs.destroy();
            (*dev).mws.destroy();
        }
        // SAFETY: `released` is valid until the memory is freed, which happens after this call.
        unsafe { (*dev).released.store(true, Release) };
    }

    /// `alloc_hw_port_stats` callback.
    ///
    /// # Safety
    ///
    /// Only called by the RDMA core, as described in the callback contract of [`OpsTable`].
    unsafe extern "C" fn alloc_hw_port_stats_callback(
        ib: *mut bindings::ib_device,
        port: u32,
    ) -> *mut bindings::rdma_hw_stats {
        // SAFETY: By the callback contract of `OpsTable`.
        let dev = unsafe { Device::<T>::from_raw(ib) };
        match T::alloc_hw_port_stats(dev, port) {
            Ok(descs) => hw_counters::alloc_stats(descs),
            Err(_) => ptr::null_mut(),
        }
    }

    /// `get_hw_stats` callback.
    ///
    /// # Safety
    ///
    /// Only called by the RDMA core, as described in the callback contract of [`OpsTable`].
    unsafe extern "C" fn get_hw_stats_callback(
        ib: *mut bindings::ib_device,
        stats: *mut bindings::rdma_hw_stats,
        port: u32,
        _index: c_int,
    ) -> c_int {
        from_result(|| {
            // SAFETY: By the callback contract of `OpsTable`.
            let dev = unsafe { Device::<T>::from_raw(ib) };
            if stats.is_null() {
                return Err(EINVAL);
            }
            // SAFETY: `stats` was allocated by `alloc_hw_port_stats_callback`; the RDMA core
            // holds its lock for the call.
            let values = unsafe { hw_counters::values(stats) };
            let n = T::get_hw_stats(dev, port, values)?;
            Ok(c_int::try_from(n)?)
        })
    }
}
