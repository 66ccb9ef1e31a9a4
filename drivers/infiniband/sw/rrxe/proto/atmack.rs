// SPDX-License-Identifier: GPL-2.0

//! Atomic Acknowledge Extended Transport Header (IBTA Vol 1 §9.3.6), 8
//! bytes: the original value of the remote operand, big-endian. Follows the
//! AETH in an RC ATOMIC ACKNOWLEDGE.

#![forbid(unsafe_code)]

use super::error::Result;
use super::wire::{check_len, Reader, Writer};

/// A decoded AtomicAckETH.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct AtomicAckEth {
    /// OrigRemDt: the 64-bit value at the remote address before the atomic.
    pub orig: u64,
}

impl AtomicAckEth {
    /// Length of the AtomicAckETH in bytes.
    pub const LEN: usize = 8;

    /// Decodes the AtomicAckETH at the start of `buf`.
    ///
    /// # Errors
    ///
    /// [`super::Error::Truncated`] if `buf` is shorter than
    /// [`AtomicAckEth::LEN`].
    pub fn parse(buf: &[u8]) -> Result<Self> {
        Ok(Self {
            orig: Reader::new(buf).u64()?,
        })
    }

    /// Encodes the AtomicAckETH into the first [`AtomicAckEth::LEN`] bytes
    /// of `buf`.
    ///
    /// # Errors
    ///
    /// [`super::Error::Truncated`] if `buf` is too short; nothing is written.
    pub fn write(&self, buf: &mut [u8]) -> Result {
        check_len(buf, Self::LEN)?;
        Writer::new(buf).u64(self.orig)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Error;
    use proptest::prelude::*;

    #[test]
    fn known_bytes() {
        let bytes = [0, 0, 0, 0, 0, 0, 0x12, 0x34];
        assert_eq!(
            AtomicAckEth::parse(&bytes),
            Ok(AtomicAckEth { orig: 0x1234 })
        );
        let mut out = [0xffu8; 8];
        AtomicAckEth { orig: 0x1234 }.write(&mut out).unwrap();
        assert_eq!(out, bytes);
        assert_eq!(AtomicAckEth::parse(&bytes[..7]), Err(Error::Truncated));
    }

    proptest! {
        #[test]
        fn roundtrip(orig in any::<u64>()) {
            let mut buf = [0u8; 8];
            AtomicAckEth { orig }.write(&mut buf).unwrap();
            prop_assert_eq!(AtomicAckEth::parse(&buf), Ok(AtomicAckEth { orig }));
        }
    }
}
