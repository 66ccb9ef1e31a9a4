// SPDX-License-Identifier: GPL-2.0

#![forbid(unsafe_code)]

//! Transmit path: RoCEv2 packets built for a QP and handed to the IP stack.
//!
//! Packets are built while the QP's state lock is held (interrupts off), so
//! building only allocates (`GFP_ATOMIC`) and writes headers: BTH and
//! extension headers from the protocol core, the payload through a closure,
//! then the UDP and IP headers (IPv4 with DF set, or IPv6), and last the
//! ICRC over all of them. The built packets go to the QP's transmit queue;
//! [`send_queued`] hands them to the IP stack once the lock is dropped, one
//! sender at a time so that a QP's packets leave in PSN order.
//!
//! Flow control: every packet handed to the IP stack is charged to the
//! QP's transmit credit until the stack frees it ([`Qp::xmit`]). The
//! producers ([`tx_room`]) stop while the packets in flight and those
//! queued reach the high-water mark, and resume from the QP's kick once
//! fewer than the low-water mark are left, so that a QP never floods the
//! netdev's queue (whose overflow drops packets, which then cost
//! retransmissions).

use crate::{
    net::{
        self,
        route::Route,
        skbuff::{
            xmit_allowed,
            BhDisabled,
            UdpIpHdr, //
        },
        SkBuff,
    },
    proto::{
        self,
        bth::Bth,
        icrc,
        packet::{
            packet_len,
            parse_packet,
            write_headers,
            ExtHeaders, //
        },
        segment::pad_len,
        udp::udp_sport,
        ROCEV2_UDP_PORT,
    },
    rdma::{
        device::Device,
        qp::Qp,
        trace, //
    },
};
use kernel::{
    prelude::*,
    sync::{
        aref::ARef,
        atomic::Relaxed, //
    },
};

use super::{
    hw_counters::{
        qp_counts,
        Counter, //
    },
    icrc::KernelCrc32,
    verbs::Rrxe, //
};

/// Where a connected QP's packets go: resolved on first use after RTR.
pub(crate) struct TxCtx {
    route: Route,
    ndev: ARef<net::Device>,
    hdr: UdpIpHdr,
}

/// The address vector of a connected QP, as set by `modify_qp`.
#[derive(Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Path {
    /// Destination GID.
    pub(crate) dgid: [u8; 16],
    /// Source GID index.
    pub(crate) sgid_index: u8,
    /// IPv6 flow label (0: derive the UDP source port from the QPNs).
    pub(crate) flow_label: u32,
    /// IPv4 TOS / IPv6 traffic class.
    pub(crate) traffic_class: u8,
    /// IPv4 TTL / IPv6 hop limit.
    pub(crate) hop_limit: u8,
}

impl TxCtx {
    /// Resolves `path` for QP `lqpn` talking to `rqpn` on `dev`'s port.
    pub(crate) fn resolve(dev: &Device<Rrxe>, path: &Path, lqpn: u32, rqpn: u32) -> Result<Self> {
        // The packets leave through the net device the source GID belongs
        // to: for a VLAN's GID the VLAN device, which tags them (as the C
        // driver sends through the sgid_attr's device).
        let (sgid, gid_ndev) = dev.gid_with_netdev(1, u32::from(path.sgid_index))?;
        let ndev: ARef<net::Device> = gid_ndev.unwrap_or_else(|| dev.ndev().into());
        let route = Route::output(ndev.net(), &ndev, &sgid, &path.dgid)?;
        let hdr = UdpIpHdr {
            sgid,
            dgid: path.dgid,
            sport: udp_sport(path.flow_label, lqpn, rqpn),
            dport: ROCEV2_UDP_PORT,
            tos: path.traffic_class,
            ttl: path.hop_limit,
            flow_label: path.flow_label,
        };
        Ok(Self { route, ndev, hdr })
    }

    /// The MTU of the net device the packets leave through (a VLAN's for
    /// a VLAN GID), as it is now.
    pub(crate) fn netdev_mtu(&self) -> u32 {
        self.ndev.mtu()
    }

    /// Whether the cached route may still be used (`dst_check`).
    pub(crate) fn route_is_current(&self) -> bool {
        self.route.is_current()
    }

    /// Builds one packet with headers `bth` and `ext` and a payload of
    /// `payload_len` bytes written by `fill`. The pad count is set here.
    pub(crate) fn build(
        &self,
        bth: &Bth,
        ext: &ExtHeaders,
        payload_len: usize,
        fill: impl FnOnce(&mut [u8]) -> Result,
    ) -> Result<SkBuff> {
        self.build_from(self.hdr.sport, bth, ext, payload_len, fill)
    }

    /// As [`TxCtx::build`], for datagrams: the UDP source port follows the
    /// QPNs of each packet (`lqpn` sending to `rqpn`).
    pub(crate) fn build_datagram(
        &self,
        lqpn: u32,
        rqpn: u32,
        bth: &Bth,
        ext: &ExtHeaders,
        payload_len: usize,
        fill: impl FnOnce(&mut [u8]) -> Result,
    ) -> Result<SkBuff> {
        let sport = udp_sport(self.hdr.flow_label, lqpn, rqpn);
        self.build_from(sport, bth, ext, payload_len, fill)
    }

    fn build_from(
        &self,
        sport: u16,
        bth: &Bth,
        ext: &ExtHeaders,
        payload_len: usize,
        fill: impl FnOnce(&mut [u8]) -> Result,
    ) -> Result<SkBuff> {
        let info = bth.opcode.info().ok_or(EINVAL)?;
        let len = packet_len(info, payload_len).ok_or(EINVAL)?;
        let mut skb = SkBuff::alloc_udp(&self.ndev, &self.route, len)?;
        {
            let data = skb.data_mut();
            let bth = Bth {
                pad: pad_len(payload_len),
                ..*bth
            };
            let h = write_headers(data, &bth, ext).map_err(proto_err)?;
            let end = h.checked_add(payload_len).ok_or(EINVAL)?;
            fill(data.get_mut(h..end).ok_or(EINVAL)?)?;
        }
        let hdr = UdpIpHdr { sport, ..self.hdr };
        skb.push_udp_ip(&self.route, &hdr)?;
        // Longer than the net device carries: a packet of a message begun
        // before its MTU shrank, which keeps its size (`rc::current_mtu`).
        // Fragmented, it still arrives; dropped, it would be lost at
        // every retry. Before the ICRC, which covers the IPv4 flags.
        if skb.len() > usize::try_from(self.netdev_mtu()).unwrap_or(usize::MAX) {
            skb.allow_fragments()?;
        }
        let (ip, udp, roce) = skb.ip_udp_payload().ok_or(EINVAL)?;
        icrc::generate(&KernelCrc32, ip, udp, roce).map_err(proto_err)?;
        Ok(skb)
    }
}

fn proto_err(_: proto::Error) -> Error {
    EINVAL
}

/// Whether the transport may build another packet for `qp`: fewer than
/// the high-water mark in flight and queued together. On `false` the QP is
/// kicked when credit comes back.
pub(crate) fn tx_room(qp: &Qp<Rrxe>) -> bool {
    qp.tx_credit().may_send(qp.txq.len())
}

/// Event `rrxe_send_pkt` for `skb`, a packet of QP `qpn` with its IP and
/// UDP headers.
fn trace_send(dev: &Device<Rrxe>, qpn: u32, skb: &mut SkBuff) {
    if !trace::send_pkt_enabled() {
        return;
    }
    if let Some((_, _, roce)) = skb.ip_udp_payload() {
        if let Ok(pkt) = parse_packet(roce) {
            trace::send_pkt(dev, &super::recv::trace_fields(qpn, &pkt));
        }
    }
}

/// Most packets one call of [`send_queued`] delivers to QPs of this host.
/// Such a packet is received within the call, and the ACK it causes lets
/// the requester queue the next packets there: without a bound a loopback
/// stream ran a whole 1 MiB message with bottom halves disabled (a
/// real-time thread of the same CPU waited 580 ms on the debug kernel).
/// The rest goes on from the QP's sleepable work, in process context,
/// where the scheduler may run others between two calls (at most 11 ms
/// late then); going on from the kick (softirq) instead chained calls for
/// 50–150 ms. The C driver's loopback likewise hands each packet to the
/// receiver's task, in process context. Packets to other hosts are not
/// counted: the transmit credit bounds them.
const MAX_LOCAL_PER_SEND: u32 = 8;

/// Hands the packets queued on `qp` to the IP stack. Never called with the
/// QP's state lock held (the IP stack must run with interrupts enabled).
pub(crate) fn send_queued(qp: &Qp<Rrxe>) {
    // A kernel consumer may post with interrupts disabled (ib_mad posts
    // under an irqsave lock): the IP stack then runs from the QP's kick,
    // which also sets up a route the post could not (`prepare_tx`), so it
    // is kicked even with nothing queued.
    if !xmit_allowed() {
        qp.kick();
        return;
    }
    // Most received data packets queue nothing (no AckReq): skip the
    // sending token and the bottom-half section. Whoever queues a packet
    // calls this after, so one queued after this look is not missed.
    if qp.txq.is_empty() {
        if qp.tx_credit().take_wake() {
            qp.kick();
        }
        return;
    }
    let dev = qp.device();
    let counts = qp_counts(qp);
    let net = dev.ndev().net();
    // Whoever holds the sending token must not be preempted or interrupted
    // by softirqs on this CPU: packets others queue (ACKs from the receive
    // path) would wait for it.
    let _bh = BhDisabled::new();
    let mut local_budget = MAX_LOCAL_PER_SEND;
    loop {
        // One sender at a time keeps the packets in order.
        if !qp.start_sending() {
            return;
        }
        while let Some(mut skb) = qp.txq.pop_front() {
            let local = skb.dst_is_loopback();
            if local && local_budget == 0 {
                // Back at the head, in order: the sleepable work goes on
                // from it.
                qp.txq.push_front(skb);
                qp.stop_sending();
                return qp.queue_sleepable();
            }
            let len = skb.len();
            trace_send(dev, qp.qp_num(), &mut skb);
            if local {
                local_budget -= 1;
                // To an address of this host: straight to the receive path,
                // as the C driver's loopback does (the IP stack would hand
                // it back on `lo`, which carries no rrxe device).
                counts.inc(Counter::SentPkts);
                // CAST: the length of one packet.
                counts.add(Counter::SentBytes, len as u64);
                dev.local_deliveries.fetch_add(1, Relaxed);
                super::recv::deliver_local(dev, skb);
                dev.local_deliveries.fetch_sub(1, Relaxed);
                continue;
            }
            // Charged to the QP until the stack frees it: see `rc`'s
            // flow control.
            match qp.xmit(net, skb) {
                Ok(()) => {
                    counts.inc(Counter::SentPkts);
                    // CAST: the length of one packet.
                    counts.add(Counter::SentBytes, len as u64);
                }
                Err(_) => counts.inc(Counter::SendErr),
            }
        }
        // A packet queued after the last pop but before the flag was
        // cleared is sent by the next round.
        if !qp.stop_sending() {
            break;
        }
    }
    // A producer stopped with the queue full and little in flight (packets
    // delivered locally are not charged, so no skb destructor wakes it):
    // it goes on from the kick.
    if qp.tx_credit().take_wake() {
        qp.kick();
    }
}
