// SPDX-License-Identifier: GPL-2.0

//! Fuzz the receive-side packet parser with arbitrary UDP payloads.
//!
//! Besides "never panics", checks that an accepted packet is internally
//! consistent and survives a re-encode: building a packet from the parsed
//! BTH, extension headers and payload gives bytes that parse to the same
//! view. The ICRC routines run over the same bytes behind a fixed IPv4 and
//! IPv6 header, and must agree with each other.

#![no_main]

use libfuzzer_sys::fuzz_target;
use rrxe_proto::crc32::TableCrc32;
use rrxe_proto::icrc;
use rrxe_proto::packet::{build_packet, packet_len, parse_packet};

const IPV4: [u8; 20] = [
    0x45, 0, 0, 0, 0, 0, 0x40, 0, 64, 17, 0, 0, 10, 0, 0, 1, 10, 0, 0, 2,
];
const IPV6: [u8; 40] = [0x60; 40];
const UDP: [u8; 8] = [0xc0, 0x00, 0x12, 0xb7, 0, 0, 0, 0];

fuzz_target!(|data: &[u8]| {
    for ip in [&IPV4[..], &IPV6[..]] {
        match icrc::compute(&TableCrc32, ip, &UDP, data) {
            Ok(crc) => {
                let mut copy = data.to_vec();
                icrc::generate(&TableCrc32, ip, &UDP, &mut copy).unwrap();
                assert_eq!(copy[copy.len() - 4..], crc.to_le_bytes());
                assert_eq!(icrc::verify(&TableCrc32, ip, &UDP, &copy), Ok(()));
            }
            Err(_) => assert!(data.len() < 16),
        }
    }

    let Ok(p) = parse_packet(data) else {
        return;
    };
    let info = p.info();
    assert_eq!(info.opcode, p.bth().opcode);
    assert_eq!(p.ext().set(), info.headers);
    assert_eq!(
        p.header_len() + p.payload().len() + usize::from(p.bth().pad) + 4,
        data.len()
    );
    assert_eq!(packet_len(info, p.payload().len()), Some(data.len()));
    assert!(info.has_payload || p.payload().is_empty());

    let mut buf = vec![0u8; data.len()];
    let n = build_packet(&mut buf, p.bth(), p.ext(), p.payload()).unwrap();
    assert_eq!(n, data.len());
    let q = parse_packet(&buf).unwrap();
    assert_eq!(q.bth(), p.bth());
    assert_eq!(q.ext(), p.ext());
    assert_eq!(q.payload(), p.payload());
    // Header bytes are identical but for reserved bits cleared on write.
    for (i, (a, b)) in data[..p.header_len()].iter().zip(&buf).enumerate() {
        assert_eq!(a & b, *b, "byte {i}: write set a bit the input did not have");
    }
});
