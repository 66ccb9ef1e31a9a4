// SPDX-License-Identifier: GPL-2.0

//! Work completions: `struct ib_wc` for kernel consumers and
//! `struct ib_uverbs_wc` (48 bytes) in user-space completion queues.
//!
//! C headers: [`include/rdma/ib_verbs.h`](srctree/include/rdma/ib_verbs.h),
//! [`include/uapi/rdma/ib_user_verbs.h`](srctree/include/uapi/rdma/ib_user_verbs.h)

use crate::{
    bindings,
    rdma::ah::NetworkType, //
};

/// `IB_WC_GRH`: the receive buffer starts with the 40-byte GRH (on RoCEv2,
/// the IP header of the packet as a pseudo GRH).
pub const WC_GRH: u32 = bindings::ib_wc_flags_IB_WC_GRH;
/// `IB_WC_WITH_IMM`.
pub const WC_WITH_IMM: u32 = bindings::ib_wc_flags_IB_WC_WITH_IMM;
/// `IB_WC_WITH_INVALIDATE`.
pub const WC_WITH_INVALIDATE: u32 = bindings::ib_wc_flags_IB_WC_WITH_INVALIDATE;

/// Completion opcode (`enum ib_wc_opcode`; `struct ib_uverbs_wc` carries
/// the same numbers). The masked atomics and LSO, which rxe never
/// completes, are left out.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
#[repr(u32)]
pub enum WcOpcode {
    /// `IB_WC_SEND`.
    Send = bindings::ib_wc_opcode_IB_WC_SEND,
    /// `IB_WC_RDMA_WRITE`.
    RdmaWrite = bindings::ib_wc_opcode_IB_WC_RDMA_WRITE,
    /// `IB_WC_RDMA_READ`.
    RdmaRead = bindings::ib_wc_opcode_IB_WC_RDMA_READ,
    /// `IB_WC_COMP_SWAP`.
    CompSwap = bindings::ib_wc_opcode_IB_WC_COMP_SWAP,
    /// `IB_WC_FETCH_ADD`.
    FetchAdd = bindings::ib_wc_opcode_IB_WC_FETCH_ADD,
    /// `IB_WC_BIND_MW`.
    BindMw = bindings::ib_wc_opcode_IB_WC_BIND_MW,
    /// `IB_WC_LOCAL_INV`.
    LocalInv = bindings::ib_wc_opcode_IB_WC_LOCAL_INV,
    /// `IB_WC_ATOMIC_WRITE`.
    AtomicWrite = bindings::ib_wc_opcode_IB_WC_ATOMIC_WRITE,
    /// `IB_WC_REG_MR`.
    RegMr = bindings::ib_wc_opcode_IB_WC_REG_MR,
    /// `IB_WC_FLUSH`.
    Flush = bindings::ib_wc_opcode_IB_WC_FLUSH,
    /// `IB_WC_RECV`.
    Recv = bindings::ib_wc_opcode_IB_WC_RECV,
    /// `IB_WC_RECV_RDMA_WITH_IMM`.
    RecvRdmaWithImm = bindings::ib_wc_opcode_IB_WC_RECV_RDMA_WITH_IMM,
}

impl WcOpcode {
    /// The C value.
    pub const fn raw(self) -> u32 {
        self as u32
    }
}

/// Size of `struct ib_uverbs_wc`.
pub const UVERBS_WC_SIZE: usize = 48;
/// Size of `struct ib_wc` (with `UVERBS_WC_SIZE`, what a CQ slot must hold).
pub const KERNEL_WC_SIZE: usize = core::mem::size_of::<bindings::ib_wc>();

/// Completion status (`enum ib_wc_status`).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
#[repr(u32)]
pub enum WcStatus {
    /// `IB_WC_SUCCESS`.
    Success = bindings::ib_wc_status_IB_WC_SUCCESS,
    /// `IB_WC_LOC_LEN_ERR`.
    LocLenErr = bindings::ib_wc_status_IB_WC_LOC_LEN_ERR,
    /// `IB_WC_LOC_QP_OP_ERR`.
    LocQpOpErr = bindings::ib_wc_status_IB_WC_LOC_QP_OP_ERR,
    /// `IB_WC_LOC_PROT_ERR`.
    LocProtErr = bindings::ib_wc_status_IB_WC_LOC_PROT_ERR,
    /// `IB_WC_WR_FLUSH_ERR`.
    WrFlushErr = bindings::ib_wc_status_IB_WC_WR_FLUSH_ERR,
    /// `IB_WC_MW_BIND_ERR`.
    MwBindErr = bindings::ib_wc_status_IB_WC_MW_BIND_ERR,
    /// `IB_WC_REM_INV_REQ_ERR`.
    RemInvReqErr = bindings::ib_wc_status_IB_WC_REM_INV_REQ_ERR,
    /// `IB_WC_REM_ACCESS_ERR`.
    RemAccessErr = bindings::ib_wc_status_IB_WC_REM_ACCESS_ERR,
    /// `IB_WC_REM_OP_ERR`.
    RemOpErr = bindings::ib_wc_status_IB_WC_REM_OP_ERR,
    /// `IB_WC_RETRY_EXC_ERR`.
    RetryExcErr = bindings::ib_wc_status_IB_WC_RETRY_EXC_ERR,
    /// `IB_WC_RNR_RETRY_EXC_ERR`.
    RnrRetryExcErr = bindings::ib_wc_status_IB_WC_RNR_RETRY_EXC_ERR,
    /// `IB_WC_REM_INV_RD_REQ_ERR`.
    RemInvRdReqErr = bindings::ib_wc_status_IB_WC_REM_INV_RD_REQ_ERR,
}

/// One work completion, independent of who consumes it.
#[derive(Clone, Copy, Debug)]
pub struct Wc {
    /// The consumer's work request id (for kernel consumers it may hold a
    /// `struct ib_cqe *`).
    pub wr_id: u64,
    /// Completion status.
    pub status: WcStatus,
    /// Completion opcode.
    pub opcode: WcOpcode,
    /// Bytes transferred.
    pub byte_len: u32,
    /// Immediate data (big endian, as received) or invalidated rkey.
    pub ex: u32,
    /// Local QP number.
    pub qp_num: u32,
    /// Remote QP number (UD).
    pub src_qp: u32,
    /// `IB_WC_*` flags common to both layouts ([`WC_GRH`], [`WC_WITH_IMM`],
    /// [`WC_WITH_INVALIDATE`]); the kernel-only ones follow from the fields
    /// below.
    pub wc_flags: u32,
    /// P_Key index.
    pub pkey_index: u16,
    /// Port number.
    pub port_num: u8,
    /// Kernel completions of UD receives: how the GRH in the buffer is to
    /// be read (`network_hdr_type`, with `IB_WC_WITH_NETWORK_HDR_TYPE`):
    /// [`NetworkType::Ipv4`] or [`NetworkType::Ipv6`] on RoCEv2, as
    /// `ib_init_ah_attr_from_wc` needs to answer. Not in user completions.
    pub network_hdr_type: Option<NetworkType>,
    /// Kernel completions of receives through a VLAN device: its VLAN id
    /// (`vlan_id`, with `IB_WC_WITH_VLAN`), as the C driver reports it. Not
    /// in user completions.
    pub vlan_id: Option<u16>,
    /// The kernel QP (`struct ib_qp *`, as an address); 0 for user QPs.
    pub(crate) qp: usize,
}

impl Wc {
    /// The 48-byte `struct ib_uverbs_wc`.
    pub fn to_uverbs(&self) -> [u8; UVERBS_WC_SIZE] {
        let mut b = [0u8; UVERBS_WC_SIZE];
        b[0..8].copy_from_slice(&self.wr_id.to_ne_bytes());
        b[8..12].copy_from_slice(&(self.status as u32).to_ne_bytes());
        b[12..16].copy_from_slice(&self.opcode.raw().to_ne_bytes());
        b[20..24].copy_from_slice(&self.byte_len.to_ne_bytes());
        b[24..28].copy_from_slice(&self.ex.to_ne_bytes());
        b[28..32].copy_from_slice(&self.qp_num.to_ne_bytes());
        b[32..36].copy_from_slice(&self.src_qp.to_ne_bytes());
        b[36..40].copy_from_slice(&self.wc_flags.to_ne_bytes());
        b[40..42].copy_from_slice(&self.pkey_index.to_ne_bytes());
        b[46] = self.port_num;
        b
    }

    /// Fills the kernel's `struct ib_wc`.
    pub(crate) fn write_raw(&self, wc: &mut bindings::ib_wc) {
        // SAFETY: All-zero is a valid `ib_wc`.
        *wc = unsafe { core::mem::zeroed() };
        wc.__bindgen_anon_1.bindgen_union_field = self.wr_id;
        wc.status = self.status as u32;
        wc.opcode = self.opcode.raw();
        wc.byte_len = self.byte_len;
        wc.ex.bindgen_union_field = self.ex;
        wc.src_qp = self.src_qp;
        let mut flags = self.wc_flags;
        if let Some(t) = self.network_hdr_type {
            flags |= bindings::ib_wc_flags_IB_WC_WITH_NETWORK_HDR_TYPE;
            // CAST: `enum rdma_network_type` values are below 4.
            wc.network_hdr_type = t.as_raw() as u8;
        }
        if let Some(vlan) = self.vlan_id {
            flags |= bindings::ib_wc_flags_IB_WC_WITH_VLAN;
            wc.vlan_id = vlan;
        }
        wc.wc_flags = i32::try_from(flags).unwrap_or(0);
        wc.pkey_index = self.pkey_index;
        wc.port_num = self.port_num.into();
        wc.qp = self.qp as *mut bindings::ib_qp;
    }
}
