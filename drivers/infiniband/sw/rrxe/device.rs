// SPDX-License-Identifier: GPL-2.0

#![forbid(unsafe_code)]

//! Per-device state of an rrxe device.

use crate::{
    net,
    rdma::{
        attr::DeviceAttr,
        port::Mtu,
        Gid,
        Guid, //
    },
};
use kernel::{
    new_mutex,
    prelude::*,
    sync::aref::ARef,
    sync::atomic::{
        Atomic,
        Relaxed, //
    }, //
    sync::Mutex,
};

use super::{
    coexist::Claim,
    hw_counters::{
        BoundQps,
        Counter,
        Counters, //
    },
    mtu::active_mtu,
    ns::NsUse,
    param,
    pool::IndexPool, //
};

/// Length of an Ethernet address.
const ETH_ALEN: usize = 6;

/// The state of one rrxe device, kept inside its `struct ib_device`.
#[pin_data]
pub(crate) struct RrxeDev {
    /// Indices of memory region keys.
    #[pin]
    pub(crate) mr_pool: IndexPool,
    /// QP numbers.
    #[pin]
    pub(crate) qp_pool: IndexPool,
    /// SRQ numbers.
    #[pin]
    pub(crate) srq_pool: IndexPool,
    /// Address handle numbers.
    #[pin]
    pub(crate) ah_pool: IndexPool,
    /// Indices of memory window R_Keys (after the MR range, as in rxe).
    #[pin]
    pub(crate) mw_pool: IndexPool,
    /// Source of [`super::qp::RrxeQp::uid`], which no two QPs of the
    /// device's life share (a type 2 window is bound to one QP).
    pub(crate) next_qp_uid: Atomic<u64>,
    /// Whether the GSI QP (QP1) exists: one per port.
    pub(crate) gsi_created: Atomic<bool>,
    /// Packets to a QP of this host being delivered now, nested or on
    /// other CPUs ([`super::tx::send_queued`]).
    pub(crate) local_deliveries: Atomic<u32>,
    /// Source of the GUIDs and of `query_gid`: the net device's MAC, or a
    /// random locally administered address for net devices without one.
    raw_gid: [u8; ETH_ALEN],
    /// Attributes reported by `query_device`.
    attr: DeviceAttr,
    /// The system image GUID `query_device` reports (as a `__be64`):
    /// `modify_device` may change it.
    sys_image_guid: Atomic<u64>,
    /// The port's capability mask, which `modify_port` changes: the
    /// connection manager sets `CM_SUP` when it binds to the device and
    /// clears it when it leaves (as on the C driver).
    port_cap_flags: Atomic<u32>,
    /// Q_Key violations counted before the last `IB_PORT_RESET_QKEY_CNTR`.
    qkey_viol_base: Atomic<u64>,
    /// Active path MTU in bytes, following the net device MTU.
    active_mtu: Atomic<u32>,
    /// Port hardware counters: every event, bound QPs' included.
    pub(crate) counters: Counters,
    /// The QPs bound to QP counters, whose share of `counters`
    /// `get_hw_stats` leaves out ([`hw_counters::QpCounts`]).
    #[pin]
    pub(crate) bound_qps: Mutex<BoundQps>,
    /// Keeps the RoCEv2 sockets of the net device's namespace open.
    _ns: NsUse,
    /// Keeps `rdma_rxe` from loading while the device exists.
    _claim: Claim,
    /// The net device the port is bound to, for the transmit path: held
    /// for the device's lifetime, so that softirq context never has to ask
    /// the RDMA core for it (`ib_device_get_netdev` is not softirq-safe).
    ndev: ARef<net::Device>,
    /// UD multicast groups.
    #[pin]
    pub(crate) mcast: super::mcast::Groups,
    /// Serialises the read-modify-write of atomic operations (CmpSwap,
    /// FetchAdd) that this device executes, so that they are atomic with
    /// respect to each other (`IB_ATOMIC_HCA`).
    #[pin]
    pub(crate) atomic_ops: crate::rdma::lock::SpinLockIrq<()>,
}

impl RrxeDev {
    /// The net device of the port.
    pub(crate) fn ndev(&self) -> &net::Device {
        &self.ndev
    }

    /// Creates the state of a device on top of `ndev`, which holds `claim`.
    pub(crate) fn new(ndev: &net::Device, claim: Claim) -> impl PinInit<Self, Error> {
        let mut raw_gid = [0u8; ETH_ALEN];
        if ndev.hw_addr(&mut raw_gid) == 0 {
            // Connection management needs a unique GID even without a MAC (e.g. `tun`).
            raw_gid = net::random_ether_addr();
        }
        let guid = Guid::from_eui48(&raw_gid);
        let mtu = active_mtu(ndev.mtu()).bytes();
        let ns = NsUse::new(ndev);
        let held: ARef<net::Device> = ndev.into();
        try_pin_init!(Self {
            mr_pool <- IndexPool::new(param::MIN_MR_INDEX as u32, param::MAX_MR_INDEX as u32),
            qp_pool <- IndexPool::new(param::MIN_QP_INDEX as u32, param::MAX_QP_INDEX as u32),
            srq_pool <- IndexPool::new(param::MIN_SRQ_INDEX as u32, param::MAX_SRQ_INDEX as u32),
            ah_pool <- IndexPool::new(param::MIN_AH_INDEX, param::MAX_AH_INDEX),
            mw_pool <- IndexPool::new(param::MIN_MW_INDEX, param::MAX_MW_INDEX),
            next_qp_uid: Atomic::new(1),
            gsi_created: Atomic::new(false),
            local_deliveries: Atomic::new(0),
            raw_gid,
            attr: param::device_attr(guid),
            sys_image_guid: Atomic::new(guid.to_be64_raw()),
            port_cap_flags: Atomic::new(param::PORT_CAP_FLAGS),
            qkey_viol_base: Atomic::new(0),
            active_mtu: Atomic::new(mtu),
            counters: Counters::new(),
            bound_qps <- new_mutex!(BoundQps::default(), "RrxeDev::bound_qps"),
            _ns: ns?,
            _claim: claim,
            ndev: held,
            mcast <- crate::rdma::lock::new_spinlock_irq!(KVec::new(), "RrxeDev::mcast"),
            atomic_ops <- crate::rdma::lock::new_spinlock_irq!((), "RrxeDev::atomic_ops"),
        })
    }

    /// The node GUID: the EUI-64 of the MAC address.
    pub(crate) fn node_guid(&self) -> Guid {
        Guid::from_eui48(&self.raw_gid)
    }

    /// The device attributes.
    pub(crate) fn attr(&self) -> &DeviceAttr {
        &self.attr
    }

    /// The system image GUID: `attr().sys_image_guid` until
    /// `modify_device` changes it.
    pub(crate) fn sys_image_guid(&self) -> Guid {
        Guid(self.sys_image_guid.load(Relaxed).to_ne_bytes())
    }

    /// Replaces the system image GUID (`modify_device`).
    pub(crate) fn set_sys_image_guid(&self, guid: Guid) {
        self.sys_image_guid.store(guid.to_be64_raw(), Relaxed);
    }

    /// The port's capability mask.
    pub(crate) fn port_cap_flags(&self) -> u32 {
        self.port_cap_flags.load(Relaxed)
    }

    /// Sets the capability bits `set`, then clears those of `clr`
    /// (`modify_port`), atomically with respect to other changes.
    pub(crate) fn modify_port_cap_flags(&self, set: u32, clr: u32) {
        let mut old = self.port_cap_flags.load(Relaxed);
        while let Err(now) = self
            .port_cap_flags
            .cmpxchg(old, (old | set) & !clr, Relaxed)
        {
            old = now;
        }
    }

    /// The port's Q_Key violation counter (PortInfo:Q_KeyViolations, 16
    /// bits that stop at their maximum, IBTA Vol 1 §14.2.5.6): Q_Key drops
    /// since the last reset.
    pub(crate) fn qkey_viol_cntr(&self) -> u32 {
        let n = self.counters.get(Counter::RcvdDropBadQkey);
        let since = n.saturating_sub(self.qkey_viol_base.load(Relaxed));
        u32::try_from(since.min(0xffff)).unwrap_or(0xffff)
    }

    /// Resets the Q_Key violation counter (`IB_PORT_RESET_QKEY_CNTR`); the
    /// `rcvd_drop_bad_qkey` hardware counter keeps its count.
    pub(crate) fn reset_qkey_viol_cntr(&self) {
        self.qkey_viol_base
            .store(self.counters.get(Counter::RcvdDropBadQkey), Relaxed);
    }

    /// The value `query_gid` reports: the MAC in the first six bytes.
    pub(crate) fn raw_gid(&self) -> Gid {
        let mut gid = Gid::default();
        gid.0[..ETH_ALEN].copy_from_slice(&self.raw_gid);
        gid
    }

    /// The current active path MTU of the port.
    pub(crate) fn active_mtu(&self) -> Mtu {
        Mtu::at_most(self.active_mtu.load(Relaxed)).unwrap_or(Mtu::Mtu256)
    }

    /// Follows a change of the net device MTU.
    pub(crate) fn set_netdev_mtu(&self, netdev_mtu: u32) {
        self.active_mtu
            .store(active_mtu(netdev_mtu).bytes(), Relaxed);
    }

    /// Counts a transition of the port to down.
    pub(crate) fn count_link_down(&self) {
        self.counters.inc(Counter::LinkDowned);
    }
}
