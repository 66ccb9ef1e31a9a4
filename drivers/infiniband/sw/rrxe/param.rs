// SPDX-License-Identifier: GPL-2.0

#![forbid(unsafe_code)]

//! Device and port limits.
//!
//! The numbers are those of the C driver (`drivers/infiniband/sw/rxe/rxe_param.h`
//! in Linux 7.2), so that rdma-core's rxe provider and its users see the same
//! device.  Capability *flags* are only advertised once the feature works in
//! rrxe; see [`DEVICE_CAP_FLAGS`].

use crate::proto::rc::MAX_QP_RD_ATOM;
use crate::rdma::{
    attr::{
        odp_support,
        AtomicCap,
        DeviceAttr,
        DeviceCapFlags,
        KernelCapFlags,
        OdpCaps, //
    },
    port::{
        cap,
        width,
        Mtu,
        PhysState,
        PortAttr,
        PortState, //
    },
    Guid,
};

/// Version of the rxe user ABI (`RXE_UVERBS_ABI_VERSION`).
pub(crate) const UVERBS_ABI_VERSION: u32 = 2;

/// Headroom between the net device MTU and the RoCE path MTU, in bytes:
/// Ethernet/IP/UDP headers plus BTH, the largest extension headers and ICRC
/// (`RXE_MAX_HDR_LENGTH`).
pub(crate) const MAX_HDR_LENGTH: u32 = 80;

/// Objects of each kind (QPs, CQs, PDs, ...), before index reservations.
const DEFAULT_MAX_VALUE: i32 = 1 << 20;
/// Scatter/gather entries per work request.
pub(crate) const MAX_SGE: i32 = 32;
/// First QP index; 0 and 1 are the special QPs, the rest of the range is reserved.
pub(crate) const MIN_QP_INDEX: i32 = 16;
/// Work requests per work queue (`max_qp_wr`).
pub(crate) const MAX_QP_WR: u32 = DEFAULT_MAX_VALUE as u32;
/// Work requests per SRQ (`max_srq_wr`).
pub(crate) const MAX_SRQ_WR: u32 = DEFAULT_MAX_VALUE as u32;
/// SGEs per SRQ work request (`max_srq_sge`).
pub(crate) const MAX_SRQ_SGE: u32 = 27;
/// Pages of a fast-register MR (`RXE_MAX_FMR_PAGE_LIST_LEN`).
pub(crate) const MAX_FMR_PAGE_LIST_LEN: u32 = 512;
/// First address handle index.
pub(crate) const MIN_AH_INDEX: u32 = 1;
/// Last address handle index.
pub(crate) const MAX_AH_INDEX: u32 = (1 << 15) - 1;
/// Last QP index.
pub(crate) const MAX_QP_INDEX: i32 = DEFAULT_MAX_VALUE;
/// Last SRQ index.
pub(crate) const MAX_SRQ_INDEX: i32 = DEFAULT_MAX_VALUE;
/// First SRQ index.
pub(crate) const MIN_SRQ_INDEX: i32 = 0x0002_0001;
/// Last MR index; MW indices follow.
pub(crate) const MAX_MR_INDEX: i32 = DEFAULT_MAX_VALUE >> 1;
/// First MR index.
pub(crate) const MIN_MR_INDEX: i32 = 1;
/// First MW index.
pub(crate) const MIN_MW_INDEX: u32 = MAX_MR_INDEX as u32 + 1;
/// Last MW index.
pub(crate) const MAX_MW_INDEX: u32 = DEFAULT_MAX_VALUE as u32;
/// Log2 of the CQ size limit.
const MAX_LOG_CQE: u32 = 15;
/// IEEE OUI reported as vendor id (IBTA Vol 1 §A3.3.1: none assigned).
const VENDOR_ID: u32 = 0x00ff_ffff;

/// Device capabilities advertised by rrxe.
///
/// MEM_MGT_EXTENSIONS: fast-register MRs (`alloc_mr`, `map_mr_sg`), the
/// `IB_WR_REG_MR` and `IB_WR_LOCAL_INV` work requests and SEND with
/// invalidate (IBTA Vol 1 §10.6.2.2); kernel ULPs such as NVMe-oF and
/// NFS/RDMA require it.
///
/// RC_RNR_NAK_GEN: the RC responder answers a SEND without a posted
/// receive WQE with an RNR NAK (IBTA Vol 1 §9.7.5.2.8).
///
/// ATOMIC_WRITE: RC ATOMIC WRITE requests are sent and executed (IBTA Vol 1
/// Annex A19).
///
/// FLUSH_GLOBAL, FLUSH_PERSISTENT: RC FLUSH requests are sent and executed
/// (IBTA Vol 1 Annex A19); regions may grant the FLUSH access flags (the
/// RDMA core refuses them without these), persistence only on persistent
/// memory.
///
/// MEM_WINDOW, MEM_WINDOW_TYPE_2B: memory windows of type 1 and 2B
/// (`alloc_mw`, BIND_MW, invalidation), as the C driver.
///
/// AUTO_PATH_MIG, CHANGE_PHY_PORT, UD_AV_PORT_ENFORCE: as the C driver,
/// which sets them too. An alternate path and a migration state are
/// accepted by `modify_qp` and reported by `query_qp` (port 1, the only
/// one), and, as there, never migrated to; a UD address vector names
/// port 1 or is refused.
pub(crate) const DEVICE_CAP_FLAGS: DeviceCapFlags = DeviceCapFlags::BAD_PKEY_CNTR
    .union(DeviceCapFlags::AUTO_PATH_MIG)
    .union(DeviceCapFlags::CHANGE_PHY_PORT)
    .union(DeviceCapFlags::UD_AV_PORT_ENFORCE)
    .union(DeviceCapFlags::BAD_QKEY_CNTR)
    .union(DeviceCapFlags::PORT_ACTIVE_EVENT)
    .union(DeviceCapFlags::SYS_IMAGE_GUID)
    .union(DeviceCapFlags::SRQ_RESIZE)
    .union(DeviceCapFlags::MEM_MGT_EXTENSIONS)
    .union(DeviceCapFlags::RC_RNR_NAK_GEN)
    .union(DeviceCapFlags::ATOMIC_WRITE)
    .union(DeviceCapFlags::FLUSH_GLOBAL)
    .union(DeviceCapFlags::FLUSH_PERSISTENT)
    .union(DeviceCapFlags::MEM_WINDOW)
    .union(DeviceCapFlags::MEM_WINDOW_TYPE_2B);

/// Number of GID table entries of the port.
pub(crate) const PORT_GID_TBL_LEN: i32 = 1024;
/// Number of P_Key table entries: only the default P_Key.
pub(crate) const PORT_PKEY_TBL_LEN: u16 = 1;
/// The default (full-member) P_Key (IBTA Vol 1 §10.9.1.2).
pub(crate) const DEFAULT_PKEY_FULL: u16 = 0xffff;
/// GID subnet prefix: link-local `fe80::/64`.
pub(crate) const PORT_SUBNET_PREFIX: u64 = 0xfe80_0000_0000_0000;

/// The device attributes of a device whose system image GUID is
/// `sys_image_guid`.
pub(crate) fn device_attr(sys_image_guid: Guid) -> DeviceAttr {
    DeviceAttr {
        sys_image_guid,
        max_mr_size: u64::MAX,
        page_size_cap: 0xffff_f000,
        vendor_id: VENDOR_ID,
        max_qp: DEFAULT_MAX_VALUE - MIN_QP_INDEX,
        max_qp_wr: DEFAULT_MAX_VALUE,
        device_cap_flags: DEVICE_CAP_FLAGS,
        kernel_cap_flags: KernelCapFlags::ALLOW_USER_UNREG | KernelCapFlags::ON_DEMAND_PAGING,
        max_send_sge: MAX_SGE,
        max_recv_sge: MAX_SGE,
        max_sge_rd: 32,
        max_cq: DEFAULT_MAX_VALUE,
        max_cqe: (1 << MAX_LOG_CQE) - 1,
        max_mr: MAX_MR_INDEX - MIN_MR_INDEX,
        max_pd: DEFAULT_MAX_VALUE,
        // CAST: 128 fits in i32.
        max_qp_rd_atom: MAX_QP_RD_ATOM as i32,
        max_res_rd_atom: 0x3f000,
        // CAST: as above.
        max_qp_init_rd_atom: MAX_QP_RD_ATOM as i32,
        // CmpSwap and FetchAdd, atomic with respect to the device's own
        // atomics, as the C driver.
        atomic_cap: AtomicCap::Hca,
        // CAST: both fit in 21 bits.
        max_mw: DEFAULT_MAX_VALUE - MIN_MW_INDEX as i32,
        max_mcast_grp: 8192,
        max_mcast_qp_attach: 56,
        max_total_mcast_qp_attach: 0x70000,
        max_ah: (1 << 15) - 1,
        max_srq: DEFAULT_MAX_VALUE - MIN_SRQ_INDEX,
        max_srq_wr: DEFAULT_MAX_VALUE,
        max_srq_sge: 27,
        max_fast_reg_page_list_len: MAX_FMR_PAGE_LIST_LEN,
        max_pkeys: 64,
        local_ca_ack_delay: 15,
        odp_caps: ODP_CAPS,
        ..DeviceAttr::default()
    }
}

/// What on-demand memory serves, as the C driver's `odp_caps`: explicit
/// regions (not implicit ones), for every RC operation and for UD SEND
/// and receive; UC none.
pub(crate) const ODP_CAPS: OdpCaps = OdpCaps {
    general: odp_support::SUPPORT,
    rc: odp_support::SEND
        | odp_support::RECV
        | odp_support::WRITE
        | odp_support::READ
        | odp_support::ATOMIC
        | odp_support::SRQ_RECV
        | odp_support::FLUSH
        | odp_support::ATOMIC_WRITE,
    uc: 0,
    ud: odp_support::SEND | odp_support::RECV | odp_support::SRQ_RECV,
};

/// The port's capability mask until `modify_port` changes it, as the C
/// driver's (`RXE_PORT_PORT_CAP_FLAGS`).
pub(crate) const PORT_CAP_FLAGS: u32 = cap::CM_SUP;

/// The port attributes that do not depend on the net device.
pub(crate) fn port_attr(active_mtu: Mtu) -> PortAttr {
    PortAttr {
        subnet_prefix: PORT_SUBNET_PREFIX,
        state: PortState::Down,
        max_mtu: Mtu::Mtu4096,
        active_mtu,
        gid_tbl_len: PORT_GID_TBL_LEN,
        port_cap_flags: PORT_CAP_FLAGS,
        max_msg_sz: 1 << 31,
        pkey_tbl_len: PORT_PKEY_TBL_LEN,
        max_vl_num: 1,
        active_width: width::X1,
        active_speed: 1,
        phys_state: PhysState::Polling,
        ..PortAttr::default()
    }
}
