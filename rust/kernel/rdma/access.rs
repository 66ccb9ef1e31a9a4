// SPDX-License-Identifier: GPL-2.0

//! Access rights of memory regions, memory windows and QPs
//! (`enum ib_access_flags`).
//!
//! C header: [`include/rdma/ib_verbs.h`](srctree/include/rdma/ib_verbs.h)

use crate::bindings;

kernel::impl_flags!(
    /// `IB_ACCESS_*` flags: what a memory region or window lets the local
    /// QP and remote peers do with its memory, or what remote operations a
    /// QP's responder accepts (`qp_access_flags`).
    ///
    /// A value taken from C keeps every bit it had, the ones no
    /// [`AccessFlag`] names included, so that a driver can refuse them
    /// (test with [`AccessFlags::contains_all`] on the set it supports,
    /// not with `!`, which drops unnamed bits).
    #[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
    pub struct AccessFlags(u32);

    /// One access right.
    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    pub enum AccessFlag {
        /// `IB_ACCESS_LOCAL_WRITE`.
        LocalWrite = bindings::ib_access_flags_IB_ACCESS_LOCAL_WRITE,
        /// `IB_ACCESS_REMOTE_WRITE`.
        RemoteWrite = bindings::ib_access_flags_IB_ACCESS_REMOTE_WRITE,
        /// `IB_ACCESS_REMOTE_READ`.
        RemoteRead = bindings::ib_access_flags_IB_ACCESS_REMOTE_READ,
        /// `IB_ACCESS_REMOTE_ATOMIC`.
        RemoteAtomic = bindings::ib_access_flags_IB_ACCESS_REMOTE_ATOMIC,
        /// `IB_ACCESS_MW_BIND`.
        MwBind = bindings::ib_access_flags_IB_ACCESS_MW_BIND,
        /// `IB_ZERO_BASED`: a window addressed from 0.
        ZeroBased = bindings::ib_access_flags_IB_ZERO_BASED,
        /// `IB_ACCESS_ON_DEMAND`.
        OnDemand = bindings::ib_access_flags_IB_ACCESS_ON_DEMAND,
        /// `IB_ACCESS_HUGETLB`.
        Hugetlb = bindings::ib_access_flags_IB_ACCESS_HUGETLB,
        /// `IB_ACCESS_RELAXED_ORDERING`, the first of the optional range.
        RelaxedOrdering = bindings::ib_access_flags_IB_ACCESS_RELAXED_ORDERING,
        /// `IB_ACCESS_FLUSH_GLOBAL`.
        FlushGlobal = bindings::ib_access_flags_IB_ACCESS_FLUSH_GLOBAL,
        /// `IB_ACCESS_FLUSH_PERSISTENT`.
        FlushPersistent = bindings::ib_access_flags_IB_ACCESS_FLUSH_PERSISTENT,
    }
);

impl AccessFlags {
    /// `IB_ACCESS_OPTIONAL`: the range of flags a device may ignore (from
    /// `IB_ACCESS_RELAXED_ORDERING` up to `IB_UVERBS_ACCESS_OPTIONAL_LAST`).
    pub const OPTIONAL: Self = Self(bindings::ib_access_flags_IB_ACCESS_OPTIONAL);

    /// The flags of the C value `v`, unknown bits included.
    pub const fn from_raw(v: u32) -> Self {
        Self(v)
    }

    /// The C value.
    pub const fn raw(self) -> u32 {
        self.0
    }

    /// The set of `flags`, for constants (the operators are not `const`).
    pub const fn of(flags: &[AccessFlag]) -> Self {
        let mut v = 0;
        let mut i = 0;
        while i < flags.len() {
            v |= flags[i] as u32;
            i += 1;
        }
        Self(v)
    }

    /// The flags of `self` and of `other`, for constants.
    pub const fn union(self, other: Self) -> Self {
        Self(self.0 | other.0)
    }
}
