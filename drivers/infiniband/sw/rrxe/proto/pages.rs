// SPDX-License-Identifier: GPL-2.0

//! Address arithmetic of page-list memory regions (fast-register MRs).
//!
//! A fast-register region maps `[iova, iova + length)` onto a list of
//! pages of `1 << page_shift` bytes each, as `ib_sg_to_pages` builds it:
//! page 0 holds the page-aligned block that contains `iova`, page 1 the
//! next block, and so on. So the address `addr` lies in page
//! `(addr >> page_shift) - (iova >> page_shift)` at byte
//! `addr & (page_size - 1)` (the C driver's `rxe_mr_iova_to_index` and
//! `rxe_mr_iova_to_page_offset`). The pages need not be contiguous, so an
//! access is cut into one piece per page.

#![forbid(unsafe_code)]

/// Largest page shift a page list may use (`ib_map_mr_sg` takes the page
/// size as a 32-bit power of two).
pub const MAX_PAGE_SHIFT: u32 = 31;

/// One piece of an access to a page-list region, inside a single page.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PageChunk {
    /// Index of the page in the list.
    pub index: usize,
    /// Byte offset in the page.
    pub offset: usize,
    /// Byte offset of the piece in the access (its buffer).
    pub at: usize,
    /// Length of the piece in bytes.
    pub len: usize,
}

/// The pieces of an access of `len` bytes at `addr`, see [`page_chunks`].
#[derive(Clone, Debug)]
pub struct PageChunks {
    first_page: u64,
    page_shift: u32,
    addr: u64,
    at: usize,
    len: usize,
}

/// Cuts the access `[addr, addr + len)` of a region whose first byte is at
/// `iova` and whose pages are `1 << page_shift` bytes into per-page
/// pieces, in address order.
///
/// The caller has checked that the access lies inside the region (so
/// `addr >= iova` and nothing wraps) and that `page_shift` is at most
/// [`MAX_PAGE_SHIFT`]; the indices are not checked against the length of
/// the page list. A larger shift is clamped to [`MAX_PAGE_SHIFT`].
pub fn page_chunks(iova: u64, page_shift: u32, addr: u64, len: usize) -> PageChunks {
    let page_shift = page_shift.min(MAX_PAGE_SHIFT);
    PageChunks {
        first_page: iova >> page_shift,
        page_shift,
        addr,
        at: 0,
        len,
    }
}

impl Iterator for PageChunks {
    type Item = PageChunk;

    fn next(&mut self) -> Option<PageChunk> {
        if self.at >= self.len {
            return None;
        }
        let page_size = 1u64 << self.page_shift;
        let offset = self.addr & (page_size - 1);
        let index = (self.addr >> self.page_shift).checked_sub(self.first_page)?;
        let room = page_size - offset;
        let left = self.len - self.at;
        // CAST: `room` is at most 2^31, and `take` is at most `left`, a `usize`.
        let take = (room.min(left as u64)) as usize;
        let chunk = PageChunk {
            index: usize::try_from(index).ok()?,
            offset: usize::try_from(offset).ok()?,
            at: self.at,
            len: take,
        };
        self.at += take;
        // CAST: `take` fits u64.
        self.addr = self.addr.wrapping_add(take as u64);
        Some(chunk)
    }
}

/// Number of pages `[iova, iova + length)` spans with pages of
/// `1 << page_shift` bytes; `None` if the range wraps or `page_shift`
/// exceeds [`MAX_PAGE_SHIFT`]. An empty range spans no page.
pub fn pages_spanned(iova: u64, length: u64, page_shift: u32) -> Option<u64> {
    if page_shift > MAX_PAGE_SHIFT {
        return None;
    }
    if length == 0 {
        return Some(0);
    }
    let last = iova.checked_add(length - 1)?;
    Some((last >> page_shift) - (iova >> page_shift) + 1)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn chunks(iova: u64, shift: u32, addr: u64, len: usize) -> Vec<PageChunk> {
        page_chunks(iova, shift, addr, len).collect()
    }

    #[test]
    fn inside_one_page() {
        // 4 KiB pages; the region starts 0x100 into its first page.
        let c = chunks(0x1_0100, 12, 0x1_0180, 0x80);
        assert_eq!(
            c,
            [PageChunk {
                index: 0,
                offset: 0x180,
                at: 0,
                len: 0x80
            }]
        );
    }

    #[test]
    fn crosses_pages() {
        let c = chunks(0x1_0100, 12, 0x1_0f00, 0x1200);
        assert_eq!(
            c,
            [
                PageChunk {
                    index: 0,
                    offset: 0xf00,
                    at: 0,
                    len: 0x100
                },
                PageChunk {
                    index: 1,
                    offset: 0,
                    at: 0x100,
                    len: 0x1000
                },
                PageChunk {
                    index: 2,
                    offset: 0,
                    at: 0x1100,
                    len: 0x100
                },
            ]
        );
    }

    #[test]
    fn later_page_and_empty_access() {
        let c = chunks(0x2000, 12, 0x5004, 4);
        assert_eq!(
            c,
            [PageChunk {
                index: 3,
                offset: 4,
                at: 0,
                len: 4
            }]
        );
        assert!(chunks(0x2000, 12, 0x2000, 0).is_empty());
    }

    #[test]
    fn large_pages() {
        // 2 MiB pages, as with huge-page scatterlists.
        let c = chunks(0x40_0000, 21, 0x5f_fff0, 0x20);
        assert_eq!(c.len(), 2);
        assert_eq!((c[0].index, c[0].offset, c[0].len), (0, 0x1f_fff0, 0x10));
        assert_eq!(
            (c[1].index, c[1].offset, c[1].at, c[1].len),
            (1, 0, 0x10, 0x10)
        );
    }

    #[test]
    fn address_before_region_yields_nothing() {
        assert!(chunks(0x3000, 12, 0x1000, 8).is_empty());
    }

    #[test]
    fn iova_with_rewritten_upper_bits() {
        // xprtrdma rewrites the upper 32 bits of the iova after mapping:
        // the page arithmetic only depends on the offset from the iova.
        let iova = 0xdead_beef_0000_0100;
        let c = chunks(iova, 12, iova + 0x1000, 8);
        assert_eq!((c[0].index, c[0].offset), (1, 0x100));
    }

    #[test]
    fn spans() {
        assert_eq!(pages_spanned(0x1000, 0, 12), Some(0));
        assert_eq!(pages_spanned(0x1000, 0x1000, 12), Some(1));
        assert_eq!(pages_spanned(0x1001, 0x1000, 12), Some(2));
        assert_eq!(pages_spanned(0xfff, 2, 12), Some(2));
        assert_eq!(pages_spanned(u64::MAX, 2, 12), None);
        assert_eq!(pages_spanned(0, 1, 32), None);
    }

    #[test]
    fn chunks_cover_the_access_exactly() {
        for shift in [9u32, 12, 16] {
            for start in [0u64, 1, 511, 4095, 4097] {
                for len in [0usize, 1, 512, 4096, 9000] {
                    let iova = 0x10_0000 + 3;
                    let addr = iova + start;
                    let c = chunks(iova, shift, addr, len);
                    let total: usize = c.iter().map(|p| p.len).sum();
                    assert_eq!(total, len);
                    let mut at = 0;
                    for p in &c {
                        assert_eq!(p.at, at);
                        assert!(p.offset + p.len <= 1 << shift);
                        let a = addr + at as u64;
                        assert_eq!(p.index as u64, (a >> shift) - (iova >> shift));
                        at += p.len;
                    }
                }
            }
        }
    }
}
