// SPDX-License-Identifier: GPL-2.0

#![forbid(unsafe_code)]

//! Receive path: RoCEv2 datagrams from the UDP tunnel sockets, in softirq.
//!
//! Every check that needs only the packet and the device is made before
//! anything else happens, in this order, and a failure drops the packet and
//! counts it under a `rcvd_drop_*` counter of the device:
//!
//! 1. the device the packet arrived on (or the real device under a VLAN)
//!    carries an rrxe device; otherwise the packet is dropped uncounted;
//! 2. the UDP length matches the datagram, and the payload holds a BTH;
//! 3. [`parse_packet`]: transport version 0, a known opcode, QPN not 0, a
//!    length that holds the opcode's headers, pad and ICRC, and no payload
//!    on opcodes that carry none;
//! 4. the destination address is a GID of the port (or multicast);
//! 5. the ICRC;
//! 6. the P_Key is the port's (0xffff, or 0x7fff);
//! 7. the destination QP exists (`Device::lookup_qp`, which takes a
//!    reference that keeps the QP alive while the packet is handled);
//! 8. the opcode is of the QP's service (RC, UC, or UD for UD and GSI).
//!
//! Only then is the packet counted in `rcvd_pkts` and `rcvd_bytes` (the IP
//! packet length, as the C driver counts it) and handed to the QP.
//!
//! The C driver looks the QP up before it checks the ICRC; rrxe checks the
//! ICRC first, so that a packet with a wrong ICRC is counted as such
//! whatever QPN it names.

use crate::{
    net::{
        self,
        skbuff::{
            ETH_P_IP,
            ETH_P_IPV6, //
        },
        udp_tunnel::EncapRcv,
        SkBuff,
    },
    proto::{
        self,
        bth::{
            pkey_matches_default,
            MULTICAST_QPN, //
        },
        icrc::UDP_HDR_LEN,
        opcode::{
            self,
            Transport, //
        },
        packet::{
            parse_packet,
            Packet, //
        },
    },
    rdma::{
        device::{
            Device,
            RegisteredDevice, //
        },
        qp::QpType,
        trace::{
            self,
            PktFields, //
        },
        Gid, //
    },
};

use super::{
    hw_counters::{
        qp_counts,
        Counter, //
    },
    icrc::KernelCrc32,
    mcast,
    qp::RrxeQp,
    rc::Taken,
    verbs::Rrxe, //
};

/// The port every rrxe device has.
const PORT: u32 = 1;

/// The encapsulation handler of rrxe's UDP sockets.
pub(crate) struct Rx;

impl EncapRcv for Rx {
    fn encap_rcv(ndev: &net::Device, skb: SkBuff) {
        // Traffic of a VLAN goes to the device of the real device under it.
        let dev = RegisteredDevice::<Rrxe>::get_by_netdev(ndev).or_else(|| {
            ndev.vlan_real_dev()
                .and_then(RegisteredDevice::<Rrxe>::get_by_netdev)
        });
        let Some(dev) = dev else {
            // Not for us: `skb` is dropped.
            return;
        };
        if let Err(reason) = rcv(&dev, ndev, skb) {
            dev.counters.inc(reason);
        }
    }
}

/// Receives a packet rrxe built for an address of this host: `skb` holds
/// the IP header, UDP header and RoCEv2 payload, as after transmit
/// preparation. It goes through every receive check, like a packet from
/// the wire.
pub(crate) fn deliver_local(dev: &Device<Rrxe>, mut skb: SkBuff) {
    let ip_len = match skb.data().first().map(|b| b >> 4) {
        Some(4) => skb.data().first().map_or(0, |b| usize::from(b & 0xf) * 4),
        Some(6) => 40,
        _ => 0,
    };
    if ip_len == 0 || skb.pull(ip_len).is_err() {
        dev.counters.inc(Counter::RcvdDropOther);
        return;
    }
    if let Err(reason) = rcv(dev, dev.ndev(), skb) {
        dev.counters.inc(reason);
    }
}

/// The drop counter of a protocol-core error.
fn drop_reason(e: proto::Error) -> Counter {
    match e {
        proto::Error::Truncated => Counter::RcvdDropTruncated,
        proto::Error::BadTransportVersion => Counter::RcvdDropBadTver,
        proto::Error::UnknownOpcode => Counter::RcvdDropBadOpcode,
        proto::Error::InvalidQpn => Counter::RcvdDropBadQpn,
        proto::Error::BadLength => Counter::RcvdDropBadLength,
        proto::Error::IcrcMismatch => Counter::RcvdDropBadIcrc,
        _ => Counter::RcvdDropOther,
    }
}

/// Validates a datagram and hands it to its QP; on error the datagram has
/// been dropped and the counter to increment is returned.
fn rcv(dev: &Device<Rrxe>, ndev: &net::Device, mut skb: SkBuff) -> Result<(), Counter> {
    // Large datagrams arrive in fragments; the checks need them in one piece.
    skb.linearize().map_err(|_| Counter::RcvdDropOther)?;
    let ip = skb.network_to_data().ok_or(Counter::RcvdDropOther)?;
    let data = skb.data();
    let (udp, roce) = data
        .split_first_chunk::<UDP_HDR_LEN>()
        .ok_or(Counter::RcvdDropTruncated)?;
    // The UDP layer has trimmed the skb to the UDP length; an IPv6 jumbogram
    // (length 0) is not RoCE.
    let ulen = usize::from(u16::from_be_bytes([udp[4], udp[5]]));
    if ulen != data.len() {
        return Err(Counter::RcvdDropTruncated);
    }

    let pkt = parse_packet(roce).map_err(drop_reason)?;
    check_dgid(dev, ndev, skb.protocol(), ip)?;
    // Datagram completions name the VLAN a packet came through.
    let vlan_id = ndev.vlan_id();
    pkt.verify_icrc(&KernelCrc32, ip, udp)
        .map_err(drop_reason)?;
    if !pkey_matches_default(pkt.bth().pkey) {
        return Err(Counter::RcvdDropBadPkey);
    }
    if trace::recv_pkt_enabled() {
        trace::recv_pkt(dev, &trace_fields(pkt.bth().dest_qpn, &pkt));
    }
    if pkt.bth().dest_qpn == MULTICAST_QPN {
        // Only UD QPs join groups.
        check_transport(QpType::Ud.raw(), pkt.info().transport)?;
        // One copy for every attached UD QP.
        let mut dgid = [0u8; 16];
        match skb.protocol() {
            ETH_P_IP => {
                dgid[10] = 0xff;
                dgid[11] = 0xff;
                dgid[12..].copy_from_slice(ip.get(16..20).ok_or(Counter::RcvdDropOther)?);
            }
            _ => dgid.copy_from_slice(ip.get(24..40).ok_or(Counter::RcvdDropOther)?),
        }
        let mut delivered = false;
        mcast::for_each_member(&dev.mcast, &dgid, |qpn| {
            if let Some(qp) = dev.lookup_qp(qpn) {
                if qp.qp_type() == QpType::Ud {
                    // UD packets are never held.
                    drop(RrxeQp::rcv(&qp, &pkt, ip, skb.protocol(), vlan_id));
                    delivered = true;
                }
            }
        });
        if !delivered {
            return Err(Counter::RcvdDropBadQpn);
        }
        dev.counters.inc(Counter::RcvdPkts);
        // CAST: lengths of one IP packet fit in a `u64`.
        dev.counters
            .add(Counter::RcvdBytes, (ip.len() + data.len()) as u64);
        return Ok(());
    }
    let Some(qp) = dev.lookup_qp(pkt.bth().dest_qpn) else {
        return Err(Counter::RcvdDropBadQpn);
    };
    check_transport(qp.qp_type().raw(), pkt.info().transport)?;

    let counts = qp_counts(&qp);
    counts.inc(Counter::RcvdPkts);
    // CAST: lengths of one IP packet fit in a `u64`.
    counts.add(Counter::RcvdBytes, (ip.len() + data.len()) as u64);
    let received = RrxeQp::rcv(&qp, &pkt, ip, skb.protocol(), vlan_id);
    if received.taken() == Taken::Hold {
        received.hold(skb);
    }
    Ok(())
}

/// The fields the packet events show of `pkt`, for QP `qpn`.
pub(crate) fn trace_fields(qpn: u32, pkt: &Packet<'_>) -> PktFields {
    let bth = pkt.bth();
    PktFields {
        qpn,
        dest_qpn: bth.dest_qpn,
        psn: bth.psn.get(),
        opcode: bth.opcode.0,
        // CAST: the payload of one packet fits in a `u32`.
        len: pkt.payload().len() as u32,
        ackreq: bth.ack_req,
    }
}

// The protocol core's copy of `enum ib_qp_type`, which `qp_accepts` reads.
const _: () = assert!(
    opcode::qp_type::SMI == QpType::Smi.raw()
        && opcode::qp_type::GSI == QpType::Gsi.raw()
        && opcode::qp_type::RC == QpType::Rc.raw()
        && opcode::qp_type::UC == QpType::Uc.raw()
        && opcode::qp_type::UD == QpType::Ud.raw()
);

/// Checks that a packet's opcode belongs to the service of its
/// destination QP (the C driver's `check_type_state`): an RC QP takes only
/// RC opcodes, UC only UC, UD and GSI only UD.
fn check_transport(ty: u32, transport: Transport) -> Result<(), Counter> {
    if opcode::qp_accepts(ty, transport) {
        Ok(())
    } else {
        Err(Counter::RcvdDropBadTransport)
    }
}

/// The source address of the IP header `ip` as a GID (IPv4-mapped for
/// IPv4).
pub(crate) fn src_gid(protocol: u16, ip: &[u8]) -> Option<[u8; 16]> {
    let mut gid = [0u8; 16];
    match protocol {
        ETH_P_IP => {
            gid[10] = 0xff;
            gid[11] = 0xff;
            gid[12..].copy_from_slice(ip.get(12..16)?);
        }
        ETH_P_IPV6 => gid.copy_from_slice(ip.get(8..24)?),
        _ => return None,
    }
    Some(gid)
}

/// Checks that the destination address of the IP header `ip` is multicast
/// or a RoCEv2 GID of the port on `ndev`.
fn check_dgid(
    dev: &Device<Rrxe>,
    ndev: &net::Device,
    protocol: u16,
    ip: &[u8],
) -> Result<(), Counter> {
    let mut dgid = Gid::default();
    match protocol {
        ETH_P_IP => {
            let daddr = ip.get(16..20).ok_or(Counter::RcvdDropOther)?;
            // IPv4-mapped IPv6 address, as in the GID table.
            dgid.0[10] = 0xff;
            dgid.0[11] = 0xff;
            dgid.0[12..].copy_from_slice(daddr);
            // 224.0.0.0/4.
            if daddr[0] & 0xf0 == 0xe0 {
                return Ok(());
            }
        }
        ETH_P_IPV6 => {
            dgid.0
                .copy_from_slice(ip.get(24..40).ok_or(Counter::RcvdDropOther)?);
            // ff00::/8.
            if dgid.0[0] == 0xff {
                return Ok(());
            }
        }
        _ => return Err(Counter::RcvdDropOther),
    }
    if dev.has_roce_v2_gid(PORT, &dgid, ndev) {
        Ok(())
    } else {
        Err(Counter::RcvdDropBadDgid)
    }
}
