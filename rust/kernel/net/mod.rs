// SPDX-License-Identifier: GPL-2.0

//! Networking abstractions the kernel crate does not provide yet.
//!
//! Upstream, these modules would join `rust/kernel/net.rs`.

pub mod device;
pub mod namespace;
pub mod notifier;
pub mod pernet;
pub mod route;
pub mod skbuff;
pub mod udp_tunnel;

pub use device::{
    random_ether_addr,
    Device, //
};
pub use namespace::Namespace;
pub use route::Route;
pub use skbuff::{
    xmit_udp,
    SkBuff,
    SkbQueue,
    UdpIpHdr, //
};
