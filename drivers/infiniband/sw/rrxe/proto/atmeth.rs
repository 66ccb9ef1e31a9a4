// SPDX-License-Identifier: GPL-2.0

//! Atomic Extended Transport Header (IBTA Vol 1 §9.3.4), 28 bytes.
//!
//! ```text
//!  bytes 0-7   VA: virtual address (8-byte aligned)
//!  bytes 8-11  R_Key
//!  bytes 12-19 Swap (CmpSwap) or Add (FetchAdd) Data
//!  bytes 20-27 Compare Data (CmpSwap only)
//! ```
//!
//! Carried by CmpSwap and FetchAdd requests. Big-endian; the header is not a
//! multiple of 8 bytes, so its 64-bit fields are unaligned on the wire.

#![forbid(unsafe_code)]

use super::wire::header;

header! {
    /// A decoded AtomicETH.
    #[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
    pub struct AtomicEth("AtomicETH", 28) {
        /// VA: remote virtual address of the 64-bit operand.
        pub va: u64,
        /// R_Key of the remote memory region or window.
        pub rkey: u32,
        /// Swap Data (CmpSwap) or Add Data (FetchAdd).
        pub swap_add: u64,
        /// Compare Data (CmpSwap; ignored by FetchAdd).
        pub compare: u64,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::proto::wire::tests::assert_known_bytes;

    #[test]
    fn known_bytes() {
        let a = AtomicEth {
            va: 0x1000,
            rkey: 0xabcd_ef01,
            swap_add: 0x0102_0304_0506_0708,
            compare: u64::MAX,
        };
        let mut want = [0u8; 28];
        want[6] = 0x10;
        want[8..12].copy_from_slice(&[0xab, 0xcd, 0xef, 0x01]);
        want[12..20].copy_from_slice(&[1, 2, 3, 4, 5, 6, 7, 8]);
        want[20..28].copy_from_slice(&[0xff; 8]);
        assert_known_bytes(a, &want);
    }
}
