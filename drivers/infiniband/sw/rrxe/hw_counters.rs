// SPDX-License-Identifier: GPL-2.0

#![forbid(unsafe_code)]

//! Port hardware counters (sysfs `ports/1/hw_counters/`, `rdma statistic`).
//!
//! Same names and order as the C driver (`rxe_hw_counters.c`), so that
//! tools comparing the two see the same files.

use crate::proto::pma::PortCounters;
use crate::rdma::{
    device::Device,
    hw_counters::StatDesc,
    qp::Qp, //
};
use kernel::prelude::*;
use kernel::sync::atomic::{
    Atomic,
    Relaxed, //
};

use super::verbs::Rrxe;

/// A counter; the discriminant is its index in [`DESCS`].
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum Counter {
    /// Packets sent.
    SentPkts,
    /// Packets received and accepted.
    RcvdPkts,
    /// Duplicate requests received.
    DuplicateRequest,
    /// Requests received out of sequence.
    OutOfSeqRequest,
    /// RNR NAKs received.
    RcvdRnrErr,
    /// RNR NAKs sent.
    SendRnrErr,
    /// PSN sequence error NAKs received.
    RcvdSeqErr,
    /// ACKs deferred to the sender task.
    AckDeferred,
    /// Transport retries exhausted.
    RetryExceededErr,
    /// RNR retries exhausted.
    RetryRnrExceededErr,
    /// Retransmissions started by the completer.
    CompleterRetryErr,
    /// Packets that could not be sent.
    SendErr,
    /// Transitions of the port to down.
    LinkDowned,
    /// SEND requests sent.
    RdmaSends,
    /// SEND requests received.
    RdmaRecvs,
    /// Bytes sent.
    SentBytes,
    /// Bytes received.
    RcvdBytes,
    // rrxe's own counters, after those of the C driver: received packets
    // dropped before reaching a QP, by reason.
    /// UDP payload shorter than a BTH, or UDP length not matching the packet.
    RcvdDropTruncated,
    /// BTH transport version not 0.
    RcvdDropBadTver,
    /// Unknown or unsupported BTH opcode.
    RcvdDropBadOpcode,
    /// Length not matching the opcode's headers, pad and ICRC.
    RcvdDropBadLength,
    /// Destination address not a GID of the port.
    RcvdDropBadDgid,
    /// Wrong ICRC.
    RcvdDropBadIcrc,
    /// Destination QPN 0, or no such QP.
    RcvdDropBadQpn,
    /// Opcode of another service than the destination QP's (the C
    /// driver's `check_type_state`).
    RcvdDropBadTransport,
    /// P_Key not matching the port's only P_Key, 0xffff (also counted in
    /// the port's `bad_pkey_cntr`, as the C driver's `check_keys`).
    RcvdDropBadPkey,
    /// UD: Q_Key not the QP's (also in the port's `qkey_viol_cntr`).
    RcvdDropBadQkey,
    /// Other reasons: unsupported IP header, no memory to linearize.
    RcvdDropOther,
    // rrxe's flow counters, which `make bench` reads to explain a figure.
    /// The RC requester stopped with `MAX_UNACKED_PSNS` packets
    /// unacknowledged (each time it stopped).
    ReqWindowFull,
    /// The requester stopped with its QP's transmit credit used up: too
    /// many of its packets not yet freed by the network device.
    ReqCreditStall,
    /// ACKs, NAKs and RNR NAKs sent by RC responders.
    SentAcks,
    /// Acknowledge packets (ACK, NAK, RNR NAK) received by RC completers.
    RcvdAcks,
}

/// Number of counters.
pub(crate) const NUM: usize = 32;

/// Counter names, indexed by [`Counter`].
pub(crate) const DESCS: &[StatDesc; NUM] = &[
    StatDesc::new(c"sent_pkts"),
    StatDesc::new(c"rcvd_pkts"),
    StatDesc::new(c"duplicate_request"),
    StatDesc::new(c"out_of_seq_request"),
    StatDesc::new(c"rcvd_rnr_err"),
    StatDesc::new(c"send_rnr_err"),
    StatDesc::new(c"rcvd_seq_err"),
    StatDesc::new(c"ack_deferred"),
    StatDesc::new(c"retry_exceeded_err"),
    StatDesc::new(c"retry_rnr_exceeded_err"),
    StatDesc::new(c"completer_retry_err"),
    StatDesc::new(c"send_err"),
    StatDesc::new(c"link_downed"),
    StatDesc::new(c"rdma_sends"),
    StatDesc::new(c"rdma_recvs"),
    StatDesc::new(c"sent_bytes"),
    StatDesc::new(c"rcvd_bytes"),
    StatDesc::new(c"rcvd_drop_truncated"),
    StatDesc::new(c"rcvd_drop_bad_tver"),
    StatDesc::new(c"rcvd_drop_bad_opcode"),
    StatDesc::new(c"rcvd_drop_bad_length"),
    StatDesc::new(c"rcvd_drop_bad_dgid"),
    StatDesc::new(c"rcvd_drop_bad_icrc"),
    StatDesc::new(c"rcvd_drop_bad_qpn"),
    StatDesc::new(c"rcvd_drop_bad_transport"),
    StatDesc::new(c"rcvd_drop_bad_pkey"),
    StatDesc::new(c"rcvd_drop_bad_qkey"),
    StatDesc::new(c"rcvd_drop_other"),
    StatDesc::new(c"req_window_full"),
    StatDesc::new(c"req_credit_stall"),
    StatDesc::new(c"sent_acks"),
    StatDesc::new(c"rcvd_acks"),
];

/// The counters of one port.
pub(crate) struct Counters([Atomic<u64>; NUM]);

impl Counters {
    /// Creates counters that are all zero.
    pub(crate) const fn new() -> Self {
        Self([const { Atomic::new(0) }; NUM])
    }

    /// Adds `n` to counter `c`.
    pub(crate) fn add(&self, c: Counter, n: u64) {
        // CAST: the discriminants are the indices `0..NUM`.
        self.0[c as usize].add(n, Relaxed);
    }

    /// Adds one to counter `c`.
    pub(crate) fn inc(&self, c: Counter) {
        self.add(c, 1);
    }

    /// The value of counter `c`.
    pub(crate) fn get(&self, c: Counter) -> u64 {
        // CAST: the discriminants are the indices `0..NUM`.
        self.0[c as usize].load(Relaxed)
    }

    /// The counters the port's performance management agent reports
    /// (sysfs `ports/1/counters/`), as the C driver's `rxe_mad.c` takes them.
    pub(crate) fn pma(&self) -> PortCounters {
        PortCounters {
            link_downed: self.get(Counter::LinkDowned),
            sent_bytes: self.get(Counter::SentBytes),
            rcvd_bytes: self.get(Counter::RcvdBytes),
            sent_pkts: self.get(Counter::SentPkts),
            rcvd_pkts: self.get(Counter::RcvdPkts),
        }
    }
}

/// Where a QP's events are counted: in the device's totals (which the
/// port's performance management agent reports) and in the QP's own counts.
/// A QP counter (`rdma statistic qp`) owns what its QPs count between the
/// snapshots taken at bind and unbind ([`BoundQps`]); `get_hw_stats` leaves
/// that out, because the RDMA core shows a port (sysfs `hw_counters`,
/// `rdma statistic show`) as its own values plus its counters', running and
/// gone. Each event lands on one side of a snapshot, so nothing is lost or
/// counted twice however the counting races with binding.
pub(crate) struct QpCounts<'a> {
    total: &'a Counters,
    own: &'a Counters,
}

impl QpCounts<'_> {
    /// Adds `n` to counter `c`.
    pub(crate) fn add(&self, c: Counter, n: u64) {
        self.total.add(c, n);
        self.own.add(c, n);
    }

    /// Adds one to counter `c`.
    pub(crate) fn inc(&self, c: Counter) {
        self.add(c, 1);
    }
}

/// The counts of `qp`'s events.
pub(crate) fn qp_counts(qp: &Qp<Rrxe>) -> QpCounts<'_> {
    QpCounts {
        total: &qp.device().counters,
        own: &qp.own_counts,
    }
}

/// Values of all counters.
pub(crate) type Values = [u64; NUM];

/// A QP bound to a QP counter: its counts when it was bound.
struct BoundQp {
    qpn: u32,
    /// The counter ([`crate::rdma::counter::CounterGuard::key`]).
    counter: usize,
    base: Values,
}

/// The device's QPs bound to QP counters, and what QPs counted while bound
/// before they were unbound.
#[derive(Default)]
pub(crate) struct BoundQps {
    qps: KVec<BoundQp>,
    retired: Values,
}

/// `values += qp's counts since base`, or nothing if the QP is gone.
fn add_since(dev: &Device<Rrxe>, qpn: u32, base: &Values, values: &mut Values) {
    if let Some(qp) = dev.lookup_qp(qpn) {
        let now = qp.own_counts.snapshot();
        for ((v, n), b) in values.iter_mut().zip(&now).zip(base) {
            *v = v.saturating_add(n.saturating_sub(*b));
        }
    }
}

impl BoundQps {
    /// Binds `qp` to `counter`: from now on what it counts is the counter's.
    pub(crate) fn bind(&mut self, counter: usize, qp: &Qp<Rrxe>) -> Result {
        let e = BoundQp {
            qpn: qp.qp_num(),
            counter,
            base: qp.own_counts.snapshot(),
        };
        self.qps.push(e, GFP_KERNEL)?;
        Ok(())
    }

    /// Unbinds `qp`; what it counted while bound is added to `retired` (the
    /// counter's) and to the device's.
    pub(crate) fn unbind(&mut self, dev: &Device<Rrxe>, qp: &Qp<Rrxe>, retired: &mut Values) {
        let qpn = qp.qp_num();
        let Some(i) = self.qps.iter().position(|e| e.qpn == qpn) else {
            return;
        };
        let mut delta = [0u64; NUM];
        add_since(dev, qpn, &self.qps[i].base, &mut delta);
        for ((r, t), d) in retired.iter_mut().zip(self.retired.iter_mut()).zip(&delta) {
            *r = r.saturating_add(*d);
            *t = t.saturating_add(*d);
        }
        let _ = self.qps.remove(i);
    }

    /// The counts of `counter`: `retired` plus what its QPs counted since
    /// they were bound.
    pub(crate) fn counter_values(
        &self,
        dev: &Device<Rrxe>,
        counter: usize,
        retired: &Values,
    ) -> Values {
        let mut v = *retired;
        for e in self.qps.iter().filter(|e| e.counter == counter) {
            add_since(dev, e.qpn, &e.base, &mut v);
        }
        v
    }

    /// What all QPs counted while bound, now and before.
    pub(crate) fn bound_share(&self, dev: &Device<Rrxe>) -> Values {
        let mut v = self.retired;
        for e in self.qps.iter() {
            add_since(dev, e.qpn, &e.base, &mut v);
        }
        v
    }
}

/// The driver's part of a QP counter (`struct rdma_counter`): what its QPs
/// counted while bound before they were unbound.
#[derive(Default)]
pub(crate) struct QpCounter {
    pub(crate) retired: Values,
}

impl Default for Counters {
    fn default() -> Self {
        Self::new()
    }
}

impl Counters {
    /// The values of all counters.
    pub(crate) fn snapshot(&self) -> Values {
        let mut v = [0u64; NUM];
        for (v, c) in v.iter_mut().zip(&self.0) {
            *v = c.load(Relaxed);
        }
        v
    }

    /// Copies `self` minus `minus` to `values`, counter by counter, and
    /// returns how many were copied.
    pub(crate) fn read_less(&self, minus: &Values, values: &mut [u64]) -> usize {
        let mut n = 0;
        for ((v, c), m) in values.iter_mut().zip(&self.0).zip(minus) {
            *v = c.load(Relaxed).saturating_sub(*m);
            n += 1;
        }
        n
    }
}

#[kunit_tests(rrxe_hw_counters)]
mod tests {
    use super::*;

    #[test]
    fn last_counter_is_last_desc() {
        // CAST: the discriminants are the indices `0..NUM`.
        assert_eq!(Counter::RcvdAcks as usize, NUM - 1);
    }

    #[test]
    fn read_copies_in_order() {
        let c = Counters::new();
        c.inc(Counter::LinkDowned);
        c.add(Counter::SentBytes, 4096);
        let none = [0u64; NUM];
        let mut v = [u64::MAX; NUM];
        assert_eq!(c.read_less(&none, &mut v), NUM);
        assert_eq!(v[Counter::LinkDowned as usize], 1);
        assert_eq!(v[Counter::SentBytes as usize], 4096);
        assert_eq!(v[Counter::SentPkts as usize], 0);

        // A shorter buffer gets a prefix.
        let mut short = [0u64; 3];
        assert_eq!(c.read_less(&none, &mut short), 3);
    }

    #[test]
    fn read_less_subtracts_the_bound_share() {
        // What get_hw_stats shows is the total less the bound share.
        let total = Counters::new();
        total.add(Counter::SentPkts, 10);
        let mut share = [0u64; NUM];
        share[Counter::SentPkts as usize] = 4;
        let mut v = [0u64; NUM];
        assert_eq!(total.read_less(&share, &mut v), NUM);
        assert_eq!(v[Counter::SentPkts as usize], 6);
        assert_eq!(total.snapshot()[Counter::SentPkts as usize], 10);
    }
}
