// SPDX-License-Identifier: GPL-2.0

//! The arithmetic of an access to a registered memory region that needs no
//! kernel state: whether `[addr, addr + len)` lies inside the region, and
//! whether an atomic's word is aligned where it really is in memory. The
//! key, PD and permission checks need the region itself and stay with the
//! driver's `mem.rs`.

#![forbid(unsafe_code)]

/// Whether the access `[addr, addr + len)` lies inside the region
/// `[iova, iova + length)`, as the C driver's `mr_check_range`. An access
/// or a region whose end does not fit in 64 bits is refused rather than
/// wrapped onto low addresses. An empty access is inside when `addr` is in
/// `[iova, iova + length]`.
pub const fn range_within(iova: u64, length: u64, addr: u64, len: u64) -> bool {
    match (addr.checked_add(len), iova.checked_add(length)) {
        (Some(end), Some(region_end)) => addr >= iova && end <= region_end,
        _ => false,
    }
}

/// Whether the 8-byte word of an atomic or ATOMIC WRITE at `addr` is
/// aligned (IBTA Vol 1 §9.4.5 for atomics, Annex A19 for ATOMIC WRITE),
/// for a region that maps its iova onto memory at the same page offset
/// (DMA and fast-register regions).
pub const fn word_aligned(addr: u64) -> bool {
    // The low three bits clear.
    addr.trailing_zeros() >= 3
}

/// Whether the 8-byte word at `addr` of a user region whose first byte,
/// `iova`, lies at `umem_offset` in its first page is aligned both in the
/// iova and in memory: a region registered with `ibv_reg_mr_iova` may put
/// an aligned iova on an unaligned address, and an atomic on that word
/// would not be atomic (the C driver checks the address in memory and
/// answers an Invalid Request). `addr` is inside the region; only the low
/// bits matter, so the arithmetic wraps.
pub const fn user_word_aligned(iova: u64, umem_offset: u64, addr: u64) -> bool {
    word_aligned(addr) && word_aligned(umem_offset.wrapping_add(addr.wrapping_sub(iova)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges() {
        // A region of 8 KiB at 0x1000.
        let inside = |addr: u64, len: u64| range_within(0x1000, 0x2000, addr, len);
        // At its start and its end.
        assert!(inside(0x1000, 0x2000));
        assert!(inside(0x1000, 1));
        assert!(inside(0x2fff, 1));
        assert!(!inside(0x0fff, 1));
        assert!(!inside(0x0fff, 0x2001));
        assert!(!inside(0x1000, 0x2001));
        assert!(!inside(0x3000, 1));
        assert!(!inside(0x2ff8, 9));
        // Length 0: inside up to one past the end.
        assert!(inside(0x1000, 0));
        assert!(inside(0x3000, 0));
        assert!(!inside(0x3001, 0));
        assert!(!inside(0x0fff, 0));
        // addr + len past 2^64: refused, not wrapped to a small end (a
        // wrapping sum gives end 4, which is below the region's end).
        let top = u64::MAX - 0x1fff;
        assert!(range_within(top, 0x1000, top, 0x1000));
        assert!(!range_within(top, 0x1000, u64::MAX - 3, 8));
        assert!(!range_within(top, 0x1000, top, u64::MAX));
        assert!(!inside(0x1000, u64::MAX));
        // A region whose own end passes 2^64 takes nothing.
        assert!(!range_within(u64::MAX - 0xfff, 0x1000, u64::MAX - 0xfff, 8));
        // The C9-94 lengths against a 4 GiB region: the range decides.
        let big = |addr: u64, len: u32| range_within(0, 1 << 32, addr, u64::from(len));
        assert!(big(0, 1 << 31));
        assert!(big(1 << 31, 1 << 31));
        assert!(!big((1 << 31) + 1, 1 << 31));
        assert!(big(0, (1 << 31) + 1));
        assert!(!big(1 << 31, (1 << 31) + 1));
    }

    #[test]
    fn alignment() {
        assert!(word_aligned(0));
        assert!(word_aligned(0x1008));
        assert!(!word_aligned(0x1004));
        assert!(!word_aligned(0x1001));
        // The iova is aligned, but the buffer starts 4 bytes into its page:
        // the word is at page offset 4 + 8. Before 15d6b60 only the iova
        // was checked, and this returned true.
        assert!(!user_word_aligned(0x1_0000, 4, 0x1_0008));
        assert!(!user_word_aligned(0x1_0000, 4, 0x1_0000));
        assert!(user_word_aligned(0x1_0004, 4, 0x1_0008));
        assert!(user_word_aligned(0x1_0000, 0x800, 0x1_0010));
        // The reverse: the buffer starts a page but the iova is 4 bytes
        // off. The word at an aligned iova is 4 bytes off in memory (true
        // before 15d6b60), and the word aligned in memory has an unaligned
        // iova, which the requester refuses (§9.4.5) and so does rrxe.
        assert!(!user_word_aligned(0x1_0004, 0, 0x1_0008));
        assert!(!user_word_aligned(0x1_0004, 0, 0x1_0004));
        // ibv_reg_mr: iova and address agree, so their alignments do.
        assert!(!user_word_aligned(0x1_0003, 3, 0x1_0003));
        assert!(user_word_aligned(0x1_0003, 3, 0x1_0008));
        // The iova need not lie near the address: a zero-based MR.
        assert!(user_word_aligned(0, 0x10, 0x40));
        assert!(!user_word_aligned(0, 0x14, 0x40));
        // Wrapping arithmetic keeps the low bits of a huge iova.
        assert!(user_word_aligned(u64::MAX - 7, 0, u64::MAX - 7));
        assert!(!user_word_aligned(u64::MAX - 7, 4, u64::MAX - 7));
    }
}
