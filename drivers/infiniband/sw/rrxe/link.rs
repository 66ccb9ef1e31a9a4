// SPDX-License-Identifier: GPL-2.0

#![forbid(unsafe_code)]

//! The `rrxe` link type: `rdma link add NAME type rrxe netdev DEV`.

use crate::{
    net,
    rdma::{
        device::{
            RegisteredDevice,
            UnregisteredDevice,
            UverbsCmd, //
        },
        link::LinkOps, //
    },
};
use kernel::prelude::*;

use super::{
    coexist::Claim,
    device::RrxeDev,
    verbs::Rrxe, //
};

/// The `rrxe` link type.
pub(crate) struct RrxeLink;

impl LinkOps for RrxeLink {
    const TYPE: &'static CStr = c"rrxe";

    fn newlink(ibdev_name: &CStr, ndev: &net::Device) -> Result {
        if ndev.is_vlan() {
            pr_err!("rrxe creation allowed on top of a real device only\n");
            return Err(EPERM);
        }
        if RegisteredDevice::<Rrxe>::get_by_netdev(ndev).is_some() {
            pr_err!("already configured on {}\n", ndev.name());
            return Err(EEXIST);
        }

        // Before anything is allocated: `EBUSY` while `rdma_rxe` is loaded.
        let claim = Claim::new(ibdev_name)?;
        // In the net device's namespace: in exclusive mode the device is
        // then seen (and usable) only there. rdma_rxe allocates every
        // device in init_net, where a device made from inside a namespace
        // is out of that namespace's reach.
        let mut dev = UnregisteredDevice::<Rrxe>::new(ndev.net(), RrxeDev::new(ndev, claim))?;
        dev.mark_name_assigned_by_user();
        dev.set_node_desc(c"rrxe");
        dev.set_ca_ports(1);
        dev.set_num_comp_vectors(kernel::cpu::nr_cpu_ids());
        dev.set_local_dma_lkey(0);
        let guid = dev.node_guid();
        dev.set_node_guid(guid);
        // rdma-core's rxe provider rings the send doorbell with POST_SEND and
        // arms CQs with REQ_NOTIFY_CQ, both legacy write() commands.
        dev.enable_uverbs_cmd(UverbsCmd::PostSend);
        dev.enable_uverbs_cmd(UverbsCmd::ReqNotifyCq);

        dev.register(ibdev_name, ndev, 1).inspect_err(|e| {
            pr_err!("failed to add {}: error {}\n", ndev.name(), e.to_errno());
        })
    }
}
