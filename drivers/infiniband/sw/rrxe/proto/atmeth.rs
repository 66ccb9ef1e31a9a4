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

use super::error::Result;
use super::wire::{check_len, Reader, Writer};

/// A decoded AtomicETH.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct AtomicEth {
    /// VA: remote virtual address of the 64-bit operand.
    pub va: u64,
    /// R_Key of the remote memory region or window.
    pub rkey: u32,
    /// Swap Data (CmpSwap) or Add Data (FetchAdd).
    pub swap_add: u64,
    /// Compare Data (CmpSwap; ignored by FetchAdd).
    pub compare: u64,
}

impl AtomicEth {
    /// Length of the AtomicETH in bytes.
    pub const LEN: usize = 28;

    /// Decodes the AtomicETH at the start of `buf`.
    ///
    /// # Errors
    ///
    /// [`super::Error::Truncated`] if `buf` is shorter than
    /// [`AtomicEth::LEN`].
    pub fn parse(buf: &[u8]) -> Result<Self> {
        let mut r = Reader::new(buf);
        Ok(Self {
            va: r.u64()?,
            rkey: r.u32()?,
            swap_add: r.u64()?,
            compare: r.u64()?,
        })
    }

    /// Encodes the AtomicETH into the first [`AtomicEth::LEN`] bytes of
    /// `buf`.
    ///
    /// # Errors
    ///
    /// [`super::Error::Truncated`] if `buf` is too short; nothing is written.
    pub fn write(&self, buf: &mut [u8]) -> Result {
        check_len(buf, Self::LEN)?;
        let mut w = Writer::new(buf);
        w.u64(self.va)?;
        w.u32(self.rkey)?;
        w.u64(self.swap_add)?;
        w.u64(self.compare)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Error;
    use proptest::prelude::*;

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
        let mut out = [0u8; 28];
        a.write(&mut out).unwrap();
        assert_eq!(out, want);
        assert_eq!(AtomicEth::parse(&want), Ok(a));
        assert_eq!(AtomicEth::parse(&want[..27]), Err(Error::Truncated));
        assert_eq!(a.write(&mut out[..27]), Err(Error::Truncated));
    }

    proptest! {
        #[test]
        fn roundtrip(va in any::<u64>(), rkey in any::<u32>(), swap_add in any::<u64>(), compare in any::<u64>()) {
            let a = AtomicEth { va, rkey, swap_add, compare };
            let mut buf = [0u8; 28];
            a.write(&mut buf).unwrap();
            prop_assert_eq!(AtomicEth::parse(&buf), Ok(a));
        }
    }
}
