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
}

/// Number of counters.
pub(crate) const NUM: usize = 28;

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

    /// Copies the counters to `values` and returns how many were copied.
    pub(crate) fn read(&self, values: &mut [u64]) -> usize {
        let mut n = 0;
        for (v, c) in values.iter_mut().zip(&self.0) {
            *v = c.load(Relaxed);
            n += 1;
        }
        n
    }
}

/// Where a QP's events are counted: always in the device's totals (which
/// the port's performance management agent reports); while the QP is bound
/// to a QP counter (`rdma statistic qp`), also in the QP's own counts and in
/// the device's share of bound QPs, which `get_hw_stats` leaves out: the
/// RDMA core shows a port (sysfs `hw_counters`, `rdma statistic show`) as
/// its own values plus those of its QP counters, running and gone.
pub(crate) struct QpCounts<'a> {
    total: &'a Counters,
    bound: Option<(&'a Counters, &'a Counters)>,
}

impl QpCounts<'_> {
    /// Adds `n` to counter `c`.
    pub(crate) fn add(&self, c: Counter, n: u64) {
        self.total.add(c, n);
        if let Some((own, share)) = self.bound {
            own.add(c, n);
            share.add(c, n);
        }
    }

    /// Adds one to counter `c`.
    pub(crate) fn inc(&self, c: Counter) {
        self.add(c, 1);
    }
}

/// The counts of `qp`'s events.
pub(crate) fn qp_counts(qp: &Qp<Rrxe>) -> QpCounts<'_> {
    let dev = qp.device();
    QpCounts {
        total: &dev.counters,
        bound: qp
            .counter_bound
            .load(Relaxed)
            .then_some((&qp.own_counts, &dev.bound_counts)),
    }
}

/// The driver's part of a QP counter (`struct rdma_counter`): what its QPs
/// counted before they left it, and the QPs bound now. Changed only under
/// the counter's mutex, which the RDMA core holds around bind, unbind and
/// update.
#[derive(Default)]
pub(crate) struct QpCounter {
    retired: Counters,
    qpns: KVec<u32>,
}

impl QpCounter {
    /// Binds `qp`: its counts start from zero.
    pub(crate) fn bind(&mut self, qp: &Qp<Rrxe>) -> Result {
        self.qpns.push(qp.qp_num(), GFP_KERNEL)?;
        Counters::new().take_from(&qp.own_counts);
        qp.counter_bound.store(true, Relaxed);
        Ok(())
    }

    /// Unbinds `qp`; the counter keeps what it counted.
    pub(crate) fn unbind(&mut self, qp: &Qp<Rrxe>) {
        qp.counter_bound.store(false, Relaxed);
        self.retired.take_from(&qp.own_counts);
        let qpn = qp.qp_num();
        self.qpns.retain(|n| *n != qpn);
    }

    /// Fills `values` with the counter's counts: those of the QPs that
    /// left, plus those of the QPs bound now.
    pub(crate) fn read(&self, dev: &Device<Rrxe>, values: &mut [u64]) -> usize {
        let n = self.retired.read(values);
        for qpn in self.qpns.iter() {
            if let Some(qp) = dev.lookup_qp(*qpn) {
                qp.own_counts.add_to(values);
            }
        }
        n
    }
}

impl Default for Counters {
    fn default() -> Self {
        Self::new()
    }
}

impl Counters {
    /// Copies `self` minus `minus` to `values`, counter by counter, and
    /// returns how many were copied.
    pub(crate) fn read_less(&self, minus: &Counters, values: &mut [u64]) -> usize {
        let mut n = 0;
        for ((v, c), m) in values.iter_mut().zip(&self.0).zip(&minus.0) {
            *v = c.load(Relaxed).saturating_sub(m.load(Relaxed));
            n += 1;
        }
        n
    }

    /// Moves every count of `from` into `self`; `from` is left at zero.
    pub(crate) fn take_from(&self, from: &Counters) {
        for (c, f) in self.0.iter().zip(&from.0) {
            c.add(f.xchg(0, Relaxed), Relaxed);
        }
    }

    /// Adds the counts to `values`, counter by counter.
    pub(crate) fn add_to(&self, values: &mut [u64]) {
        for (v, c) in values.iter_mut().zip(&self.0) {
            *v = v.saturating_add(c.load(Relaxed));
        }
    }
}

#[kunit_tests(rrxe_hw_counters)]
mod tests {
    use super::*;

    #[test]
    fn last_counter_is_last_desc() {
        // CAST: the discriminants are the indices `0..NUM`.
        assert_eq!(Counter::RcvdDropOther as usize, NUM - 1);
    }

    #[test]
    fn read_copies_in_order() {
        let c = Counters::new();
        c.inc(Counter::LinkDowned);
        c.add(Counter::SentBytes, 4096);
        let mut v = [u64::MAX; NUM];
        assert_eq!(c.read(&mut v), NUM);
        assert_eq!(v[Counter::LinkDowned as usize], 1);
        assert_eq!(v[Counter::SentBytes as usize], 4096);
        assert_eq!(v[Counter::SentPkts as usize], 0);

        // A shorter buffer gets a prefix.
        let mut short = [0u64; 3];
        assert_eq!(c.read(&mut short), 3);
    }

    #[test]
    fn bound_share_moves_between_counters() {
        // What get_hw_stats shows is the total less the bound share.
        let (total, share) = (Counters::new(), Counters::new());
        total.add(Counter::SentPkts, 10);
        share.add(Counter::SentPkts, 4);
        let mut v = [0u64; NUM];
        assert_eq!(total.read_less(&share, &mut v), NUM);
        assert_eq!(v[Counter::SentPkts as usize], 6);

        // Unbinding moves a QP's counts into its counter and zeroes them.
        let (own, retired) = (Counters::new(), Counters::new());
        own.add(Counter::RcvdRnrErr, 3);
        retired.add(Counter::RcvdRnrErr, 2);
        retired.take_from(&own);
        assert_eq!(retired.get(Counter::RcvdRnrErr), 5);
        assert_eq!(own.get(Counter::RcvdRnrErr), 0);

        // A counter's value: what left plus what its QPs hold now.
        own.add(Counter::RcvdRnrErr, 1);
        let mut v = [0u64; NUM];
        retired.read(&mut v);
        own.add_to(&mut v);
        assert_eq!(v[Counter::RcvdRnrErr as usize], 6);
    }
}
