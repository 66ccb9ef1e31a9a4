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

use super::bth::QPN_MASK;
use super::error::{Error, Result};
use super::wire::{check_len, Reader, Writer};

/// The Q_Key of the GSI QP (QP1), `0x8001_0000`.
pub const GSI_QKEY: u32 = 0x8001_0000;

/// A decoded DETH. The reserved byte is ignored on parse and written as 0.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct Deth {
    /// Q_Key: queue key the destination UD QP checks.
    pub qkey: u32,
    /// SrcQP: source QPN, 24 bits.
    pub src_qpn: u32,
}

impl Deth {
    /// Length of the DETH in bytes.
    pub const LEN: usize = 8;

    /// Decodes the DETH at the start of `buf`.
    ///
    /// # Errors
    ///
    /// [`Error::Truncated`] if `buf` is shorter than [`Deth::LEN`].
    pub fn parse(buf: &[u8]) -> Result<Self> {
        let mut r = Reader::new(buf);
        Ok(Self {
            qkey: r.u32()?,
            src_qpn: r.u32()? & QPN_MASK,
        })
    }

    /// Encodes the DETH into the first [`Deth::LEN`] bytes of `buf`.
    ///
    /// # Errors
    ///
    /// [`Error::Truncated`] if `buf` is too short, [`Error::FieldOutOfRange`]
    /// if `src_qpn` does not fit in 24 bits. Nothing is written on error.
    pub fn write(&self, buf: &mut [u8]) -> Result {
        check_len(buf, Self::LEN)?;
        if self.src_qpn > QPN_MASK {
            return Err(Error::FieldOutOfRange);
        }
        let mut w = Writer::new(buf);
        w.u32(self.qkey)?;
        w.u32(self.src_qpn)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn known_bytes() {
        let bytes = [0x80, 0x01, 0x00, 0x00, 0xee, 0x00, 0x00, 0x01];
        let deth = Deth::parse(&bytes).unwrap();
        assert_eq!(
            deth,
            Deth {
                qkey: GSI_QKEY,
                src_qpn: 1
            }
        );
        let mut out = [0u8; 8];
        deth.write(&mut out).unwrap();
        assert_eq!(out, [0x80, 0x01, 0x00, 0x00, 0x00, 0x00, 0x00, 0x01]);
        assert_eq!(Deth::parse(&bytes[..7]), Err(Error::Truncated));
        assert_eq!(
            Deth {
                qkey: 0,
                src_qpn: 1 << 24
            }
            .write(&mut out),
            Err(Error::FieldOutOfRange)
        );
    }

    proptest! {
        #[test]
        fn roundtrip(qkey in any::<u32>(), src_qpn in 0..=QPN_MASK) {
            let deth = Deth { qkey, src_qpn };
            let mut buf = [0u8; 8];
            deth.write(&mut buf).unwrap();
            prop_assert_eq!(Deth::parse(&buf), Ok(deth));
        }
    }
}
