// SPDX-License-Identifier: GPL-2.0

//! The RDMA core's cache of the GID table.
//!
//! C header: [`include/rdma/ib_cache.h`](srctree/include/rdma/ib_cache.h)

use crate::{
    bindings, net,
    rdma::{
        device::{
            Device,
            Driver, //
        },
        Gid, //
    },
};

impl<T: Driver> Device<T> {
    /// Returns whether `gid` is a RoCEv2 GID of port `port` bound to
    /// `netdev` (`rdma_find_gid_by_port` with `IB_GID_TYPE_ROCE_UDP_ENCAP`).
    ///
    /// Safe in any context: the lookup takes the table's irq-safe lock.
    pub fn has_roce_v2_gid(&self, port: u32, gid: &Gid, netdev: &net::Device) -> bool {
        // SAFETY: The device and `netdev` are valid; `gid` points to 16 readable bytes.
        unsafe {
            bindings::rdma_has_roce_v2_gid(self.as_raw(), gid.0.as_ptr(), port, netdev.as_raw())
        }
    }
}
