// SPDX-License-Identifier: GPL-2.0

//! Object indices (QPN, SRQN, the index part of lkey/rkey) allocated
//! round-robin from a range, as the C driver's pools do with
//! `xa_alloc_cyclic`, so that a freed index is not reused at once.
//!
//! The bitmap is owned by the caller (one bit per index of the range).

#![forbid(unsafe_code)]

/// Cyclic allocator over `min..=max` backed by a caller-owned bitmap.
#[derive(Debug)]
pub struct IndexRange {
    min: u32,
    max: u32,
    next: u32,
}

impl IndexRange {
    /// An allocator for `min..=max`; `min <= max`.
    pub const fn new(min: u32, max: u32) -> Self {
        Self {
            min,
            max,
            next: min,
        }
    }

    /// Number of 64-bit words the bitmap needs.
    pub const fn words(&self) -> usize {
        ((self.max - self.min) as usize + 1).div_ceil(64)
    }

    fn test(bits: &[u64], i: u32) -> bool {
        bits.get((i / 64) as usize)
            .is_some_and(|w| w & (1 << (i % 64)) != 0)
    }

    fn set(bits: &mut [u64], i: u32, v: bool) {
        if let Some(w) = bits.get_mut((i / 64) as usize) {
            if v {
                *w |= 1 << (i % 64);
            } else {
                *w &= !(1 << (i % 64));
            }
        }
    }

    /// Allocates the next free index at or after the last one handed out.
    pub fn alloc(&mut self, bits: &mut [u64]) -> Option<u32> {
        let span = self.max - self.min + 1;
        let start = self.next - self.min;
        for k in 0..span {
            let off = (start + k) % span;
            if !Self::test(bits, off) {
                Self::set(bits, off, true);
                self.next = self.min + (off + 1) % span;
                return Some(self.min + off);
            }
        }
        None
    }

    /// Frees `index`; out-of-range or free indices are ignored.
    pub fn free(&mut self, bits: &mut [u64], index: u32) {
        if (self.min..=self.max).contains(&index) {
            Self::set(bits, index - self.min, false);
        }
    }
}

/// The 32-bit key of a memory region or window: the index in the upper 24
/// bits, a rolling 8-bit key in the low bits.
pub const fn make_key(index: u32, key: u8) -> u32 {
    (index << 8) | key as u32
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cyclic_and_bounded() {
        let mut r = IndexRange::new(16, 19);
        let mut bits = vec![0u64; r.words()];
        assert_eq!(r.alloc(&mut bits), Some(16));
        assert_eq!(r.alloc(&mut bits), Some(17));
        r.free(&mut bits, 16);
        // Not reused at once.
        assert_eq!(r.alloc(&mut bits), Some(18));
        assert_eq!(r.alloc(&mut bits), Some(19));
        assert_eq!(r.alloc(&mut bits), Some(16));
        assert_eq!(r.alloc(&mut bits), None);
        r.free(&mut bits, 100);
        r.free(&mut bits, 18);
        assert_eq!(r.alloc(&mut bits), Some(18));
    }

    #[test]
    fn keys() {
        assert_eq!(make_key(0x24, 0x09), 0x2409);
        assert_eq!(IndexRange::new(1, (1 << 19) - 1).words(), 8192);
    }
}
