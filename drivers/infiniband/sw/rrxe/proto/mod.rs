// SPDX-License-Identifier: GPL-2.0

//! RoCEv2 protocol core: wire formats and pure protocol arithmetic.
//!
//! Everything here is plain `core` Rust with no kernel dependency, so that the
//! module compiles it in while `cargo test` and `cargo fuzz` exercise it on
//! the host (ARCHITECTURE.md, decision 6). Nothing allocates and nothing
//! panics on untrusted input: every parser takes a byte slice, checks its
//! bounds and returns [`Error`] instead.
//!
//! - Transport headers, one module each: [`bth`], [`reth`], [`aeth`],
//!   [`immdt`], [`ieth`], [`deth`], [`atmeth`], [`atmack`] and [`feth`]
//!   (IBTA Vol 1 §9.2, §9.3; FETH from Annex A19).
//! - [`opcode`]: the BTH OpCode table for RC, UC and UD (IBTA Vol 1 §9.2.1).
//! - [`psn`]: 24-bit packet sequence number arithmetic (IBTA Vol 1 §9.7).
//! - [`segment`]: splitting a message into FIRST/MIDDLE/LAST/ONLY packets by
//!   path MTU, and the BTH pad count.
//! - [`icrc`]: the RoCEv2 invariant CRC (IBTA Vol 1 Annex A17) over a
//!   pluggable CRC-32 ([`crc32::Crc32`]); [`crc32::TableCrc32`] is a portable
//!   implementation for hosts and tests, the kernel plugs in `crc32_le()`.
//! - [`packet`]: the receive-side parser of a UDP payload, and the transmit
//!   side header writer.
//! - [`udp`]: the UDP source port (flow entropy) of a QP.
//! - [`access`]: the range and alignment arithmetic of an access to a
//!   registered memory region.
//! - [`pma`]: the port's performance management agent (`PortCounters`).
//! - [`queue`] and [`wqe`]: the rxe user ABI's shared queues and the send
//!   and receive work queue entries user space writes into them; [`wr`]:
//!   the work request opcodes and what rxe does with each.

#![forbid(unsafe_code)]

pub mod access;
pub mod ack;
pub mod aeth;
pub mod atmack;
pub mod atmeth;
pub mod bth;
pub mod crc32;
pub mod deth;
pub mod error;
pub mod feth;
pub mod icrc;
pub mod ieth;
pub mod immdt;
pub mod index;
pub mod opcode;
pub mod packet;
pub mod pages;
pub mod pma;
pub mod psn;
pub mod qp_check;
pub mod queue;
pub mod rc;
pub mod reth;
pub mod segment;
pub mod udp;
mod wire;
pub mod wqe;
pub mod wr;

#[cfg(test)]
mod c_driver_tests;

pub use error::Error;
pub use error::Result;

/// UDP destination port of RoCEv2 (IBTA Vol 1 Annex A17), host byte order.
pub const ROCEV2_UDP_PORT: u16 = 4791;
