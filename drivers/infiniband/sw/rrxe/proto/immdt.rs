// SPDX-License-Identifier: GPL-2.0

//! Immediate Data Extended Transport Header (IBTA Vol 1 §9.3.7), 4 bytes.
//!
//! Carried by the last (or only) packet of SEND and RDMA WRITE with
//! immediate. The four bytes are opaque: they are handed to the receiver's
//! completion exactly as they appear on the wire (`imm_data` is a `__be32`
//! in `struct ib_uverbs_wc`).

#![forbid(unsafe_code)]

use super::wire::header;

header! {
    /// A decoded ImmDt.
    #[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
    pub struct ImmDt("ImmDt", 4) {
        /// Immediate data, in wire (network) byte order.
        pub imm_data: [u8; 4],
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::proto::wire::tests::assert_known_bytes;

    #[test]
    fn known_bytes() {
        let bytes = [0xde, 0xad, 0xbe, 0xef];
        assert_known_bytes(ImmDt { imm_data: bytes }, &bytes);
    }
}
