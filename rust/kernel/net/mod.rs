// SPDX-License-Identifier: GPL-2.0

//! Networking abstractions the kernel crate does not provide yet.
//!
//! Upstream, these modules would join `rust/kernel/net.rs`.

pub mod device;
pub mod notifier;

pub use device::{
    random_ether_addr,
    Device, //
};
