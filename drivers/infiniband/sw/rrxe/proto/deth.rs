// SPDX-License-Identifier: GPL-2.0

//! Datagram Extended Transport Header (IBTA Vol 1 §9.3.2), 8 bytes.
//!
//! ```text
//!  bytes 0-3  Q_Key
//!  byte 4     reserved
//!  bytes 5-7  SrcQP
//! ```
//!
//! Carried by every UD packet. Big-endian.

#![forbid(unsafe_code)]

use super::wire::header;
use super::wire::ResvU24;

/// The Q_Key of the GSI QP (QP1), `0x8001_0000`.
pub const GSI_QKEY: u32 = 0x8001_0000;

header! {
    /// A decoded DETH. The reserved byte is ignored on parse and written as 0.
    #[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
    pub struct Deth("DETH", 8) {
        /// Q_Key: queue key the destination UD QP checks.
        pub qkey: u32,
        /// SrcQP: source QPN, 24 bits.
        pub src_qpn: u32 as ResvU24,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::proto::wire::tests::{assert_known_bytes, assert_out_of_range};

    #[test]
    fn known_bytes() {
        let deth = Deth {
            qkey: GSI_QKEY,
            src_qpn: 1,
        };
        assert_known_bytes(deth, &[0x80, 0x01, 0x00, 0x00, 0x00, 0x00, 0x00, 0x01]);
        // The reserved byte is ignored.
        assert_eq!(
            Deth::parse(&[0x80, 0x01, 0x00, 0x00, 0xee, 0x00, 0x00, 0x01]),
            Ok(deth)
        );
        assert_out_of_range(Deth {
            qkey: 0,
            src_qpn: 1 << 24,
        });
    }
}
