// SPDX-License-Identifier: GPL-2.0

//! RDMA Extended Transport Header (IBTA Vol 1 §9.3.3), 16 bytes.
//!
//! ```text
//!  bytes 0-7   VA: virtual address
//!  bytes 8-11  R_Key
//!  bytes 12-15 DMA Length
//! ```
//!
//! Carried by the first (or only) packet of an RDMA WRITE, by RDMA READ
//! requests, and by FLUSH and ATOMIC WRITE. Big-endian.

#![forbid(unsafe_code)]

use super::wire::header;

header! {
    /// A decoded RETH.
    #[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
    pub struct Reth("RETH", 16) {
        /// VA: remote virtual address (or offset in a zero-based region).
        pub va: u64,
        /// R_Key of the remote memory region or window.
        pub rkey: u32,
        /// DMA Length: length of the whole transfer in bytes.
        pub dma_len: u32,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::proto::wire::tests::assert_known_bytes;

    #[test]
    fn known_bytes() {
        let reth = Reth {
            va: 0x0102_0304_0506_0708,
            rkey: 0x1122_3344,
            dma_len: 0x0000_1000,
        };
        let bytes = [
            1, 2, 3, 4, 5, 6, 7, 8, 0x11, 0x22, 0x33, 0x44, 0, 0, 0x10, 0,
        ];
        assert_known_bytes(reth, &bytes);
    }
}
