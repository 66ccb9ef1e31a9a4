// SPDX-License-Identifier: GPL-2.0

//! Host build of the rrxe protocol core.
//!
//! The kernel module compiles the same files as `mod proto;` (see `mod.rs`);
//! this root exists only so that `cargo test` and `cargo fuzz` can build them
//! as an ordinary `no_std` library on the host. It adds nothing but the crate
//! attributes, which are only valid at a crate root.

#![cfg_attr(not(test), no_std)]
#![forbid(unsafe_code)]

#[path = "mod.rs"]
mod proto;

pub use proto::*;
