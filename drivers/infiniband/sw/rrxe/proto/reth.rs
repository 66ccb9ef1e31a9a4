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

use super::error::Result;
use super::wire::{check_len, Reader, Writer};

/// A decoded RETH.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct Reth {
    /// VA: remote virtual address (or offset in a zero-based region).
    pub va: u64,
    /// R_Key of the remote memory region or window.
    pub rkey: u32,
    /// DMA Length: length of the whole transfer in bytes.
    pub dma_len: u32,
}

impl Reth {
    /// Length of the RETH in bytes.
    pub const LEN: usize = 16;

    /// Decodes the RETH at the start of `buf`.
    ///
    /// # Errors
    ///
    /// [`super::Error::Truncated`] if `buf` is shorter than [`Reth::LEN`].
    pub fn parse(buf: &[u8]) -> Result<Self> {
        let mut r = Reader::new(buf);
        Ok(Self {
            va: r.u64()?,
            rkey: r.u32()?,
            dma_len: r.u32()?,
        })
    }

    /// Encodes the RETH into the first [`Reth::LEN`] bytes of `buf`.
    ///
    /// # Errors
    ///
    /// [`super::Error::Truncated`] if `buf` is too short; nothing is written.
    pub fn write(&self, buf: &mut [u8]) -> Result {
        check_len(buf, Self::LEN)?;
        let mut w = Writer::new(buf);
        w.u64(self.va)?;
        w.u32(self.rkey)?;
        w.u32(self.dma_len)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Error;
    use proptest::prelude::*;

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
        let mut out = [0u8; 16];
        reth.write(&mut out).unwrap();
        assert_eq!(out, bytes);
        assert_eq!(Reth::parse(&bytes), Ok(reth));
        assert_eq!(Reth::parse(&bytes[..15]), Err(Error::Truncated));
        assert_eq!(reth.write(&mut out[..15]), Err(Error::Truncated));
    }

    proptest! {
        #[test]
        fn roundtrip(va in any::<u64>(), rkey in any::<u32>(), dma_len in any::<u32>()) {
            let reth = Reth { va, rkey, dma_len };
            let mut buf = [0u8; 16];
            reth.write(&mut buf).unwrap();
            prop_assert_eq!(Reth::parse(&buf), Ok(reth));
        }
    }
}
