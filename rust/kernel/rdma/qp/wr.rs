// SPDX-License-Identifier: GPL-2.0

//! Work requests of kernel consumers (`struct ib_send_wr`, `struct ib_recv_wr`
//! and the structures that contain them).

use crate::{
    bindings,
    rdma::{
        access::AccessFlags,
        ah::Ah,
        device::{
            Device,
            Driver, //
        },
        mr::Mr, //
    },
};
use kernel::prelude::*;

/// One scatter/gather element of a work request (`struct ib_sge`).
///
/// For kernel consumers `addr` is a DMA address, which on rxe-like devices
/// (no DMA device: `ib_uses_virt_dma`) is the kernel virtual address.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Sge {
    /// Start address (an iova of the MR `lkey` names).
    pub addr: u64,
    /// Length in bytes.
    pub length: u32,
    /// Local key of the MR.
    pub lkey: u32,
}

/// The remote side of an RDMA READ or WRITE (`struct ib_rdma_wr`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RdmaArgs {
    /// Remote virtual address.
    pub remote_addr: u64,
    /// R_Key of the remote region.
    pub rkey: u32,
}

/// The operands of an atomic operation (`struct ib_atomic_wr`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct AtomicArgs {
    /// Remote virtual address (8-byte aligned).
    pub remote_addr: u64,
    /// Compare (CmpSwap) or add (FetchAdd) operand.
    pub compare_add: u64,
    /// Swap operand (CmpSwap).
    pub swap: u64,
    /// R_Key of the remote region.
    pub rkey: u32,
}

/// The destination of a UD or GSI send (`struct ib_ud_wr`).
pub struct UdArgs<'a, T: Driver> {
    /// The address handle, of the same device.
    pub ah: &'a Ah<T>,
    /// Destination QPN.
    pub remote_qpn: u32,
    /// Q_Key.
    pub remote_qkey: u32,
    /// P_Key index (GSI QPs).
    pub pkey_index: u16,
}

/// The arguments of a fast registration (`struct ib_reg_wr`).
pub struct RegArgs<'a, T: Driver> {
    /// The region being registered, of the same device.
    pub mr: &'a Mr<T>,
    /// The new lkey and rkey.
    pub key: u32,
    /// The registration's access flags.
    pub access: AccessFlags,
    /// The region's I/O virtual address as the consumer left it after
    /// mapping (`ib_mr.iova`; consumers may rewrite it after
    /// `ib_map_mr_sg`).
    pub iova: u64,
    /// The region's length in bytes as mapped (`ib_mr.length`).
    pub length: u64,
}

/// A send work request of a kernel consumer (`struct ib_send_wr` and the
/// structure the RDMA core embeds it in), borrowed by `post_send` until the
/// driver queues its WQE.
///
/// The RDMA core's contract (`include/rdma/ib_verbs.h`) says which
/// structure contains the `ib_send_wr`: an `ib_ud_wr` for every WR posted
/// to a UD, GSI or SMI QP (`ud_wr()`); on other QPs an `ib_rdma_wr` for
/// the RDMA READ/WRITE opcodes (`rdma_wr()`), an `ib_atomic_wr` for the
/// atomics (`atomic_wr()`) and an `ib_reg_wr` for `IB_WR_REG_MR`
/// (`reg_wr()`). The accessors below read a containing structure only in
/// those cases.
///
/// # Invariants
///
/// `wr` was posted by a kernel consumer to a kernel QP of device `dev`,
/// of a datagram type exactly when `datagram` is true; it and its containing structure (per the
/// contract above) and its `num_sge` entries of `sg_list` are valid for
/// `'a`, up to the point where the driver queues its WQE: the WR may
/// complete, and its consumer free it, from then on, so a driver reads
/// everything it needs of it before queueing and nothing after.
pub struct SendWr<'a, T: Driver> {
    pub(super) wr: &'a bindings::ib_send_wr,
    /// The QP is of a datagram type (UD, GSI, SMI): `wr` is the `wr` of
    /// an `ib_ud_wr`.
    pub(super) datagram: bool,
    /// The QP's device.
    pub(super) dev: &'a Device<T>,
}

kernel::impl_flags!(
    /// The `IB_SEND_*` flags of a send work request (`enum
    /// ib_send_flags`); unknown bits are kept.
    #[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
    pub struct SendFlags(u32);

    /// One send flag.
    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    pub enum SendFlag {
        /// `IB_SEND_FENCE`: wait for earlier RDMA READs and atomics to
        /// complete.
        // CAST: the C enum is signed (it has a negative reserved bit); these are small positive
        // flags.
        Fence = bindings::ib_send_flags_IB_SEND_FENCE as u32,
        /// `IB_SEND_SIGNALED`: complete with a CQE whatever the QP's
        /// `sq_sig_type`.
        Signaled = bindings::ib_send_flags_IB_SEND_SIGNALED as u32,
        /// `IB_SEND_SOLICITED`: set the BTH SE bit of the last packet.
        Solicited = bindings::ib_send_flags_IB_SEND_SOLICITED as u32,
        /// `IB_SEND_INLINE`: the data is copied into the WQE at posting.
        Inline = bindings::ib_send_flags_IB_SEND_INLINE as u32,
        /// `IB_SEND_IP_CSUM`: checksum offload.
        IpCsum = bindings::ib_send_flags_IB_SEND_IP_CSUM as u32,
    }
);

impl SendFlags {
    /// The flags of the C value `v`, unknown bits included.
    pub const fn from_raw(v: u32) -> Self {
        Self(v)
    }

    /// The C value.
    pub const fn raw(self) -> u32 {
        self.0
    }
}

/// The placement types (`enum ib_placement_type`) and selectivity levels
/// (`enum ib_selectivity_level`) of a FLUSH (IBTA Vol 1 Annex A19), as
/// user space writes them into a FLUSH work request.
pub mod flush {
    use crate::bindings;
    /// `IB_FLUSH_GLOBAL`: placement for global visibility.
    pub const GLOBAL: u32 = bindings::ib_placement_type_IB_FLUSH_GLOBAL;
    /// `IB_FLUSH_PERSISTENT`: placement for persistence.
    pub const PERSISTENT: u32 = bindings::ib_placement_type_IB_FLUSH_PERSISTENT;
    /// `IB_FLUSH_RANGE`: the RETH's range.
    pub const RANGE: u32 = bindings::ib_selectivity_level_IB_FLUSH_RANGE;
    /// `IB_FLUSH_MR`: the whole memory region.
    pub const MR: u32 = bindings::ib_selectivity_level_IB_FLUSH_MR;
}

/// `IB_QP_SET_QKEY`: a datagram send WR whose `remote_qkey` has this bit
/// set is sent with the QP's own Q_Key (IBTA Vol 1 §10.2.5, C10-15).
pub const QKEY_USE_QP: u32 = bindings::IB_QP_SET_QKEY;

/// Work request opcodes (`enum ib_wr_opcode`).
pub mod wr_opcode {
    use crate::bindings;
    /// `IB_WR_RDMA_WRITE`.
    pub const RDMA_WRITE: u32 = bindings::ib_wr_opcode_IB_WR_RDMA_WRITE;
    /// `IB_WR_RDMA_WRITE_WITH_IMM`.
    pub const RDMA_WRITE_WITH_IMM: u32 = bindings::ib_wr_opcode_IB_WR_RDMA_WRITE_WITH_IMM;
    /// `IB_WR_SEND`.
    pub const SEND: u32 = bindings::ib_wr_opcode_IB_WR_SEND;
    /// `IB_WR_SEND_WITH_IMM`.
    pub const SEND_WITH_IMM: u32 = bindings::ib_wr_opcode_IB_WR_SEND_WITH_IMM;
    /// `IB_WR_RDMA_READ`.
    pub const RDMA_READ: u32 = bindings::ib_wr_opcode_IB_WR_RDMA_READ;
    /// `IB_WR_ATOMIC_CMP_AND_SWP`.
    pub const ATOMIC_CMP_AND_SWP: u32 = bindings::ib_wr_opcode_IB_WR_ATOMIC_CMP_AND_SWP;
    /// `IB_WR_ATOMIC_FETCH_AND_ADD`.
    pub const ATOMIC_FETCH_AND_ADD: u32 = bindings::ib_wr_opcode_IB_WR_ATOMIC_FETCH_AND_ADD;
    /// `IB_WR_LOCAL_INV`.
    pub const LOCAL_INV: u32 = bindings::ib_wr_opcode_IB_WR_LOCAL_INV;
    /// `IB_WR_BIND_MW`.
    pub const BIND_MW: u32 = bindings::ib_wr_opcode_IB_WR_BIND_MW;
    /// `IB_WR_SEND_WITH_INV`.
    pub const SEND_WITH_INV: u32 = bindings::ib_wr_opcode_IB_WR_SEND_WITH_INV;
    /// `IB_WR_LSO`.
    pub const LSO: u32 = bindings::ib_wr_opcode_IB_WR_LSO;
    /// `IB_WR_RDMA_READ_WITH_INV`.
    pub const RDMA_READ_WITH_INV: u32 = bindings::ib_wr_opcode_IB_WR_RDMA_READ_WITH_INV;
    /// `IB_WR_MASKED_ATOMIC_CMP_AND_SWP`.
    pub const MASKED_ATOMIC_CMP_AND_SWP: u32 =
        bindings::ib_wr_opcode_IB_WR_MASKED_ATOMIC_CMP_AND_SWP;
    /// `IB_WR_MASKED_ATOMIC_FETCH_AND_ADD`.
    pub const MASKED_ATOMIC_FETCH_AND_ADD: u32 =
        bindings::ib_wr_opcode_IB_WR_MASKED_ATOMIC_FETCH_AND_ADD;
    /// `IB_WR_FLUSH`.
    pub const FLUSH: u32 = bindings::ib_wr_opcode_IB_WR_FLUSH;
    /// `IB_WR_ATOMIC_WRITE`.
    pub const ATOMIC_WRITE: u32 = bindings::ib_wr_opcode_IB_WR_ATOMIC_WRITE;
    /// `IB_WR_REG_MR`.
    pub const REG_MR: u32 = bindings::ib_wr_opcode_IB_WR_REG_MR;
}

/// Reads entry `i` of an SGE list of `num_sge` entries.
///
/// # Safety
///
/// `sg_list` holds `num_sge` valid entries (when `num_sge` is positive).
unsafe fn sge_at(sg_list: *const bindings::ib_sge, num_sge: c_int, i: u32) -> Option<Sge> {
    let n = u32::try_from(num_sge).ok()?;
    if i >= n || sg_list.is_null() {
        return None;
    }
    // SAFETY: `i < num_sge` entries are valid by the safety requirements; `u32` fits `usize`.
    let s = unsafe { &*sg_list.add(i as usize) };
    Some(Sge {
        addr: s.addr,
        length: s.length,
        lkey: s.lkey,
    })
}

impl<'a, T: Driver> SendWr<'a, T> {
    /// The consumer's id (`wr_id`, or a `struct ib_cqe *` as a number).
    pub fn wr_id(&self) -> u64 {
        self.wr.__bindgen_anon_1.bindgen_union_field
    }

    /// `enum ib_wr_opcode`.
    pub fn opcode(&self) -> u32 {
        self.wr.opcode
    }

    /// `IB_SEND_*` flags.
    pub fn send_flags(&self) -> SendFlags {
        // CAST: the C field is an `int` holding flag bits.
        SendFlags::from_raw(self.wr.send_flags as u32)
    }

    /// Number of SGEs; `u32::MAX` for a negative count (a consumer bug that
    /// any `max_send_sge` check rejects).
    pub fn num_sge(&self) -> u32 {
        u32::try_from(self.wr.num_sge).unwrap_or(u32::MAX)
    }

    /// SGE `i`, if `i` is below [`SendWr::num_sge`].
    pub fn sge(&self, i: u32) -> Option<Sge> {
        // SAFETY: `sg_list` holds `num_sge` valid entries by the type invariant.
        unsafe { sge_at(self.wr.sg_list, self.wr.num_sge, i) }
    }

    /// `ex.imm_data` as stored: the four bytes of the `__be32` (wire order)
    /// read as a native `u32`, so `imm_data().to_ne_bytes()` is the ImmDt.
    pub fn imm_data(&self) -> u32 {
        self.wr.ex.bindgen_union_field
    }

    /// `ex.invalidate_rkey` (the same bytes as [`SendWr::imm_data`]).
    pub fn invalidate_rkey(&self) -> u32 {
        self.wr.ex.bindgen_union_field
    }

    fn is_ud(&self) -> bool {
        self.datagram
    }

    /// The remote address and key of an RDMA READ or WRITE opcode
    /// (`rdma_wr()`); `None` for other opcodes and on UD QPs.
    pub fn rdma(&self) -> Option<RdmaArgs> {
        if self.is_ud()
            || !matches!(
                self.opcode(),
                wr_opcode::RDMA_WRITE
                    | wr_opcode::RDMA_WRITE_WITH_IMM
                    | wr_opcode::RDMA_READ
                    | wr_opcode::RDMA_READ_WITH_INV
            )
        {
            return None;
        }
        // CAST: by the RDMA core's contract (type invariant) `wr` is the first field of an
        // `ib_rdma_wr` for these opcodes on a connected QP.
        let c = core::ptr::from_ref(self.wr).cast::<bindings::ib_rdma_wr>();
        // SAFETY: The containing `ib_rdma_wr` is valid for `'a` by the type invariant.
        let c = unsafe { &*c };
        Some(RdmaArgs {
            remote_addr: c.remote_addr,
            rkey: c.rkey,
        })
    }

    /// The operands of an atomic opcode (`atomic_wr()`); `None` for other
    /// opcodes and on UD QPs.
    pub fn atomic(&self) -> Option<AtomicArgs> {
        if self.is_ud()
            || !matches!(
                self.opcode(),
                wr_opcode::ATOMIC_CMP_AND_SWP
                    | wr_opcode::ATOMIC_FETCH_AND_ADD
                    | wr_opcode::MASKED_ATOMIC_CMP_AND_SWP
                    | wr_opcode::MASKED_ATOMIC_FETCH_AND_ADD
            )
        {
            return None;
        }
        // CAST: by the RDMA core's contract `wr` is the first field of an `ib_atomic_wr` for
        // these opcodes on a connected QP.
        let c = core::ptr::from_ref(self.wr).cast::<bindings::ib_atomic_wr>();
        // SAFETY: The containing `ib_atomic_wr` is valid for `'a` by the type invariant.
        let c = unsafe { &*c };
        Some(AtomicArgs {
            remote_addr: c.remote_addr,
            compare_add: c.compare_add,
            swap: c.swap,
            rkey: c.rkey,
        })
    }

    /// The destination of a send on a UD or GSI QP (`ud_wr()`); `None` on
    /// other QPs, and when the address handle is missing or belongs to
    /// another device.
    pub fn ud(&self) -> Option<UdArgs<'a, T>> {
        if !self.is_ud() {
            return None;
        }
        // CAST: by the RDMA core's contract `wr` is the first field of an `ib_ud_wr` on UD, GSI
        // and SMI QPs.
        let c = core::ptr::from_ref(self.wr).cast::<bindings::ib_ud_wr>();
        // SAFETY: The containing `ib_ud_wr` is valid for `'a` by the type invariant.
        let c: &'a bindings::ib_ud_wr = unsafe { &*c };
        if c.ah.is_null() {
            return None;
        }
        // SAFETY: A non-NULL `ah` of a kernel UD WR is a live address handle the consumer holds
        // for the call; `device` is constant after creation.
        let dev = unsafe { (*c.ah).device };
        if dev != self.dev.as_raw() {
            return None;
        }
        // SAFETY: Every AH of our device was created by `Ah::<T>::create_callback` and is
        // initialised; the consumer keeps it alive for `'a`.
        let ah = unsafe { Ah::<T>::from_raw(c.ah) };
        Some(UdArgs {
            ah,
            remote_qpn: c.remote_qpn,
            remote_qkey: c.remote_qkey,
            pkey_index: c.pkey_index,
        })
    }

    /// The arguments of `IB_WR_REG_MR` (`reg_wr()`); `None` for other
    /// opcodes, on UD QPs and when the region belongs to another device.
    pub fn reg(&self) -> Option<RegArgs<'a, T>> {
        if self.is_ud() || self.opcode() != wr_opcode::REG_MR {
            return None;
        }
        // CAST: by the RDMA core's contract `wr` is the first field of an `ib_reg_wr` for
        // `IB_WR_REG_MR`.
        let c = core::ptr::from_ref(self.wr).cast::<bindings::ib_reg_wr>();
        // SAFETY: The containing `ib_reg_wr` is valid for `'a` by the type invariant.
        let c: &'a bindings::ib_reg_wr = unsafe { &*c };
        if c.mr.is_null() {
            return None;
        }
        // SAFETY: A non-NULL `mr` of a REG_MR WR is a live region the consumer holds for the
        // call; `device` is constant after creation.
        let dev = unsafe { (*c.mr).device };
        if dev != self.dev.as_raw() {
            return None;
        }
        // SAFETY: Every MR of our device was created by `Mr::<T>`'s callbacks (the driver's ops
        // are the only way to make one) and stays valid while the consumer holds it, for `'a`.
        let mr = unsafe { Mr::<T>::from_raw(c.mr) };
        // SAFETY: The consumer posting the WR owns the region and does not change it during the
        // post (`ib_map_mr_sg` and the rewrites of `iova` happen before).
        let (iova, length) = unsafe { ((*c.mr).iova, (*c.mr).length) };
        Some(RegArgs {
            mr,
            key: c.key,
            // CAST: the C field is an `int` holding flag bits.
            access: AccessFlags::from_raw(c.access as u32),
            iova,
            length,
        })
    }

    /// Copies the data of an `IB_SEND_INLINE` WR into `dst`, SGE after SGE,
    /// as the C driver's `copy_inline_data_to_wqe` does, and returns its
    /// length.
    ///
    /// `EINVAL` if the WR is not inline, the data does not fit `dst`, or an
    /// SGE has a NULL address.
    pub fn copy_inline(&self, dst: &mut [u8]) -> Result<usize> {
        if !self.send_flags().contains(SendFlag::Inline) {
            return Err(EINVAL);
        }
        let mut total = 0usize;
        for i in 0..self.num_sge() {
            let sge = self.sge(i).ok_or(EINVAL)?;
            let len = sge.length as usize;
            if len == 0 {
                continue;
            }
            let end = total.checked_add(len).ok_or(EINVAL)?;
            let to = dst.get_mut(total..end).ok_or(EINVAL)?;
            if sge.addr == 0 {
                return Err(EINVAL);
            }
            // CAST: with virtual DMA (no DMA device) the address of an inline SGE is a kernel
            // virtual address (`ib_virt_dma_to_ptr`).
            let from = sge.addr as usize as *const u8;
            // SAFETY: The WR comes from a kernel consumer (type invariant), which vouches that
            // the `length` bytes at each inline SGE's address are readable kernel memory it
            // owns for the duration of `post_send` (the buffer may be reused once the call
            // returns), as with the C driver. `to` is a distinct Rust buffer of `len` bytes.
            unsafe { core::ptr::copy_nonoverlapping(from, to.as_mut_ptr(), len) };
            total = end;
        }
        Ok(total)
    }
}

/// A receive work request (`struct ib_recv_wr`), borrowed by `post_recv`
/// until the driver queues its WQE.
///
/// # Invariants
///
/// `wr` and its `num_sge` entries of `sg_list` are valid for `'a`, up to
/// the point where the driver queues its WQE (as for [`SendWr`]).
pub struct RecvWr<'a> {
    wr: &'a bindings::ib_recv_wr,
}

impl RecvWr<'_> {
    /// The consumer's id (`wr_id`, or a `struct ib_cqe *` as a number).
    pub fn wr_id(&self) -> u64 {
        self.wr.__bindgen_anon_1.bindgen_union_field
    }

    /// Number of SGEs; `u32::MAX` for a negative count.
    pub fn num_sge(&self) -> u32 {
        u32::try_from(self.wr.num_sge).unwrap_or(u32::MAX)
    }

    /// SGE `i`, if `i` is below [`RecvWr::num_sge`].
    pub fn sge(&self, i: u32) -> Option<Sge> {
        // SAFETY: `sg_list` holds `num_sge` valid entries by the type invariant.
        unsafe { sge_at(self.wr.sg_list, self.wr.num_sge, i) }
    }
}

/// Gives each WR of the receive WR list `wr` to `post`, in list order, for
/// the `post_recv` and `post_srq_recv` callbacks.
///
/// The first WR that `post` refuses ends the walk: `*bad` names it and its
/// error is returned, and the WRs after it are not looked at, as
/// `ib_post_recv` and `ib_post_srq_recv` document.
///
/// # Safety
///
/// `wr` is NULL or a list of WRs that, with their SGE lists, stay valid for
/// the call until `post` has queued each; `bad` is NULL or valid for writes.
pub(crate) unsafe fn post_recv_list(
    wr: *const bindings::ib_recv_wr,
    bad: *mut *const bindings::ib_recv_wr,
    mut post: impl FnMut(&RecvWr<'_>) -> Result,
) -> c_int {
    let mut cur = wr;
    while !cur.is_null() {
        // SAFETY: A valid element of the list, not posted yet, by the safety requirements.
        let w = unsafe { &*cur };
        // A posted receive may complete (a packet arriving in softirq) and its WR be freed by
        // the consumer's completion handler before this returns: read the link first.
        let next = w.next;
        // INVARIANT: The caller keeps `w` and its SGE list valid until it is posted.
        let r = RecvWr { wr: w };
        if let Err(e) = post(&r) {
            if !bad.is_null() {
                // SAFETY: `bad` is valid for writes by the safety requirements.
                unsafe { *bad = cur };
            }
            return e.to_errno();
        }
        cur = next;
    }
    0
}
