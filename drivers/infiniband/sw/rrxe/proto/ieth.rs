// SPDX-License-Identifier: GPL-2.0

//! Invalidate Extended Transport Header (IBTA Vol 1 §9.3.8), 4 bytes.
//!
//! Carried by the last (or only) packet of SEND with invalidate: the R_Key
//! the responder invalidates before completing the receive. Big-endian.

#![forbid(unsafe_code)]

use super::error::Result;
use super::wire::{check_len, Reader, Writer};

/// A decoded IETH.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct Ieth {
    /// R_Key to invalidate.
    pub rkey: u32,
}

impl Ieth {
    /// Length of the IETH in bytes.
    pub const LEN: usize = 4;

    /// Decodes the IETH at the start of `buf`.
    ///
    /// # Errors
    ///
    /// [`super::Error::Truncated`] if `buf` is shorter than [`Ieth::LEN`].
    pub fn parse(buf: &[u8]) -> Result<Self> {
        Ok(Self {
            rkey: Reader::new(buf).u32()?,
        })
    }

    /// Encodes the IETH into the first [`Ieth::LEN`] bytes of `buf`.
    ///
    /// # Errors
    ///
    /// [`super::Error::Truncated`] if `buf` is too short; nothing is written.
    pub fn write(&self, buf: &mut [u8]) -> Result {
        check_len(buf, Self::LEN)?;
        Writer::new(buf).u32(self.rkey)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Error;
    use proptest::prelude::*;

    #[test]
    fn known_bytes() {
        let bytes = [0x00, 0x01, 0x02, 0x7f];
        assert_eq!(Ieth::parse(&bytes), Ok(Ieth { rkey: 0x0001_027f }));
        let mut out = [0u8; 4];
        Ieth { rkey: 0x0001_027f }.write(&mut out).unwrap();
        assert_eq!(out, bytes);
        assert_eq!(Ieth::parse(&bytes[..3]), Err(Error::Truncated));
    }

    proptest! {
        #[test]
        fn roundtrip(rkey in any::<u32>()) {
            let mut buf = [0u8; 4];
            Ieth { rkey }.write(&mut buf).unwrap();
            prop_assert_eq!(Ieth::parse(&buf), Ok(Ieth { rkey }));
        }
    }
}
