// SPDX-License-Identifier: GPL-2.0

//! Port attributes (`struct ib_port_attr`, `struct ib_port_immutable`).
//!
//! C header: [`include/rdma/ib_verbs.h`](srctree/include/rdma/ib_verbs.h)

use crate::bindings;

/// Logical port state (`enum ib_port_state`, IBTA Vol 1 §14.2.5.6).
#[derive(Clone, Copy, Default, PartialEq, Eq, Debug)]
pub enum PortState {
    /// No state change.
    Nop,
    /// Link down.
    #[default]
    Down,
    /// Link up, not yet configured.
    Init,
    /// Configured, not yet forwarding data packets.
    Armed,
    /// Forwarding data packets.
    Active,
    /// Active, deferring traffic (RoCE: carrier up, not yet usable).
    ActiveDefer,
}

impl PortState {
    pub(crate) const fn as_raw(self) -> bindings::ib_port_state {
        match self {
            Self::Nop => bindings::ib_port_state_IB_PORT_NOP,
            Self::Down => bindings::ib_port_state_IB_PORT_DOWN,
            Self::Init => bindings::ib_port_state_IB_PORT_INIT,
            Self::Armed => bindings::ib_port_state_IB_PORT_ARMED,
            Self::Active => bindings::ib_port_state_IB_PORT_ACTIVE,
            Self::ActiveDefer => bindings::ib_port_state_IB_PORT_ACTIVE_DEFER,
        }
    }

    pub(crate) const fn from_raw(v: bindings::ib_port_state) -> Self {
        match v {
            bindings::ib_port_state_IB_PORT_NOP => Self::Nop,
            bindings::ib_port_state_IB_PORT_INIT => Self::Init,
            bindings::ib_port_state_IB_PORT_ARMED => Self::Armed,
            bindings::ib_port_state_IB_PORT_ACTIVE => Self::Active,
            bindings::ib_port_state_IB_PORT_ACTIVE_DEFER => Self::ActiveDefer,
            _ => Self::Down,
        }
    }
}

/// Physical port state (`enum ib_port_phys_state`, IBTA Vol 1 §14.2.5.6).
#[derive(Clone, Copy, Default, PartialEq, Eq, Debug)]
pub enum PhysState {
    /// Sleeping.
    Sleep,
    /// Trying to bring the link up.
    #[default]
    Polling,
    /// Administratively disabled.
    Disabled,
    /// Link up.
    LinkUp,
}

impl PhysState {
    const fn as_raw(self) -> u8 {
        let v = match self {
            Self::Sleep => bindings::ib_port_phys_state_IB_PORT_PHYS_STATE_SLEEP,
            Self::Polling => bindings::ib_port_phys_state_IB_PORT_PHYS_STATE_POLLING,
            Self::Disabled => bindings::ib_port_phys_state_IB_PORT_PHYS_STATE_DISABLED,
            Self::LinkUp => bindings::ib_port_phys_state_IB_PORT_PHYS_STATE_LINK_UP,
        };
        // CAST: the values are 1..=7; `ib_port_attr::phys_state` is a `u8`.
        v as u8
    }
}

/// Path MTU (`enum ib_mtu`): the payload size of one packet, in bytes.
#[derive(Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Debug)]
pub enum Mtu {
    /// 256 bytes.
    #[default]
    Mtu256,
    /// 512 bytes.
    Mtu512,
    /// 1024 bytes.
    Mtu1024,
    /// 2048 bytes.
    Mtu2048,
    /// 4096 bytes.
    Mtu4096,
}

impl Mtu {
    /// Returns the MTU in bytes.
    pub const fn bytes(self) -> u32 {
        match self {
            Self::Mtu256 => 256,
            Self::Mtu512 => 512,
            Self::Mtu1024 => 1024,
            Self::Mtu2048 => 2048,
            Self::Mtu4096 => 4096,
        }
    }

    /// Returns the largest MTU that is at most `bytes`, or `None` below 256.
    pub const fn at_most(bytes: u32) -> Option<Self> {
        Some(match bytes {
            0..256 => return None,
            256..512 => Self::Mtu256,
            512..1024 => Self::Mtu512,
            1024..2048 => Self::Mtu1024,
            2048..4096 => Self::Mtu2048,
            _ => Self::Mtu4096,
        })
    }

    /// Returns the MTU as `enum ib_mtu` (as in `ib_qp_attr::path_mtu`).
    pub const fn to_ib_mtu(self) -> u32 {
        self.as_raw()
    }

    const fn as_raw(self) -> bindings::ib_mtu {
        match self {
            Self::Mtu256 => bindings::ib_mtu_IB_MTU_256,
            Self::Mtu512 => bindings::ib_mtu_IB_MTU_512,
            Self::Mtu1024 => bindings::ib_mtu_IB_MTU_1024,
            Self::Mtu2048 => bindings::ib_mtu_IB_MTU_2048,
            Self::Mtu4096 => bindings::ib_mtu_IB_MTU_4096,
        }
    }
}

/// Link layer of a port (`enum rdma_link_layer`).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum LinkLayer {
    /// Not specified.
    Unspecified,
    /// InfiniBand.
    InfiniBand,
    /// Ethernet (RoCE, iWARP).
    Ethernet,
}

impl LinkLayer {
    pub(crate) const fn as_raw(self) -> bindings::rdma_link_layer {
        match self {
            Self::Unspecified => bindings::rdma_link_layer_IB_LINK_LAYER_UNSPECIFIED,
            Self::InfiniBand => bindings::rdma_link_layer_IB_LINK_LAYER_INFINIBAND,
            Self::Ethernet => bindings::rdma_link_layer_IB_LINK_LAYER_ETHERNET,
        }
    }
}

/// Port capability flags (`enum ib_port_capability_mask_bits`, IBTA Vol 1
/// §14.2.5.6 PortInfo:CapabilityMask).
pub mod cap {
    use crate::bindings;

    /// Communication management is supported.
    pub const CM_SUP: u32 = bindings::ib_port_capability_mask_bits_IB_PORT_CM_SUP;
}

/// A change of port attributes (`ib_modify_port`: `struct ib_port_modify`
/// and its mask). The connection manager sets and clears `cap::CM_SUP`
/// this way when it binds to and leaves a device.
pub struct PortModify {
    /// Capability bits to set.
    pub set_port_cap_mask: u32,
    /// Capability bits to clear (after setting).
    pub clr_port_cap_mask: u32,
    /// Reset the Q_Key violation counter (`IB_PORT_RESET_QKEY_CNTR`).
    pub reset_qkey_cntr: bool,
    /// Mask bits other than `IB_PORT_RESET_QKEY_CNTR` (shutdown, init
    /// type, OPA).
    pub other_mask: u32,
}

impl PortModify {
    /// Reads a change the RDMA core passes to `modify_port`.
    ///
    /// # Safety
    ///
    /// `attr` is valid for reading.
    pub(crate) unsafe fn from_raw(mask: u32, attr: *const bindings::ib_port_modify) -> Self {
        let reset_bit = bindings::ib_port_modify_flags_IB_PORT_RESET_QKEY_CNTR;
        // SAFETY: The caller guarantees that `attr` is valid for reading.
        let attr = unsafe { &*attr };
        Self {
            set_port_cap_mask: attr.set_port_cap_mask,
            clr_port_cap_mask: attr.clr_port_cap_mask,
            reset_qkey_cntr: mask & reset_bit != 0,
            other_mask: mask & !reset_bit,
        }
    }
}

/// Link width (`enum ib_port_width`): number of lanes.
pub mod width {
    use crate::bindings;

    /// One lane.
    // CAST: the widths are small bit values; `ib_port_attr::active_width` is a `u8`.
    pub const X1: u8 = bindings::ib_port_width_IB_WIDTH_1X as u8;
}

/// The attributes of a port (`struct ib_port_attr`).
///
/// Field names and units are those of the C structure.  Fields not listed
/// here are reported as zero.
#[derive(Clone, Default, Debug)]
pub struct PortAttr {
    /// GID subnet prefix, in host byte order.
    pub subnet_prefix: u64,
    /// Logical port state.
    pub state: PortState,
    /// Largest supported MTU.
    pub max_mtu: Mtu,
    /// Current MTU.
    pub active_mtu: Mtu,
    /// Number of GID table entries.
    pub gid_tbl_len: i32,
    /// PortInfo:CapabilityMask (see [`cap`]).
    pub port_cap_flags: u32,
    /// Largest message, in bytes.
    pub max_msg_sz: u32,
    /// P_Key violation counter.
    pub bad_pkey_cntr: u32,
    /// Q_Key violation counter.
    pub qkey_viol_cntr: u32,
    /// Number of P_Key table entries.
    pub pkey_tbl_len: u16,
    /// LID of the subnet manager.
    pub sm_lid: u32,
    /// Base LID of the port.
    pub lid: u32,
    /// LID mask count.
    pub lmc: u8,
    /// Number of virtual lanes.
    pub max_vl_num: u8,
    /// Service level of the subnet manager.
    pub sm_sl: u8,
    /// Subnet timeout, as `4.096 µs * 2^subnet_timeout`.
    pub subnet_timeout: u8,
    /// PortInfo:InitTypeReply.
    pub init_type_reply: u8,
    /// Active link width (see [`width`]).
    pub active_width: u8,
    /// Active link speed (`enum ib_port_speed`).
    pub active_speed: u16,
    /// Physical port state.
    pub phys_state: PhysState,
}

impl PortAttr {
    /// Writes `self` to `out`; fields this type does not carry become zero.
    pub(crate) fn write_raw(&self, out: &mut bindings::ib_port_attr) {
        // SAFETY: `ib_port_attr` is plain old data (integers and a bitfield); all-zero is a
        // valid value.
        *out = unsafe { core::mem::zeroed() };
        out.subnet_prefix = self.subnet_prefix;
        out.state = self.state.as_raw();
        out.max_mtu = self.max_mtu.as_raw();
        out.active_mtu = self.active_mtu.as_raw();
        out.gid_tbl_len = self.gid_tbl_len;
        out.port_cap_flags = self.port_cap_flags;
        out.max_msg_sz = self.max_msg_sz;
        out.bad_pkey_cntr = self.bad_pkey_cntr;
        out.qkey_viol_cntr = self.qkey_viol_cntr;
        out.pkey_tbl_len = self.pkey_tbl_len;
        out.sm_lid = self.sm_lid;
        out.lid = self.lid;
        out.lmc = self.lmc;
        out.max_vl_num = self.max_vl_num;
        out.sm_sl = self.sm_sl;
        out.subnet_timeout = self.subnet_timeout;
        out.init_type_reply = self.init_type_reply;
        out.active_width = self.active_width;
        out.active_speed = self.active_speed;
        out.phys_state = self.phys_state.as_raw();
    }
}

/// Core capabilities of a port (`RDMA_CORE_PORT_*`), fixed for the device's
/// lifetime.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct CoreCapFlags(u32);

impl CoreCapFlags {
    /// RoCEv2: RoCE over UDP/IP (IBTA Vol 1 Annex A17).
    pub const IBA_ROCE_UDP_ENCAP: Self = Self(bindings::RDMA_CORE_PORT_IBA_ROCE_UDP_ENCAP);
}

/// The immutable attributes of a port (`struct ib_port_immutable`), read
/// once at registration.
#[derive(Clone, Copy, Debug)]
pub struct PortImmutable {
    /// Number of P_Key table entries.
    pub pkey_tbl_len: i32,
    /// Number of GID table entries.
    pub gid_tbl_len: i32,
    /// Protocols the port speaks.
    pub core_cap_flags: CoreCapFlags,
    /// Largest MAD the port handles, in bytes.
    pub max_mad_size: u32,
}

impl PortImmutable {
    /// Size of a standard management datagram, in bytes (IBTA Vol 1 §13.4).
    pub const MGMT_MAD_SIZE: u32 = bindings::IB_MGMT_MAD_SIZE;

    pub(crate) fn write_raw(&self, out: &mut bindings::ib_port_immutable) {
        out.pkey_tbl_len = self.pkey_tbl_len;
        out.gid_tbl_len = self.gid_tbl_len;
        out.core_cap_flags = self.core_cap_flags.0;
        out.max_mad_size = self.max_mad_size;
    }
}
