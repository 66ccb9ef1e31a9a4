// SPDX-License-Identifier: GPL-2.0

//! Immediate Data Extended Transport Header (IBTA Vol 1 §9.3.7), 4 bytes.
//!
//! Carried by the last (or only) packet of SEND and RDMA WRITE with
//! immediate. The four bytes are opaque: they are handed to the receiver's
//! completion exactly as they appear on the wire (`imm_data` is a `__be32`
//! in `struct ib_uverbs_wc`).

#![forbid(unsafe_code)]

use super::error::Result;
use super::wire::{check_len, Reader, Writer};

/// A decoded ImmDt.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct ImmDt {
    /// Immediate data, in wire (network) byte order.
    pub imm_data: [u8; 4],
}

impl ImmDt {
    /// Length of the ImmDt in bytes.
    pub const LEN: usize = 4;

    /// Decodes the ImmDt at the start of `buf`.
    ///
    /// # Errors
    ///
    /// [`super::Error::Truncated`] if `buf` is shorter than [`ImmDt::LEN`].
    pub fn parse(buf: &[u8]) -> Result<Self> {
        Ok(Self {
            imm_data: Reader::new(buf).array()?,
        })
    }

    /// Encodes the ImmDt into the first [`ImmDt::LEN`] bytes of `buf`.
    ///
    /// # Errors
    ///
    /// [`super::Error::Truncated`] if `buf` is too short; nothing is written.
    pub fn write(&self, buf: &mut [u8]) -> Result {
        check_len(buf, Self::LEN)?;
        Writer::new(buf).array(self.imm_data)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Error;

    #[test]
    fn known_bytes() {
        let bytes = [0xde, 0xad, 0xbe, 0xef];
        let imm = ImmDt::parse(&bytes).unwrap();
        assert_eq!(imm.imm_data, bytes);
        let mut out = [0u8; 4];
        imm.write(&mut out).unwrap();
        assert_eq!(out, bytes);
        assert_eq!(ImmDt::parse(&bytes[..3]), Err(Error::Truncated));
        assert_eq!(imm.write(&mut out[..3]), Err(Error::Truncated));
    }
}
