// SPDX-License-Identifier: GPL-2.0

#![forbid(unsafe_code)]

//! Calibration against the C driver: RoCEv2 packets that `rdma_rxe` sent
//! between the two test VMs (`testdata/rxe-c-driver.pcap`, made with
//! `testdata/capture-rxe.pair.sh`) must all parse, carry an ICRC that our
//! code computes identically, re-encode to the same header bytes, and use
//! the UDP source ports our [`super::udp`] functions derive.

use super::crc32::TableCrc32;
use super::icrc;
use super::opcode::{Opcode, Transport};
use super::packet::{build_packet, parse_packet};
use super::udp;
use std::collections::BTreeSet;
use std::vec::Vec;

static CAPTURE: &[u8] = include_bytes!("testdata/rxe-c-driver.pcap");

/// One captured frame, split into IP header, UDP header and UDP payload.
struct Frame<'a> {
    ip: &'a [u8],
    udp: &'a [u8],
    roce: &'a [u8],
}

/// Minimal reader for a little-endian, microsecond, Ethernet pcap file.
fn frames(pcap: &[u8]) -> Vec<Frame<'_>> {
    let be16 = |b: &[u8]| usize::from(u16::from_be_bytes([b[0], b[1]]));
    let le32 = |b: &[u8]| u32::from_le_bytes([b[0], b[1], b[2], b[3]]) as usize;
    assert_eq!(le32(&pcap[0..4]), 0xa1b2_c3d4, "pcap magic");
    assert_eq!(le32(&pcap[20..24]), 1, "Ethernet link type");
    let mut out = Vec::new();
    let mut off = 24;
    while off < pcap.len() {
        let incl = le32(&pcap[off + 8..off + 12]);
        let frame = &pcap[off + 16..off + 16 + incl];
        off += 16 + incl;
        let l3 = &frame[14..];
        let (ip, rest) = match be16(&frame[12..14]) {
            0x0800 => {
                let ihl = usize::from(l3[0] & 0x0f) * 4;
                let total = be16(&l3[2..4]);
                (&l3[..ihl], &l3[ihl..total])
            }
            0x86dd => {
                let plen = be16(&l3[4..6]);
                (&l3[..40], &l3[40..40 + plen])
            }
            other => panic!("unexpected ethertype {other:#x}"),
        };
        let udp_len = be16(&rest[4..6]);
        assert_eq!(be16(&rest[2..4]), 4791);
        out.push(Frame {
            ip,
            udp: &rest[..8],
            roce: &rest[8..udp_len],
        });
    }
    out
}

#[test]
fn c_driver_capture() {
    let frames = frames(CAPTURE);
    assert_eq!(frames.len(), 88);
    let mut opcodes = BTreeSet::new();
    let mut ipv6 = 0;
    for (i, f) in frames.iter().enumerate() {
        let p = parse_packet(f.roce).unwrap_or_else(|e| panic!("packet {i}: {e}"));
        opcodes.insert(p.bth().opcode.0);
        ipv6 += usize::from(f.ip[0] >> 4 == 6);

        // The C driver's ICRC is ours.
        assert_eq!(
            p.verify_icrc(&TableCrc32, f.ip, f.udp),
            Ok(()),
            "packet {i}"
        );
        let mut copy = f.roce.to_vec();
        icrc::generate(&TableCrc32, f.ip, f.udp, &mut copy).unwrap();
        assert_eq!(copy, f.roce, "packet {i}");

        // Our encoder reproduces the C driver's headers, payload and pad.
        let mut rebuilt = std::vec![0u8; f.roce.len()];
        let n = build_packet(&mut rebuilt, p.bth(), p.ext(), p.payload()).unwrap();
        assert_eq!(n, f.roce.len());
        assert_eq!(rebuilt[..n - 4], f.roce[..n - 4], "packet {i}");

        // UDP source port: from the QPN for UD (set at create), from the
        // symmetric flow label of the two QPNs for RC. In this capture both
        // ends of every RC connection have the same QPN.
        let sport = u16::from_be_bytes([f.udp[0], f.udp[1]]);
        let qpn = p.bth().dest_qpn;
        match p.info().transport {
            Transport::Ud => {
                let src = p.ext().deth.unwrap().src_qpn;
                assert_eq!(sport, udp::sport_from_qpn(src), "packet {i}");
            }
            Transport::Rc | Transport::Uc => {
                assert_eq!(sport, udp::udp_sport(0, qpn, qpn), "packet {i}");
            }
        }
    }
    assert_eq!(ipv6, 8);
    let want = [
        Opcode::RC_SEND_FIRST,
        Opcode::RC_SEND_LAST,
        Opcode::RC_SEND_ONLY,
        Opcode::RC_RDMA_WRITE_ONLY,
        Opcode::RC_RDMA_READ_REQUEST,
        Opcode::RC_RDMA_READ_RESPONSE_FIRST,
        Opcode::RC_RDMA_READ_RESPONSE_MIDDLE,
        Opcode::RC_RDMA_READ_RESPONSE_LAST,
        Opcode::RC_ACKNOWLEDGE,
        Opcode::RC_ATOMIC_ACKNOWLEDGE,
        Opcode::RC_FETCH_ADD,
        Opcode::UD_SEND_ONLY,
    ];
    assert_eq!(opcodes, want.iter().map(|o| o.0).collect());
}
