// SPDX-License-Identifier: GPL-2.0

#![forbid(unsafe_code)]

//! Reactions to events of the net devices rrxe devices are bound to.

use crate::{
    net::{
        self,
        notifier::{
            Event,
            Handler, //
        },
    },
    rdma::{
        device::{
            self,
            RegisteredDevice, //
        },
        port::PortState, //
    },
};
use kernel::prelude::*;

use super::verbs::Rrxe;

/// Handler of net device events.
pub(crate) struct NetEvents;

impl Handler for NetEvents {
    fn notify(&self, event: Event, ndev: &net::Device) {
        let Some(dev) = RegisteredDevice::<Rrxe>::get_by_netdev(ndev) else {
            return;
        };
        match event {
            // The RTNL lock is held: unregister from a workqueue.
            Event::Unregister => dev.unregister_queued(),
            Event::ChangeMtu => {
                pr_debug!("{} changed mtu to {}\n", ndev.name(), ndev.mtu());
                dev.set_netdev_mtu(ndev.mtu());
            }
            // The RDMA core reports PORT_ACTIVE/PORT_ERR for these; count the downs.
            Event::Down | Event::Change => {
                if device::port_state_of(ndev) == PortState::Down {
                    dev.count_link_down();
                }
            }
            _ => {}
        }
    }
}
