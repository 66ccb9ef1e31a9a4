// SPDX-License-Identifier: GPL-2.0

#![forbid(unsafe_code)]

//! Memory regions: DMA MRs for kernel consumers and user MRs pinned with
//! `ib_umem` and translated through a page table built at registration.

use crate::{
    proto::index::make_key,
    rdma::{
        eopnotsupp,
        mr::{
            rereg,
            Mr,
            MrKeys,
            ReregArgs,
            UserMrArgs, //
        },
        pd::Pd,
        udata::Udata,
        umem::Umem, //
    },
};
use kernel::{
    prelude::*,
    sync::atomic::{
        Atomic,
        Relaxed, //
    },
};

use super::verbs::Rrxe;

/// `IB_ACCESS_*` bits (include/rdma/ib_verbs.h).
pub(crate) mod access {
    /// `IB_ACCESS_LOCAL_WRITE`.
    pub(crate) const LOCAL_WRITE: i32 = 1;
    /// `IB_ACCESS_REMOTE_WRITE`.
    pub(crate) const REMOTE_WRITE: i32 = 1 << 1;
    /// `IB_ACCESS_REMOTE_READ`.
    pub(crate) const REMOTE_READ: i32 = 1 << 2;
    /// `IB_ACCESS_REMOTE_ATOMIC`.
    pub(crate) const REMOTE_ATOMIC: i32 = 1 << 3;
    /// `IB_ACCESS_MW_BIND`.
    pub(crate) const MW_BIND: i32 = 1 << 4;
    /// `IB_ACCESS_ON_DEMAND`.
    pub(crate) const ON_DEMAND: i32 = 1 << 6;
    /// `IB_ACCESS_FLUSH_GLOBAL`.
    pub(crate) const FLUSH_GLOBAL: i32 = 1 << 8;
    /// `IB_ACCESS_FLUSH_PERSISTENT`.
    pub(crate) const FLUSH_PERSISTENT: i32 = 1 << 9;
    /// `IB_ACCESS_RELAXED_ORDERING` (the optional range starts here).
    pub(crate) const OPTIONAL: i32 = !((1 << 20) - 1);
    /// What rxe accepts on MRs (`RXE_ACCESS_SUPPORTED_MR`). ODP is not
    /// implemented, so `ON_DEMAND` is refused with `EOPNOTSUPP` separately.
    pub(crate) const SUPPORTED_MR: i32 = LOCAL_WRITE
        | REMOTE_WRITE
        | REMOTE_READ
        | REMOTE_ATOMIC
        | MW_BIND
        | ON_DEMAND
        | FLUSH_GLOBAL
        | FLUSH_PERSISTENT
        | OPTIONAL;
}

/// What a memory region maps.
pub(crate) enum Mapping {
    /// All of kernel memory, iova = kernel virtual address.
    Dma,
    /// Pinned user pages, translated by the requester and responder.
    User(Umem),
}

/// State of a memory region.
pub(crate) struct RrxeMr {
    /// Index part of the keys.
    pub(crate) index: u32,
    /// `IB_ACCESS_*` flags; `rereg_user_mr` may change them while the
    /// data path reads them.
    access: Atomic<i32>,
    /// What the region maps.
    pub(crate) mapping: Mapping,
}

fn keys(index: u32, key: u8, iova: u64, length: u64) -> MrKeys {
    let k = make_key(index, key);
    MrKeys {
        lkey: k,
        rkey: k,
        iova,
        length,
    }
}

impl RrxeMr {
    /// A DMA MR.
    pub(crate) fn dma(pd: &Pd<Rrxe>, access: i32) -> Result<(impl PinInit<Self, Error>, MrKeys)> {
        let (index, key) = pd.device().mr_pool.alloc_key()?;
        let init = try_init!(Self {
            index,
            access: Atomic::new(access),
            mapping: Mapping::Dma,
        });
        Ok((init, keys(index, key, 0, 0)))
    }

    /// A user MR.
    pub(crate) fn user(
        pd: &Pd<Rrxe>,
        args: &UserMrArgs,
        _udata: Option<&Udata>,
    ) -> Result<(impl PinInit<Self, Error>, MrKeys)> {
        if args.access & !access::SUPPORTED_MR != 0 {
            return Err(eopnotsupp());
        }
        if args.access & access::ON_DEMAND != 0 {
            return Err(eopnotsupp());
        }
        let umem = pd.umem_get(args.start, args.length, args.access)?;
        let (index, key) = pd.device().mr_pool.alloc_key()?;
        let access = args.access;
        let init = try_init!(Self {
            index,
            access: Atomic::new(access),
            mapping: Mapping::User(umem),
        });
        Ok((init, keys(index, key, args.iova, args.length)))
    }

    /// The region's `IB_ACCESS_*` flags.
    pub(crate) fn access(&self) -> i32 {
        self.access.load(Relaxed)
    }

    /// `rereg_user_mr`, as the C driver does it: only a new PD or new access
    /// flags, never a new translation (`EOPNOTSUPP`, which test suites read
    /// as "skip"). The RDMA core moves the region to the new PD itself once
    /// this succeeds; nothing of ours refers to the PD.
    pub(crate) fn rereg(mr: &Mr<Rrxe>, args: &ReregArgs) -> Result {
        if args.flags & !(rereg::PD | rereg::ACCESS) != 0 {
            return Err(eopnotsupp());
        }
        if args.flags & rereg::ACCESS == 0 {
            return Ok(());
        }
        // Writable access needs pages pinned for writing (`EACCES`).
        if let Mapping::User(umem) = &mr.mapping {
            umem.check_rereg(args.flags, args.access)?;
        }
        if args.access & !access::SUPPORTED_MR != 0 || args.access & access::ON_DEMAND != 0 {
            return Err(eopnotsupp());
        }
        mr.access.store(args.access, Relaxed);
        Ok(())
    }

    /// Deregistration: frees the index (the umem is released when the state
    /// is dropped).
    pub(crate) fn dereg(mr: &Mr<Rrxe>) -> Result {
        mr.device().mr_pool.free(mr.index);
        Ok(())
    }
}
