// SPDX-License-Identifier: GPL-2.0

#![forbid(unsafe_code)]

//! rrxe: a software RoCEv2 provider, the Rust peer of `rdma_rxe`.
//!
//! `rdma link add NAME type rrxe netdev DEV` creates a device bound to the
//! Ethernet device `DEV` that rdma-core's stock `rxe` provider drives.
//!
//! # Locking
//!
//! The transport of a QP runs under its state lock, from a verb, the
//! receive softirq, a timer or the QP's kick (BH work). Every spinlock the
//! data path takes disables interrupts (only the index pools', taken in
//! process context, do not). The order, outermost first; a lock is only
//! taken with those above it held:
//!
//! 1. Mutexes, never under a spinlock: an SRQ's `modify` (then its state),
//!    the device's `bound_qps` (then the QP table), the namespace's
//!    `sockets`.
//! 2. A QP's `state` ([`qp::RrxeQp`]). Never two at once: packets built
//!    under it are sent, and local ones delivered to their QP, after it is
//!    dropped.
//! 3. Under the QP's state: an AH's route (`RrxeAh::route`, UD sends), or the
//!    device's `atomic_ops` (an atomic's read-modify-write); never both.
//! 4. Under those: a fast-register region's state (`RrxeMr::fast`) or a
//!    window's binding (`RrxeMw::bind`); never both.
//! 5. Leaves, which take nothing else: a CQ's ring ([`cq::RrxeCq`]), the
//!    object tables' xarray locks (released before the object's own lock
//!    is taken), an on-demand region's page table (`UmemOdp`), the skb
//!    queues, the device's multicast groups, the index pools, and the
//!    kernel's timer and workqueue locks. An SRQ's state takes only
//!    leaves: a UD receive checks, under it, that the on-demand memory of
//!    the WQE it takes is mapped (an xarray lookup, the page table, and
//!    the QP's work queued when it is not).
//!
//! An on-demand region's `umem_mutex` is taken only in process context
//! (its invalidation callback, under the process's mm locks, and the
//! QP's sleepable work), never under a spinlock; the page table is taken
//! under it.
//!
//! The consumers' callbacks run with no driver lock held and interrupts
//! enabled (the C helpers check it under lockdep): completion handlers and
//! CQ overrun events ([`cq::RrxeCq::run_due`]), and QP and SRQ events,
//! all made by `RrxeQp::report_events` once the QP's state lock is
//! dropped. A verb that owes one (an ERR flush in `post_send`, `modify_qp`
//! to ERR) leaves it to the QP's kick, so that the handler does not run
//! inside the caller's verb with the caller's own locks held. One
//! exception remains: a packet to a QP of the same host is delivered from
//! the sender's context, so a `post_send` whose packet completes a local
//! peer's receive runs that peer's handlers before it returns (with no
//! driver lock held, and bottom halves disabled).

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
mod odp;
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
