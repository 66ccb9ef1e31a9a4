// SPDX-License-Identifier: GPL-2.0

#![forbid(unsafe_code)]

//! Per-device index pools: QPNs, SRQNs and the index part of MR keys.

use crate::proto::index::IndexRange;
use kernel::{
    prelude::*,
    sync::{
        new_spinlock,
        SpinLock, //
    }, //
};

struct Inner {
    range: IndexRange,
    bits: KVVec<u64>,
    /// Rolling key byte for memory keys.
    key: u8,
}

/// A pool of indices `min..=max`, handed out round-robin.
#[pin_data]
pub(crate) struct IndexPool {
    #[pin]
    inner: SpinLock<Inner>,
}

impl IndexPool {
    /// A pool of `min..=max`.
    pub(crate) fn new(min: u32, max: u32) -> impl PinInit<Self, Error> {
        let range = IndexRange::new(min, max);
        let words = range.words();
        try_pin_init!(Self {
            inner <- new_spinlock!(Inner {
                range,
                bits: {
                    let mut v = KVVec::with_capacity(words, GFP_KERNEL)?;
                    v.resize(words, 0, GFP_KERNEL)?;
                    v
                },
                key: 0,
            }, "IndexPool::inner"),
        })
    }

    /// Allocates an index; `ENOMEM` when the pool is exhausted (as the C
    /// driver's pools report).
    pub(crate) fn alloc(&self) -> Result<u32> {
        let mut g = self.inner.lock();
        let Inner { range, bits, .. } = &mut *g;
        range.alloc(bits).ok_or(ENOMEM)
    }

    /// Allocates an index and a fresh key byte.
    pub(crate) fn alloc_key(&self) -> Result<(u32, u8)> {
        let mut g = self.inner.lock();
        let Inner { range, bits, key } = &mut *g;
        let index = range.alloc(bits).ok_or(ENOMEM)?;
        *key = key.wrapping_add(1);
        Ok((index, *key))
    }

    /// Frees `index`.
    pub(crate) fn free(&self, index: u32) {
        let mut g = self.inner.lock();
        let Inner { range, bits, .. } = &mut *g;
        range.free(bits, index);
    }
}
