// SPDX-License-Identifier: GPL-2.0

#![forbid(unsafe_code)]

//! Data movement between packets and registered memory.
//!
//! Every access names a key, an address and a length, and goes through the
//! memory region the key designates: the key must match the region's
//! current key exactly, the region must belong to the QP's protection
//! domain and allow the access, and `[addr, addr + len)` must lie inside
//! `[iova, iova + length)`. Only then is the region's pinned memory
//! touched. A failed check moves nothing.
//!
//! DMA MRs (a kernel PD's `local_dma_lkey`) span all of kernel memory:
//! their addresses are kernel virtual addresses that the kernel consumer
//! vouches for, and they have no range to check (as `mr_check_range` in
//! the C driver). They serve local access by the consumer's own kernel QPs
//! only; remote access through them is refused.
//!
//! Fast-register MRs are checked against their registration (valid, the
//! current key including its key byte, the registered access flags and
//! range), under the region's lock, and the data is copied page by page
//! with the lock still held, so that an invalidation on another CPU either
//! comes before the access (which then fails) or after it.
//!
//! On-demand regions are checked as user regions; their pages are copied
//! only if mapped, otherwise the access fails with [`MemError::Fault`],
//! which names the range for the caller to have faulted in
//! ([`super::odp::request`]) before it tries again.

use crate::{
    proto::{
        access::{
            range_within,
            user_word_aligned,
            word_aligned, //
        },
        feth,
        pages::{
            page_chunks,
            PageChunk,
            MAX_PAGE_SHIFT, //
        },
        wqe::{
            recv_sge,
            send_inline,
            send_sge,
            SendWqe,
            Sge, //
        },
    },
    rdma::{
        access::{
            AccessFlag,
            AccessFlags, //
        },
        device::Device,
        lock::SpinLockIrq,
        mr::{
            Mr,
            PageList, //
        },
        umem_odp::{
            OdpError,
            UmemOdp, //
        },
        wc::WcStatus,
    },
};
use core::ops::Range;
use kernel::{
    prelude::*,
    sync::aref::ARef, //
};

use super::{
    mr::{
        FastState,
        Mapping, //
    },
    mw::{
        is_mw_key,
        RrxeMw, //
    },
    odp::OdpFault,
    verbs::Rrxe, //
};

/// Why an access to registered memory was refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum MemError {
    /// No region with this key, another PD, or the access is not allowed.
    Key,
    /// Outside the region.
    Range,
    /// The scatter/gather list is shorter than the data.
    Length,
    /// An atomic's word is not 8-byte aligned in memory.
    Misaligned,
    /// On-demand memory that is not mapped: fault it in and try again.
    Fault(OdpFault),
}

impl MemError {
    /// The completion status of a work request whose local memory (its
    /// lkeys' SGEs) could not be used, as the C driver reports it.
    pub(crate) fn local_status(self) -> WcStatus {
        match self {
            MemError::Length => WcStatus::LocLenErr,
            _ => WcStatus::LocProtErr,
        }
    }
}

/// Which permission an access needs.
#[derive(Clone, Copy)]
pub(crate) enum Need {
    /// Local read (send gather): every MR allows it.
    LocalRead,
    /// Local write (receive scatter).
    LocalWrite,
    /// Remote write (RDMA WRITE responder).
    RemoteWrite,
    /// Remote read (RDMA READ responder).
    RemoteRead,
    /// Remote atomic (CmpSwap, FetchAdd responder).
    RemoteAtomic,
    /// FLUSH responder: every `IB_ACCESS_FLUSH_*` bit given (one per
    /// placement type asked; none for a FLUSH that asks for neither).
    Flush(AccessFlags),
}

/// Through which kind of key memory is accessed.
#[derive(Clone, Copy)]
pub(crate) enum Via {
    /// An lkey of the QP's own work request.
    Lkey,
    /// An R_Key a peer sent to the responder of the QP with this
    /// [`super::qp::RrxeQp::uid`] (a type 2 window answers only its QP).
    Rkey(u64),
}

/// Where an access goes and what it may do: `addr` through `key` (an
/// lkey, or an R_Key as `via` says) with permission `need`.
#[derive(Clone, Copy)]
pub(crate) struct Access {
    /// The lkey or R_Key.
    pub(crate) key: u32,
    /// Which kind of key `key` is.
    pub(crate) via: Via,
    /// The permission the access needs.
    pub(crate) need: Need,
    /// The first byte's address (iova).
    pub(crate) addr: u64,
}

impl Access {
    /// An access through the lkey `key` of the QP's own work request.
    fn lkey(key: u32, need: Need, addr: u64) -> Self {
        Access {
            key,
            via: Via::Lkey,
            need,
            addr,
        }
    }

    /// An access through the R_Key `key` a peer sent to the responder of
    /// the QP with [`super::qp::RrxeQp::uid`] `qp_uid`.
    pub(crate) fn rkey(qp_uid: u64, key: u32, need: Need, addr: u64) -> Self {
        Access {
            key,
            via: Via::Rkey(qp_uid),
            need,
            addr,
        }
    }
}

/// Whether access flags `flags` allow the access `need`.
pub(crate) fn allows(flags: AccessFlags, need: Need) -> bool {
    match need {
        Need::LocalRead => true,
        Need::LocalWrite => flags.contains(AccessFlag::LocalWrite),
        Need::RemoteWrite => flags.contains(AccessFlag::RemoteWrite),
        Need::RemoteRead => flags.contains(AccessFlag::RemoteRead),
        Need::RemoteAtomic => flags.contains(AccessFlag::RemoteAtomic),
        Need::Flush(bits) => flags.contains_all(bits),
    }
}

/// Looks up the region of `at`'s key and checks ownership, permission and
/// the range of `len` bytes from `at.addr`.
///
/// For a fast-register region only the PD is checked here: the rest
/// depends on its registration, which [`fast_access`] checks under its
/// lock.
///
/// An R_Key in the window range is looked up as a memory window
/// ([`RrxeMw::lookup`]), whose region (a user region) must hold the range
/// too.
fn region(
    dev: &Device<Rrxe>,
    pd_id: usize,
    at: Access,
    len: usize,
) -> Result<ARef<Mr<Rrxe>>, MemError> {
    let Access {
        key,
        via,
        need,
        addr,
    } = at;
    // CAST: lengths of one message fit in u64.
    let len64 = len as u64;
    let mr = match via {
        Via::Rkey(qp_uid) if is_mw_key(key) => {
            RrxeMw::lookup(dev, pd_id, qp_uid, key, need, Some((addr, len64)))?.mr
        }
        Via::Rkey(_) => region_of_key(dev, pd_id, key, true, need)?,
        Via::Lkey => region_of_key(dev, pd_id, key, false, need)?,
    };
    if let Mapping::User(_) | Mapping::Odp(_) = mr.mapping {
        // CAST: lengths of one message fit in u64.
        if !range_within(mr.iova(), mr.length(), addr, len64) {
            return Err(MemError::Range);
        }
    }
    Ok(mr)
}

/// [`region`] without the range check.
fn region_of_key(
    dev: &Device<Rrxe>,
    pd_id: usize,
    key: u32,
    remote: bool,
    need: Need,
) -> Result<ARef<Mr<Rrxe>>, MemError> {
    let mr = dev.lookup_mr(key >> 8).ok_or(MemError::Key)?;
    if let Mapping::Fast(_) = mr.mapping {
        if mr.pd_id() != pd_id {
            return Err(MemError::Key);
        }
        return Ok(mr);
    }
    let current = if remote { mr.rkey() } else { mr.lkey() };
    if current != key || mr.pd_id() != pd_id {
        return Err(MemError::Key);
    }
    if !allows(mr.access(), need) {
        return Err(MemError::Key);
    }
    if let Mapping::Dma = mr.mapping {
        if remote || !mr.is_kernel_dma() {
            return Err(MemError::Key);
        }
        return Ok(mr);
    }
    Ok(mr)
}

/// Checks the registration of a fast-register region for an access of
/// `len` bytes at `addr` through `key` with permission `need`, then calls
/// `f` for each per-page piece, with the region's lock held.
fn fast_access(
    fast: &SpinLockIrq<FastState>,
    key: u32,
    need: Need,
    addr: u64,
    len: usize,
    mut f: impl FnMut(&PageList, &PageChunk) -> Result,
) -> Result<(), MemError> {
    let st = fast.lock();
    if !st.valid || st.key != key || !allows(st.access, need) {
        return Err(MemError::Key);
    }
    // CAST: lengths of one message fit in u64.
    if !range_within(st.iova, st.length, addr, len as u64) {
        return Err(MemError::Range);
    }
    let shift = st.pages.page_shift();
    if shift > MAX_PAGE_SHIFT {
        return Err(MemError::Range);
    }
    for chunk in page_chunks(st.iova, shift, addr, len) {
        f(&st.pages, &chunk).map_err(|_| MemError::Range)?;
    }
    Ok(())
}

/// Checks that `len` bytes at `addr` may be accessed remotely through
/// `rkey` with permission `need`, without touching them.
pub(crate) fn check_remote(
    dev: &Device<Rrxe>,
    pd_id: usize,
    qp_uid: u64,
    rkey: u32,
    need: Need,
    addr: u64,
    len: u32,
) -> Result<(), MemError> {
    let at = Access::rkey(qp_uid, rkey, need, addr);
    let mr = region(dev, pd_id, at, len as usize)?;
    if let Mapping::Fast(fast) = &mr.mapping {
        // The pages must exist too: a registration wider than its mapping
        // fails here rather than halfway through the data.
        return fast_access(fast, rkey, need, addr, len as usize, |pages, c| {
            if c.index < pages.len() {
                Ok(())
            } else {
                Err(EINVAL)
            }
        });
    }
    Ok(())
}

/// Byte offset of `addr` in `mr` (checked by [`region`]).
fn offset_in(mr: &Mr<Rrxe>, addr: u64) -> Result<usize, MemError> {
    usize::try_from(addr - mr.iova()).map_err(|_| MemError::Range)
}

/// Which way [`copy`] moves data, with the buffer on the other side of
/// registered memory (the C driver's `enum rxe_mr_copy_dir`).
pub(crate) enum CopyDir<'a> {
    /// From the buffer into registered memory.
    ToMr(&'a [u8]),
    /// From registered memory into the buffer.
    FromMr(&'a mut [u8]),
}

impl CopyDir<'_> {
    fn len(&self) -> usize {
        match self {
            CopyDir::ToMr(src) => src.len(),
            CopyDir::FromMr(dst) => dst.len(),
        }
    }

    /// Bytes `range` of the buffer, copied the same way.
    fn part(&mut self, range: Range<usize>) -> Option<CopyDir<'_>> {
        match self {
            CopyDir::ToMr(src) => src.get(range).map(CopyDir::ToMr),
            CopyDir::FromMr(dst) => dst.get_mut(range).map(CopyDir::FromMr),
        }
    }
}

/// Copies between the buffer of `dir` and registered memory at `at`, one
/// way or the other: both walk the same checks and pages.
pub(crate) fn copy(
    dev: &Device<Rrxe>,
    pd_id: usize,
    at: Access,
    mut dir: CopyDir<'_>,
) -> Result<(), MemError> {
    let len = dir.len();
    if len == 0 {
        return Ok(());
    }
    let Access {
        key, need, addr, ..
    } = at;
    let mr = region(dev, pd_id, at, len)?;
    match &mr.mapping {
        Mapping::User(umem) => {
            let offset = offset_in(&mr, addr)?;
            match dir {
                CopyDir::ToMr(src) => umem.copy_to(offset, src),
                CopyDir::FromMr(dst) => umem.copy_from(offset, dst),
            }
            .map_err(|_| MemError::Range)
        }
        Mapping::Odp(odp) => {
            let offset = offset_in(&mr, addr)?;
            // A write faults its pages in writable, and so does an atomic's
            // read of the word it then writes.
            let (r, write) = match dir {
                CopyDir::ToMr(src) => (odp.copy_to(offset, src), true),
                CopyDir::FromMr(dst) => (
                    odp.copy_from(offset, dst),
                    matches!(need, Need::RemoteAtomic),
                ),
            };
            r.map_err(|e| odp_error(&mr, odp, e, offset, len, write))
        }
        Mapping::Dma => match dir {
            CopyDir::ToMr(src) => mr.kernel_copy_to(addr, src),
            CopyDir::FromMr(dst) => mr.kernel_copy_from(addr, dst),
        }
        .map_err(|_| MemError::Range),
        Mapping::Fast(fast) => fast_access(fast, key, need, addr, len, |pages, c| {
            match dir.part(c.at..c.at + c.len).ok_or(EINVAL)? {
                CopyDir::ToMr(src) => pages.copy_to(c.index, c.offset, src),
                CopyDir::FromMr(dst) => pages.copy_from(c.index, c.offset, dst),
            }
        }),
    }
}

/// The error of an access to on-demand memory of `mr` that `odp` refused:
/// a fault of the range from its first unmapped page, when that is what
/// is missing.
fn odp_error(
    mr: &Mr<Rrxe>,
    odp: &UmemOdp,
    e: OdpError,
    offset: usize,
    len: usize,
    write: bool,
) -> MemError {
    match e {
        OdpError::NotPresent(at) => {
            let rest = (offset + len).saturating_sub(at);
            MemError::Fault(OdpFault::new(
                mr.lkey(),
                at,
                rest,
                write && odp.is_writable(),
            ))
        }
        OdpError::ReadOnly => MemError::Key,
        OdpError::Range => MemError::Range,
    }
}

/// Checks that the on-demand memory of `len` bytes at `at` is mapped
/// (writable, if `at.need` writes), without touching it:
/// [`MemError::Fault`] for the first part that is not. Any other problem
/// is left to the access itself to report (`Ok` here).
pub(crate) fn probe(
    dev: &Device<Rrxe>,
    pd_id: usize,
    at: Access,
    len: usize,
) -> Result<(), MemError> {
    if len == 0 {
        return Ok(());
    }
    let write = matches!(
        at.need,
        Need::LocalWrite | Need::RemoteWrite | Need::RemoteAtomic
    );
    let Ok(mr) = region(dev, pd_id, at, len) else {
        return Ok(());
    };
    let addr = at.addr;
    let Mapping::Odp(odp) = &mr.mapping else {
        return Ok(());
    };
    let Ok(offset) = offset_in(&mr, addr) else {
        return Ok(());
    };
    match odp.is_present(offset, len, write) {
        Err(e @ OdpError::NotPresent(_)) => Err(odp_error(&mr, odp, e, offset, len, write)),
        _ => Ok(()),
    }
}

/// The SGE list of a WQE snapshot: send and receive WQEs lay theirs out
/// differently.
#[derive(Clone, Copy)]
pub(crate) enum Sges<'a> {
    /// A send WQE's.
    Send(&'a [u8]),
    /// A receive WQE's.
    Recv(&'a [u8]),
}

impl Sges<'_> {
    fn at(self, i: u32) -> Option<Sge> {
        match self {
            Sges::Send(slot) => send_sge(slot, i).ok(),
            Sges::Recv(slot) => recv_sge(slot, i).ok(),
        }
    }
}

/// [`probe`] of the first `len` bytes the SGE list `sges` names,
/// writable: where a READ response, an atomic's original value or a
/// receive's data goes.
pub(crate) fn probe_sges(
    dev: &Device<Rrxe>,
    pd_id: usize,
    sges: Sges<'_>,
    num_sge: u32,
    len: usize,
) -> Result<(), MemError> {
    let r = walk(num_sge, sges, 0, len, |sge, off, _, n| {
        let addr = sge.addr.checked_add(off).ok_or(MemError::Range)?;
        probe(
            dev,
            pd_id,
            Access::lkey(sge.lkey, Need::LocalWrite, addr),
            n,
        )
    });
    match r {
        Err(MemError::Fault(f)) => Err(MemError::Fault(f)),
        _ => Ok(()),
    }
}

/// Checks that the atomic word at `at` is 8-byte aligned in memory, not
/// only in the iova: a user MR registered with `ibv_reg_mr_iova` may place
/// an aligned iova on an unaligned address (the C driver checks the page
/// offset, `RESPST_ERR_MISALIGNED_ATOMIC`). DMA and fast-register regions
/// map the iova onto memory page by page.
fn check_word_aligned(dev: &Device<Rrxe>, pd_id: usize, at: Access) -> Result<(), MemError> {
    let mr = region(dev, pd_id, at, 8)?;
    let addr = at.addr;
    let aligned = match &mr.mapping {
        // CAST: a page offset fits in u64.
        Mapping::User(umem) => user_word_aligned(mr.iova(), umem.offset() as u64, addr),
        // CAST: a page offset fits in u64.
        Mapping::Odp(odp) => user_word_aligned(mr.iova(), odp.offset() as u64, addr),
        _ => word_aligned(addr),
    };
    if !aligned {
        return Err(MemError::Misaligned);
    }
    Ok(())
}

/// Executes an atomic operation on the 8-byte word at `addr` of the region
/// of `rkey` (IBTA Vol 1 §9.4.5): reads it, stores `op(value)` when that is
/// `Some`, and returns the value read. The word is in host byte order, as
/// the requester's CPU sees it. The device's `atomic_ops` lock makes the
/// read-modify-write atomic with respect to every other atomic operation
/// of the device.
pub(crate) fn atomic(
    dev: &Device<Rrxe>,
    pd_id: usize,
    qp_uid: u64,
    rkey: u32,
    addr: u64,
    op: impl FnOnce(u64) -> Option<u64>,
) -> Result<u64, MemError> {
    let at = Access::rkey(qp_uid, rkey, Need::RemoteAtomic, addr);
    check_word_aligned(dev, pd_id, at)?;
    let mut word = [0u8; 8];
    let _guard = dev.atomic_ops.lock();
    copy(dev, pd_id, at, CopyDir::FromMr(&mut word))?;
    let orig = u64::from_ne_bytes(word);
    if let Some(new) = op(orig) {
        copy(dev, pd_id, at, CopyDir::ToMr(&new.to_ne_bytes()))?;
    }
    Ok(orig)
}

/// Stores the 8 bytes `value` (as they came on the wire) at `addr` of the
/// region of `rkey`, for an ATOMIC WRITE (IBTA Vol 1 Annex A19): under the
/// device's `atomic_ops` lock, so that no CmpSwap or FetchAdd of the device
/// sees the word half written.
pub(crate) fn atomic_write(
    dev: &Device<Rrxe>,
    pd_id: usize,
    qp_uid: u64,
    rkey: u32,
    addr: u64,
    value: [u8; 8],
) -> Result<(), MemError> {
    let at = Access::rkey(qp_uid, rkey, Need::RemoteWrite, addr);
    check_word_aligned(dev, pd_id, at)?;
    let _guard = dev.atomic_ops.lock();
    copy(dev, pd_id, at, CopyDir::ToMr(&value))
}

// The requester puts a FLUSH WQE's placement type and selectivity level
// (the values of the C enums, which librxe writes) into the FETH as they
// are, and the responder reads the FETH with proto's constants: the two
// must agree.
const _: () = {
    use crate::rdma::qp::flush;
    assert!(feth::PLT_GLOBAL as u32 == flush::GLOBAL);
    assert!(feth::PLT_PERSISTENT as u32 == flush::PERSISTENT);
    assert!(feth::SEL_RANGE as u32 == flush::RANGE);
    assert!(feth::SEL_MR as u32 == flush::MR);
};

/// The `IB_ACCESS_FLUSH_*` flags a FLUSH of placement type `placement`
/// needs, of the QP and of the region (as the C driver's responder).
pub(crate) fn flush_access(placement: u8) -> AccessFlags {
    let mut flags = AccessFlags::empty();
    if placement & feth::PLT_GLOBAL != 0 {
        flags |= AccessFlag::FlushGlobal;
    }
    if placement & feth::PLT_PERSISTENT != 0 {
        flags |= AccessFlag::FlushPersistent;
    }
    flags
}

/// Executes a FLUSH (IBTA Vol 1 Annex A19) through `rkey` at the responder
/// of the QP `qp_uid`: the region (or window) must grant the FLUSH access
/// of each placement type asked and, unless the selectivity is the whole
/// region, hold `range`; then the whole region (the whole window) or the
/// range is flushed (as the C driver: a reserved selectivity is
/// range-checked and flushes the region). What earlier requests placed is
/// made globally visible (every copy into registered memory is done by the
/// time the FLUSH is executed; the fence orders it before the response)
/// and, for persistence, written back from the CPU caches.
///
/// The write-back runs in the responder, with interrupts off, for as much
/// as the request names (the C driver's does the same in its task); it only
/// happens on persistent memory, which no region of ordinary pages may
/// grant. Deferring it to a context that may sleep comes with the ODP
/// deferral path.
pub(crate) fn flush(
    dev: &Device<Rrxe>,
    pd_id: usize,
    qp_uid: u64,
    rkey: u32,
    placement: u8,
    selectivity: u8,
    range: (u64, u64),
) -> Result<(), MemError> {
    let need = Need::Flush(flush_access(placement));
    let persistent = placement & feth::PLT_PERSISTENT != 0;
    let (whole, check_range) = (selectivity != feth::SEL_RANGE, selectivity != feth::SEL_MR);
    let (mr, window) = if is_mw_key(rkey) {
        let asked = check_range.then_some(range);
        let w = RrxeMw::lookup(dev, pd_id, qp_uid, rkey, need, asked)?;
        (w.mr, Some((w.addr, w.length)))
    } else {
        (region_of_key(dev, pd_id, rkey, true, need)?, None)
    };
    match &mr.mapping {
        Mapping::User(umem) => {
            let (iova, length) = (mr.iova(), mr.length());
            if check_range && !range_within(iova, length, range.0, range.1) {
                return Err(MemError::Range);
            }
            let (addr, len) = if whole {
                window.unwrap_or((iova, length))
            } else {
                range
            };
            if persistent && len != 0 {
                let len = usize::try_from(len).map_err(|_| MemError::Range)?;
                umem.wb_cache_pmem(offset_in(&mr, addr)?, len)
                    .map_err(|_| MemError::Range)?;
            }
        }
        // Never persistent memory (refused at registration): a FLUSH to
        // global visibility needs only the fence below.
        Mapping::Odp(_) => {
            if check_range && !range_within(mr.iova(), mr.length(), range.0, range.1) {
                return Err(MemError::Range);
            }
            if persistent {
                return Err(MemError::Key);
            }
        }
        // Remote access through a DMA region is refused by `region_of_key`.
        Mapping::Dma => return Err(MemError::Key),
        Mapping::Fast(fast) => {
            let st = fast.lock();
            if !st.valid || st.key != rkey || !allows(st.access, need) {
                return Err(MemError::Key);
            }
            if check_range && !range_within(st.iova, st.length, range.0, range.1) {
                return Err(MemError::Range);
            }
            let (addr, len) = if whole { (st.iova, st.length) } else { range };
            if persistent && len != 0 {
                let shift = st.pages.page_shift();
                if shift > MAX_PAGE_SHIFT {
                    return Err(MemError::Range);
                }
                let len = usize::try_from(len).map_err(|_| MemError::Range)?;
                for c in page_chunks(st.iova, shift, addr, len) {
                    st.pages
                        .wb_cache_pmem(c.index, c.offset, c.len)
                        .map_err(|_| MemError::Range)?;
                }
            }
        }
    }
    core::sync::atomic::fence(core::sync::atomic::Ordering::SeqCst);
    Ok(())
}

/// Walks the scatter/gather list `sges` (`count` entries) from byte
/// `offset` of the message for `len` bytes, calling `f(sge, offset in the
/// sge, chunk offset, chunk length)` for each piece.
fn walk(
    count: u32,
    sges: Sges<'_>,
    mut offset: u64,
    len: usize,
    mut f: impl FnMut(&Sge, u64, usize, usize) -> Result<(), MemError>,
) -> Result<(), MemError> {
    let mut done = 0usize;
    for i in 0..count {
        if done == len {
            break;
        }
        let sge = sges.at(i).ok_or(MemError::Length)?;
        let sl = u64::from(sge.length);
        if offset >= sl {
            offset -= sl;
            continue;
        }
        // CAST: bounded by `len`, a usize.
        let take = ((sl - offset) as usize).min(len - done);
        f(&sge, offset, done, take)?;
        done += take;
        offset = 0;
    }
    if done == len {
        Ok(())
    } else {
        Err(MemError::Length)
    }
}

/// Copies between the buffer of `dir` and the memory the SGE list `sges`
/// names through its lkeys, from message byte `offset`.
fn copy_sges(
    dev: &Device<Rrxe>,
    pd_id: usize,
    sges: Sges<'_>,
    num_sge: u32,
    offset: u32,
    mut dir: CopyDir<'_>,
) -> Result<(), MemError> {
    let need = match dir {
        CopyDir::ToMr(_) => Need::LocalWrite,
        CopyDir::FromMr(_) => Need::LocalRead,
    };
    let len = dir.len();
    walk(num_sge, sges, u64::from(offset), len, |sge, off, at, n| {
        let part = dir.part(at..at + n).ok_or(MemError::Length)?;
        let addr = sge.addr.checked_add(off).ok_or(MemError::Range)?;
        copy(dev, pd_id, Access::lkey(sge.lkey, need, addr), part)
    })
}

/// Gathers `dst.len()` bytes of the send WQE `w`'s data (`slot` is its
/// snapshot) from message byte `offset`: its inline data, or its SGEs
/// through their lkeys.
pub(crate) fn gather(
    dev: &Device<Rrxe>,
    pd_id: usize,
    slot: &[u8],
    w: &SendWqe,
    offset: u32,
    dst: &mut [u8],
) -> Result<(), MemError> {
    if w.has_inline() {
        let data = send_inline(slot, w.length).map_err(|_| MemError::Length)?;
        let start = offset as usize;
        let src = data.get(start..start + dst.len()).ok_or(MemError::Length)?;
        dst.copy_from_slice(src);
        return Ok(());
    }
    let from = CopyDir::FromMr(dst);
    copy_sges(dev, pd_id, Sges::Send(slot), w.num_sge, offset, from)
}

/// Scatters `src` into the SGEs `sges` from message byte `offset`: a
/// receive WQE's, or a send WQE's for READ response data.
pub(crate) fn scatter(
    dev: &Device<Rrxe>,
    pd_id: usize,
    sges: Sges<'_>,
    num_sge: u32,
    offset: u32,
    src: &[u8],
) -> Result<(), MemError> {
    copy_sges(dev, pd_id, sges, num_sge, offset, CopyDir::ToMr(src))
}
