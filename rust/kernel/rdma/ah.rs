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
        object::rdma_object,
        table::Liveness,
        udata::Udata, //
    },
};
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
    /// Destination MAC address, when the RDMA core resolved one (RoCE
    /// address vectors: `rdma_ah_attr.roce.dmac`, filled by
    /// `ib_resolve_eth_dmac`).
    pub dmac: Option<[u8; 6]>,
}

impl Av {
    /// The GRH fields of `a`, and its destination MAC if it is a RoCE
    /// address vector.
    pub(crate) fn from_ah_attr(a: &bindings::rdma_ah_attr) -> Self {
        let g = &a.grh;
        let dmac = (a.type_ == bindings::rdma_ah_attr_type_RDMA_AH_ATTR_TYPE_ROCE)
            // SAFETY: `roce` is the member the type selects; every bit pattern is a valid
            // `[u8; 6]`.
            .then(|| unsafe { a.__bindgen_anon_1.roce.as_ref().dmac });
        Self {
            // SAFETY: Every bit pattern is a valid `[u8; 16]`, and `raw` covers the union.
            dgid: unsafe { *g.dgid.raw.as_ref() },
            sgid_index: g.sgid_index,
            flow_label: g.flow_label,
            traffic_class: g.traffic_class,
            hop_limit: g.hop_limit,
            dmac,
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

    /// The global route header fields and the destination MAC.
    pub fn av(&self) -> Av {
        Av::from_ah_attr(&self.0)
    }
}

/// An address handle of a device of driver `T`, with the driver's state in
/// place.
///
/// Every address handle is published by its number (the one
/// [`Driver::create_ah`] returns, which rxe's user ABI calls `ah_num`) from
/// creation to destruction, for [`Device::lookup_ah`]: user and kernel UD
/// work requests name their address handle by that number.
///
/// # Invariants
///
/// - `ib` is at offset 0 and is a valid `struct ib_ah` of a device of
///   driver `T`; `live`, `num` and `data` are initialised while a reference
///   to `Self` exists.
/// - The memory is not freed before the count of `live` reached zero.
#[repr(C)]
pub struct Ah<T: Driver> {
    ib: Opaque<bindings::ib_ah>,
    live: Liveness,
    /// The number the handle is published under.
    num: u32,
    data: T::AhData,
}

rdma_object!(Ah: ib_ah => AhData, in_place, from_raw, counted, send_sync);

/// How long a destruction that may not sleep waits for the references
/// others hold, in milliseconds (as the C driver's `RXE_POOL_TIMEOUT`).
const ATOMIC_DESTROY_WAIT_MS: u32 = 200;

impl<T: Driver> Ah<T> {
    /// The number the handle is published under (rxe's `ah_num`).
    pub fn num(&self) -> u32 {
        self.num
    }

    /// Whether the handle belongs to user space.
    pub fn is_user(&self) -> bool {
        // SAFETY: Set by the RDMA core before `create_ah`; constant afterwards.
        unsafe { !(*self.ib.get()).uobject.is_null() }
    }

    /// Identity of the PD, to compare with a QP's
    /// ([`crate::rdma::qp::Qp::pd_id`]).
    pub fn pd_id(&self) -> usize {
        // SAFETY: Set by the RDMA core before `create_ah`; constant afterwards.
        unsafe { (*self.ib.get()).pd as usize }
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
            // SAFETY: `init` is valid for the call.
            let flags = unsafe { (*init).flags };
            let sleepable = flags & bindings::rdma_create_ah_flags_RDMA_CREATE_AH_SLEEPABLE != 0;
            // SAFETY: `device` is set by the core.
            let dev = unsafe { Device::<T>::from_raw((*ptr).device) };
            // SAFETY: `udata` is NULL or valid for the call.
            let udata = unsafe { Udata::from_raw(udata) };
            let (dinit, num) = T::create_ah(dev, attr, udata)?;
            let this = Self::container(ptr);
            // SAFETY: `live` and `num` are zeroed memory inside the allocation, which does not
            // move until `ib_core` frees it; the count is only waited on at destruction.
            unsafe {
                let Ok(()) = Liveness::new().__pinned_init(&raw mut (*this).live);
                (&raw mut (*this).num).write(num);
            }
            // SAFETY: Uninitialised memory in the allocation; on error the core frees it.
            unsafe { dinit.__pinned_init(&raw mut (*this).data) }?;
            // SAFETY: The AH holds its initial reference; `destroy_callback` removes it before
            // dropping that reference, and `ib_core` frees the memory only after that. The
            // allocation mode follows the caller's context.
            let published = unsafe {
                if sleepable {
                    dev.ahs.insert(num, this)
                } else {
                    dev.ahs.insert_atomic(num, this)
                }
            };
            if let Err(e) = published {
                // Number taken (a driver bug) or no memory: undo as a destroy.
                // SAFETY: Fully initialised above.
                let ah = unsafe { &*this };
                if T::destroy_ah(ah).is_err() {
                    pr_warn!("rdma: destroying an unpublished AH {} failed\n", num);
                }
                // SAFETY: Not published, so we hold the only reference; dropped only here,
                // and `ib_core` frees the memory without another callback.
                unsafe { Self::drop_data(this) };
                return Err(e);
            }
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
            // SAFETY: By the safety requirements.
            let ah = unsafe { Self::from_raw(ptr) };
            let a = T::query_ah(ah);
            // SAFETY: `out` is valid for writes; the copy is plain data.
            unsafe { core::ptr::write(out, core::ptr::read(&a.0)) };
            Ok(0)
        })
    }

    /// `modify_ah` callback.
    ///
    /// # Safety
    ///
    /// Called by `ib_core` for a live AH, with a valid `attr` whose
    /// `sgid_attr` the core holds (or NULL) for the call.
    pub(crate) unsafe extern "C" fn modify_callback(
        ptr: *mut bindings::ib_ah,
        attr: *mut bindings::rdma_ah_attr,
    ) -> c_int {
        from_result(|| {
            // SAFETY: By the safety requirements.
            let ah = unsafe { Self::from_raw(ptr) };
            // SAFETY: By the safety requirements.
            let attr = unsafe { AhAttr::from_raw(&*attr) };
            T::modify_ah(ah, attr)?;
            Ok(0)
        })
    }

    /// Waits, without sleeping, until the count of `live` reached zero;
    /// `false` after [`ATOMIC_DESTROY_WAIT_MS`].
    fn spin_until_unused(&self) -> bool {
        for _ in 0..ATOMIC_DESTROY_WAIT_MS {
            if self.live.is_done() {
                return true;
            }
            // SAFETY: FFI call without preconditions; busy-waits 1 ms.
            unsafe { bindings::__udelay(1000) };
        }
        self.live.is_done()
    }

    /// `destroy_ah` callback.
    ///
    /// Called in atomic context when `flags` lacks
    /// `RDMA_DESTROY_AH_SLEEPABLE` (the connection manager destroys its
    /// AHs under a lock). References taken by [`Device::lookup_ah`] are
    /// then waited for by busy-waiting, at most [`ATOMIC_DESTROY_WAIT_MS`];
    /// past that the AH is leaked (`ETIMEDOUT`: the RDMA core then keeps
    /// the memory), as the C driver does.
    ///
    /// # Safety
    ///
    /// Called by `ib_core` once for an AH whose creation succeeded.
    pub(crate) unsafe extern "C" fn destroy_callback(
        ptr: *mut bindings::ib_ah,
        flags: u32,
    ) -> c_int {
        from_result(|| {
            let this = Self::container(ptr);
            // SAFETY: Valid by the safety requirements.
            let ah = unsafe { &*this };
            let sleepable = flags & bindings::rdma_destroy_ah_flags_RDMA_DESTROY_AH_SLEEPABLE != 0;
            // Order: no new lookups, then the driver (which may refuse), then wait for the
            // references held elsewhere, then drop the state.
            ah.device().ahs.remove_atomic(ah.num, this);
            if let Err(e) = T::destroy_ah(ah) {
                // SAFETY: The AH still holds its initial reference and is removed again before
                // it is dropped.
                if unsafe { ah.device().ahs.insert_atomic(ah.num, this) }.is_err() {
                    pr_warn!(
                        "rdma: AH {} stays unreachable after a failed destroy\n",
                        ah.num
                    );
                }
                return Err(e);
            }
            if sleepable {
                // SAFETY: We own the initial reference; the AH is valid for the call.
                unsafe { ah.live.put_initial_and_wait() };
            } else {
                // SAFETY: We own the initial reference; the completion is only waited on below.
                unsafe { Liveness::put(&raw const ah.live) };
                if !ah.spin_until_unused() {
                    // Someone still uses it: keep the memory (the core does not free it when
                    // we fail) rather than free it under them.
                    pr_warn!("rdma: AH {} still in use, leaked\n", ah.num);
                    return Err(ETIMEDOUT);
                }
            }
            // SAFETY: No reference is left; dropped only here.
            unsafe { Self::drop_data(this) };
            Ok(0)
        })
    }
}

impl Clone for AhAttr {
    fn clone(&self) -> Self {
        // SAFETY: Plain data without references (the invariant above).
        Self(unsafe { core::ptr::read(&self.0) }, self.1)
    }
}
