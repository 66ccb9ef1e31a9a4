// SPDX-License-Identifier: GPL-2.0

//! rrxe: software RoCEv2 RDMA provider.
//!
//! Crate root of the out-of-tree module. It only wires the parts together:
//!
//! - `rust/`: safe abstractions over ib_core and the network stack, laid
//!   out as they would be in the kernel crate (`rust/kernel/rdma/`,
//!   `rust/kernel/net/`), plus the module's generated bindings. All
//!   `unsafe` code lives there.
//! - `drivers/infiniband/sw/rrxe/`: the driver, free of `unsafe` code.

#[path = "rust/bindings/mod.rs"]
mod bindings;

/// The CRC library (`crc32_le`), as the kernel crate would export it.
#[path = "rust/kernel/crc.rs"]
pub mod crc;

/// Module life-cycle events, as the kernel crate would export them.
#[path = "rust/kernel/module_notifier.rs"]
pub mod module_notifier;

#[path = "rust/kernel/net/mod.rs"]
pub mod net;

#[path = "rust/kernel/notifier.rs"]
mod notifier;

#[path = "rust/kernel/rdma/mod.rs"]
pub mod rdma;

#[path = "drivers/infiniband/sw/rrxe/rrxe.rs"]
mod rrxe;

/// The kernel-independent RoCEv2 protocol core, shared with the host tests.
#[path = "drivers/infiniband/sw/rrxe/proto/mod.rs"]
pub mod proto;

kernel::prelude::module! {
    type: rrxe::RrxeModule,
    name: "rrxe",
    authors: ["The rrxe authors"],
    description: "Soft RoCE (RoCEv2) RDMA provider in Rust",
    license: "GPL",
    alias: ["rdma-link-rrxe"],
}
