// SPDX-License-Identifier: GPL-2.0

//! Address handles (`struct ib_ah`).
//!
//! C header: [`include/rdma/ib_verbs.h`](srctree/include/rdma/ib_verbs.h)

use crate::{
    bindings,
    rdma::{
        device::{
            Device,
            Driver, //
        },
        udata::Udata, //
    },
};
use core::ops::Deref;
use kernel::{
    error::from_result,
    prelude::*,
    types::Opaque, //
};

/// The global route header fields of an address vector (`struct
/// ib_global_route` without the GID attribute reference): what the transmit
/// path puts in the IP header of a RoCEv2 packet.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Av {
    /// Destination GID, network byte order (for RoCEv2, the IPv6 or
    /// IPv4-mapped destination address).
    pub dgid: [u8; 16],
    /// Index of the source GID in the port's GID table.
    pub sgid_index: u8,
    /// IPv6 flow label (20 bits).
    pub flow_label: u32,
    /// Traffic class (IPv6 traffic class, IPv4 DSCP/ECN).
    pub traffic_class: u8,
    /// Hop limit (IPv6 hop limit, IPv4 TTL).
    pub hop_limit: u8,
}

impl Av {
    pub(crate) fn from_grh(g: &bindings::ib_global_route) -> Self {
        Self {
            // SAFETY: Every bit pattern is a valid `[u8; 16]`, and `raw` covers the union.
            dgid: unsafe { *g.dgid.raw.as_ref() },
            sgid_index: g.sgid_index,
            flow_label: g.flow_label,
            traffic_class: g.traffic_class,
            hop_limit: g.hop_limit,
        }
    }
}

/// Network type of a source GID (`enum rdma_network_type`): how packets
/// from it are carried.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NetworkType {
    /// InfiniBand.
    Ib,
    /// RoCE v1 (Ethernet, `ETH_P_IBOE`).
    RoceV1,
    /// RoCEv2 over IPv4 (a v4-mapped GID).
    Ipv4,
    /// RoCEv2 over IPv6.
    Ipv6,
}

impl NetworkType {
    /// The `enum rdma_network_type` value.
    pub(crate) fn as_raw(self) -> bindings::rdma_network_type {
        match self {
            Self::Ib => bindings::rdma_network_type_RDMA_NETWORK_IB,
            Self::RoceV1 => bindings::rdma_network_type_RDMA_NETWORK_ROCE_V1,
            Self::Ipv4 => bindings::rdma_network_type_RDMA_NETWORK_IPV4,
            Self::Ipv6 => bindings::rdma_network_type_RDMA_NETWORK_IPV6,
        }
    }

    fn from_raw(t: bindings::rdma_network_type) -> Option<Self> {
        match t {
            bindings::rdma_network_type_RDMA_NETWORK_IB => Some(Self::Ib),
            bindings::rdma_network_type_RDMA_NETWORK_ROCE_V1 => Some(Self::RoceV1),
            bindings::rdma_network_type_RDMA_NETWORK_IPV4 => Some(Self::Ipv4),
            bindings::rdma_network_type_RDMA_NETWORK_IPV6 => Some(Self::Ipv6),
            _ => None,
        }
    }
}

/// An address vector (`struct rdma_ah_attr`), kept without its
/// `sgid_attr` reference (the RDMA core only lends it during a call), and
/// the network type of that source GID, read while it was lent.
pub struct AhAttr(bindings::rdma_ah_attr, Option<NetworkType>);

// SAFETY: The only pointer (`grh.sgid_attr`) is always NULL in a stored `AhAttr`.
unsafe impl Send for AhAttr {}
// SAFETY: As above.
unsafe impl Sync for AhAttr {}

impl AhAttr {
    /// # Safety
    ///
    /// `a.grh.sgid_attr` is NULL or points to a GID attribute valid for the
    /// duration of the call.
    unsafe fn from_raw(a: &bindings::rdma_ah_attr) -> Self {
        let sgid_attr = a.grh.sgid_attr;
        let network = if sgid_attr.is_null() {
            None
        } else {
            // SAFETY: Valid by the safety requirements; the helper only reads it.
            NetworkType::from_raw(unsafe { bindings::rdma_gid_attr_network_type(sgid_attr) })
        };
        // SAFETY: Plain data; the borrowed reference is cleared below.
        let mut c = Self(unsafe { core::ptr::read(a) }, network);
        c.0.grh.sgid_attr = core::ptr::null();
        c
    }

    /// Network type of the source GID, when the RDMA core resolved one (it
    /// does for every address vector with a GRH).
    pub fn network_type(&self) -> Option<NetworkType> {
        self.1
    }

    /// Port number.
    pub fn port_num(&self) -> u32 {
        self.0.port_num
    }

    /// Whether a GRH is present (`IB_AH_GRH`, always on RoCE).
    pub fn has_grh(&self) -> bool {
        u32::from(self.0.ah_flags) & bindings::ib_ah_flags_IB_AH_GRH != 0
    }

    /// Index of the source GID.
    pub fn sgid_index(&self) -> u8 {
        self.0.grh.sgid_index
    }

    /// The global route header fields.
    pub fn av(&self) -> Av {
        Av::from_grh(&self.0.grh)
    }
}

/// An address handle of a device of driver `T`, with the driver's state in
/// place.
///
/// # Invariants
///
/// `ib` is at offset 0 and valid; `data` is initialised while a reference
/// to `Self` exists.
#[repr(C)]
pub struct Ah<T: Driver> {
    ib: Opaque<bindings::ib_ah>,
    data: T::AhData,
}

// SAFETY: The C part is synchronised by the RDMA core; the data is `Send`.
unsafe impl<T: Driver> Send for Ah<T> {}
// SAFETY: The data is `Sync`.
unsafe impl<T: Driver> Sync for Ah<T> {}

impl<T: Driver> Ah<T> {
    /// Checked when the ops table is built: `ib_core` allocates with `kzalloc`.
    pub(crate) const SIZE: usize = {
        assert!(core::mem::offset_of!(Self, ib) == 0);
        assert!(core::mem::align_of::<Self>() <= bindings::ARCH_KMALLOC_MINALIGN);
        core::mem::size_of::<Self>()
    };

    /// The device.
    pub fn device(&self) -> &Device<T> {
        // SAFETY: By the type invariant.
        unsafe { Device::from_raw((*self.ib.get()).device) }
    }

    /// `create_ah` / `create_user_ah` callback.
    ///
    /// # Safety
    ///
    /// Called by `ib_core` with a fresh, zeroed AH of a device of driver `T`.
    pub(crate) unsafe extern "C" fn create_callback(
        ptr: *mut bindings::ib_ah,
        init: *mut bindings::rdma_ah_init_attr,
        udata: *mut bindings::ib_udata,
    ) -> c_int {
        from_result(|| {
            // SAFETY: Valid for the call, with a valid `ah_attr` whose `sgid_attr` the core holds
            // (or NULL) for the call.
            let attr = unsafe { AhAttr::from_raw(&*(*init).ah_attr) };
            // SAFETY: `device` is set by the core.
            let dev = unsafe { Device::<T>::from_raw((*ptr).device) };
            // SAFETY: `udata` is NULL or valid for the call.
            let udata = unsafe { Udata::from_raw(udata) };
            let dinit = T::create_ah(dev, attr, udata)?;
            // CAST: `ib` is the first field.
            let this = ptr.cast::<Self>();
            // SAFETY: Uninitialised memory in the allocation; on error the core frees it.
            unsafe { dinit.__pinned_init(&raw mut (*this).data) }?;
            Ok(0)
        })
    }

    /// `query_ah` callback.
    ///
    /// # Safety
    ///
    /// Called by `ib_core` for a live AH.
    pub(crate) unsafe extern "C" fn query_callback(
        ptr: *mut bindings::ib_ah,
        out: *mut bindings::rdma_ah_attr,
    ) -> c_int {
        from_result(|| {
            // CAST: `ib` is the first field.
            // SAFETY: By the safety requirements.
            let ah = unsafe { &*ptr.cast::<Self>() };
            let a = T::query_ah(ah);
            // SAFETY: `out` is valid for writes; the copy is plain data.
            unsafe { core::ptr::write(out, core::ptr::read(&a.0)) };
            Ok(0)
        })
    }

    /// `destroy_ah` callback.
    ///
    /// # Safety
    ///
    /// Called by `ib_core` once for an AH whose creation succeeded.
    pub(crate) unsafe extern "C" fn destroy_callback(
        ptr: *mut bindings::ib_ah,
        _flags: u32,
    ) -> c_int {
        from_result(|| {
            // CAST: `ib` is the first field.
            let this = ptr.cast::<Self>();
            // SAFETY: Valid by the safety requirements.
            T::destroy_ah(unsafe { &*this })?;
            // SAFETY: Dropped only here.
            unsafe { core::ptr::drop_in_place(&raw mut (*this).data) };
            Ok(0)
        })
    }
}

impl<T: Driver> Deref for Ah<T> {
    type Target = T::AhData;

    fn deref(&self) -> &T::AhData {
        &self.data
    }
}

impl Clone for AhAttr {
    fn clone(&self) -> Self {
        // SAFETY: Plain data without references (the invariant above).
        Self(unsafe { core::ptr::read(&self.0) }, self.1)
    }
}
