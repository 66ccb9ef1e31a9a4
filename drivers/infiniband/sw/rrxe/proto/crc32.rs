// SPDX-License-Identifier: GPL-2.0

//! The CRC-32 behind the ICRC, as a pluggable primitive.
//!
//! The ICRC uses the CRC-32 of IEEE 802.3 (polynomial `0x04c11db7`, bit
//! reflected, so `0xedb88320` in the table form). The protocol core only
//! needs the running update step; the kernel module implements [`Crc32`]
//! with the kernel's `crc32_le()` (which may use the CPU's carry-less
//! multiply), while host builds and tests use [`TableCrc32`].

#![forbid(unsafe_code)]

/// A CRC-32 update function.
///
/// Implementations must behave exactly like Linux's `crc32_le(crc, p, len)`:
/// the reflected IEEE 802.3 polynomial `0xedb88320`, continuing from the
/// running value `crc`, with no inversion before or after. Seeding with
/// `!0` and inverting the result gives the familiar CRC-32 of zlib and
/// Ethernet: `!crc32_le(!0, b"123456789") == 0xcbf4_3926`.
pub trait Crc32 {
    /// Continues the CRC `crc` over `data` and returns the new running value.
    fn crc32_le(&self, crc: u32, data: &[u8]) -> u32;
}

/// Reflected IEEE 802.3 CRC-32 polynomial.
pub const CRC32_POLY_LE: u32 = 0xedb8_8320;

/// A portable, byte-at-a-time table implementation of [`Crc32`].
#[derive(Clone, Copy, Debug, Default)]
pub struct TableCrc32;

#[expect(
    clippy::indexing_slicing,
    clippy::cast_possible_truncation,
    reason = "evaluated at compile time, with n < 256"
)]
const fn make_table() -> [u32; 256] {
    let mut table = [0u32; 256];
    let mut n = 0;
    while n < 256 {
        let mut c = n as u32;
        let mut k = 0;
        while k < 8 {
            c = if c & 1 != 0 {
                CRC32_POLY_LE ^ (c >> 1)
            } else {
                c >> 1
            };
            k += 1;
        }
        table[n] = c;
        n += 1;
    }
    table
}

static TABLE: [u32; 256] = make_table();

impl Crc32 for TableCrc32 {
    fn crc32_le(&self, mut crc: u32, data: &[u8]) -> u32 {
        for &byte in data {
            let [low, ..] = crc.to_le_bytes();
            // A u8 always indexes a 256-entry table in bounds.
            #[expect(
                clippy::indexing_slicing,
                reason = "index is a u8, table has 256 entries"
            )]
            let t = TABLE[usize::from(low ^ byte)];
            crc = t ^ (crc >> 8);
        }
        crc
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use proptest::prelude::*;

    /// Bit-at-a-time CRC-32, written straight from the definition, as an
    /// independent reference for [`TableCrc32`].
    pub(crate) struct BitwiseCrc32;

    impl Crc32 for BitwiseCrc32 {
        fn crc32_le(&self, mut crc: u32, data: &[u8]) -> u32 {
            for &byte in data {
                crc ^= u32::from(byte);
                for _ in 0..8 {
                    let lsb = crc & 1;
                    crc >>= 1;
                    if lsb == 1 {
                        crc ^= CRC32_POLY_LE;
                    }
                }
            }
            crc
        }
    }

    #[test]
    fn check_value() {
        // The standard CRC-32 check value.
        assert_eq!(!TableCrc32.crc32_le(!0, b"123456789"), 0xcbf4_3926);
        assert_eq!(!BitwiseCrc32.crc32_le(!0, b"123456789"), 0xcbf4_3926);
        // The ICRC seed: eight 0xff bytes standing in for the masked LRH.
        assert_eq!(TableCrc32.crc32_le(!0, &[0xff; 8]), 0xdebb_20e3);
        assert_eq!(TableCrc32.crc32_le(0x1234_5678, &[]), 0x1234_5678);
    }

    proptest! {
        #[test]
        fn table_matches_bitwise(crc in any::<u32>(), data in proptest::collection::vec(any::<u8>(), 0..256)) {
            prop_assert_eq!(TableCrc32.crc32_le(crc, &data), BitwiseCrc32.crc32_le(crc, &data));
        }

        #[test]
        fn chunking_is_transparent(data in proptest::collection::vec(any::<u8>(), 0..256), cut in any::<prop::sample::Index>()) {
            let at = cut.index(data.len() + 1);
            let (a, b) = data.split_at(at);
            let whole = TableCrc32.crc32_le(!0, &data);
            prop_assert_eq!(TableCrc32.crc32_le(TableCrc32.crc32_le(!0, a), b), whole);
        }
    }
}
