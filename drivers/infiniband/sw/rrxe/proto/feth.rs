// SPDX-License-Identifier: GPL-2.0

//! FLUSH Extended Transport Header (IBTA Vol 1 Annex A19, Memory Placement
//! Extensions), 4 bytes, big-endian:
//!
//! ```text
//!  bits 31:6  reserved
//!  bits 5:4   SEL: selectivity level
//!  bits 3:0   PLT: placement type
//! ```
//!
//! Precedes the RETH in an RC FLUSH request.

#![forbid(unsafe_code)]

use super::error::{Error, Result};
use super::wire::{check_len, Reader, Writer};

const PLT_MASK: u8 = 0x0f;
const SEL_MASK: u8 = 0x30;
const SEL_SHIFT: u8 = 4;

/// PLT bit: placement for global visibility (`IB_FLUSH_GLOBAL`).
pub const PLT_GLOBAL: u8 = 1 << 0;
/// PLT bit: placement for persistence (`IB_FLUSH_PERSISTENT`).
pub const PLT_PERSISTENT: u8 = 1 << 1;
/// SEL: the RETH's range (`IB_FLUSH_RANGE`).
pub const SEL_RANGE: u8 = 0;
/// SEL: the whole memory region (`IB_FLUSH_MR`).
pub const SEL_MR: u8 = 1;

/// A decoded FETH. Reserved bits are ignored on parse and written as 0.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct Feth {
    /// PLT: placement type bit mask (global visibility, persistence), 4 bits.
    pub placement_type: u8,
    /// SEL: selectivity level (whole region or the RETH range), 2 bits.
    pub selectivity: u8,
}

impl Feth {
    /// Length of the FETH in bytes.
    pub const LEN: usize = 4;

    /// Decodes the FETH at the start of `buf`.
    ///
    /// # Errors
    ///
    /// [`Error::Truncated`] if `buf` is shorter than [`Feth::LEN`].
    pub fn parse(buf: &[u8]) -> Result<Self> {
        let [.., low] = Reader::new(buf).array::<4>()?;
        Ok(Self {
            placement_type: low & PLT_MASK,
            selectivity: (low & SEL_MASK) >> SEL_SHIFT,
        })
    }

    /// Encodes the FETH into the first [`Feth::LEN`] bytes of `buf`.
    ///
    /// # Errors
    ///
    /// [`Error::Truncated`] if `buf` is too short, [`Error::FieldOutOfRange`]
    /// if a field does not fit. Nothing is written on error.
    pub fn write(&self, buf: &mut [u8]) -> Result {
        check_len(buf, Self::LEN)?;
        if self.placement_type > PLT_MASK || self.selectivity > SEL_MASK >> SEL_SHIFT {
            return Err(Error::FieldOutOfRange);
        }
        Writer::new(buf).u32(u32::from(
            (self.selectivity << SEL_SHIFT) | self.placement_type,
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_bytes() {
        let f = Feth {
            placement_type: 0x2,
            selectivity: 1,
        };
        let mut out = [0u8; 4];
        f.write(&mut out).unwrap();
        assert_eq!(out, [0, 0, 0, 0x12]);
        assert_eq!(
            Feth::parse(&[0xff, 0xff, 0xff, 0xc3]),
            Ok(Feth {
                placement_type: 3,
                selectivity: 0
            })
        );
        assert_eq!(
            Feth {
                placement_type: 16,
                selectivity: 0
            }
            .write(&mut out),
            Err(Error::FieldOutOfRange)
        );
        assert_eq!(
            Feth {
                placement_type: 0,
                selectivity: 4
            }
            .write(&mut out),
            Err(Error::FieldOutOfRange)
        );
        assert_eq!(Feth::parse(&out[..3]), Err(Error::Truncated));
        for plt in 0..16 {
            for sel in 0..4 {
                let f = Feth {
                    placement_type: plt,
                    selectivity: sel,
                };
                f.write(&mut out).unwrap();
                assert_eq!(Feth::parse(&out), Ok(f));
            }
        }
    }
}
