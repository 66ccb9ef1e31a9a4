// SPDX-License-Identifier: GPL-2.0

//! Queue pairs (`struct ib_qp`).
//!
//! C header: [`include/rdma/ib_verbs.h`](srctree/include/rdma/ib_verbs.h)

use crate::{
    bindings,
    net::{
        skbuff::{
            xmit_udp_charged,
            TxCredit,
            TxOwner, //
        },
        Namespace,
        SkBuff, //
    },
    rdma::{
        ah::Ah,
        cq::Cq,
        device::{
            Device,
            Driver, //
        },
        mr::Mr,
        srq::Srq,
        table::{
            Liveness,
            Published, //
        },
        timer::Timer,
        udata::Udata,
        Gid, //
    },
};
use core::{
    marker::PhantomData,
    ops::Deref,
    ptr::NonNull, //
};
use kernel::{
    error::{
        from_result,
        to_result, //
    },
    prelude::*,
    sync::{
        aref::AlwaysRefCounted,
        atomic::{
            Atomic,
            Relaxed, //
        },
    },
    types::Opaque, //
};

pub use crate::rdma::ah::Av;

/// QP types (`enum ib_qp_type`) as raw values.
pub mod qp_type {
    use crate::bindings;
    /// `IB_QPT_SMI`.
    pub const SMI: u32 = bindings::ib_qp_type_IB_QPT_SMI;
    /// `IB_QPT_GSI`.
    pub const GSI: u32 = bindings::ib_qp_type_IB_QPT_GSI;
    /// `IB_QPT_RC`.
    pub const RC: u32 = bindings::ib_qp_type_IB_QPT_RC;
    /// `IB_QPT_UC`.
    pub const UC: u32 = bindings::ib_qp_type_IB_QPT_UC;
    /// `IB_QPT_UD`.
    pub const UD: u32 = bindings::ib_qp_type_IB_QPT_UD;
}

/// QP states (`enum ib_qp_state`) as raw values.
pub mod qp_state {
    use crate::bindings;
    /// `IB_QPS_RESET`.
    pub const RESET: u32 = bindings::ib_qp_state_IB_QPS_RESET;
    /// `IB_QPS_INIT`.
    pub const INIT: u32 = bindings::ib_qp_state_IB_QPS_INIT;
    /// `IB_QPS_RTR`.
    pub const RTR: u32 = bindings::ib_qp_state_IB_QPS_RTR;
    /// `IB_QPS_RTS`.
    pub const RTS: u32 = bindings::ib_qp_state_IB_QPS_RTS;
    /// `IB_QPS_SQD`.
    pub const SQD: u32 = bindings::ib_qp_state_IB_QPS_SQD;
    /// `IB_QPS_SQE`.
    pub const SQE: u32 = bindings::ib_qp_state_IB_QPS_SQE;
    /// `IB_QPS_ERR`.
    pub const ERR: u32 = bindings::ib_qp_state_IB_QPS_ERR;
}

/// Attribute mask bits (`enum ib_qp_attr_mask`).
pub mod mask {
    use crate::bindings;
    /// `IB_QP_STATE`.
    pub const STATE: u32 = bindings::ib_qp_attr_mask_IB_QP_STATE;
    /// `IB_QP_CUR_STATE`.
    pub const CUR_STATE: u32 = bindings::ib_qp_attr_mask_IB_QP_CUR_STATE;
    /// `IB_QP_EN_SQD_ASYNC_NOTIFY`.
    pub const EN_SQD_ASYNC_NOTIFY: u32 = bindings::ib_qp_attr_mask_IB_QP_EN_SQD_ASYNC_NOTIFY;
    /// `IB_QP_ACCESS_FLAGS`.
    pub const ACCESS_FLAGS: u32 = bindings::ib_qp_attr_mask_IB_QP_ACCESS_FLAGS;
    /// `IB_QP_PKEY_INDEX`.
    pub const PKEY_INDEX: u32 = bindings::ib_qp_attr_mask_IB_QP_PKEY_INDEX;
    /// `IB_QP_PORT`.
    pub const PORT: u32 = bindings::ib_qp_attr_mask_IB_QP_PORT;
    /// `IB_QP_QKEY`.
    pub const QKEY: u32 = bindings::ib_qp_attr_mask_IB_QP_QKEY;
    /// `IB_QP_AV`.
    pub const AV: u32 = bindings::ib_qp_attr_mask_IB_QP_AV;
    /// `IB_QP_PATH_MTU`.
    pub const PATH_MTU: u32 = bindings::ib_qp_attr_mask_IB_QP_PATH_MTU;
    /// `IB_QP_TIMEOUT`.
    pub const TIMEOUT: u32 = bindings::ib_qp_attr_mask_IB_QP_TIMEOUT;
    /// `IB_QP_RETRY_CNT`.
    pub const RETRY_CNT: u32 = bindings::ib_qp_attr_mask_IB_QP_RETRY_CNT;
    /// `IB_QP_RNR_RETRY`.
    pub const RNR_RETRY: u32 = bindings::ib_qp_attr_mask_IB_QP_RNR_RETRY;
    /// `IB_QP_RQ_PSN`.
    pub const RQ_PSN: u32 = bindings::ib_qp_attr_mask_IB_QP_RQ_PSN;
    /// `IB_QP_MAX_QP_RD_ATOMIC`.
    pub const MAX_QP_RD_ATOMIC: u32 = bindings::ib_qp_attr_mask_IB_QP_MAX_QP_RD_ATOMIC;
    /// `IB_QP_ALT_PATH`.
    pub const ALT_PATH: u32 = bindings::ib_qp_attr_mask_IB_QP_ALT_PATH;
    /// `IB_QP_MIN_RNR_TIMER`.
    pub const MIN_RNR_TIMER: u32 = bindings::ib_qp_attr_mask_IB_QP_MIN_RNR_TIMER;
    /// `IB_QP_SQ_PSN`.
    pub const SQ_PSN: u32 = bindings::ib_qp_attr_mask_IB_QP_SQ_PSN;
    /// `IB_QP_MAX_DEST_RD_ATOMIC`.
    pub const MAX_DEST_RD_ATOMIC: u32 = bindings::ib_qp_attr_mask_IB_QP_MAX_DEST_RD_ATOMIC;
    /// `IB_QP_PATH_MIG_STATE`.
    pub const PATH_MIG_STATE: u32 = bindings::ib_qp_attr_mask_IB_QP_PATH_MIG_STATE;
    /// `IB_QP_CAP`.
    pub const CAP: u32 = bindings::ib_qp_attr_mask_IB_QP_CAP;
    /// `IB_QP_DEST_QPN`.
    pub const DEST_QPN: u32 = bindings::ib_qp_attr_mask_IB_QP_DEST_QPN;
    /// `IB_QP_ATTR_STANDARD_BITS`: every bit below `IB_QP_RATE_LIMIT`.
    pub const STANDARD_BITS: u32 = (bindings::ib_qp_attr_mask_IB_QP_RATE_LIMIT << 1) - 1;
}

/// Capabilities of a QP's work queues (`struct ib_qp_cap`).
#[derive(Clone, Copy, Debug, Default)]
pub struct QpCap {
    /// Send queue depth.
    pub max_send_wr: u32,
    /// Receive queue depth.
    pub max_recv_wr: u32,
    /// SGEs per send WR.
    pub max_send_sge: u32,
    /// SGEs per receive WR.
    pub max_recv_sge: u32,
    /// Inline data per send WR, in bytes.
    pub max_inline_data: u32,
}

impl QpCap {
    fn from_raw(c: &bindings::ib_qp_cap) -> Self {
        Self {
            max_send_wr: c.max_send_wr,
            max_recv_wr: c.max_recv_wr,
            max_send_sge: c.max_send_sge,
            max_recv_sge: c.max_recv_sge,
            max_inline_data: c.max_inline_data,
        }
    }

    fn write_raw(&self, c: &mut bindings::ib_qp_cap) {
        c.max_send_wr = self.max_send_wr;
        c.max_recv_wr = self.max_recv_wr;
        c.max_send_sge = self.max_send_sge;
        c.max_recv_sge = self.max_recv_sge;
        c.max_inline_data = self.max_inline_data;
    }
}

/// Creation attributes of a QP (`struct ib_qp_init_attr`).
#[derive(Clone, Copy, Debug)]
pub struct QpInitAttr {
    /// `enum ib_qp_type`, see [`qp_type`].
    pub qp_type: u32,
    /// Requested capabilities; the driver writes back what it allocated.
    pub cap: QpCap,
    /// Every send WR completes (`IB_SIGNAL_ALL_WR`).
    pub sq_sig_all: bool,
    /// `enum ib_qp_create_flags`.
    pub create_flags: u32,
    /// Port (GSI/SMI only).
    pub port_num: u32,
    /// Whether both CQs are given.
    pub has_cqs: bool,
    /// Whether the QP receives from an SRQ.
    pub has_srq: bool,
}

/// Attributes of a QP (`struct ib_qp_attr`), as the driver stores and
/// reports them.
///
/// The address vectors are kept without their `sgid_attr` references (the
/// RDMA core only lends those for the duration of a call).
pub struct QpAttr(bindings::ib_qp_attr);

impl Clone for QpAttr {
    fn clone(&self) -> Self {
        Self(self.0.clone_raw())
    }
}

// SAFETY: The only pointers (`sgid_attr`, `xmit_slave`) are always NULL in a stored `QpAttr`.
unsafe impl Send for QpAttr {}
// SAFETY: As above.
unsafe impl Sync for QpAttr {}

macro_rules! qp_attr_accessors {
    ($($(#[$m:meta])* $get:ident, $set:ident: $t:ty;)*) => {
        $(
            $(#[$m])*
            pub fn $get(&self) -> $t { self.0.$get }
            /// Sets the field of the same name.
            pub fn $set(&mut self, v: $t) { self.0.$get = v; }
        )*
    };
}

impl QpAttr {
    /// All-zero attributes (state RESET).
    pub fn new() -> Self {
        // SAFETY: All-zero is a valid `ib_qp_attr`.
        Self(unsafe { core::mem::zeroed() })
    }

    fn from_raw(a: &bindings::ib_qp_attr) -> Self {
        // SAFETY: `ib_qp_attr` is plain data; the copy is a bitwise snapshot.
        let mut c = Self(unsafe { core::ptr::read(a) });
        c.0.ah_attr.grh.sgid_attr = core::ptr::null();
        c.0.alt_ah_attr.grh.sgid_attr = core::ptr::null();
        c.0.xmit_slave = core::ptr::null_mut();
        c
    }

    qp_attr_accessors! {
        /// `qp_state`.
        qp_state, set_qp_state: u32;
        /// `cur_qp_state`.
        cur_qp_state, set_cur_qp_state: u32;
        /// `path_mtu` (`enum ib_mtu`).
        path_mtu, set_path_mtu: u32;
        /// `qp_access_flags`.
        qp_access_flags, set_qp_access_flags: i32;
        /// `port_num`.
        port_num, set_port_num: u32;
        /// `alt_port_num`.
        alt_port_num, set_alt_port_num: u32;
        /// `timeout` (4.096 µs × 2^timeout).
        timeout, set_timeout: u8;
        /// `alt_timeout`.
        alt_timeout, set_alt_timeout: u8;
        /// `max_rd_atomic`.
        max_rd_atomic, set_max_rd_atomic: u8;
        /// `max_dest_rd_atomic`.
        max_dest_rd_atomic, set_max_dest_rd_atomic: u8;
        /// `sq_draining`.
        sq_draining, set_sq_draining: u8;
        /// `sq_psn`.
        sq_psn, set_sq_psn: u32;
        /// `rq_psn`.
        rq_psn, set_rq_psn: u32;
        /// `dest_qp_num`: the remote QPN (RC, UC).
        dest_qp_num, set_dest_qp_num: u32;
        /// `retry_cnt`: transport retries before an error (0..=7).
        retry_cnt, set_retry_cnt: u8;
        /// `rnr_retry`: RNR NAK retries (0..=6; 7 means unlimited).
        rnr_retry, set_rnr_retry: u8;
        /// `min_rnr_timer`: the RNR NAK timer field sent to the requester
        /// (IBTA Vol 1 §9.7.5.2.8, table of encoded times).
        min_rnr_timer, set_min_rnr_timer: u8;
        /// `qkey` (UD, GSI).
        qkey, set_qkey: u32;
        /// `pkey_index`.
        pkey_index, set_pkey_index: u16;
    }

    /// The GRH of the primary path: destination GID, source GID index, flow
    /// label, traffic class and hop limit; and the destination MAC.
    pub fn av(&self) -> Av {
        Av::from_ah_attr(&self.0.ah_attr)
    }

    /// `cap`.
    pub fn cap(&self) -> QpCap {
        QpCap::from_raw(&self.0.cap)
    }

    /// Sets `cap`.
    pub fn set_cap(&mut self, cap: &QpCap) {
        cap.write_raw(&mut self.0.cap);
    }

    /// Port of the primary address vector.
    pub fn ah_port_num(&self) -> u32 {
        self.0.ah_attr.port_num
    }

    /// Copies the fields of `new` selected by `mask` (`IB_QP_*`), except the
    /// state, which the caller sets after its checks.
    pub fn merge(&mut self, new: &QpAttr, m: u32) {
        let (d, s) = (&mut self.0, &new.0);
        macro_rules! take {
            ($bit:expr, $($f:ident),+) => {
                if m & $bit != 0 { $(d.$f = s.$f;)+ }
            };
        }
        take!(mask::CUR_STATE, cur_qp_state);
        take!(mask::EN_SQD_ASYNC_NOTIFY, en_sqd_async_notify);
        take!(mask::ACCESS_FLAGS, qp_access_flags);
        take!(mask::PKEY_INDEX, pkey_index);
        take!(mask::PORT, port_num);
        take!(mask::QKEY, qkey);
        if m & mask::AV != 0 {
            // SAFETY: Plain data copy; the `sgid_attr` reference is dropped below.
            d.ah_attr = unsafe { core::ptr::read(&s.ah_attr) };
            d.ah_attr.grh.sgid_attr = core::ptr::null();
        }
        if m & mask::ALT_PATH != 0 {
            // SAFETY: As above.
            d.alt_ah_attr = unsafe { core::ptr::read(&s.alt_ah_attr) };
            d.alt_ah_attr.grh.sgid_attr = core::ptr::null();
            d.alt_port_num = s.alt_port_num;
            d.alt_pkey_index = s.alt_pkey_index;
            d.alt_timeout = s.alt_timeout;
        }
        take!(mask::PATH_MTU, path_mtu);
        take!(mask::TIMEOUT, timeout);
        take!(mask::RETRY_CNT, retry_cnt);
        take!(mask::RNR_RETRY, rnr_retry);
        take!(mask::RQ_PSN, rq_psn);
        take!(mask::MAX_QP_RD_ATOMIC, max_rd_atomic);
        take!(mask::MIN_RNR_TIMER, min_rnr_timer);
        take!(mask::SQ_PSN, sq_psn);
        take!(mask::MAX_DEST_RD_ATOMIC, max_dest_rd_atomic);
        take!(mask::PATH_MIG_STATE, path_mig_state);
        take!(mask::DEST_QPN, dest_qp_num);
    }
}

impl Default for QpAttr {
    fn default() -> Self {
        Self::new()
    }
}

/// Whether the IBTA transition table allows going from `cur` to `next` for
/// a QP of type `ty` with attribute mask `mask` (`ib_modify_qp_is_ok`).
pub fn modify_is_ok(cur: u32, next: u32, ty: u32, mask: u32) -> bool {
    // SAFETY: Pure function over its arguments.
    unsafe { bindings::ib_modify_qp_is_ok(cur, next, ty, mask) }
}

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
    /// `IB_ACCESS_*` flags.
    pub access: i32,
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
/// `wr` was posted by a kernel consumer to a kernel QP of type `qp_type`
/// of device `dev`; it and its containing structure (per the
/// contract above) and its `num_sge` entries of `sg_list` are valid for
/// `'a`, up to the point where the driver queues its WQE: the WR may
/// complete, and its consumer free it, from then on, so a driver reads
/// everything it needs of it before queueing and nothing after.
pub struct SendWr<'a, T: Driver> {
    wr: &'a bindings::ib_send_wr,
    qp_type: u32,
    /// The QP's device.
    dev: &'a Device<T>,
}

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
    pub fn send_flags(&self) -> u32 {
        // CAST: the C field is an `int` holding flag bits.
        self.wr.send_flags as u32
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
        matches!(self.qp_type, qp_type::UD | qp_type::GSI | qp_type::SMI)
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
            access: c.access,
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
        // CAST: a small positive flag.
        if self.send_flags() & bindings::ib_send_flags_IB_SEND_INLINE as u32 == 0 {
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

/// An asynchronous event of a QP (`enum ib_event_type`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u32)]
pub enum QpEvent {
    /// `IB_EVENT_QP_LAST_WQE_REACHED`: a QP that receives from an SRQ
    /// entered the error state and takes no more WQEs from it (IBTA Vol 1
    /// §10.3.1, §11.6.3).
    LastWqeReached = bindings::ib_event_type_IB_EVENT_QP_LAST_WQE_REACHED,
    /// `IB_EVENT_SQ_DRAINED`: a QP moved to SQD has no message of its send
    /// queue in progress any more (§10.3.1, §11.6.3).
    SqDrained = bindings::ib_event_type_IB_EVENT_SQ_DRAINED,
    /// `IB_EVENT_QP_ACCESS_ERR`: the responder met an access violation it
    /// cannot report in a receive completion (§11.6.3, C9-222.1).
    AccessErr = bindings::ib_event_type_IB_EVENT_QP_ACCESS_ERR,
}

/// The timers of a QP ([`Qp::arm_timer`]).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum QpTimer {
    /// The requester's transport timer (local ACK timeout, IBTA Vol 1
    /// §9.7.6.1.3).
    Retransmit,
    /// The requester's wait after an RNR NAK (IBTA Vol 1 §9.7.5.2.8).
    Rnr,
}

/// A queue pair of a device of driver `T`, with the driver's state in place.
///
/// The RDMA core allocates it (`size_ib_qp`, zeroed); the abstraction adds
/// a reference count, so that [`Device::lookup_qp`] can hand out
/// `ARef<Qp<T>>`, and two timers.
///
/// # Invariants
///
/// - `ib` is at offset 0 and is a valid `struct ib_qp` of a device of driver
///   `T` while a reference to `Self` exists.
/// - `live` and the timers are initialised and `data` is initialised while a
///   reference to `Self` exists; the timers are shut down before `data` is
///   dropped.
/// - The memory is not freed before the count of `live` reached zero.
#[repr(C)]
pub struct Qp<T: Driver> {
    ib: Opaque<bindings::ib_qp>,
    live: Liveness,
    /// Set when destruction begins.
    dying: Atomic<bool>,
    retransmit_timer: Timer,
    rnr_timer: Timer,
    /// The kick ([`Qp::kick`]); while queued it owns a reference.
    kick_work: Opaque<bindings::work_struct>,
    /// Work that may sleep ([`Qp::queue_sleepable`]); while queued it owns
    /// a reference.
    sleep_work: Opaque<bindings::work_struct>,
    /// Transmit credit of the QP's packets ([`Qp::xmit`]).
    tx_credit: TxCredit,
    data: T::QpData,
}

// SAFETY: The C part is synchronised by the RDMA core; the data is `Send`.
unsafe impl<T: Driver> Send for Qp<T> {}
// SAFETY: The data is `Sync`; the C fields read through `&self` are constant after creation.
unsafe impl<T: Driver> Sync for Qp<T> {}

/// The QP being created, before its driver state exists.
pub struct NewQp<T: Driver>(*mut bindings::ib_qp, core::marker::PhantomData<T>);

impl<T: Driver> NewQp<T> {
    /// The device.
    pub fn device(&self) -> &Device<T> {
        // SAFETY: `device` is set by the RDMA core before `create_qp`.
        unsafe { Device::from_raw((*self.0).device) }
    }

    /// The send CQ.
    pub fn send_cq(&self) -> Option<&Cq<T>> {
        // SAFETY: Set by the RDMA core from the init attributes; a CQ of our device, alive while
        // the QP holds its use count.
        unsafe {
            (*self.0)
                .send_cq
                .as_ref()
                .map(|c| Cq::from_raw(core::ptr::from_ref(c).cast_mut()))
        }
    }

    /// The receive CQ.
    pub fn recv_cq(&self) -> Option<&Cq<T>> {
        // SAFETY: As for `send_cq`.
        unsafe {
            (*self.0)
                .recv_cq
                .as_ref()
                .map(|c| Cq::from_raw(core::ptr::from_ref(c).cast_mut()))
        }
    }
}

impl<T: Driver> Qp<T> {
    /// Checked when the ops table is built: `ib_core` allocates with `kzalloc`.
    pub(crate) const SIZE: usize = {
        assert!(core::mem::offset_of!(Self, ib) == 0);
        assert!(core::mem::align_of::<Self>() <= bindings::ARCH_KMALLOC_MINALIGN);
        core::mem::size_of::<Self>()
    };

    /// # Safety
    ///
    /// `ptr` must be the `ib_qp` of a live `Qp<T>` with initialised data, valid for `'a`.
    pub(crate) unsafe fn from_raw<'a>(ptr: *mut bindings::ib_qp) -> &'a Self {
        // SAFETY: By the safety requirements.
        unsafe { &*ptr.cast::<Self>() }
    }

    /// The device.
    pub fn device(&self) -> &Device<T> {
        // SAFETY: By the type invariant.
        unsafe { Device::from_raw((*self.ib.get()).device) }
    }

    /// The QP number.
    pub fn qp_num(&self) -> u32 {
        // SAFETY: Constant after creation.
        unsafe { (*self.ib.get()).qp_num }
    }

    /// The QP type (see [`qp_type`]).
    pub fn qp_type(&self) -> u32 {
        // SAFETY: Constant after creation.
        unsafe { (*self.ib.get()).qp_type }
    }

    /// Whether the QP belongs to user space.
    pub fn is_user(&self) -> bool {
        // SAFETY: Constant after creation.
        unsafe { !(*self.ib.get()).uobject.is_null() }
    }

    /// Address of the C QP, for kernel work completions.
    pub fn wc_qp(&self) -> usize {
        self.ib.get() as usize
    }

    /// The send CQ.
    pub fn send_cq(&self) -> &Cq<T> {
        // SAFETY: A QP always has a send CQ of our device (checked at creation); it outlives the
        // QP (the core holds a use count).
        unsafe { Cq::from_raw((*self.ib.get()).send_cq) }
    }

    /// The receive CQ.
    pub fn recv_cq(&self) -> &Cq<T> {
        // SAFETY: As for `send_cq`.
        unsafe { Cq::from_raw((*self.ib.get()).recv_cq) }
    }

    /// Identity of the PD, to compare with a memory region's
    /// ([`crate::rdma::mr::Mr::pd_id`]).
    pub fn pd_id(&self) -> usize {
        // SAFETY: Set by the RDMA core before `create_qp`; constant afterwards.
        unsafe { (*self.ib.get()).pd as usize }
    }

    /// Whether the QP receives from an SRQ.
    pub fn has_srq(&self) -> bool {
        // SAFETY: Set by the RDMA core before `create_qp`; constant afterwards.
        unsafe { !(*self.ib.get()).srq.is_null() }
    }

    /// The SRQ the QP receives from, if any.
    pub fn srq(&self) -> Option<&Srq<T>> {
        // SAFETY: Constant after creation.
        let srq = unsafe { (*self.ib.get()).srq };
        if srq.is_null() {
            return None;
        }
        // SAFETY: An SRQ of our device; the RDMA core keeps it alive while the QP exists (it
        // holds a use count).
        Some(unsafe { Srq::from_raw(srq) })
    }

    /// Reports an asynchronous event of the QP to its event handler. The
    /// RDMA core's handler passes it on to the consumer's (uverbs queues it
    /// for user space; `ib_drain_qp` waits for Last WQE Reached).
    ///
    /// The handler runs in the caller's context, which may be softirq, so
    /// it must be called without any lock that the QP's verbs take.
    pub fn report_event(&self, event: QpEvent) {
        let ib = self.ib.get();
        // SAFETY: The RDMA core sets `event_handler` (its own, for every QP it creates) and
        // `qp_context` before `create_qp`, and neither changes afterwards.
        let (handler, context) = unsafe { ((*ib).event_handler, (*ib).qp_context) };
        let Some(handler) = handler else {
            return;
        };
        let mut ev = bindings::ib_event {
            // SAFETY: `device` is set by the RDMA core before `create_qp` and constant.
            device: unsafe { (*ib).device },
            element: bindings::ib_event__bindgen_ty_1::default(),
            event: event as bindings::ib_event_type,
        };
        // SAFETY: Writing a pointer member of a union the event owns.
        unsafe { *ev.element.qp.as_mut() = ib };
        // SAFETY: The handler is the RDMA core's and `context` the one it was set up with, for
        // events of this QP, which the caller's reference keeps alive for the call; `ev` is
        // valid for the call.
        unsafe { handler(&mut ev, context) };
    }

    /// Whether destruction has begun: the QP is no longer found by
    /// [`Device::lookup_qp`] and its timers no longer fire. Work that
    /// requeues itself should stop.
    pub fn is_dying(&self) -> bool {
        self.dying.load(Relaxed)
    }

    fn timer(&self, t: QpTimer) -> &Timer {
        match t {
            QpTimer::Retransmit => &self.retransmit_timer,
            QpTimer::Rnr => &self.rnr_timer,
        }
    }

    /// (Re)arms `t` to fire once after `usecs` microseconds (at least the
    /// next tick); [`Driver::qp_timer`] is then called in softirq. Any
    /// context. A no-op once destruction began.
    pub fn arm_timer(&self, t: QpTimer, usecs: u64) {
        self.timer(t).arm_usecs(usecs);
    }

    /// Disarms `t`; a callback already running is not waited for. Any
    /// context.
    pub fn cancel_timer(&self, t: QpTimer) {
        self.timer(t).cancel();
    }

    /// Has [`Driver::qp_kick`] called soon in softirq (on the BH
    /// workqueue), e.g. to transmit what was built in a context that cannot
    /// (interrupts disabled). Queued at most once at a time. Any context.
    /// A no-op once destruction began.
    pub fn kick(&self) {
        // SAFETY: `kick_work` was initialised by `setup_timers`.
        unsafe { self.queue_owning(&self.kick_work, bindings::queue_bh_work) };
    }

    /// Queues `work` with `queue` unless destruction began; while queued,
    /// the work owns a reference to the QP, which its callback drops.
    ///
    /// # Safety
    ///
    /// `work` is a work item of `self` initialised by `setup_timers`, whose
    /// callback drops the reference.
    unsafe fn queue_owning(
        &self,
        work: &Opaque<bindings::work_struct>,
        queue: unsafe extern "C" fn(*mut bindings::work_struct) -> bool,
    ) {
        if self.is_dying() {
            return;
        }
        // The queued work owns a reference: destruction waits for it. The caller's `&self`
        // comes with a reference, so the count is not zero.
        self.live.get();
        // SAFETY: `work` is initialised by the safety requirements.
        if !unsafe { queue(work.get()) } {
            // Already queued, with its own reference.
            // SAFETY: We own the reference taken above; the caller's keeps `self` alive.
            unsafe { Liveness::put(&raw const self.live) };
        }
    }

    /// Has [`Driver::qp_sleepable`] called soon in process context (on an
    /// unbound workqueue), for what may sleep, e.g. faulting in the pages
    /// of on-demand memory. Queued at most once at a time. Any context. A
    /// no-op once destruction began.
    pub fn queue_sleepable(&self) {
        // SAFETY: `sleep_work` was initialised by `setup_timers`.
        unsafe { self.queue_owning(&self.sleep_work, bindings::queue_unbound_work) };
    }

    /// The QP's transmit credit: how many of its packets are in the IP
    /// stack ([`TxCredit::in_flight`]), and whether a producer may build
    /// more ([`TxCredit::may_send`]).
    pub fn tx_credit(&self) -> &TxCredit {
        &self.tx_credit
    }

    /// Hands `skb` to the IP stack in `net`, charged to the QP's transmit
    /// credit until the stack frees it ([`xmit_udp_charged`]). When credit
    /// comes back after [`TxCredit::may_send`] refused, the QP is kicked
    /// ([`Qp::kick`]).
    ///
    /// # Errors
    ///
    /// As [`xmit_udp_charged`].
    pub fn xmit(&self, net: &Namespace, skb: SkBuff) -> Result {
        xmit_udp_charged(net, skb, self)
    }

    /// Sets up the timers.
    ///
    /// # Safety
    ///
    /// `this` is a QP whose timers are not set up or were shut down; it does
    /// not move until they are shut down again.
    unsafe fn setup_timers(this: *mut Self) {
        // SAFETY: By the safety requirements; the callbacks find the QP from the timers.
        unsafe {
            Timer::setup(&raw mut (*this).retransmit_timer, Self::retransmit_callback);
            Timer::setup(&raw mut (*this).rnr_timer, Self::rnr_callback);
            bindings::init_work(
                Opaque::cast_into(&raw const (*this).kick_work),
                Some(Self::kick_callback),
            );
            bindings::init_sleepable_work(
                Opaque::cast_into(&raw const (*this).sleep_work),
                Some(Self::sleep_callback),
            );
        }
    }

    /// Shuts the timers down and waits for running callbacks; arming them
    /// is a no-op afterwards. Sleeps.
    fn shutdown_timers(&self) {
        self.retransmit_timer.shutdown_sync();
        self.rnr_timer.shutdown_sync();
        // `dying` is set: no new kick is queued. A cancelled kick drops the reference it owned.
        // SAFETY: `kick_work` was initialised by `setup_timers`.
        if unsafe { bindings::cancel_work_sync(self.kick_work.get()) } {
            // SAFETY: The cancelled work owned this reference; ours keeps `self` alive.
            unsafe { Liveness::put(&raw const self.live) };
        }
        // SAFETY: `sleep_work` was initialised by `setup_timers`.
        if unsafe { bindings::cancel_work_sync(self.sleep_work.get()) } {
            // SAFETY: As for the kick.
            unsafe { Liveness::put(&raw const self.live) };
        }
    }

    /// Expiry of the retransmit timer.
    ///
    /// # Safety
    ///
    /// Called by the timer core with the `retransmit_timer` of a `Qp<T>`, set
    /// up by `setup_timers` and not yet shut down.
    unsafe extern "C" fn retransmit_callback(t: *mut bindings::timer_list) {
        // CAST: `Timer` is a transparent wrapper of `timer_list`.
        // SAFETY: `t` is the `retransmit_timer` of a `Qp<T>` by the safety requirements; its
        // data is initialised and it stays alive until the timers are shut down, which waits
        // for this callback.
        let qp = unsafe { &*kernel::container_of!(t.cast::<Timer>(), Self, retransmit_timer) };
        T::qp_timer(qp, QpTimer::Retransmit);
    }

    /// Expiry of the RNR timer.
    ///
    /// # Safety
    ///
    /// As for `retransmit_callback`, with the `rnr_timer`.
    unsafe extern "C" fn rnr_callback(t: *mut bindings::timer_list) {
        // CAST: `Timer` is a transparent wrapper of `timer_list`.
        // SAFETY: As in `retransmit_callback`.
        let qp = unsafe { &*kernel::container_of!(t.cast::<Timer>(), Self, rnr_timer) };
        T::qp_timer(qp, QpTimer::Rnr);
    }

    /// `attach_mcast` callback.
    ///
    /// # Safety
    ///
    /// Called by `ib_core` for a live QP with a valid GID.
    pub(crate) unsafe extern "C" fn attach_mcast_callback(
        ptr: *mut bindings::ib_qp,
        gid: *mut bindings::ib_gid,
        _lid: u16,
    ) -> c_int {
        from_result(|| {
            // SAFETY: By the safety requirements.
            let qp = unsafe { Self::from_raw(ptr) };
            // SAFETY: `gid` is valid for the call; every bit pattern is a valid `[u8; 16]`.
            let mgid = Gid(unsafe { *(*gid).raw.as_ref() });
            T::attach_mcast(qp, &mgid)?;
            Ok(0)
        })
    }

    /// `detach_mcast` callback.
    ///
    /// # Safety
    ///
    /// As for `attach_mcast_callback`.
    pub(crate) unsafe extern "C" fn detach_mcast_callback(
        ptr: *mut bindings::ib_qp,
        gid: *mut bindings::ib_gid,
        _lid: u16,
    ) -> c_int {
        from_result(|| {
            // SAFETY: By the safety requirements.
            let qp = unsafe { Self::from_raw(ptr) };
            // SAFETY: As in `attach_mcast_callback`.
            let mgid = Gid(unsafe { *(*gid).raw.as_ref() });
            T::detach_mcast(qp, &mgid)?;
            Ok(0)
        })
    }

    /// The kick work ran.
    ///
    /// # Safety
    ///
    /// Called by the workqueue with the `kick_work` of a `Qp<T>` queued by
    /// [`Qp::kick`], which owns a reference.
    unsafe extern "C" fn kick_callback(w: *mut bindings::work_struct) {
        // SAFETY: `w` is the `kick_work` of a `Qp<T>`, kept alive by the work's reference.
        let qp = unsafe { &*kernel::container_of!(Opaque::cast_from(w), Self, kick_work) };
        T::qp_kick(qp);
        // SAFETY: The work owned this reference; `qp` is not used afterwards.
        unsafe { Liveness::put(&raw const qp.live) };
    }

    /// The sleepable work ran.
    ///
    /// # Safety
    ///
    /// Called by the workqueue with the `sleep_work` of a `Qp<T>` queued by
    /// [`Qp::queue_sleepable`], which owns a reference.
    unsafe extern "C" fn sleep_callback(w: *mut bindings::work_struct) {
        // SAFETY: `w` is the `sleep_work` of a `Qp<T>`, kept alive by the work's reference.
        let qp = unsafe { &*kernel::container_of!(Opaque::cast_from(w), Self, sleep_work) };
        T::qp_sleepable(qp);
        // SAFETY: The work owned this reference; `qp` is not used afterwards.
        unsafe { Liveness::put(&raw const qp.live) };
    }

    /// Unpublishes the QP and shuts its timers down: the first steps of
    /// destruction.
    fn unpublish(&self) {
        self.dying.store(true, Relaxed);
        self.device().qps.remove(self.qp_num(), self);
        self.shutdown_timers();
    }

    /// Undoes `unpublish` after the driver refused the destruction.
    ///
    /// # Safety
    ///
    /// `this` is a live QP after `unpublish`, still holding its initial
    /// reference.
    unsafe fn republish(this: *mut Self) {
        // SAFETY: The timers were shut down by `unpublish`; the QP does not move.
        unsafe { Self::setup_timers(this) };
        // SAFETY: Valid by the safety requirements.
        let qp = unsafe { &*this };
        qp.dying.store(false, Relaxed);
        // SAFETY: The QP holds its initial reference and is removed again before it is dropped.
        if unsafe { qp.device().qps.insert(qp.qp_num(), this) }.is_err() {
            pr_warn!(
                "rdma: QP {} stays unreachable after a failed destroy\n",
                qp.qp_num()
            );
        }
        // `unpublish` may have cancelled a queued kick (a UD WQE waiting for
        // its route, a bounded run's continuation), and the timers were shut
        // down whether armed or not: one kick lets the driver look at the
        // QP again and re-arm what it still needs (review suspicion S3).
        qp.kick();
    }

    /// The last steps of destruction, after the driver's: waits for the
    /// other references and drops the driver's state.
    ///
    /// # Safety
    ///
    /// `this` is a QP after `unpublish` and a successful `T::destroy_qp`;
    /// nothing uses it afterwards except the RDMA core, which frees it.
    unsafe fn finish_destroy(this: *mut Self) {
        // Packets still in the IP stack hold the credit's shared state, not the QP: from here
        // their destructors wake nobody, so the wait below is not for them (a qdisc may hold
        // them for seconds). The initial reference is still held, so a wake that was under way
        // has taken the kick's reference, which the wait covers.
        // SAFETY: The QP is valid for the call.
        unsafe { (*this).tx_credit.detach() };
        // SAFETY: We own the initial reference; the QP stays valid for the call.
        unsafe { (*this).live.put_initial_and_wait() };
        // SAFETY: No reference is left and the timers are shut down; dropped only here. The
        // credit no longer names the QP, and its drop leaves the shared state and the socket's
        // `struct sock` to the packets in flight.
        unsafe {
            core::ptr::drop_in_place(&raw mut (*this).data);
            core::ptr::drop_in_place(&raw mut (*this).tx_credit);
        }
    }

    /// `create_qp` callback.
    ///
    /// # Safety
    ///
    /// Called by `ib_core` with a fresh, zeroed QP of a device of driver `T`.
    pub(crate) unsafe extern "C" fn create_callback(
        ptr: *mut bindings::ib_qp,
        init: *mut bindings::ib_qp_init_attr,
        udata: *mut bindings::ib_udata,
    ) -> c_int {
        from_result(|| {
            // SAFETY: `init` is valid for the call.
            let ia = unsafe { &mut *init };
            let mut attr = QpInitAttr {
                qp_type: ia.qp_type,
                cap: QpCap::from_raw(&ia.cap),
                sq_sig_all: ia.sq_sig_type == bindings::ib_sig_type_IB_SIGNAL_ALL_WR,
                create_flags: ia.create_flags,
                port_num: ia.port_num,
                has_cqs: !ia.send_cq.is_null() && !ia.recv_cq.is_null(),
                has_srq: !ia.srq.is_null(),
            };
            let new = NewQp::<T>(ptr, core::marker::PhantomData);
            // SAFETY: `udata` is NULL or valid for the call.
            let udata = unsafe { Udata::from_raw(udata) };
            // Allocated before the driver's `create_qp`, whose side effects (a QPN, counts
            // on the CQs) only its `destroy_qp` undoes: nothing after it may fail but its
            // own initialiser.
            let credit = TxCredit::new()?;
            let (dinit, qp_num) = T::create_qp(&new, &mut attr, udata)?;
            // CAST: `ib` is the first field.
            let this = ptr.cast::<Self>();
            // SAFETY: `live`, `dying` and the timers are zeroed memory inside the allocation,
            // which does not move until `ib_core` frees it. Nothing of these needs undoing if a
            // later step fails: the count is only waited on by `destroy_callback` and the timers
            // are not armed before the QP is handed out.
            unsafe {
                let Ok(()) = Liveness::new().__pinned_init(&raw mut (*this).live);
                (&raw mut (*this).dying).write(Atomic::new(false));
                Self::setup_timers(this);
            }
            // SAFETY: `tx_credit` is uninitialised memory inside the allocation.
            unsafe { (&raw mut (*this).tx_credit).write(credit) };
            // SAFETY: `data` is uninitialised memory inside the allocation; on error `ib_core`
            // frees it without calling `destroy_callback`, so the credit is dropped here.
            if let Err(e) = unsafe { dinit.__pinned_init(&raw mut (*this).data) } {
                // SAFETY: Written above; nothing else refers to it.
                unsafe { core::ptr::drop_in_place(&raw mut (*this).tx_credit) };
                return Err(e);
            }
            // SAFETY: No one else uses the new QP yet.
            unsafe { (*ptr).qp_num = qp_num };
            attr.cap.write_raw(&mut ia.cap);
            // SAFETY: The QP is fully initialised.
            let qp = unsafe { Self::from_raw(ptr) };
            // INVARIANT: A fresh credit binds (only) to its QP, before any packet is sent.
            // SAFETY: The QP does not move (`ib_core` allocated it) and stays valid, its kick
            // callable, until `finish_destroy` detaches the credit, or the error paths below
            // drop it, before the memory goes.
            if let Err(e) = unsafe { qp.tx_credit.bind(qp) } {
                // Cannot happen for a fresh credit; undone as a failed creation.
                // SAFETY: Initialised above, not published; dropped once, here.
                unsafe {
                    core::ptr::drop_in_place(&raw mut (*this).data);
                    core::ptr::drop_in_place(&raw mut (*this).tx_credit);
                }
                return Err(e);
            }
            // SAFETY: The QP holds its initial reference; `destroy_callback` removes it before
            // dropping that reference, and `ib_core` frees the memory only after that.
            if let Err(e) = unsafe { qp.device().qps.insert(qp_num, this) } {
                // Another QP with this number (a driver bug) or no memory: undo as a destroy.
                qp.unpublish();
                if T::destroy_qp(qp).is_err() {
                    pr_warn!("rdma: destroying an unpublished QP {} failed\n", qp_num);
                }
                // SAFETY: Destroyed above; `ib_core` frees the memory without another callback.
                unsafe { Self::finish_destroy(this) };
                return Err(e);
            }
            Ok(0)
        })
    }

    /// `modify_qp` callback.
    ///
    /// # Safety
    ///
    /// Called by `ib_core` for a live QP.
    pub(crate) unsafe extern "C" fn modify_callback(
        ptr: *mut bindings::ib_qp,
        attr: *mut bindings::ib_qp_attr,
        m: c_int,
        udata: *mut bindings::ib_udata,
    ) -> c_int {
        from_result(|| {
            // SAFETY: By the safety requirements.
            let qp = unsafe { Self::from_raw(ptr) };
            // SAFETY: `attr` is valid for the call.
            let a = QpAttr::from_raw(unsafe { &*attr });
            // SAFETY: `udata` is NULL or valid for the call.
            let udata = unsafe { Udata::from_raw(udata) };
            T::modify_qp(qp, &a, m as u32, udata)?;
            Ok(0)
        })
    }

    /// `query_qp` callback.
    ///
    /// # Safety
    ///
    /// Called by `ib_core` for a live QP with valid output structs.
    pub(crate) unsafe extern "C" fn query_callback(
        ptr: *mut bindings::ib_qp,
        attr: *mut bindings::ib_qp_attr,
        _m: c_int,
        init: *mut bindings::ib_qp_init_attr,
    ) -> c_int {
        from_result(|| {
            // SAFETY: By the safety requirements.
            let qp = unsafe { Self::from_raw(ptr) };
            let (a, sq_sig_all) = T::query_qp(qp)?;
            // SAFETY: `attr` and `init` are valid for writes for the call; the init attributes
            // were zeroed by the caller.
            unsafe {
                core::ptr::write(attr, a.0.clone_raw());
                let ia = &mut *init;
                ia.send_cq = (*ptr).send_cq;
                ia.recv_cq = (*ptr).recv_cq;
                ia.srq = (*ptr).srq;
                ia.qp_type = (*ptr).qp_type;
                ia.cap = core::ptr::read(&(*attr).cap);
                ia.sq_sig_type = if sq_sig_all {
                    bindings::ib_sig_type_IB_SIGNAL_ALL_WR
                } else {
                    bindings::ib_sig_type_IB_SIGNAL_REQ_WR
                };
            }
            Ok(0)
        })
    }

    /// `fill_res_qp_entry` callback.
    ///
    /// # Safety
    ///
    /// Called by `ib_core`'s netlink code, in process context, for a live QP
    /// and a message being built.
    pub(crate) unsafe extern "C" fn fill_res_entry_callback(
        msg: *mut bindings::sk_buff,
        ptr: *mut bindings::ib_qp,
    ) -> c_int {
        from_result(|| {
            // SAFETY: By the safety requirements.
            let qp = unsafe { Self::from_raw(ptr) };
            // The details go in one `RDMA_NLDEV_ATTR_DRIVER` nest.
            // SAFETY: `msg` is the message being built, valid for the call.
            let nest = unsafe {
                bindings::nla_nest_start(
                    msg,
                    bindings::rdma_nldev_attr_RDMA_NLDEV_ATTR_DRIVER as c_int,
                )
            };
            if nest.is_null() {
                return Err(EMSGSIZE);
            }
            let mut out = ResDetails {
                msg,
                _p: PhantomData,
            };
            let r = T::fill_res_qp_entry(qp, &mut out);
            // SAFETY: `nest` was opened in `msg` above and nothing after it
            // was closed.
            unsafe {
                match r {
                    Ok(()) => bindings::nla_nest_end(msg, nest),
                    Err(_) => bindings::nla_nest_cancel(msg, nest),
                }
            }
            r?;
            Ok(0)
        })
    }

    /// `destroy_qp` callback.
    ///
    /// # Safety
    ///
    /// Called by `ib_core` once for a QP whose creation succeeded.
    pub(crate) unsafe extern "C" fn destroy_callback(
        ptr: *mut bindings::ib_qp,
        _udata: *mut bindings::ib_udata,
    ) -> c_int {
        from_result(|| {
            // CAST: `ib` is the first field.
            let this = ptr.cast::<Self>();
            // SAFETY: By the safety requirements.
            let qp = unsafe { Self::from_raw(ptr) };
            // Order: no new lookups and no timers, then the driver (which may refuse and frees
            // the QPN), then wait for references held elsewhere, then drop the state.
            qp.unpublish();
            if let Err(e) = T::destroy_qp(qp) {
                // SAFETY: After `unpublish`, with the initial reference.
                unsafe { Self::republish(this) };
                return Err(e);
            }
            // SAFETY: Destroyed above; `ib_core` frees the QP after we return.
            unsafe { Self::finish_destroy(this) };
            Ok(0)
        })
    }

    /// `post_send` callback.
    ///
    /// # Safety
    ///
    /// Called by `ib_core` for a live QP; `wr` is NULL (user doorbell) or a
    /// valid list; `bad` is valid for writes when `wr` is not NULL.
    pub(crate) unsafe extern "C" fn post_send_callback(
        ptr: *mut bindings::ib_qp,
        wr: *const bindings::ib_send_wr,
        bad: *mut *const bindings::ib_send_wr,
    ) -> c_int {
        // SAFETY: By the safety requirements.
        let qp = unsafe { Self::from_raw(ptr) };
        let mut cur = wr;
        // A list for a user QP comes from the uverbs `POST_SEND` command with addresses user
        // space chose: never act on it, ring the doorbell instead (as `rxe_post_send` does).
        if cur.is_null() || qp.is_user() {
            return from_result(|| T::post_send(qp, None).map(|()| 0));
        }
        let qp_type = qp.qp_type();
        let dev = qp.device();
        while !cur.is_null() {
            // SAFETY: A valid element of the list, not posted yet.
            let w = unsafe { &*cur };
            // Once `w` is posted its completion may run, on another CPU or in an interrupt on
            // this one, before `post_send` returns, and the consumer may free the WR with its
            // container there (SMB Direct frees its send I/O in its completion handler): the
            // link to the next WR is read before, and `w` not touched after.
            let next = w.next;
            // INVARIANT: A kernel consumer posted `w` to this kernel QP; the consumer keeps it,
            // its container and its SGEs valid at least until it is queued.
            let s = SendWr {
                wr: w,
                qp_type,
                dev,
            };
            if let Err(e) = T::post_send(qp, Some(&s)) {
                if !bad.is_null() {
                    // SAFETY: `bad` is valid for writes.
                    unsafe { *bad = cur };
                }
                return e.to_errno();
            }
            cur = next;
        }
        0
    }

    /// `post_recv` callback.
    ///
    /// # Safety
    ///
    /// Called by `ib_core` for a live QP with a valid list; `bad` is valid
    /// for writes.
    pub(crate) unsafe extern "C" fn post_recv_callback(
        ptr: *mut bindings::ib_qp,
        wr: *const bindings::ib_recv_wr,
        bad: *mut *const bindings::ib_recv_wr,
    ) -> c_int {
        // SAFETY: By the safety requirements.
        let qp = unsafe { Self::from_raw(ptr) };
        // SAFETY: The RDMA core passes a valid list and a `bad` valid for writes.
        unsafe { post_recv_list(wr, bad, |r| T::post_recv(qp, r)) }
    }
}

trait CloneRaw {
    fn clone_raw(&self) -> Self;
}

impl CloneRaw for bindings::ib_qp_attr {
    fn clone_raw(&self) -> Self {
        // SAFETY: Plain data.
        unsafe { core::ptr::read(self) }
    }
}

// SAFETY: References are counted in `live`; the memory is freed only after `destroy_callback`
// waited for the count to reach zero.
unsafe impl<T: Driver> AlwaysRefCounted for Qp<T> {
    fn inc_ref(&self) {
        self.live.get();
    }

    unsafe fn dec_ref(obj: NonNull<Self>) {
        // SAFETY: The caller owns a reference, so the QP is valid; it is not touched afterwards.
        unsafe { Liveness::put(&raw const (*obj.as_ptr()).live) };
    }
}

impl<T: Driver> TxOwner for Qp<T> {
    fn tx_credit(&self) -> &TxCredit {
        &self.tx_credit
    }

    fn tx_wake(&self) {
        // Queues work holding its own reference (a no-op once destruction began): any context.
        // Called only before `finish_destroy` detached the credit, so the initial reference is
        // still held and the count is not zero.
        self.kick();
    }
}

// SAFETY: `liveness` is always `live`, which the `AlwaysRefCounted` implementation uses.
unsafe impl<T: Driver> Published for Qp<T> {
    fn liveness(&self) -> &Liveness {
        &self.live
    }
}

impl<T: Driver> Deref for Qp<T> {
    type Target = T::QpData;

    fn deref(&self) -> &T::QpData {
        &self.data
    }
}

/// The driver-specific attributes of a resource-tracking netlink answer
/// (`RDMA_NLDEV_ATTR_DRIVER`), which `rdma res show ... -dd` prints as
/// `name value` pairs.
pub struct ResDetails<'a> {
    msg: *mut bindings::sk_buff,
    _p: PhantomData<&'a mut bindings::sk_buff>,
}

impl ResDetails<'_> {
    /// Adds `name` with the decimal value `v`.
    pub fn put_u32(&mut self, name: &CStr, v: u32) -> Result {
        // SAFETY: `msg` is the message being built for the call that made
        // `self`; `name` is a NUL-terminated string.
        to_result(unsafe { bindings::rdma_nl_put_driver_u32(self.msg, name.as_char_ptr(), v) })
    }

    /// Adds `name` with the value `v`, shown in hexadecimal.
    pub fn put_u32_hex(&mut self, name: &CStr, v: u32) -> Result {
        // SAFETY: As in `put_u32`.
        to_result(unsafe { bindings::rdma_nl_put_driver_u32_hex(self.msg, name.as_char_ptr(), v) })
    }

    /// Adds `name` with the decimal value `v`.
    pub fn put_u64(&mut self, name: &CStr, v: u64) -> Result {
        // SAFETY: As in `put_u32`.
        to_result(unsafe { bindings::rdma_nl_put_driver_u64(self.msg, name.as_char_ptr(), v) })
    }
}
