// SPDX-License-Identifier: GPL-2.0

#![forbid(unsafe_code)]

//! rrxe: a software RoCEv2 provider, the Rust peer of `rdma_rxe`.
//!
//! `rdma link add NAME type rrxe netdev DEV` creates a device bound to the
//! Ethernet device `DEV` that rdma-core's stock `rxe` provider drives.

mod ah;
mod coexist;
mod cq;
mod device;
mod hw_counters;
mod icrc;
mod link;
mod mcast;
mod mem;
mod mr;
mod mtu;
mod mw;
mod net;
mod ns;
mod param;
mod pool;
mod qp;
mod rc;
mod recv;
mod srq;
mod tx;
mod ud;
mod verbs;

use crate::{
    net::{
        notifier,
        skbuff::TxCreditFence, //
    },
    rdma::{
        device::DriverRegistration,
        link as rdma_link, //
    },
};
use kernel::prelude::*;

/// The module state.
///
/// Fields are dropped in declaration order, which is the teardown order at
/// unload: no new links, then every rrxe device unregistered (and no other
/// driver's), then a wait for the destructors of packets their QPs left in
/// the IP stack (a qdisc may hold them after the QP is gone), then no more
/// net device events, and last the guard that keeps `rdma_rxe` out while
/// rrxe devices exist.
#[pin_data]
pub(crate) struct RrxeModule {
    #[pin]
    link: rdma_link::Registration<link::RrxeLink>,
    devices: DriverRegistration<verbs::Rrxe>,
    tx_credits: TxCreditFence,
    /// Per-namespace RoCEv2 sockets; those still open are closed here.
    #[pin]
    namespaces: ns::Registration,
    #[pin]
    netdev_events: notifier::Registration<net::NetEvents>,
    #[pin]
    rxe_guard: coexist::Registration,
}

impl kernel::InPlaceModule for RrxeModule {
    fn init(_module: &'static ThisModule) -> impl PinInit<Self, Error> {
        try_pin_init!(Self {
            rxe_guard <- coexist::Registration::new(try_init!(coexist::RxeGuard {})),
            netdev_events <- notifier::Registration::new(try_init!(net::NetEvents {})),
            namespaces <- ns::Registration::new(),
            devices: DriverRegistration::new(),
            tx_credits: TxCreditFence::new(),
            link <- rdma_link::Registration::new(),
        })
    }
}
