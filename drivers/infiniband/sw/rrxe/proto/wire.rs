// SPDX-License-Identifier: GPL-2.0

//! Bounds-checked big-endian readers and writers over byte slices.
//!
//! All multi-byte fields of the IBA transport headers are big-endian
//! (network byte order). These cursors never index out of bounds: a short
//! buffer is an [`Error::Truncated`].

#![forbid(unsafe_code)]

use super::error::{Error, Result};

/// A cursor that reads fields from the front of a byte slice.
pub(crate) struct Reader<'a> {
    buf: &'a [u8],
}

impl<'a> Reader<'a> {
    /// Starts reading at the beginning of `buf`.
    pub(crate) fn new(buf: &'a [u8]) -> Self {
        Self { buf }
    }

    /// Reads the next `N` bytes.
    pub(crate) fn array<const N: usize>(&mut self) -> Result<[u8; N]> {
        let (head, rest) = self.buf.split_first_chunk::<N>().ok_or(Error::Truncated)?;
        self.buf = rest;
        Ok(*head)
    }

    /// Reads one byte.
    pub(crate) fn u8(&mut self) -> Result<u8> {
        let [b] = self.array::<1>()?;
        Ok(b)
    }

    /// Reads a big-endian 16-bit field.
    pub(crate) fn u16(&mut self) -> Result<u16> {
        Ok(u16::from_be_bytes(self.array()?))
    }

    /// Reads a big-endian 32-bit field.
    pub(crate) fn u32(&mut self) -> Result<u32> {
        Ok(u32::from_be_bytes(self.array()?))
    }

    /// Reads a big-endian 64-bit field.
    pub(crate) fn u64(&mut self) -> Result<u64> {
        Ok(u64::from_be_bytes(self.array()?))
    }
}

/// A cursor that writes fields to the front of a mutable byte slice.
pub(crate) struct Writer<'a> {
    buf: &'a mut [u8],
}

impl<'a> Writer<'a> {
    /// Starts writing at the beginning of `buf`.
    pub(crate) fn new(buf: &'a mut [u8]) -> Self {
        Self { buf }
    }

    /// Writes `N` bytes.
    pub(crate) fn array<const N: usize>(&mut self, v: [u8; N]) -> Result {
        let buf = core::mem::take(&mut self.buf);
        let (head, rest) = buf.split_first_chunk_mut::<N>().ok_or(Error::Truncated)?;
        *head = v;
        self.buf = rest;
        Ok(())
    }

    /// Writes one byte.
    pub(crate) fn u8(&mut self, v: u8) -> Result {
        self.array([v])
    }

    /// Writes a big-endian 16-bit field.
    pub(crate) fn u16(&mut self, v: u16) -> Result {
        self.array(v.to_be_bytes())
    }

    /// Writes a big-endian 32-bit field.
    pub(crate) fn u32(&mut self, v: u32) -> Result {
        self.array(v.to_be_bytes())
    }

    /// Writes a big-endian 64-bit field.
    pub(crate) fn u64(&mut self, v: u64) -> Result {
        self.array(v.to_be_bytes())
    }
}

/// Fails with [`Error::Truncated`] unless `buf` holds at least `len` bytes.
///
/// Writers call this first so that a short buffer is never left half written.
pub(crate) fn check_len(buf: &[u8], len: usize) -> Result {
    if buf.len() < len {
        Err(Error::Truncated)
    } else {
        Ok(())
    }
}
