// SPDX-License-Identifier: GPL-2.0

//! RDMA providers: the interface between a device driver and the RDMA core
//! (`ib_core`).
//!
//! A provider implements [`device::Driver`]; its ops table is built at compile
//! time and its per-device state lives inside the `struct ib_device`
//! allocation.  Objects that `ib_core` allocates on the driver's behalf
//! ([`ucontext::Ucontext`], [`pd::Pd`]) carry the driver's state in place in the
//! same way.
//!
//! C headers: [`include/rdma/ib_verbs.h`](srctree/include/rdma/ib_verbs.h),
//! [`include/rdma/rdma_netlink.h`](srctree/include/rdma/rdma_netlink.h).

use kernel::prelude::*;

pub mod access;
pub mod ah;
pub mod attr;
pub mod cache;
pub mod counter;
pub mod cq;
pub mod device;
pub mod hw_counters;
pub mod link;
pub mod lock;
pub mod mad;
pub mod mr;
pub mod mw;
pub(crate) mod object;
pub mod pd;
pub mod port;
pub mod qp;
pub mod queue;
pub mod srq;
mod sysfs;
pub(crate) mod table;
pub(crate) mod timer;
pub mod trace;
pub mod ucontext;
pub mod udata;
pub mod umem;
pub mod umem_odp;
pub mod wc;

#[cfg(CONFIG_KUNIT = "y")]
mod layout_tests;

/// Operation not supported on transport endpoint (`EOPNOTSUPP`), which the
/// kernel crate of 7.2 does not define. RDMA consumers (and pyverbs, which
/// reads it as "skip") expect it for unsupported features.
pub fn eopnotsupp() -> kernel::error::Error {
    // CAST: A small positive errno constant.
    kernel::error::Error::from_errno(-(crate::bindings::EOPNOTSUPP as i32))
}

/// A 64-bit globally unique identifier (node, system image or port GUID).
///
/// Stored in network byte order, as on the wire and in `__be64` fields.
#[derive(Clone, Copy, Default, PartialEq, Eq, Debug)]
pub struct Guid(pub [u8; 8]);

impl Guid {
    /// Builds the modified EUI-64 of a 48-bit MAC address (RFC 4291,
    /// appendix A): `FF:FE` inserted in the middle and the universal/local
    /// bit inverted.
    pub const fn from_eui48(mac: &[u8; 6]) -> Self {
        Self([
            mac[0] ^ 0x02,
            mac[1],
            mac[2],
            0xff,
            0xfe,
            mac[3],
            mac[4],
            mac[5],
        ])
    }

    /// Returns the GUID in the representation of a C `__be64`.
    pub const fn to_be64_raw(self) -> u64 {
        u64::from_ne_bytes(self.0)
    }
}

/// A 128-bit global identifier (`union ib_gid`).
///
/// Stored in network byte order.
#[derive(Clone, Copy, Default, PartialEq, Eq, Debug)]
pub struct Gid(pub [u8; 16]);

/// Identifier of a provider driver (`enum rdma_driver_id`).
///
/// User space matches its provider library on this value.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum DriverId {
    /// Soft-RoCE (`rdma_rxe`); rdma-core's `rxe` provider matches on it.
    Rxe,
}

impl DriverId {
    /// Returns the C value.
    pub(crate) const fn as_raw(self) -> crate::bindings::rdma_driver_id {
        match self {
            Self::Rxe => crate::bindings::rdma_driver_id_RDMA_DRIVER_RXE,
        }
    }
}

#[kunit_tests(rrxe_rdma_guid)]
mod tests {
    use super::*;

    #[test]
    fn eui64_of_mac() {
        // RFC 4291 appendix A: FF:FE in the middle, universal/local bit flipped.
        let mac = [0x52, 0x54, 0x00, 0x12, 0x34, 0x01];
        let guid = Guid::from_eui48(&mac);
        assert_eq!(guid.0, [0x50, 0x54, 0x00, 0xff, 0xfe, 0x12, 0x34, 0x01]);
        // `__be64` fields hold the bytes in wire order.
        assert_eq!(guid.to_be64_raw().to_ne_bytes(), guid.0);

        let local = Guid::from_eui48(&[0x02, 0, 0, 0, 0, 0x01]);
        assert_eq!(local.0[0], 0x00);
    }
}
