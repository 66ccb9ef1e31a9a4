// SPDX-License-Identifier: GPL-2.0

//! The CRC library (`lib/crc/`).
//!
//! C header: [`include/linux/crc32.h`](srctree/include/linux/crc32.h)

use crate::bindings;

/// Continues the least-significant-bit-first IEEE 802.3 CRC-32 `crc` over
/// `data` (`crc32_le`): reflected polynomial `0xedb88320`, no inversion
/// before or after. The architecture's accelerated version is used when
/// the CPU has one.
pub fn crc32_le(crc: u32, data: &[u8]) -> u32 {
    // SAFETY: `data` is valid for reads of `data.len()` bytes.
    unsafe { bindings::crc32_le(crc, data.as_ptr().cast(), data.len()) }
}
