// SPDX-License-Identifier: GPL-2.0

#![forbid(unsafe_code)]

//! The unreliable datagram transport (IBTA Vol 1 §9.8.4): UD QPs and the
//! GSI QP (QP1) of the connection manager.
//!
//! Their send queues hold rxe send WQEs whose `wr.ud` member names the
//! destination (`remote_qpn`, `remote_qkey`, `ah_num`, and `pkey_index` on
//! QP1), for user QPs and kernel QPs alike; the address handle is found by
//! its number ([`crate::rdma::device::Device::lookup_ah`]).

use crate::rdma::qp::Qp;

use super::{
    qp::State,
    verbs::Rrxe, //
};

/// Sends what the send queue holds, with the state lock held; the packets
/// built go to the QP's transmit queue.
///
/// Not implemented yet: the WQEs stay posted.
pub(crate) fn run_requester(_qp: &Qp<Rrxe>, _st: &mut State) {}
