// SPDX-License-Identifier: GPL-2.0

#![forbid(unsafe_code)]

//! Memory regions: DMA MRs for kernel consumers, user MRs pinned with
//! `ib_umem` and translated through a page table built at registration,
//! and fast-register MRs of kernel consumers, whose pages the consumer
//! maps with `ib_map_mr_sg` and which its `IB_WR_REG_MR`,
//! `IB_WR_LOCAL_INV` and received SEND with invalidate register and
//! invalidate at run time (IBTA Vol 1 §10.6.3.6, §10.6.5).

use crate::{
    proto::{
        index::make_key,
        wqe::RegMr, //
    },
    rdma::{
        access::{
            AccessFlag,
            AccessFlags, //
        },
        device::Device,
        eopnotsupp,
        lock::SpinLockIrq,
        mr::{
            mr_type,
            rereg,
            Mr,
            MrKeys,
            PageList,
            ReregArgs,
            SgList,
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

use super::{
    odp::OdpRegion,
    param,
    verbs::Rrxe, //
};

/// Remote access of every kind (`RXE_ACCESS_REMOTE`), which fast-register
/// regions start with.
pub(crate) const ACCESS_REMOTE: AccessFlags = AccessFlags::of(&[
    AccessFlag::RemoteRead,
    AccessFlag::RemoteWrite,
    AccessFlag::RemoteAtomic,
]);

/// What rxe accepts on MRs (`RXE_ACCESS_SUPPORTED_MR`), which is also what
/// it accepts on QPs and windows.
pub(crate) const ACCESS_SUPPORTED_MR: AccessFlags = ACCESS_REMOTE
    .union(AccessFlags::of(&[
        AccessFlag::LocalWrite,
        AccessFlag::MwBind,
        AccessFlag::OnDemand,
        AccessFlag::FlushGlobal,
        AccessFlag::FlushPersistent,
    ]))
    .union(AccessFlags::OPTIONAL);

/// What a memory region maps.
pub(crate) enum Mapping {
    /// All of kernel memory, iova = kernel virtual address.
    Dma,
    /// Pinned user pages, translated by the requester and responder.
    User(Umem),
    /// User memory mapped on demand ([`super::odp`]).
    Odp(OdpRegion),
    /// The pages a kernel consumer mapped, while it keeps them registered.
    Fast(Pin<KBox<SpinLockIrq<FastState>>>),
}

/// The registration of a fast-register region. `IB_WR_REG_MR`,
/// `IB_WR_LOCAL_INV` and SEND with invalidate change it at run time (from
/// any QP of the PD, on any CPU) while responders read it from softirq, so
/// it is under the region's lock, and data is copied with the lock held:
/// once an invalidation completes, the consumer may release the pages.
pub(crate) struct FastState {
    /// Registered (the C driver's VALID state); otherwise FREE: no access,
    /// and only a REG_MR makes it valid again.
    pub(crate) valid: bool,
    /// The current lkey and rkey (one value): the index part never changes,
    /// the consumer chooses the key byte with each REG_MR.
    pub(crate) key: u32,
    /// Access flags of the registration.
    pub(crate) access: AccessFlags,
    /// I/O virtual address of the first byte.
    pub(crate) iova: u64,
    /// Length in bytes.
    pub(crate) length: u64,
    /// The pages of the last `ib_map_mr_sg`.
    pub(crate) pages: PageList,
}

/// Why a local memory operation (REG_MR, LOCAL_INV, SEND with invalidate)
/// was refused: no such fast-register region in the QP's PD, wrong key, or
/// a REG_MR of a region already registered.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct LocalOpError;

/// State of a memory region.
pub(crate) struct RrxeMr {
    /// Index part of the keys.
    pub(crate) index: u32,
    /// Access flags ([`AccessFlags::raw`]); `rereg_user_mr` may change
    /// them while the data path reads them.
    access: Atomic<u32>,
    /// What the region maps.
    pub(crate) mapping: Mapping,
    /// Memory windows bound to the region, and [`MR_DEREGISTERED`] once its
    /// deregistration began: no window binds to it after that, and it is
    /// not deregistered while one is bound (`EINVAL`, as rxe's `num_mw`).
    mw_binds: Atomic<u32>,
}

/// [`RrxeMr::mw_binds`] bit: the region is being deregistered.
const MR_DEREGISTERED: u32 = 1 << 31;

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
    pub(crate) fn dma(
        pd: &Pd<Rrxe>,
        access: AccessFlags,
    ) -> Result<(impl PinInit<Self, Error>, MrKeys)> {
        let (index, key) = pd.device().mr_pool.alloc_key()?;
        let init = try_init!(Self {
            index,
            access: Atomic::new(access.raw()),
            mapping: Mapping::Dma,
            mw_binds: Atomic::new(0),
        });
        Ok((init, keys(index, key, 0, 0)))
    }

    /// A user MR.
    pub(crate) fn user(
        pd: &Pd<Rrxe>,
        args: &UserMrArgs,
        _udata: Option<&Udata>,
    ) -> Result<(impl PinInit<Self, Error>, MrKeys)> {
        if !ACCESS_SUPPORTED_MR.contains_all(args.access) {
            return Err(eopnotsupp());
        }
        let mapping = if args.access.contains(AccessFlag::OnDemand) {
            // Implicit ODP (the whole address space) is not offered
            // (`odp_caps`), as in the C driver.
            if args.start == 0 && args.length == u64::MAX {
                return Err(EINVAL);
            }
            // Persistence needs persistent memory, which is never mapped
            // on demand.
            if args.access.contains(AccessFlag::FlushPersistent) {
                return Err(EINVAL);
            }
            Mapping::Odp(OdpRegion::new(pd.umem_odp_get(
                args.start,
                args.length,
                args.access,
            )?))
        } else {
            let umem = pd.umem_get(args.start, args.length, args.access)?;
            // As the C driver: persistence is promised only for persistent
            // memory (a FLUSH to it writes the cache lines back).
            if args.access.contains(AccessFlag::FlushPersistent) && !umem.is_pmem() {
                return Err(EINVAL);
            }
            Mapping::User(umem)
        };
        let (index, key) = pd.device().mr_pool.alloc_key()?;
        let access = args.access.raw();
        let init = try_init!(Self {
            index,
            access: Atomic::new(access),
            mapping,
            mw_binds: Atomic::new(0),
        });
        Ok((init, keys(index, key, args.iova, args.length)))
    }

    /// A fast-register MR (`rxe_alloc_mr`): kernel consumers only, which
    /// the RDMA core guarantees (`ib_alloc_mr` has no user-space verb). It
    /// starts invalid (FREE) with room for `max_num_sg` pages; `EINVAL` for
    /// another type or more pages than the device advertises.
    pub(crate) fn fast(
        pd: &Pd<Rrxe>,
        ty: u32,
        max_num_sg: u32,
    ) -> Result<(impl PinInit<Self, Error>, MrKeys)> {
        if ty != mr_type::MEM_REG || max_num_sg > param::MAX_FMR_PAGE_LIST_LEN {
            return Err(EINVAL);
        }
        let pages = PageList::new(max_num_sg)?;
        let pool = &pd.device().mr_pool;
        let (index, key) = pool.alloc_key()?;
        let state = FastState {
            valid: false,
            key: make_key(index, key),
            access: ACCESS_REMOTE,
            iova: 0,
            length: 0,
            pages,
        };
        let fast = match KBox::pin_init(
            crate::rdma::lock::new_spinlock_irq!(state, "RrxeMr::fast"),
            GFP_KERNEL,
        ) {
            Ok(b) => b,
            Err(e) => {
                pool.free(index);
                return Err(e);
            }
        };
        let init = try_init!(Self {
            index,
            access: Atomic::new(ACCESS_REMOTE.raw()),
            mapping: Mapping::Fast(fast),
            mw_binds: Atomic::new(0),
        });
        Ok((init, keys(index, key, 0, 0)))
    }

    /// `ib_map_mr_sg` of a fast-register region (`rxe_map_mr_sg`): replaces
    /// its page list with the consumer's scatterlist. The registration is
    /// not changed: a REG_MR makes the new mapping valid. `EINVAL` for
    /// other regions.
    pub(crate) fn map_sg(mr: &Mr<Rrxe>, sg: SgList<'_, Rrxe>) -> Result<u32> {
        let Mapping::Fast(fast) = &mr.mapping else {
            return Err(EINVAL);
        };
        let mut st = fast.lock();
        sg.map_to(&mut st.pages)
    }

    /// The region of a fast-register key index in the PD `pd_id`.
    fn fast_region(
        dev: &Device<Rrxe>,
        pd_id: usize,
        index: u32,
    ) -> Result<kernel::sync::aref::ARef<Mr<Rrxe>>, LocalOpError> {
        let mr = dev.lookup_mr(index).ok_or(LocalOpError)?;
        if !matches!(mr.mapping, Mapping::Fast(_)) || mr.pd_id() != pd_id {
            return Err(LocalOpError);
        }
        Ok(mr)
    }

    /// Executes `IB_WR_REG_MR` for a QP of PD `pd_id` (`rxe_reg_fast_mr`):
    /// the region must be a fast-register region of the same PD, not
    /// registered, and the key must keep its index. It then becomes valid
    /// with the key, access flags and range of the work request.
    pub(crate) fn register(
        dev: &Device<Rrxe>,
        pd_id: usize,
        reg: &RegMr,
    ) -> Result<(), LocalOpError> {
        let mr = Self::fast_region(dev, pd_id, reg.mr_index)?;
        let Mapping::Fast(fast) = &mr.mapping else {
            return Err(LocalOpError);
        };
        if reg.key >> 8 != mr.index {
            return Err(LocalOpError);
        }
        let mut st = fast.lock();
        if st.valid {
            return Err(LocalOpError);
        }
        st.key = reg.key;
        st.access = AccessFlags::from_raw(reg.access);
        st.iova = reg.iova;
        st.length = reg.length;
        st.valid = true;
        Ok(())
    }

    /// Invalidates the fast-register region of `key` for a QP of PD `pd_id`
    /// (`rxe_invalidate_mr`: `IB_WR_LOCAL_INV`, or a received SEND with
    /// invalidate): the key must be the region's current one. Invalidating
    /// a region that is not registered succeeds, as in the C driver.
    pub(crate) fn invalidate(
        dev: &Device<Rrxe>,
        pd_id: usize,
        key: u32,
    ) -> Result<(), LocalOpError> {
        let mr = Self::fast_region(dev, pd_id, key >> 8)?;
        let Mapping::Fast(fast) = &mr.mapping else {
            return Err(LocalOpError);
        };
        let mut st = fast.lock();
        if st.key != key {
            return Err(LocalOpError);
        }
        st.valid = false;
        Ok(())
    }

    /// The region's access flags.
    pub(crate) fn access(&self) -> AccessFlags {
        AccessFlags::from_raw(self.access.load(Relaxed))
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
        // On-demand paging is chosen at registration: pinned memory cannot
        // become on-demand here (an on-demand region stays one, with or
        // without the flag, as in the C driver).
        let odp = matches!(mr.mapping, Mapping::Odp(_));
        if !ACCESS_SUPPORTED_MR.contains_all(args.access)
            || (args.access.contains(AccessFlag::OnDemand) && !odp)
        {
            return Err(eopnotsupp());
        }
        if let Mapping::Odp(umem) = &mr.mapping {
            let write = AccessFlag::LocalWrite | AccessFlag::RemoteWrite | AccessFlag::RemoteAtomic;
            if args.access.contains_any(write) && !umem.is_writable() {
                return Err(EACCES);
            }
            if args.access.contains(AccessFlag::FlushPersistent) {
                return Err(EINVAL);
            }
        }
        // As at registration (the C driver does not check again here: a
        // rereg could promise persistence of ordinary memory).
        if let Mapping::User(umem) = &mr.mapping {
            if args.access.contains(AccessFlag::FlushPersistent) && !umem.is_pmem() {
                return Err(EINVAL);
            }
        }
        mr.access.store(args.access.raw(), Relaxed);
        Ok(())
    }

    /// The start of a deregistration, while the region is still usable:
    /// refused while memory windows are bound to it (`EINVAL`, as rxe),
    /// else no window binds to it any more.
    pub(crate) fn begin_dereg(mr: &Mr<Rrxe>) -> Result {
        match mr.mw_binds.cmpxchg(0, MR_DEREGISTERED, Relaxed) {
            Ok(_) => Ok(()),
            Err(_) => Err(EINVAL),
        }
    }

    /// Deregistration: frees the index (the umem is released when the
    /// state is dropped).
    pub(crate) fn dereg(mr: &Mr<Rrxe>) -> Result {
        mr.device().mr_pool.free(mr.index);
        Ok(())
    }

    /// Counts a memory window bound to the region; `false` once its
    /// deregistration began.
    pub(crate) fn bind_mw(&self) -> bool {
        let mut cur = self.mw_binds.load(Relaxed);
        loop {
            if cur & MR_DEREGISTERED != 0 {
                return false;
            }
            match self.mw_binds.cmpxchg(cur, cur + 1, Relaxed) {
                Ok(_) => return true,
                Err(now) => cur = now,
            }
        }
    }

    /// Uncounts a window counted by [`RrxeMr::bind_mw`].
    pub(crate) fn unbind_mw(&self) {
        self.mw_binds.fetch_sub(1u32, Relaxed);
    }
}
