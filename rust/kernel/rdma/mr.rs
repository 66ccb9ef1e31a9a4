// SPDX-License-Identifier: GPL-2.0

//! Memory regions (`struct ib_mr`), allocated by the driver.
//!
//! C header: [`include/rdma/ib_verbs.h`](srctree/include/rdma/ib_verbs.h)

use crate::{
    bindings,
    rdma::{
        access::AccessFlags,
        device::{
            Device,
            Driver, //
        },
        object::rdma_object,
        pd::Pd,
        table::Liveness,
        udata::Udata, //
    },
};
use core::ptr;
use kernel::{
    error::from_result,
    prelude::*,
    sync::atomic::{
        Atomic,
        Relaxed, //
    },
    types::Opaque, //
};

/// Memory region types (`enum ib_mr_type`) as raw values.
pub mod mr_type {
    use crate::bindings;
    /// `IB_MR_TYPE_MEM_REG`: a fast-register region, mapped with
    /// `ib_map_mr_sg` and registered by an `IB_WR_REG_MR` work request.
    pub const MEM_REG: u32 = bindings::ib_mr_type_IB_MR_TYPE_MEM_REG;
}

/// The page list of a fast-register memory region: the addresses of the
/// pages a kernel consumer mapped with `ib_map_mr_sg`, filled only by
/// [`SgList::map_to`].
///
/// Page `i` covers the `1 << page_shift()` bytes at its address. With
/// virtual DMA (the device has no DMA device, `ib_uses_virt_dma`), a DMA
/// address is the kernel virtual address (`ib_virt_dma_to_ptr`), so the
/// copy methods reach the consumer's memory directly.
///
/// The memory is the consumer's. By registering the region (posting an
/// `IB_WR_REG_MR` work request for it) the consumer vouches that the
/// mapped pages stay allocated and reserved for the device until it has
/// invalidated or deregistered the region, exactly as it would for a
/// DMA-capable adapter reading and writing them. A driver therefore only
/// copies through the list while the region is registered (valid), and
/// only inside the region's range.
///
/// # Invariants
///
/// Every entry of `pages` was given by `ib_sg_to_pages` to the set-page
/// callback of [`SgList::map_to`], for a scatterlist a kernel consumer
/// passed to `ib_map_mr_sg`, with a page size of `1 << page_shift` bytes;
/// none is zero.
pub struct PageList {
    pages: KVec<u64>,
    page_shift: u32,
}

impl PageList {
    /// An empty list with room for `max_pages` pages (allocated now: the
    /// list is filled in atomic context).
    pub fn new(max_pages: u32) -> Result<Self> {
        // INVARIANT: Empty.
        Ok(Self {
            pages: KVec::with_capacity(max_pages as usize, GFP_KERNEL)?,
            page_shift: 0,
        })
    }

    /// Number of pages mapped.
    pub fn len(&self) -> usize {
        self.pages.len()
    }

    /// Whether no page is mapped.
    pub fn is_empty(&self) -> bool {
        self.pages.is_empty()
    }

    /// Log2 of the page size of the current mapping, in bytes.
    pub fn page_shift(&self) -> u32 {
        self.page_shift
    }

    /// The kernel address of `len` bytes at byte `offset` of page `index`:
    /// `EINVAL` unless they lie inside that page.
    fn range(&self, index: usize, offset: usize, len: usize) -> Result<*mut u8> {
        let page = *self.pages.get(index).ok_or(EINVAL)?;
        let end = offset.checked_add(len).ok_or(EINVAL)?;
        // CAST: lossless, `usize` is 64 bits where rxe-like devices exist (`CONFIG_64BIT`).
        if end as u64 > 1u64 << self.page_shift {
            return Err(EINVAL);
        }
        // CAST: with virtual DMA a DMA address is the kernel virtual address; `offset` stays
        // inside the page, which does not wrap (it is kernel memory).
        Ok((page as usize).wrapping_add(offset) as *mut u8)
    }

    /// Copies `src` to byte `offset` of page `index` (`EINVAL` unless it
    /// fits the page), under the contract of [`PageList`].
    pub fn copy_to(&self, index: usize, offset: usize, src: &[u8]) -> Result {
        if src.is_empty() {
            return Ok(());
        }
        let dst = self.range(index, offset, src.len())?;
        // SAFETY: By the type invariant the page is a block of `1 << page_shift` bytes of kernel
        // memory a kernel consumer mapped for this region, and `range` kept the copy inside it;
        // the consumer vouches that it is writable and reserved for the device while the region
        // is registered (see above). `src` is a distinct Rust buffer.
        unsafe { core::ptr::copy_nonoverlapping(src.as_ptr(), dst, src.len()) };
        Ok(())
    }

    /// Copies byte `offset` of page `index` on into `dst` (`EINVAL` unless
    /// it fits the page), under the contract of [`PageList`].
    pub fn copy_from(&self, index: usize, offset: usize, dst: &mut [u8]) -> Result {
        if dst.is_empty() {
            return Ok(());
        }
        let src = self.range(index, offset, dst.len())?;
        // SAFETY: As in `copy_to`, with readable memory; `dst` is a distinct Rust buffer.
        unsafe { core::ptr::copy_nonoverlapping(src.cast_const(), dst.as_mut_ptr(), dst.len()) };
        Ok(())
    }

    /// Writes the CPU cache lines of `len` bytes at byte `offset` of page
    /// `index` back to memory (FLUSH to persistence, IBTA Vol 1 Annex A19);
    /// `EINVAL` unless they fit the page.
    pub fn wb_cache_pmem(&self, index: usize, offset: usize, len: usize) -> Result {
        if len == 0 {
            return Ok(());
        }
        let addr = self.range(index, offset, len)?;
        // SAFETY: As in `copy_to`, `[addr, addr + len)` is kernel memory of a mapped page;
        // writing cache lines back reads and changes no byte.
        unsafe { bindings::wb_cache_pmem(addr.cast(), len) };
        Ok(())
    }

    /// Appends a page given by `ib_sg_to_pages`; `ENOMEM` when full (the
    /// core then maps a prefix of the scatterlist), as the C driver.
    fn push(&mut self, addr: u64) -> Result {
        if addr == 0 {
            return Err(EINVAL);
        }
        // INVARIANT: Only called by the set-page callback of `SgList::map_to`.
        self.pages.push_within_capacity(addr).map_err(|_| ENOMEM)
    }
}

/// The scatterlist a kernel consumer passed to `ib_map_mr_sg` for `mr`,
/// borrowed for the duration of the `map_mr_sg` callback.
///
/// # Invariants
///
/// `sg` holds `nents` DMA-mapped entries of a kernel consumer and `offset`
/// is NULL or valid, for `'a`; `mr` is the region `ib_map_mr_sg` was called
/// for, whose `page_size` it set.
pub struct SgList<'a, T: Driver> {
    mr: &'a Mr<T>,
    sg: *mut bindings::scatterlist,
    nents: c_int,
    offset: *mut c_uint,
}

impl<T: Driver> SgList<'_, T> {
    /// Replaces the contents of `pages` with the pages of the scatterlist
    /// (`ib_sg_to_pages`), with the page size the consumer chose, and
    /// returns the number of scatterlist entries mapped, which the RDMA
    /// core returns to the consumer. The core sets the region's `iova` and
    /// `length` to what was mapped.
    ///
    /// `EINVAL` for a page size that is not a power of two (or a bad
    /// scatterlist); `EBUSY` if the region is being mapped concurrently.
    pub fn map_to(self, pages: &mut PageList) -> Result<u32> {
        let ib = self.mr.ib.get();
        // SAFETY: `ib_map_mr_sg` set `page_size` in this thread before calling `map_mr_sg`.
        let page_size = unsafe { (*ib).page_size };
        if !page_size.is_power_of_two() {
            return Err(EINVAL);
        }
        pages.pages.clear();
        pages.page_shift = page_size.trailing_zeros();
        let ctx: *mut PageList = pages;
        // Only one mapping at a time may publish its list to the set-page callback.
        if self
            .mr
            .map_ctx
            .cmpxchg(ptr::null_mut(), ctx, Relaxed)
            .is_err()
        {
            return Err(EBUSY);
        }
        // SAFETY: `ib` is a live region and `sg`, `nents`, `offset` are the consumer's, valid
        // for the call by the type invariant. The callback finds `ctx` through the region.
        let n = unsafe {
            bindings::ib_sg_to_pages(
                ib,
                self.sg,
                self.nents,
                self.offset,
                Some(Mr::<T>::set_page_callback),
            )
        };
        self.mr.map_ctx.store(ptr::null_mut(), Relaxed);
        match u32::try_from(n) {
            Ok(n) => Ok(n),
            Err(_) => {
                pages.pages.clear();
                Err(Error::from_errno(n))
            }
        }
    }
}

/// Keys and geometry of a new memory region.
#[derive(Clone, Copy, Debug, Default)]
pub struct MrKeys {
    /// Local key.
    pub lkey: u32,
    /// Remote key.
    pub rkey: u32,
    /// I/O virtual address of the first byte.
    pub iova: u64,
    /// Length in bytes.
    pub length: u64,
}

/// Arguments of `reg_user_mr`.
#[derive(Clone, Copy, Debug)]
pub struct UserMrArgs {
    /// User virtual address.
    pub start: u64,
    /// Length in bytes.
    pub length: u64,
    /// I/O virtual address the region is accessed at.
    pub iova: u64,
    /// Access flags.
    pub access: AccessFlags,
}

/// Flags of `rereg_user_mr` (`enum ib_mr_rereg_flags`).
pub mod rereg {
    use crate::bindings;
    /// `IB_MR_REREG_TRANS`: new address range (start, length, iova).
    // CAST: small positive flags, as the `int` of the callback.
    pub const TRANS: i32 = bindings::ib_mr_rereg_flags_IB_MR_REREG_TRANS as i32;
    /// `IB_MR_REREG_PD`: move the region to another PD.
    // CAST: as above.
    pub const PD: i32 = bindings::ib_mr_rereg_flags_IB_MR_REREG_PD as i32;
    /// `IB_MR_REREG_ACCESS`: new `IB_ACCESS_*` flags.
    // CAST: as above.
    pub const ACCESS: i32 = bindings::ib_mr_rereg_flags_IB_MR_REREG_ACCESS as i32;
}

/// `ibv_advise_mr` (`enum ib_uverbs_advise_mr_advice` and its flag).
pub mod advise {
    use crate::bindings;

    /// Fault the pages in for reading.
    pub const PREFETCH: u32 =
        bindings::ib_uverbs_advise_mr_advice_IB_UVERBS_ADVISE_MR_ADVICE_PREFETCH;
    /// Fault the pages in for writing.
    pub const PREFETCH_WRITE: u32 =
        bindings::ib_uverbs_advise_mr_advice_IB_UVERBS_ADVISE_MR_ADVICE_PREFETCH_WRITE;
    /// Take the pages already present, without faulting any in.
    pub const PREFETCH_NO_FAULT: u32 =
        bindings::ib_uverbs_advise_mr_advice_IB_UVERBS_ADVISE_MR_ADVICE_PREFETCH_NO_FAULT;
    /// `IB_UVERBS_ADVISE_MR_FLAG_FLUSH`: done before the call returns.
    pub const FLAG_FLUSH: u32 = bindings::ib_uverbs_advise_mr_flag_IB_UVERBS_ADVISE_MR_FLAG_FLUSH;
}

/// A range `ibv_advise_mr` names (`struct ib_sge`).
#[derive(Clone, Copy, Debug)]
pub struct AdviseSge {
    /// User address of the first byte.
    pub addr: u64,
    /// Length in bytes.
    pub length: u32,
    /// The region's lkey.
    pub lkey: u32,
}

/// Arguments of `rereg_user_mr`.
///
/// Only the parts `flags` names are meaningful: the range with
/// [`rereg::TRANS`], `access` with [`rereg::ACCESS`]. The RDMA core has
/// checked that `flags` is non-zero and within `IB_MR_REREG_SUPPORTED`, and
/// with [`rereg::ACCESS`] that the access flags are valid for the device.
/// When [`rereg::PD`] is set the core has already dropped it if the PD does
/// not change; it moves the region to the new PD itself after the driver
/// succeeds.
#[derive(Clone, Copy, Debug)]
pub struct ReregArgs {
    /// `IB_MR_REREG_*` flags, see [`rereg`].
    pub flags: i32,
    /// New user virtual address.
    pub start: u64,
    /// New length in bytes.
    pub length: u64,
    /// New I/O virtual address.
    pub iova: u64,
    /// New access flags.
    pub access: AccessFlags,
}

/// A memory region of a device of driver `T`.
///
/// Every region is published by the index part of its keys (`lkey >> 8`)
/// from registration to deregistration, for [`Device::lookup_mr`].
///
/// # Invariants
///
/// `ib` is at offset 0 and is a valid `struct ib_mr` of a device of driver
/// `T`, and `live` and `data` are initialised, while a reference to `Self`
/// exists; `self` was allocated by [`KBox`] in one of the
/// create callbacks and is freed in `dereg_callback`, after the count of
/// `live` reached zero. `dma` is true only for regions made by
/// `get_dma_callback`, which only the RDMA core calls, for kernel PDs.
#[repr(C)]
#[pin_data]
pub struct Mr<T: Driver> {
    ib: Opaque<bindings::ib_mr>,
    #[pin]
    live: Liveness,
    /// The index part of the keys, under which the region is published.
    index: u32,
    /// Made by `get_dma_mr`: the region of a kernel PD that covers all of
    /// kernel memory, addressed by kernel virtual address.
    dma: bool,
    /// The page list [`SgList::map_to`] is filling, for its set-page
    /// callback; NULL otherwise.
    map_ctx: Atomic<*mut PageList>,
    #[pin]
    data: T::MrData,
}

rdma_object!(Mr: ib_mr => MrData, from_raw, counted, send_sync);

impl<T: Driver> Mr<T> {
    /// The local key.
    pub fn lkey(&self) -> u32 {
        // SAFETY: The region is valid. A volatile read: consumers rewrite the key byte of
        // fast-register regions (`ib_update_fast_reg_key`).
        unsafe { (&raw const (*self.ib.get()).lkey).read_volatile() }
    }

    /// The remote key.
    pub fn rkey(&self) -> u32 {
        // SAFETY: As in `lkey`.
        unsafe { (&raw const (*self.ib.get()).rkey).read_volatile() }
    }

    /// The I/O virtual address of the first byte, of a user or DMA region
    /// (set at creation). For a fast-register region the consumer's
    /// mapping changes it: drivers take it from the `IB_WR_REG_MR` work
    /// request ([`crate::rdma::qp::RegArgs`]) instead.
    pub fn iova(&self) -> u64 {
        // SAFETY: Set at creation, constant for user and DMA regions; for others a plain read
        // of a `u64` the consumer owns.
        unsafe { (*self.ib.get()).iova }
    }

    /// The length in bytes, of a user or DMA region; see [`Mr::iova`].
    pub fn length(&self) -> u64 {
        // SAFETY: As in `iova`.
        unsafe { (*self.ib.get()).length }
    }

    /// Identity of the PD, to compare with a QP's ([`crate::rdma::qp::Qp::pd_id`]).
    pub fn pd_id(&self) -> usize {
        // SAFETY: The region is valid. A volatile read, as `READ_ONCE`: `ib_uverbs_rereg_mr`
        // with `IB_MR_REREG_PD` stores a new PD with `WRITE_ONCE` while responders read it in
        // softirq; either value is a PD pointer, compared but never dereferenced here.
        unsafe { (&raw const (*self.ib.get()).pd).read_volatile() as usize }
    }

    /// The index part of the keys, under which the region is published.
    pub fn index(&self) -> u32 {
        self.index
    }

    /// Whether the region is a kernel DMA MR: made by `get_dma_mr` (for a
    /// kernel PD, e.g. its `local_dma_lkey`) and not owned by user space.
    pub fn is_kernel_dma(&self) -> bool {
        if !self.dma {
            return false;
        }
        let ib = self.ib.get();
        // SAFETY: The region is valid. Its PD is set at creation, outlives it (the core holds a
        // use count) and never changes for DMA regions (they cannot be re-registered); a PD's
        // `uobject` is constant. The region's `uobject` is written by the RDMA core right
        // after `get_dma_mr` (NULL) and not changed afterwards; DMA regions are never in a
        // QP's MR pool, so the union holds `uobject`.
        unsafe {
            (*(*ib).pd).uobject.is_null() && (*(*ib).__bindgen_anon_1.uobject.as_ref()).is_null()
        }
    }

    /// The kernel memory `[addr, addr + len)` that a kernel DMA MR names:
    /// `EINVAL` for other regions, a NULL address or a range that wraps.
    fn kernel_range(&self, addr: u64, len: usize) -> Result<*mut u8> {
        if !self.is_kernel_dma() || addr == 0 {
            return Err(EINVAL);
        }
        // CAST: lossless, `usize` is 64 bits where rxe-like devices exist (`CONFIG_64BIT`).
        addr.checked_add(len as u64).ok_or(EINVAL)?;
        // CAST: with virtual DMA (the device has no DMA device, `ib_uses_virt_dma`), a DMA
        // address is the kernel virtual address (`ib_virt_dma_to_ptr`).
        Ok(addr as usize as *mut u8)
    }

    /// Copies `src` to kernel memory at `addr` through a kernel DMA MR.
    ///
    /// Kernel consumers address a DMA MR (their PD's `local_dma_lkey`)
    /// with DMA addresses, which for a device without a DMA device are
    /// kernel virtual addresses. `EINVAL` unless [`Mr::is_kernel_dma`].
    ///
    /// The memory is the consumer's: by posting a work request that names
    /// it, the consumer vouches that it is mapped, writable and reserved
    /// for the device until the work request completes, exactly as it
    /// would for a DMA-capable adapter writing it.
    pub fn kernel_copy_to(&self, addr: u64, src: &[u8]) -> Result {
        if src.is_empty() {
            return Ok(());
        }
        let dst = self.kernel_range(addr, src.len())?;
        // SAFETY: A kernel DMA MR, so the address comes from a kernel consumer's work request,
        // and the consumer guarantees `src.len()` writable bytes there that nothing else
        // accesses until the work request completes (see above); `src` is a distinct buffer.
        unsafe { core::ptr::copy_nonoverlapping(src.as_ptr(), dst, src.len()) };
        Ok(())
    }

    /// Copies kernel memory at `addr` into `dst` through a kernel DMA MR;
    /// the contract of [`Mr::kernel_copy_to`], with readable memory.
    pub fn kernel_copy_from(&self, addr: u64, dst: &mut [u8]) -> Result {
        if dst.is_empty() {
            return Ok(());
        }
        let src = self.kernel_range(addr, dst.len())?;
        // SAFETY: As in `kernel_copy_to`: the consumer guarantees `dst.len()` readable bytes at
        // the address until the work request completes; `dst` is a distinct buffer.
        unsafe { core::ptr::copy_nonoverlapping(src.cast_const(), dst.as_mut_ptr(), dst.len()) };
        Ok(())
    }

    /// Allocates a region with the driver's state `init` and `keys`, and
    /// publishes it by key index.
    fn create(
        pd: *mut bindings::ib_pd,
        init: impl PinInit<T::MrData, Error>,
        keys: MrKeys,
        dma: bool,
    ) -> Result<*mut bindings::ib_mr> {
        let index = keys.lkey >> 8;
        let b = KBox::pin_init(
            try_pin_init!(Self {
                ib: Opaque::zeroed(),
                live <- Liveness::new(),
                index,
                dma,
                map_ctx: Atomic::new(ptr::null_mut()),
                data <- init,
            }),
            GFP_KERNEL,
        )?;
        // SAFETY: The box is only turned back into a `KBox` in `dereg_callback`, and the object
        // is never moved.
        let raw = KBox::into_raw(unsafe { Pin::into_inner_unchecked(b) });
        // SAFETY: `raw` is valid; `pd` is a valid PD.
        unsafe {
            let ib = &mut *(*raw).ib.get();
            ib.device = (*pd).device;
            ib.pd = pd;
            ib.lkey = keys.lkey;
            ib.rkey = keys.rkey;
            ib.iova = keys.iova;
            ib.length = keys.length;
        }
        // SAFETY: `raw` is valid and fully initialised.
        let mr = unsafe { &*raw };
        // SAFETY: The region holds its initial reference; `dereg_callback` removes it before
        // dropping that reference and freeing the memory.
        if let Err(e) = unsafe { mr.device().mrs.insert(index, raw) } {
            // Index taken (a driver bug) or no memory: undo as a deregistration.
            if T::dereg_mr(mr).is_err() {
                pr_warn!("rdma: deregistering an unpublished MR failed\n");
            }
            // SAFETY: We own the initial reference; the region is valid for the call.
            unsafe { mr.live.put_initial_and_wait() };
            // SAFETY: Allocated by `KBox` above; no reference is left.
            drop(unsafe { KBox::from_raw(raw) });
            return Err(e);
        }
        // CAST: `ib` is the first field.
        Ok(raw.cast())
    }

    /// `get_dma_mr` callback.
    ///
    /// # Safety
    ///
    /// Called by `ib_core` with a live PD of a device of driver `T`.
    pub(crate) unsafe extern "C" fn get_dma_callback(
        pd: *mut bindings::ib_pd,
        access: c_int,
    ) -> *mut bindings::ib_mr {
        // SAFETY: By the safety requirements.
        let p = unsafe { Pd::<T>::from_raw(pd) };
        // CAST: the C argument is an `int` holding flag bits.
        let access = AccessFlags::from_raw(access as u32);
        // INVARIANT: `get_dma_mr` is only called by `__ib_alloc_pd`, for kernel PDs.
        match T::get_dma_mr(p, access).and_then(|(init, keys)| Self::create(pd, init, keys, true)) {
            Ok(mr) => mr,
            Err(e) => e.to_ptr(),
        }
    }

    /// `reg_user_mr` callback.
    ///
    /// # Safety
    ///
    /// Called by `ib_core` with a live PD of a device of driver `T`.
    pub(crate) unsafe extern "C" fn reg_user_callback(
        pd: *mut bindings::ib_pd,
        start: u64,
        length: u64,
        iova: u64,
        access: c_int,
        dmah: *mut bindings::ib_dmah,
        udata: *mut bindings::ib_udata,
    ) -> *mut bindings::ib_mr {
        if !dmah.is_null() {
            return crate::rdma::eopnotsupp().to_ptr();
        }
        // SAFETY: By the safety requirements.
        let p = unsafe { Pd::<T>::from_raw(pd) };
        // SAFETY: `udata` is NULL or valid for the call.
        let udata = unsafe { Udata::from_raw(udata) };
        let args = UserMrArgs {
            start,
            length,
            iova,
            // CAST: the C argument is an `int` holding flag bits.
            access: AccessFlags::from_raw(access as u32),
        };
        match T::reg_user_mr(p, &args, udata)
            .and_then(|(init, keys)| Self::create(pd, init, keys, false))
        {
            Ok(mr) => mr,
            Err(e) => e.to_ptr(),
        }
    }

    /// `alloc_mr` callback.
    ///
    /// # Safety
    ///
    /// Called by `ib_core` (`ib_alloc_mr`, for kernel consumers only) with a
    /// live PD of a device of driver `T`.
    pub(crate) unsafe extern "C" fn alloc_callback(
        pd: *mut bindings::ib_pd,
        mr_type: bindings::ib_mr_type,
        max_num_sg: u32,
    ) -> *mut bindings::ib_mr {
        // SAFETY: By the safety requirements.
        let p = unsafe { Pd::<T>::from_raw(pd) };
        match T::alloc_mr(p, mr_type, max_num_sg)
            .and_then(|(init, keys)| Self::create(pd, init, keys, false))
        {
            Ok(mr) => mr,
            Err(e) => e.to_ptr(),
        }
    }

    /// `map_mr_sg` callback.
    ///
    /// # Safety
    ///
    /// Called by `ib_core` (`ib_map_mr_sg`) with a live MR created by this
    /// abstraction, after setting its `page_size`, and a kernel consumer's
    /// DMA-mapped scatterlist of `sg_nents` entries; `sg_offset` is NULL or
    /// valid.
    pub(crate) unsafe extern "C" fn map_sg_callback(
        mr: *mut bindings::ib_mr,
        sg: *mut bindings::scatterlist,
        sg_nents: c_int,
        sg_offset: *mut c_uint,
    ) -> c_int {
        // SAFETY: By the safety requirements.
        let this = unsafe { Self::from_raw(mr) };
        // INVARIANT: By the safety requirements.
        let list = SgList {
            mr: this,
            sg,
            nents: sg_nents,
            offset: sg_offset,
        };
        match T::map_mr_sg(this, list) {
            Ok(n) => c_int::try_from(n).unwrap_or(c_int::MAX),
            Err(e) => e.to_errno(),
        }
    }

    /// Set-page callback of `ib_sg_to_pages`, as called by [`SgList::map_to`].
    ///
    /// # Safety
    ///
    /// Only passed to `ib_sg_to_pages` by [`SgList::map_to`], with a live
    /// region of driver `T`.
    unsafe extern "C" fn set_page_callback(mr: *mut bindings::ib_mr, addr: u64) -> c_int {
        // SAFETY: By the safety requirements.
        let this = unsafe { Self::from_raw(mr) };
        let list = this.map_ctx.load(Relaxed);
        if list.is_null() {
            return EINVAL.to_errno();
        }
        // SAFETY: `map_to` published `list` (it holds the list's `&mut` and does not use it
        // during the call) and is running `ib_sg_to_pages`, which calls this synchronously on
        // the same thread; the `cmpxchg` in `map_to` keeps any other mapping of this region out.
        match unsafe { &mut *list }.push(addr) {
            Ok(()) => 0,
            Err(e) => e.to_errno(),
        }
    }

    /// `advise_mr` callback (`ibv_advise_mr`, the uverbs `ADVISE_MR`
    /// method).
    ///
    /// # Safety
    ///
    /// Called by `ib_core` with a live PD of a device of driver `T` and
    /// `num_sge` (at least one) SGEs at `sg_list`.
    pub(crate) unsafe extern "C" fn advise_callback(
        pd: *mut bindings::ib_pd,
        advice: bindings::ib_uverbs_advise_mr_advice,
        flags: u32,
        sg_list: *mut bindings::ib_sge,
        num_sge: u32,
        _attrs: *mut bindings::uverbs_attr_bundle,
    ) -> c_int {
        from_result(|| {
            // SAFETY: `pd` is a live PD of a device of driver `T` by the safety requirements.
            let dev = unsafe { Device::<T>::from_raw((*pd).device) };
            // SAFETY: The core passes an array of `num_sge` SGEs it copied in (at least one),
            // valid for the call.
            let raw = unsafe { core::slice::from_raw_parts(sg_list, num_sge as usize) };
            let mut sges = KVec::with_capacity(raw.len(), GFP_KERNEL)?;
            for s in raw {
                sges.push(
                    AdviseSge {
                        addr: s.addr,
                        length: s.length,
                        lkey: s.lkey,
                    },
                    GFP_KERNEL,
                )?;
            }
            T::advise_mr(dev, pd as usize, advice, flags, &sges)?;
            Ok(0)
        })
    }

    /// `rereg_user_mr` callback.
    ///
    /// The driver changes the region in place, so the callback returns NULL
    /// on success (the RDMA core then moves the region to the new PD and
    /// keeps its keys) and an error pointer otherwise; it never creates a
    /// replacement region.
    ///
    /// # Safety
    ///
    /// Called by `ib_core` with a live MR created by this abstraction and a
    /// live PD (the new one, or the current one), both of a device of
    /// driver `T`.
    pub(crate) unsafe extern "C" fn rereg_user_callback(
        mr: *mut bindings::ib_mr,
        flags: c_int,
        start: u64,
        length: u64,
        iova: u64,
        access: c_int,
        pd: *mut bindings::ib_pd,
        udata: *mut bindings::ib_udata,
    ) -> *mut bindings::ib_mr {
        // CAST: `ib` is the first field.
        // SAFETY: By the safety requirements `mr` is the `ib` of a live `Mr<T>`.
        let this = unsafe { &*mr.cast::<Self>() };
        // SAFETY: By the safety requirements.
        let p = unsafe { Pd::<T>::from_raw(pd) };
        // SAFETY: `udata` is NULL or valid for the call.
        let udata = unsafe { Udata::from_raw(udata) };
        let args = ReregArgs {
            flags,
            start,
            length,
            iova,
            // CAST: the C argument is an `int` holding flag bits.
            access: AccessFlags::from_raw(access as u32),
        };
        match T::rereg_user_mr(this, &args, p, udata) {
            Ok(()) => ptr::null_mut(),
            Err(e) => e.to_ptr(),
        }
    }

    /// `dereg_mr` callback.
    ///
    /// # Safety
    ///
    /// Called by `ib_core` once for an MR created by this abstraction.
    pub(crate) unsafe extern "C" fn dereg_callback(
        mr: *mut bindings::ib_mr,
        _udata: *mut bindings::ib_udata,
    ) -> c_int {
        from_result(|| {
            // CAST: `ib` is the first field.
            let this = mr.cast::<Self>();
            // SAFETY: Valid by the safety requirements.
            let m = unsafe { &*this };
            // A refusal comes first, while the region is still published and usable.
            T::begin_dereg_mr(m)?;
            // Order: no new lookups, then the driver (which may refuse and frees the index),
            // then wait for references held elsewhere, then free.
            m.device().mrs.remove(m.index, this);
            if let Err(e) = T::dereg_mr(m) {
                // SAFETY: The region still holds its initial reference and is removed again
                // before it is dropped.
                if unsafe { m.device().mrs.insert(m.index, this) }.is_err() {
                    pr_warn!("rdma: MR stays unreachable after a failed deregistration\n");
                }
                return Err(e);
            }
            // SAFETY: We own the initial reference; the region is valid for the call.
            unsafe { m.live.put_initial_and_wait() };
            // SAFETY: Allocated by `KBox` in `create`; no reference is left and nothing uses it
            // after this call.
            drop(unsafe { KBox::from_raw(this) });
            Ok(0)
        })
    }
}
