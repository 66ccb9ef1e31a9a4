// SPDX-License-Identifier: GPL-2.0

//! The RoCEv2 invariant CRC (IBTA Vol 1 Annex A17).
//!
//! The ICRC is the last 4 bytes of every RoCEv2 UDP payload. It is a CRC-32
//! over
//!
//! 1. eight bytes of `0xff`, standing in for the InfiniBand LRH (folded into
//!    [`ICRC_SEED`]);
//! 2. the IP header, with the fields that routers may change replaced by
//!    ones: IPv4 Type of Service, Time to Live and Header Checksum; IPv6
//!    Traffic Class, Flow Label and Hop Limit;
//! 3. the UDP header, with the Checksum replaced by ones;
//! 4. the BTH, with byte 4 (FECN, BECN and the reserved bits, "resv8a")
//!    replaced by ones;
//! 5. everything after the BTH up to the ICRC: extension headers, payload
//!    and pad.
//!
//! The CRC is seeded as above and inverted at the end, and the wire carries
//! the 32-bit result least significant byte first (the same convention as
//! the Ethernet FCS). Only option-less IPv4 headers (IHL 5) and IPv6 headers
//! without extension headers are supported, as in the C driver.

#![forbid(unsafe_code)]

use super::bth::Bth;
use super::crc32::Crc32;
use super::error::{Error, Result};

/// Length of the ICRC in bytes.
pub const ICRC_LEN: usize = 4;

/// Running CRC value after the eight `0xff` bytes of the masked LRH, starting
/// from `!0`: `crc32_le(!0, [0xff; 8])`.
pub const ICRC_SEED: u32 = 0xdebb_20e3;

/// Length of an IPv4 header without options.
pub const IPV4_HDR_LEN: usize = 20;
/// Length of the fixed IPv6 header.
pub const IPV6_HDR_LEN: usize = 40;
/// Length of the UDP header.
pub const UDP_HDR_LEN: usize = 8;

/// An ICRC computation in progress, for packets whose bytes are not
/// contiguous (headers in one buffer, payload in pages).
///
/// [`IcrcHasher::new`] takes the IP, UDP and BT headers; every byte after the
/// BTH up to the ICRC must then be fed, in order, to
/// [`IcrcHasher::update`].
pub struct IcrcHasher<'c, C: Crc32 + ?Sized> {
    crc: &'c C,
    state: u32,
}

impl<'c, C: Crc32 + ?Sized> IcrcHasher<'c, C> {
    /// Starts an ICRC over the masked IP header, UDP header and BTH.
    ///
    /// `ip` starts at the IP header (IPv4 or IPv6, told apart by the version
    /// nibble) and may be longer than it; `udp` starts at the UDP header and
    /// `bth` at the BTH. Fields are masked in a private copy; the inputs are
    /// not modified.
    ///
    /// # Errors
    ///
    /// [`Error::BadIpHeader`] if `ip` is not an IPv4 header with IHL 5 or an
    /// IPv6 header, or `ip` or `udp` are short; [`Error::Truncated`] if
    /// `bth` is shorter than [`Bth::LEN`].
    pub fn new(crc: &'c C, ip: &[u8], udp: &[u8], bth: &[u8]) -> Result<Self> {
        let mut state = ICRC_SEED;
        match ip.first().map(|b| b >> 4) {
            Some(4) => {
                let mut h: [u8; IPV4_HDR_LEN] = *ip.first_chunk().ok_or(Error::BadIpHeader)?;
                if h[0] & 0x0f != 5 {
                    return Err(Error::BadIpHeader);
                }
                // Type of Service, Time to Live, Header Checksum.
                h[1] = 0xff;
                h[8] = 0xff;
                h[10] = 0xff;
                h[11] = 0xff;
                state = crc.crc32_le(state, &h);
            }
            Some(6) => {
                let mut h: [u8; IPV6_HDR_LEN] = *ip.first_chunk().ok_or(Error::BadIpHeader)?;
                // Traffic Class (bits 27:20) and Flow Label (bits 19:0) of
                // the first word; the version nibble stays.
                h[0] |= 0x0f;
                h[1] = 0xff;
                h[2] = 0xff;
                h[3] = 0xff;
                // Hop Limit.
                h[7] = 0xff;
                state = crc.crc32_le(state, &h);
            }
            _ => return Err(Error::BadIpHeader),
        }
        let mut u: [u8; UDP_HDR_LEN] = *udp.first_chunk().ok_or(Error::BadIpHeader)?;
        // UDP Checksum.
        u[6] = 0xff;
        u[7] = 0xff;
        state = crc.crc32_le(state, &u);
        let mut b: [u8; Bth::LEN] = *bth.first_chunk().ok_or(Error::Truncated)?;
        // FECN, BECN and reserved bits ("resv8a").
        b[4] = 0xff;
        state = crc.crc32_le(state, &b);
        Ok(Self { crc, state })
    }

    /// Continues the ICRC over the next bytes after the BTH.
    pub fn update(&mut self, data: &[u8]) {
        self.state = self.crc.crc32_le(self.state, data);
    }

    /// The ICRC of everything fed so far. On the wire it is stored as
    /// `icrc.to_le_bytes()`.
    pub fn finish(&self) -> u32 {
        !self.state
    }
}

/// Splits a UDP payload into BTH, the bytes after it, and the ICRC field.
fn split(roce: &[u8]) -> Result<(&[u8], &[u8], [u8; ICRC_LEN])> {
    let (body, icrc) = roce
        .split_last_chunk::<ICRC_LEN>()
        .ok_or(Error::Truncated)?;
    if body.len() < Bth::LEN {
        return Err(Error::Truncated);
    }
    let (bth, rest) = body.split_at(Bth::LEN);
    Ok((bth, rest, *icrc))
}

/// Computes the ICRC of a contiguous RoCEv2 packet.
///
/// `roce` is the whole UDP payload, from the BTH to and including the
/// (ignored) ICRC field; `ip` and `udp` are as for [`IcrcHasher::new`] and
/// must already carry their final lengths.
///
/// # Errors
///
/// As [`IcrcHasher::new`]; [`Error::Truncated`] if `roce` is shorter than a
/// BTH plus the ICRC.
pub fn compute<C: Crc32 + ?Sized>(crc: &C, ip: &[u8], udp: &[u8], roce: &[u8]) -> Result<u32> {
    let (bth, rest, _) = split(roce)?;
    let mut h = IcrcHasher::new(crc, ip, udp, bth)?;
    h.update(rest);
    Ok(h.finish())
}

/// Checks the ICRC at the end of `roce` (arguments as for [`compute`]).
///
/// # Errors
///
/// [`Error::IcrcMismatch`] if it is wrong; otherwise as [`compute`].
pub fn verify<C: Crc32 + ?Sized>(crc: &C, ip: &[u8], udp: &[u8], roce: &[u8]) -> Result {
    let (_, _, wire) = split(roce)?;
    if compute(crc, ip, udp, roce)? == u32::from_le_bytes(wire) {
        Ok(())
    } else {
        Err(Error::IcrcMismatch)
    }
}

/// Computes the ICRC of `roce` and stores it in its last 4 bytes (arguments
/// as for [`compute`]).
///
/// # Errors
///
/// As [`compute`]; nothing is written on error.
pub fn generate<C: Crc32 + ?Sized>(crc: &C, ip: &[u8], udp: &[u8], roce: &mut [u8]) -> Result {
    let icrc = compute(crc, ip, udp, roce)?;
    let (_, slot) = roce
        .split_last_chunk_mut::<ICRC_LEN>()
        .ok_or(Error::Truncated)?;
    *slot = icrc.to_le_bytes();
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::crc32::tests::BitwiseCrc32;
    use crate::crc32::TableCrc32;
    use proptest::prelude::*;

    /// The bytes spelled in `hex`, two digits a byte; spaces, which part
    /// the vectors below into their headers, are skipped.
    const fn unhex<const N: usize>(hex: &str) -> [u8; N] {
        const fn digit(c: u8) -> u8 {
            match c {
                b'0'..=b'9' => c - b'0',
                b'a'..=b'f' => c - b'a' + 10,
                _ => panic!("not a hex digit"),
            }
        }
        let s = hex.as_bytes();
        let mut out = [0u8; N];
        let (mut i, mut n) = (0, 0);
        while i < s.len() {
            if s[i] == b' ' {
                i += 1;
            } else {
                out[n] = digit(s[i]) << 4 | digit(s[i + 1]);
                n += 1;
                i += 2;
            }
        }
        assert!(n == N, "length differs from the type's");
        out
    }

    // Vectors from tests/host/icrc_vectors.py, which builds the packets with
    // Python's struct module and computes the ICRC with zlib.crc32 over
    // separately packed masked headers; see that script for the derivation.

    // IPv4 RC_SEND_ONLY, ICRC 0xbb89c6e7: IPv4 (20 bytes), UDP to 4791,
    // BTH (SE, pad 3), "hello, RoCE!\n", pad, ICRC.
    const IPV4_PACKET: [u8; 60] = unhex(
        "452e003c 12344000 4011144d 0a000001 0a000002 \
         c01112b7 00280000 \
         04b0ffff 80000011 80123456 \
         68656c6c6f2c20526f4345210a 000000 e7c689bb",
    );

    // IPv6 UD_SEND_ONLY_WITH_IMMEDIATE, ICRC 0x80f10c0e: IPv6 (40 bytes),
    // UDP, BTH (pad 2, BECN), DETH, ImmDt, "RoCEv2", pad, ICRC.
    const IPV6_PACKET: [u8; 84] = unhex(
        "6a412345 002c1140 fe800000 00000000 021122ff fe334455 \
         fe800000 00000000 021122ff fe334466 \
         d00d12b7 002c5555 \
         6520ffff 40000002 00ffffff \
         80010000 00000001 deadbeef \
         526f43457632 0000 0e0cf180",
    );

    fn split_v4(p: &[u8]) -> (&[u8], &[u8], &[u8]) {
        (&p[..20], &p[20..28], &p[28..])
    }

    fn split_v6(p: &[u8]) -> (&[u8], &[u8], &[u8]) {
        (&p[..40], &p[40..48], &p[48..])
    }

    #[test]
    fn ipv4_vector() {
        let (ip, udp, roce) = split_v4(&IPV4_PACKET);
        assert_eq!(compute(&TableCrc32, ip, udp, roce), Ok(0xbb89_c6e7));
        assert_eq!(verify(&TableCrc32, ip, udp, roce), Ok(()));
        let mut copy = roce.to_vec();
        copy.iter_mut().rev().take(4).for_each(|b| *b = 0);
        generate(&TableCrc32, ip, udp, &mut copy).unwrap();
        assert_eq!(copy, roce);
        // The parsed packet agrees.
        let pkt = crate::packet::parse_packet(roce).unwrap();
        assert_eq!(pkt.icrc(), 0xbb89_c6e7);
        assert_eq!(pkt.payload(), b"hello, RoCE!\n");
    }

    #[test]
    fn ipv6_vector() {
        let (ip, udp, roce) = split_v6(&IPV6_PACKET);
        assert_eq!(compute(&TableCrc32, ip, udp, roce), Ok(0x80f1_0c0e));
        assert_eq!(verify(&BitwiseCrc32, ip, udp, roce), Ok(()));
        let pkt = crate::packet::parse_packet(roce).unwrap();
        assert_eq!(pkt.verify_icrc(&TableCrc32, ip, udp), Ok(()));
        assert_eq!(
            pkt.verify_icrc(&TableCrc32, &IPV4_PACKET[..20], udp),
            Err(Error::IcrcMismatch)
        );
        assert_eq!(pkt.payload(), b"RoCEv2");
        assert_eq!(
            pkt.ext().immdt.map(|i| i.imm_data),
            Some([0xde, 0xad, 0xbe, 0xef])
        );
    }

    /// Flipping any byte changes the ICRC unless the byte is (wholly) one of
    /// the masked fields, in which case the ICRC stays valid.
    #[test]
    fn masked_fields() {
        for (packet, ip_len, masked) in [
            (&IPV4_PACKET[..], 20, &[1usize, 8, 10, 11, 26, 27, 32][..]),
            (&IPV6_PACKET[..], 40, &[1, 2, 3, 7, 46, 47, 52][..]),
        ] {
            for i in 0..packet.len() - ICRC_LEN {
                let mut p = packet.to_vec();
                p[i] ^= 0xa5;
                let (ip, rest) = p.split_at(ip_len);
                let (udp, roce) = rest.split_at(8);
                let r = verify(&TableCrc32, ip, udp, roce);
                if masked.contains(&i) {
                    assert_eq!(r, Ok(()), "byte {i} is masked");
                } else if i == 0 {
                    // The version nibble changes: no longer an IP header.
                    assert!(r.is_err());
                } else {
                    assert_eq!(r, Err(Error::IcrcMismatch), "byte {i} is covered");
                }
            }
        }
        // The IPv6 traffic class nibble shares byte 0 with the version.
        let mut p = IPV6_PACKET;
        p[0] ^= 0x0f;
        let (ip, udp, roce) = split_v6(&p);
        assert_eq!(verify(&TableCrc32, ip, udp, roce), Ok(()));
    }

    #[test]
    fn bad_headers() {
        let (ip, udp, roce) = split_v4(&IPV4_PACKET);
        let mut opts = [0u8; 24];
        opts[..20].copy_from_slice(ip);
        opts[0] = 0x46;
        assert_eq!(
            compute(&TableCrc32, &opts, udp, roce),
            Err(Error::BadIpHeader)
        );
        assert_eq!(
            compute(&TableCrc32, &ip[..19], udp, roce),
            Err(Error::BadIpHeader)
        );
        assert_eq!(
            compute(&TableCrc32, &[], udp, roce),
            Err(Error::BadIpHeader)
        );
        assert_eq!(
            compute(&TableCrc32, ip, &udp[..7], roce),
            Err(Error::BadIpHeader)
        );
        assert_eq!(
            compute(&TableCrc32, ip, udp, &roce[..15]),
            Err(Error::Truncated)
        );
        assert_eq!(
            compute(&TableCrc32, &IPV6_PACKET[..39], udp, roce),
            Err(Error::BadIpHeader)
        );
        let mut short = [0u8; 3];
        assert_eq!(
            generate(&TableCrc32, ip, udp, &mut short),
            Err(Error::Truncated)
        );
        assert_eq!(short, [0; 3]);
    }

    /// A straightforward reference: patch the masked fields in a copy of the
    /// whole packet and CRC it with the bitwise CRC, zlib style.
    fn reference(packet: &[u8], ip_len: usize) -> u32 {
        let mut p = packet[..packet.len() - ICRC_LEN].to_vec();
        if ip_len == 20 {
            p[1] = 0xff;
            p[8] = 0xff;
            p[10..12].fill(0xff);
        } else {
            p[0] |= 0x0f;
            p[1..4].fill(0xff);
            p[7] = 0xff;
        }
        p[ip_len + 6..ip_len + 8].fill(0xff);
        p[ip_len + 8 + 4] = 0xff;
        let mut all = vec![0xff; 8];
        all.extend_from_slice(&p);
        !BitwiseCrc32.crc32_le(!0, &all)
    }

    proptest! {
        #[test]
        fn matches_reference(v6 in any::<bool>(), hdr in any::<[u8; 48]>(),
                             roce in proptest::collection::vec(any::<u8>(), 16..200),
                             cuts in proptest::collection::vec(any::<prop::sample::Index>(), 0..4)) {
            let ip_len = if v6 { 40 } else { 20 };
            let mut packet = hdr[..ip_len + 8].to_vec();
            packet[0] = if v6 { 0x60 | (packet[0] & 0x0f) } else { 0x45 };
            packet.extend_from_slice(&roce);
            let want = reference(&packet, ip_len);
            let (ip, rest) = packet.split_at(ip_len);
            let (udp, roce) = rest.split_at(8);
            prop_assert_eq!(compute(&TableCrc32, ip, udp, roce), Ok(want));

            // Feeding the bytes after the BTH in pieces gives the same.
            let body = &roce[Bth::LEN..roce.len() - ICRC_LEN];
            let mut at: Vec<usize> = cuts.iter().map(|c| c.index(body.len() + 1)).collect();
            at.sort_unstable();
            let mut h = IcrcHasher::new(&TableCrc32, ip, udp, roce).unwrap();
            let mut prev = 0;
            for a in at.into_iter().chain([body.len()]) {
                h.update(&body[prev..a]);
                prev = a;
            }
            prop_assert_eq!(h.finish(), want);
        }
    }
}
