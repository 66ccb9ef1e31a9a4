// SPDX-License-Identifier: GPL-2.0

//! Device attributes reported by `query_device` (`struct ib_device_attr`).
//!
//! C header: [`include/rdma/ib_verbs.h`](srctree/include/rdma/ib_verbs.h)

use crate::{bindings, rdma::Guid};
use core::ops::BitOr;

/// Device capability flags (`enum ib_device_cap_flags`).
#[derive(Clone, Copy, Default, PartialEq, Eq, Debug)]
pub struct DeviceCapFlags(u64);

impl DeviceCapFlags {
    /// No capability.
    pub const NONE: Self = Self(0);
    /// The port counts P_Key violations (`bad_pkey_cntr`).
    pub const BAD_PKEY_CNTR: Self =
        Self::from_raw(bindings::ib_device_cap_flags_IB_DEVICE_BAD_PKEY_CNTR);
    /// The port counts Q_Key violations (`qkey_viol_cntr`).
    pub const BAD_QKEY_CNTR: Self =
        Self::from_raw(bindings::ib_device_cap_flags_IB_DEVICE_BAD_QKEY_CNTR);
    /// Automatic path migration (IBTA Vol 1 §17.2.8).
    pub const AUTO_PATH_MIG: Self =
        Self::from_raw(bindings::ib_device_cap_flags_IB_DEVICE_AUTO_PATH_MIG);
    /// A QP's primary port can be changed by `modify_qp`.
    pub const CHANGE_PHY_PORT: Self =
        Self::from_raw(bindings::ib_device_cap_flags_IB_DEVICE_CHANGE_PHY_PORT);
    /// UD address vectors must use the QP's port.
    pub const UD_AV_PORT_ENFORCE: Self =
        Self::from_raw(bindings::ib_device_cap_flags_IB_DEVICE_UD_AV_PORT_ENFORCE);
    /// The device generates `PORT_ACTIVE` events.
    pub const PORT_ACTIVE_EVENT: Self =
        Self::from_raw(bindings::ib_device_cap_flags_IB_DEVICE_PORT_ACTIVE_EVENT);
    /// The device reports a system image GUID.
    pub const SYS_IMAGE_GUID: Self =
        Self::from_raw(bindings::ib_device_cap_flags_IB_DEVICE_SYS_IMAGE_GUID);
    /// RC responders generate RNR NAKs.
    pub const RC_RNR_NAK_GEN: Self =
        Self::from_raw(bindings::ib_device_cap_flags_IB_DEVICE_RC_RNR_NAK_GEN);
    /// SRQs can be resized.
    pub const SRQ_RESIZE: Self = Self::from_raw(bindings::ib_device_cap_flags_IB_DEVICE_SRQ_RESIZE);
    /// Fast registration and local invalidation work requests.
    pub const MEM_MGT_EXTENSIONS: Self =
        Self::from_raw(bindings::ib_device_cap_flags_IB_DEVICE_MEM_MGT_EXTENSIONS);
    /// Memory windows.
    pub const MEM_WINDOW: Self = Self::from_raw(bindings::ib_device_cap_flags_IB_DEVICE_MEM_WINDOW);
    /// Type 2B memory windows.
    pub const MEM_WINDOW_TYPE_2B: Self =
        Self::from_raw(bindings::ib_device_cap_flags_IB_DEVICE_MEM_WINDOW_TYPE_2B);
    /// FLUSH to global visibility (IBTA 1.5).
    pub const FLUSH_GLOBAL: Self =
        Self::from_raw(bindings::ib_device_cap_flags_IB_DEVICE_FLUSH_GLOBAL);
    /// FLUSH to persistence (IBTA 1.5).
    pub const FLUSH_PERSISTENT: Self =
        Self::from_raw(bindings::ib_device_cap_flags_IB_DEVICE_FLUSH_PERSISTENT);
    /// ATOMIC WRITE (IBTA 1.5).
    pub const ATOMIC_WRITE: Self =
        Self::from_raw(bindings::ib_device_cap_flags_IB_DEVICE_ATOMIC_WRITE);

    const fn from_raw(v: bindings::ib_device_cap_flags) -> Self {
        // CAST: the C enum's values are 64-bit flags; widening keeps them.
        Self(v as u64)
    }

    /// Returns the flags as the C `u64`.
    pub const fn bits(self) -> u64 {
        self.0
    }

    /// Returns the flags set in `self` or `other` (`|` in constant context).
    pub const fn union(self, other: Self) -> Self {
        Self(self.0 | other.0)
    }
}

impl BitOr for DeviceCapFlags {
    type Output = Self;

    fn bitor(self, rhs: Self) -> Self {
        Self(self.0 | rhs.0)
    }
}

/// Capabilities visible to the kernel only (`enum ib_kernel_cap_flags`).
#[derive(Clone, Copy, Default, PartialEq, Eq, Debug)]
pub struct KernelCapFlags(u64);

impl KernelCapFlags {
    /// No capability.
    pub const NONE: Self = Self(0);
    /// `rdma link delete` may unregister the device.
    pub const ALLOW_USER_UNREG: Self =
        Self::from_raw(bindings::ib_kernel_cap_flags_IBK_ALLOW_USER_UNREG);
    /// Memory regions may be registered for on-demand paging.
    pub const ON_DEMAND_PAGING: Self =
        Self::from_raw(bindings::ib_kernel_cap_flags_IBK_ON_DEMAND_PAGING);

    const fn from_raw(v: bindings::ib_kernel_cap_flags) -> Self {
        // CAST: the C enum's values are 64-bit flags; widening keeps them.
        Self(v as u64)
    }

    /// Returns the flags as the C `u64`.
    pub const fn bits(self) -> u64 {
        self.0
    }
}

impl BitOr for KernelCapFlags {
    type Output = Self;

    fn bitor(self, rhs: Self) -> Self {
        Self(self.0 | rhs.0)
    }
}

/// On-demand paging capabilities (`struct ib_odp_caps`): the
/// `IB_ODP_SUPPORT*` bits of [`odp_support`].
#[derive(Clone, Copy, Default, PartialEq, Eq, Debug)]
pub struct OdpCaps {
    /// `general_caps`: [`odp_support::SUPPORT`], [`odp_support::IMPLICIT`].
    pub general: u64,
    /// Operations an RC QP may run on on-demand memory.
    pub rc: u32,
    /// Operations a UC QP may run on on-demand memory.
    pub uc: u32,
    /// Operations a UD QP may run on on-demand memory.
    pub ud: u32,
}

/// `IB_ODP_SUPPORT*` (include/rdma/ib_verbs.h).
pub mod odp_support {
    use crate::bindings;

    /// On-demand paging is supported.
    pub const SUPPORT: u64 = bindings::ib_odp_general_cap_bits_IB_ODP_SUPPORT as u64;
    /// Implicit on-demand regions (the whole address space).
    pub const IMPLICIT: u64 = bindings::ib_odp_general_cap_bits_IB_ODP_SUPPORT_IMPLICIT as u64;
    /// Send from on-demand memory.
    pub const SEND: u32 = bindings::ib_odp_transport_cap_bits_IB_ODP_SUPPORT_SEND;
    /// Receive into on-demand memory.
    pub const RECV: u32 = bindings::ib_odp_transport_cap_bits_IB_ODP_SUPPORT_RECV;
    /// RDMA WRITE to on-demand memory.
    pub const WRITE: u32 = bindings::ib_odp_transport_cap_bits_IB_ODP_SUPPORT_WRITE;
    /// RDMA READ from on-demand memory.
    pub const READ: u32 = bindings::ib_odp_transport_cap_bits_IB_ODP_SUPPORT_READ;
    /// Atomics on on-demand memory.
    pub const ATOMIC: u32 = bindings::ib_odp_transport_cap_bits_IB_ODP_SUPPORT_ATOMIC;
    /// Receive through an SRQ into on-demand memory.
    pub const SRQ_RECV: u32 = bindings::ib_odp_transport_cap_bits_IB_ODP_SUPPORT_SRQ_RECV;
    /// FLUSH of on-demand memory.
    pub const FLUSH: u32 = bindings::ib_odp_transport_cap_bits_IB_ODP_SUPPORT_FLUSH;
    /// ATOMIC WRITE to on-demand memory.
    pub const ATOMIC_WRITE: u32 = bindings::ib_odp_transport_cap_bits_IB_ODP_SUPPORT_ATOMIC_WRITE;
}

/// Atomic operation guarantees (`enum ib_atomic_cap`).
#[derive(Clone, Copy, Default, PartialEq, Eq, Debug)]
pub enum AtomicCap {
    /// Atomic operations are not supported.
    #[default]
    None,
    /// Atomic with respect to other operations of this HCA.
    Hca,
    /// Atomic with respect to all agents, CPUs included.
    Glob,
}

impl AtomicCap {
    const fn as_raw(self) -> bindings::ib_atomic_cap {
        match self {
            Self::None => bindings::ib_atomic_cap_IB_ATOMIC_NONE,
            Self::Hca => bindings::ib_atomic_cap_IB_ATOMIC_HCA,
            Self::Glob => bindings::ib_atomic_cap_IB_ATOMIC_GLOB,
        }
    }
}

/// The device attributes a driver reports (`struct ib_device_attr`).
///
/// Field names and units are those of the C structure; counts are numbers of
/// objects, sizes are in bytes.  Fields not listed here are reported as zero.
#[derive(Clone, Default, Debug)]
pub struct DeviceAttr {
    /// Firmware version.
    pub fw_ver: u64,
    /// System image GUID.
    pub sys_image_guid: Guid,
    /// Largest memory region, in bytes.
    pub max_mr_size: u64,
    /// Supported page sizes: bit `n` set means `2^n` bytes.
    pub page_size_cap: u64,
    /// IEEE OUI of the vendor (IBTA Vol 1 §A3.3.1).
    pub vendor_id: u32,
    /// Vendor part id.
    pub vendor_part_id: u32,
    /// Hardware version.
    pub hw_ver: u32,
    /// Maximum number of QPs.
    pub max_qp: i32,
    /// Maximum number of outstanding work requests per queue.
    pub max_qp_wr: i32,
    /// Device capability flags.
    pub device_cap_flags: DeviceCapFlags,
    /// Kernel-only capability flags.
    pub kernel_cap_flags: KernelCapFlags,
    /// Maximum scatter/gather entries per send work request.
    pub max_send_sge: i32,
    /// Maximum scatter/gather entries per receive work request.
    pub max_recv_sge: i32,
    /// Maximum scatter/gather entries per RDMA READ.
    pub max_sge_rd: i32,
    /// Maximum number of CQs.
    pub max_cq: i32,
    /// Maximum entries per CQ.
    pub max_cqe: i32,
    /// Maximum number of memory regions.
    pub max_mr: i32,
    /// Maximum number of protection domains.
    pub max_pd: i32,
    /// Maximum outstanding RDMA READ/atomic requests a QP can respond to.
    pub max_qp_rd_atom: i32,
    /// Maximum responder resources for RDMA READ/atomic, device-wide.
    pub max_res_rd_atom: i32,
    /// Maximum outstanding RDMA READ/atomic requests a QP can initiate.
    pub max_qp_init_rd_atom: i32,
    /// Atomic operation guarantees.
    pub atomic_cap: AtomicCap,
    /// Maximum number of memory windows.
    pub max_mw: i32,
    /// Maximum number of multicast groups.
    pub max_mcast_grp: i32,
    /// Maximum QPs per multicast group.
    pub max_mcast_qp_attach: i32,
    /// Maximum QP attachments over all multicast groups.
    pub max_total_mcast_qp_attach: i32,
    /// Maximum number of address handles.
    pub max_ah: i32,
    /// Maximum number of SRQs.
    pub max_srq: i32,
    /// Maximum outstanding work requests per SRQ.
    pub max_srq_wr: i32,
    /// Maximum scatter/gather entries per SRQ work request.
    pub max_srq_sge: i32,
    /// Maximum page list length of a fast-registration work request.
    pub max_fast_reg_page_list_len: u32,
    /// Maximum number of P_Keys.
    pub max_pkeys: u16,
    /// Local CA ACK delay, as `4.096 µs * 2^local_ca_ack_delay`.
    pub local_ca_ack_delay: u8,
    /// On-demand paging capabilities.
    pub odp_caps: OdpCaps,
}

impl DeviceAttr {
    /// Writes `self` to `out`; fields this type does not carry become zero.
    pub(crate) fn write_raw(&self, out: &mut bindings::ib_device_attr) {
        // SAFETY: `ib_device_attr` is plain old data (integers and nested structs of integers);
        // all-zero is a valid value.
        *out = unsafe { core::mem::zeroed() };
        out.fw_ver = self.fw_ver;
        out.sys_image_guid = self.sys_image_guid.to_be64_raw();
        out.max_mr_size = self.max_mr_size;
        out.page_size_cap = self.page_size_cap;
        out.vendor_id = self.vendor_id;
        out.vendor_part_id = self.vendor_part_id;
        out.hw_ver = self.hw_ver;
        out.max_qp = self.max_qp;
        out.max_qp_wr = self.max_qp_wr;
        out.device_cap_flags = self.device_cap_flags.bits();
        out.kernel_cap_flags = self.kernel_cap_flags.bits();
        out.max_send_sge = self.max_send_sge;
        out.max_recv_sge = self.max_recv_sge;
        out.max_sge_rd = self.max_sge_rd;
        out.max_cq = self.max_cq;
        out.max_cqe = self.max_cqe;
        out.max_mr = self.max_mr;
        out.max_pd = self.max_pd;
        out.max_qp_rd_atom = self.max_qp_rd_atom;
        out.max_res_rd_atom = self.max_res_rd_atom;
        out.max_qp_init_rd_atom = self.max_qp_init_rd_atom;
        out.atomic_cap = self.atomic_cap.as_raw();
        out.max_mw = self.max_mw;
        out.max_mcast_grp = self.max_mcast_grp;
        out.max_mcast_qp_attach = self.max_mcast_qp_attach;
        out.max_total_mcast_qp_attach = self.max_total_mcast_qp_attach;
        out.max_ah = self.max_ah;
        out.max_srq = self.max_srq;
        out.max_srq_wr = self.max_srq_wr;
        out.max_srq_sge = self.max_srq_sge;
        out.max_fast_reg_page_list_len = self.max_fast_reg_page_list_len;
        out.max_pkeys = self.max_pkeys;
        out.local_ca_ack_delay = self.local_ca_ack_delay;
        out.odp_caps.general_caps = self.odp_caps.general;
        out.odp_caps.per_transport_caps.rc_odp_caps = self.odp_caps.rc;
        out.odp_caps.per_transport_caps.uc_odp_caps = self.odp_caps.uc;
        out.odp_caps.per_transport_caps.ud_odp_caps = self.odp_caps.ud;
    }
}

/// Length of a node description (`IB_DEVICE_NODE_DESC_MAX`), NUL padding
/// included: a description of exactly this length has no terminator.
pub const NODE_DESC_LEN: usize = bindings::IB_DEVICE_NODE_DESC_MAX as usize;

/// A change of device attributes (`ib_modify_device`: `struct
/// ib_device_modify` and its mask). Writing sysfs `node_desc` comes here.
pub struct DeviceModify {
    /// The new system image GUID (`IB_DEVICE_MODIFY_SYS_IMAGE_GUID`).
    pub sys_image_guid: Option<Guid>,
    /// The new node description (`IB_DEVICE_MODIFY_NODE_DESC`).
    pub node_desc: Option<[u8; NODE_DESC_LEN]>,
    /// Mask bits other than these two.
    pub other_mask: u32,
}

impl DeviceModify {
    /// Reads a change the RDMA core passes to `modify_device`.
    ///
    /// # Safety
    ///
    /// `attr` is valid for reading.
    pub(crate) unsafe fn from_raw(mask: u32, attr: *const bindings::ib_device_modify) -> Self {
        let guid_bit = bindings::ib_device_modify_flags_IB_DEVICE_MODIFY_SYS_IMAGE_GUID;
        let desc_bit = bindings::ib_device_modify_flags_IB_DEVICE_MODIFY_NODE_DESC;
        // SAFETY: The caller guarantees that `attr` is valid for reading.
        let attr = unsafe { &*attr };
        Self {
            // The field is in host order (the C driver stores `cpu_to_be64` of it).
            sys_image_guid: (mask & guid_bit != 0).then(|| Guid(attr.sys_image_guid.to_be_bytes())),
            // The kernel's `c_char` is `u8`.
            node_desc: (mask & desc_bit != 0).then_some(attr.node_desc),
            other_mask: mask & !(guid_bit | desc_bit),
        }
    }
}
