// SPDX-License-Identifier: GPL-2.0

#![forbid(unsafe_code)]

//! The device operations of rrxe.

use crate::rdma::{
    attr::DeviceAttr,
    device::{
        self,
        Device,
        Driver, //
    },
    hw_counters::StatDesc,
    port::{
        CoreCapFlags,
        LinkLayer,
        PhysState,
        PortAttr,
        PortImmutable,
        PortState, //
    },
    udata::Udata,
    DriverId,
    Gid, //
};
use kernel::{
    prelude::*,
    ThisModule, //
};

use super::{
    device::RrxeDev,
    hw_counters,
    param, //
};

/// The rrxe provider.
pub(crate) struct Rrxe;

/// State of a user context (nothing yet: queues and mmaps come with CQs
/// and QPs).
pub(crate) struct Ucontext;

/// State of a protection domain (nothing yet: MRs, MWs and QPs refer to it).
pub(crate) struct Pd;

/// rrxe has one port.
const PORT: u32 = 1;

fn check_port(port: u32) -> Result {
    if port == PORT {
        Ok(())
    } else {
        Err(EINVAL)
    }
}

#[vtable]
impl Driver for Rrxe {
    type Data = RrxeDev;
    type UcontextData = Ucontext;
    type PdData = Pd;

    const DRIVER_ID: DriverId = DriverId::Rxe;
    const UVERBS_ABI_VER: u32 = param::UVERBS_ABI_VERSION;
    const OWNER: &'static ThisModule = &crate::THIS_MODULE;

    fn query_device(dev: &Device<Self>, udata: Option<&Udata>) -> Result<DeviceAttr> {
        // No driver data in either direction.
        if let Some(udata) = udata {
            udata.check_in_empty()?;
            udata.respond_empty()?;
        }
        Ok(dev.attr().clone())
    }

    fn query_port(dev: &Device<Self>, port: u32) -> Result<PortAttr> {
        check_port(port)?;
        let ndev = dev.netdev(PORT).ok_or(ENODEV)?;
        let mut attr = param::port_attr(dev.active_mtu());
        let (speed, width) = dev.eth_speed(port)?;
        attr.active_speed = speed;
        attr.active_width = width;
        attr.state = device::port_state_of(&ndev);
        attr.phys_state = if attr.state == PortState::Active {
            PhysState::LinkUp
        } else if ndev.is_up() {
            PhysState::Polling
        } else {
            PhysState::Disabled
        };
        Ok(attr)
    }

    fn get_port_immutable(_dev: &Device<Self>, port: u32) -> Result<PortImmutable> {
        check_port(port)?;
        Ok(PortImmutable {
            pkey_tbl_len: param::PORT_PKEY_TBL_LEN.into(),
            gid_tbl_len: param::PORT_GID_TBL_LEN,
            core_cap_flags: CoreCapFlags::IBA_ROCE_UDP_ENCAP,
            max_mad_size: PortImmutable::MGMT_MAD_SIZE,
        })
    }

    fn get_link_layer(_dev: &Device<Self>, _port: u32) -> LinkLayer {
        LinkLayer::Ethernet
    }

    fn query_pkey(_dev: &Device<Self>, port: u32, index: u16) -> Result<u16> {
        check_port(port)?;
        if index != 0 {
            return Err(EINVAL);
        }
        Ok(param::DEFAULT_PKEY_FULL)
    }

    fn query_gid(dev: &Device<Self>, port: u32, _index: i32) -> Result<Gid> {
        check_port(port)?;
        Ok(dev.raw_gid())
    }

    fn enable_driver(dev: &Device<Self>) -> Result {
        let ndev = dev.netdev(PORT).ok_or(ENODEV)?;
        // Initial PORT_ACTIVE/PORT_ERR; the RDMA core reports later changes itself.
        dev.dispatch_port_state_event(&ndev);
        if device::port_state_of(&ndev) == PortState::Active {
            dev_info!(dev.as_dev(), "set active\n");
        } else {
            dev.count_link_down();
            dev_info!(dev.as_dev(), "set down\n");
        }
        dev_info!(dev.as_dev(), "added {}\n", ndev.name());
        Ok(())
    }

    fn alloc_ucontext(
        _dev: &Device<Self>,
        _udata: Option<&Udata>,
    ) -> impl PinInit<Ucontext, Error> {
        try_init!(Ucontext {})
    }

    fn alloc_pd(_dev: &Device<Self>, _udata: Option<&Udata>) -> impl PinInit<Pd, Error> {
        try_init!(Pd {})
    }

    fn alloc_hw_port_stats(_dev: &Device<Self>, port: u32) -> Result<&'static [StatDesc]> {
        check_port(port)?;
        Ok(hw_counters::DESCS)
    }

    fn get_hw_stats(dev: &Device<Self>, port: u32, values: &mut [u64]) -> Result<usize> {
        check_port(port)?;
        Ok(dev.counters.read(values))
    }
}
