// SPDX-License-Identifier: GPL-2.0

#![forbid(unsafe_code)]

//! The CRC-32 behind the ICRC, from the kernel's CRC library.

use crate::{
    crc,
    proto::crc32::Crc32, //
};
use kernel::prelude::*;

/// [`Crc32`] backed by the kernel's `crc32_le()`, which uses the CPU's
/// carry-less multiply where available (the C driver uses it too).
pub(crate) struct KernelCrc32;

impl Crc32 for KernelCrc32 {
    fn crc32_le(&self, crc: u32, data: &[u8]) -> u32 {
        crc::crc32_le(crc, data)
    }
}

#[kunit_tests(rrxe_icrc_kernel_crc32)]
mod tests {
    use super::*;
    use crate::proto::crc32::TableCrc32;

    #[test]
    fn matches_table_crc32() {
        // The standard check value and the ICRC seed.
        assert_eq!(!KernelCrc32.crc32_le(!0, b"123456789"), 0xcbf4_3926);
        assert_eq!(KernelCrc32.crc32_le(!0, &[0xff; 8]), 0xdebb_20e3);
        let mut buf = [0u8; 300];
        for (i, b) in buf.iter_mut().enumerate() {
            // CAST: wraps on purpose to make a pattern.
            *b = (i * 7 + 3) as u8;
        }
        for n in [0, 1, 3, 4, 15, 16, 17, 64, 255, 300] {
            assert_eq!(
                KernelCrc32.crc32_le(0x1234_5678, &buf[..n]),
                TableCrc32.crc32_le(0x1234_5678, &buf[..n])
            );
        }
    }
}
