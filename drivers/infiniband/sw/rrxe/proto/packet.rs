// SPDX-License-Identifier: GPL-2.0

//! Whole RoCEv2 packets: the receive-side parser and the transmit-side
//! header writer.
//!
//! A RoCEv2 UDP payload is laid out as
//!
//! ```text
//!  BTH (12) | extension headers | payload | pad (0-3) | ICRC (4)
//! ```
//!
//! [`parse_packet`] performs every check the receive path can make from the
//! packet alone, before any QP is looked up or any memory touched: BTH
//! length, transport version, known opcode, QPN not 0, the length against
//! headers, pad and ICRC, 4-byte alignment, and no payload on opcodes that
//! carry none. QP-dependent checks (P_Key, Q_Key, QP state and type, source
//! address, PSN) and the ICRC itself ([`super::icrc`]) come after.

#![forbid(unsafe_code)]

use super::aeth::Aeth;
use super::atmack::AtomicAckEth;
use super::atmeth::AtomicEth;
use super::bth::{Bth, BTH_TVER};
use super::crc32::Crc32;
use super::deth::Deth;
use super::error::{Error, Result};
use super::feth::Feth;
use super::icrc;
use super::icrc::ICRC_LEN;
use super::ieth::Ieth;
use super::immdt::ImmDt;
use super::opcode::{HeaderSet, OpcodeInfo};
use super::reth::Reth;
use super::segment::pad_len;

/// Declares [`ExtHeaders`] from its fields: one `Option` of each extension
/// header, with the header's [`HeaderSet`] bit. Where each header sits is
/// [`HeaderSet::offset_of`]'s business (wire order is
/// [`HeaderSet::WIRE_ORDER`]); the fields are listed in that order too, so
/// that `write` meets a bad field in the same order as the wire.
macro_rules! ext_headers {
    ($($(#[$doc:meta])* $field:ident: $ty:ident = $bit:ident,)+) => {
        /// The extension headers of a packet: exactly those its opcode
        /// carries are `Some`.
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
        pub struct ExtHeaders {
            $(
                $(#[$doc])*
                pub $field: Option<$ty>,
            )+
        }

        impl ExtHeaders {
            /// The set of headers present.
            pub const fn set(&self) -> HeaderSet {
                let mut s = HeaderSet::NONE;
                $(
                    if self.$field.is_some() {
                        s = s.with(HeaderSet::$bit);
                    }
                )+
                s
            }

            /// Decodes the extension headers of `set` from `headers`, the
            /// packet's bytes from the start of the BTH: one pass, in wire
            /// order (the list's order, checked below), per packet.
            fn parse(set: HeaderSet, headers: &[u8]) -> Result<Self> {
                let mut off = Bth::LEN;
                $(
                    let $field = if set.contains(HeaderSet::$bit) {
                        let h = $ty::parse(headers.get(off..).ok_or(Error::Truncated)?)?;
                        off += $ty::LEN;
                        Some(h)
                    } else {
                        None
                    };
                )+
                let _ = off;
                Ok(Self { $($field,)+ })
            }

            /// Encodes the headers present into `headers`, the packet's
            /// bytes from the start of the BTH, each after the BTH and the
            /// headers before it in wire order.
            fn write(&self, headers: &mut [u8]) -> Result {
                let mut off = Bth::LEN;
                $(
                    if let Some(h) = self.$field {
                        h.write(headers.get_mut(off..).ok_or(Error::Truncated)?)?;
                        off += $ty::LEN;
                    }
                )+
                let _ = off;
                Ok(())
            }
        }

        // The list is in wire order, with the lengths of `WIRE_ORDER`:
        // parse and write walk it with a running offset.
        const _: () = {
            let order = [$((HeaderSet::$bit, $ty::LEN),)+];
            assert!(order.len() == HeaderSet::WIRE_ORDER.len());
            let mut i = 0;
            while i < order.len() {
                assert!(order[i].0.contains(HeaderSet::WIRE_ORDER[i].0));
                assert!(HeaderSet::WIRE_ORDER[i].0.contains(order[i].0));
                assert!(order[i].1 == HeaderSet::WIRE_ORDER[i].1);
                i += 1;
            }
        };
    };
}

ext_headers! {
    /// DETH (UD).
    deth: Deth = DETH,
    /// FETH (FLUSH).
    feth: Feth = FETH,
    /// RETH (RDMA WRITE first/only, READ request, FLUSH, ATOMIC WRITE).
    reth: Reth = RETH,
    /// AtomicETH (CmpSwap, FetchAdd).
    atmeth: AtomicEth = ATMETH,
    /// AETH (ACK, READ response first/last/only, atomic ACK).
    aeth: Aeth = AETH,
    /// AtomicAckETH (atomic ACK).
    atmack: AtomicAckEth = ATMACK,
    /// ImmDt (with immediate, last/only).
    immdt: ImmDt = IMMDT,
    /// IETH (SEND with invalidate, last/only).
    ieth: Ieth = IETH,
}

/// A validated view of a received RoCEv2 packet (a UDP payload).
///
/// # Invariants
///
/// Built only by [`parse_packet`]: the BTH has TVer 0, a known opcode and a
/// non-zero QPN; the extension headers are those of the opcode; the
/// payload, pad and ICRC lie within the buffer, the pad count matches the
/// payload length, and opcodes without payload have none.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Packet<'a> {
    bytes: &'a [u8],
    bth: Bth,
    info: &'static OpcodeInfo,
    ext: ExtHeaders,
    payload: &'a [u8],
    icrc: u32,
}

impl<'a> Packet<'a> {
    /// The whole UDP payload, BTH to ICRC.
    pub const fn bytes(&self) -> &'a [u8] {
        self.bytes
    }

    /// The decoded BTH.
    pub const fn bth(&self) -> &Bth {
        &self.bth
    }

    /// The opcode's table entry.
    pub const fn info(&self) -> &'static OpcodeInfo {
        self.info
    }

    /// The decoded extension headers.
    pub const fn ext(&self) -> &ExtHeaders {
        &self.ext
    }

    /// The payload, without pad and ICRC.
    pub const fn payload(&self) -> &'a [u8] {
        self.payload
    }

    /// The ICRC as carried (least significant byte first on the wire).
    pub const fn icrc(&self) -> u32 {
        self.icrc
    }

    /// Length of BTH plus extension headers, in bytes.
    pub const fn header_len(&self) -> usize {
        self.info.header_len
    }

    /// Checks the packet's ICRC against the IP and UDP headers it arrived
    /// with (see [`icrc::verify`]).
    ///
    /// # Errors
    ///
    /// [`Error::IcrcMismatch`] on a wrong ICRC, [`Error::BadIpHeader`] on an
    /// unsupported IP header.
    pub fn verify_icrc<C: Crc32 + ?Sized>(&self, crc: &C, ip: &[u8], udp: &[u8]) -> Result {
        icrc::verify(crc, ip, udp, self.bytes)
    }
}

/// Parses and validates a received RoCEv2 UDP payload.
///
/// `buf` must be exactly the UDP payload: the UDP length minus 8, not the
/// length of a padded Ethernet frame.
///
/// # Errors
///
/// - [`Error::Truncated`]: shorter than a BTH.
/// - [`Error::BadTransportVersion`]: TVer not 0.
/// - [`Error::UnknownOpcode`]: opcode not in [`super::opcode::OPCODES`].
/// - [`Error::InvalidQpn`]: destination QPN 0.
/// - [`Error::BadLength`]: shorter than headers + pad + ICRC, not a multiple
///   of 4 bytes (so the pad count does not match the payload), or a payload
///   or pad on an opcode that carries none.
pub fn parse_packet(buf: &[u8]) -> Result<Packet<'_>> {
    let bth = Bth::parse(buf)?;
    if bth.tver != BTH_TVER {
        return Err(Error::BadTransportVersion);
    }
    let info = bth.opcode.info().ok_or(Error::UnknownOpcode)?;
    if bth.dest_qpn == 0 {
        return Err(Error::InvalidQpn);
    }
    // Every header length is a multiple of 4, so an aligned packet has
    // `(payload + pad) % 4 == 0`, i.e. exactly the pad its payload needs.
    if buf.len() & 3 != 0 {
        return Err(Error::BadLength);
    }
    let (body, icrc) = buf.split_last_chunk::<ICRC_LEN>().ok_or(Error::BadLength)?;
    let (headers, rest) = body
        .split_at_checked(info.header_len)
        .ok_or(Error::BadLength)?;
    let payload_len = rest
        .len()
        .checked_sub(usize::from(bth.pad))
        .ok_or(Error::BadLength)?;
    if !info.has_payload && !rest.is_empty() {
        return Err(Error::BadLength);
    }
    let payload = rest.get(..payload_len).ok_or(Error::BadLength)?;
    let ext = ExtHeaders::parse(info.headers, headers)?;
    // INVARIANT: all checks of the type invariant passed above.
    Ok(Packet {
        bytes: buf,
        bth,
        info,
        ext,
        payload,
        icrc: u32::from_le_bytes(*icrc),
    })
}

/// Length in bytes of a packet of `info` with `payload_len` bytes of
/// payload: headers, payload, pad and ICRC. `None` on overflow.
pub const fn packet_len(info: &OpcodeInfo, payload_len: usize) -> Option<usize> {
    let pad = pad_len(payload_len) as usize;
    match info.header_len.checked_add(payload_len) {
        Some(n) => match n.checked_add(pad) {
            Some(n) => n.checked_add(ICRC_LEN),
            None => None,
        },
        None => None,
    }
}

/// Writes the BTH and extension headers of a packet to the start of `buf`,
/// returning the header length.
///
/// The BTH is written as given, including its pad count.
///
/// # Errors
///
/// [`Error::UnknownOpcode`] if the BTH opcode is unknown,
/// [`Error::HeaderMismatch`] if `ext` does not hold exactly the headers of
/// the opcode, [`Error::Truncated`] if `buf` is too short,
/// [`Error::FieldOutOfRange`] if a field does not fit. Nothing is written on
/// error.
pub fn write_headers(buf: &mut [u8], bth: &Bth, ext: &ExtHeaders) -> Result<usize> {
    let info = bth.opcode.info().ok_or(Error::UnknownOpcode)?;
    if ext.set() != info.headers {
        return Err(Error::HeaderMismatch);
    }
    let dst = buf.get_mut(..info.header_len).ok_or(Error::Truncated)?;
    // Encode into a scratch copy first so that a field error leaves `buf`
    // untouched.
    let mut scratch = [0u8; MAX_HEADER_LEN];
    let tmp = scratch.get_mut(..info.header_len).ok_or(Error::Truncated)?;
    bth.write(tmp)?;
    ext.write(tmp)?;
    dst.copy_from_slice(tmp);
    Ok(info.header_len)
}

/// Length of the longest BTH plus extension headers of any opcode, in bytes
/// (RC CmpSwap/FetchAdd: BTH + AtomicETH).
pub const MAX_HEADER_LEN: usize = 40;

/// Builds a complete packet in `buf`: headers, `payload`, zeroed pad and a
/// zeroed ICRC field (fill it with [`super::icrc::generate`] once the IP and
/// UDP headers are known). The BTH pad count is set from the payload
/// length. Returns the packet length.
///
/// # Errors
///
/// As [`write_headers`]; [`Error::BadLength`] if the opcode carries no
/// payload but `payload` is not empty. Nothing is written on error.
pub fn build_packet(buf: &mut [u8], bth: &Bth, ext: &ExtHeaders, payload: &[u8]) -> Result<usize> {
    let info = bth.opcode.info().ok_or(Error::UnknownOpcode)?;
    if !info.has_payload && !payload.is_empty() {
        return Err(Error::BadLength);
    }
    let len = packet_len(info, payload.len()).ok_or(Error::BadLength)?;
    let pkt = buf.get_mut(..len).ok_or(Error::Truncated)?;
    let bth = Bth {
        pad: pad_len(payload.len()),
        ..*bth
    };
    let (headers, rest) = pkt.split_at_mut(info.header_len);
    write_headers(headers, &bth, ext)?;
    let (data, tail) = rest.split_at_mut(payload.len());
    data.copy_from_slice(payload);
    tail.fill(0);
    Ok(len)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bth::tests::arb_bth;
    use crate::opcode::{Opcode, OPCODES};
    use crate::psn::Psn;
    use proptest::prelude::*;

    fn send_only(qpn: u32, payload: &[u8]) -> Vec<u8> {
        let bth = Bth {
            opcode: Opcode::RC_SEND_ONLY,
            dest_qpn: qpn,
            pkey: 0xffff,
            ..Bth::default()
        };
        let mut buf = vec![0u8; 64 + payload.len()];
        let n = build_packet(&mut buf, &bth, &ExtHeaders::default(), payload).unwrap();
        buf.truncate(n);
        buf
    }

    #[test]
    fn max_header_len() {
        assert_eq!(
            OPCODES.iter().map(|i| i.header_len).max(),
            Some(MAX_HEADER_LEN)
        );
    }

    #[test]
    fn send_only_roundtrip() {
        let buf = send_only(0x11, b"hello");
        assert_eq!(buf.len(), 12 + 5 + 3 + 4);
        assert_eq!(buf[1], 0x30, "pad 3");
        let p = parse_packet(&buf).unwrap();
        assert_eq!(p.payload(), b"hello");
        assert_eq!(p.bth().pad, 3);
        assert_eq!(p.info().opcode, Opcode::RC_SEND_ONLY);
        assert_eq!(p.header_len(), 12);
        assert_eq!(p.bytes(), &buf[..]);
    }

    #[test]
    fn rejects() {
        let good = send_only(0x11, b"hello!!!");
        assert!(parse_packet(&good).is_ok());
        assert_eq!(parse_packet(&good[..11]), Err(Error::Truncated));
        assert_eq!(parse_packet(&[]), Err(Error::Truncated));

        let mut p = good.clone();
        p[1] |= 0x01;
        assert_eq!(parse_packet(&p), Err(Error::BadTransportVersion));

        for op in [0x15, 0x40, 0x81, 0xff] {
            let mut p = good.clone();
            p[0] = op;
            assert_eq!(parse_packet(&p), Err(Error::UnknownOpcode), "{op:#x}");
        }

        let bad_qpn = send_only(0, b"x");
        assert_eq!(parse_packet(&bad_qpn), Err(Error::InvalidQpn));

        // Pad larger than what is left after the headers.
        let mut p = good[..16].to_vec();
        p[1] |= 0x30;
        assert_eq!(parse_packet(&p), Err(Error::BadLength));
        // Pad that does not match the payload.
        assert_eq!(parse_packet(&good[..good.len() - 1]), Err(Error::BadLength));
        // Headers longer than the packet.
        let mut p = good[..16].to_vec();
        p[0] = Opcode::RC_RDMA_WRITE_ONLY.0;
        assert_eq!(parse_packet(&p), Err(Error::BadLength));
        // Payload on an ACK.
        let mut ack = vec![0u8; 24];
        let bth = Bth {
            opcode: Opcode::RC_ACKNOWLEDGE,
            dest_qpn: 5,
            ..Bth::default()
        };
        let ext = ExtHeaders {
            aeth: Some(Aeth {
                syndrome: 0x1f,
                msn: 1,
            }),
            ..ExtHeaders::default()
        };
        let n = build_packet(&mut ack, &bth, &ext, &[]).unwrap();
        assert_eq!(n, 20);
        assert!(parse_packet(&ack[..20]).is_ok());
        assert_eq!(parse_packet(&ack), Err(Error::BadLength));
        assert_eq!(
            build_packet(&mut ack, &bth, &ext, b"data"),
            Err(Error::BadLength)
        );
    }

    #[test]
    fn writer_errors() {
        let mut buf = [0xeeu8; 64];
        let bth = Bth {
            opcode: Opcode::RC_RDMA_WRITE_FIRST,
            dest_qpn: 1,
            ..Bth::default()
        };
        assert_eq!(
            write_headers(&mut buf, &bth, &ExtHeaders::default()),
            Err(Error::HeaderMismatch)
        );
        let ext = ExtHeaders {
            reth: Some(Reth::default()),
            ..ExtHeaders::default()
        };
        assert_eq!(
            write_headers(&mut buf[..27], &bth, &ext),
            Err(Error::Truncated)
        );
        let unknown = Bth {
            opcode: Opcode(0x1e),
            ..bth
        };
        assert_eq!(
            write_headers(&mut buf, &unknown, &ext),
            Err(Error::UnknownOpcode)
        );
        let wide = Bth {
            dest_qpn: 1 << 24,
            ..bth
        };
        assert_eq!(
            write_headers(&mut buf, &wide, &ext),
            Err(Error::FieldOutOfRange)
        );
        let bad_ext = ExtHeaders {
            reth: None,
            ieth: Some(Ieth::default()),
            ..ext
        };
        assert_eq!(
            write_headers(&mut buf, &bth, &bad_ext),
            Err(Error::HeaderMismatch)
        );
        assert_eq!(buf, [0xee; 64], "nothing written on error");
        assert_eq!(write_headers(&mut buf, &bth, &ext), Ok(28));
    }

    /// A packet the C driver would build: RC RDMA WRITE ONLY WITH IMMEDIATE
    /// (`rxe_req.c` order: BTH, RETH, ImmDt, payload, pad, ICRC).
    #[test]
    fn write_with_imm_bytes() {
        let bth = Bth {
            opcode: Opcode::RC_RDMA_WRITE_ONLY_WITH_IMMEDIATE,
            se: true,
            pkey: 0xffff,
            dest_qpn: 0x12,
            ack_req: true,
            psn: Psn::new(0x00_0100),
            ..Bth::default()
        };
        let ext = ExtHeaders {
            reth: Some(Reth {
                va: 0x7f00_0000_1000,
                rkey: 0x0000_0203,
                dma_len: 2,
            }),
            immdt: Some(ImmDt {
                imm_data: [1, 2, 3, 4],
            }),
            ..ExtHeaders::default()
        };
        let mut buf = [0u8; 64];
        let n = build_packet(&mut buf, &bth, &ext, &[0xaa, 0xbb]).unwrap();
        let want: [u8; 40] = [
            0x0b, 0xa0, 0xff, 0xff, 0x00, 0x00, 0x00, 0x12, 0x80, 0x00, 0x01,
            0x00, // BTH, pad 2
            0x00, 0x00, 0x7f, 0x00, 0x00, 0x00, 0x10, 0x00, 0x00, 0x00, 0x02, 0x03, 0x00, 0x00,
            0x00, 0x02, // RETH
            0x01, 0x02, 0x03, 0x04, // ImmDt
            0xaa, 0xbb, 0x00, 0x00, // payload, pad
            0x00, 0x00, 0x00, 0x00, // ICRC slot
        ];
        assert_eq!(&buf[..n], &want[..]);
        let p = parse_packet(&want).unwrap();
        assert_eq!(p.ext(), &ext);
        assert_eq!(p.payload(), &[0xaa, 0xbb]);
    }

    fn arb_ext(set: HeaderSet) -> impl Strategy<Value = ExtHeaders> {
        (any::<[u64; 4]>(), any::<[u32; 4]>(), any::<[u8; 4]>()).prop_map(move |(q, d, b)| {
            ExtHeaders {
                deth: set.contains(HeaderSet::DETH).then_some(Deth {
                    qkey: d[0],
                    src_qpn: d[1] & 0xff_ffff,
                }),
                feth: set.contains(HeaderSet::FETH).then_some(Feth {
                    placement_type: b[0] & 0xf,
                    selectivity: b[1] & 3,
                }),
                reth: set.contains(HeaderSet::RETH).then_some(Reth {
                    va: q[0],
                    rkey: d[2],
                    dma_len: d[3],
                }),
                atmeth: set.contains(HeaderSet::ATMETH).then_some(AtomicEth {
                    va: q[1],
                    rkey: d[0],
                    swap_add: q[2],
                    compare: q[3],
                }),
                aeth: set.contains(HeaderSet::AETH).then_some(Aeth {
                    syndrome: b[2],
                    msn: d[3] & 0xff_ffff,
                }),
                atmack: set
                    .contains(HeaderSet::ATMACK)
                    .then_some(AtomicAckEth { orig: q[3] }),
                immdt: set
                    .contains(HeaderSet::IMMDT)
                    .then_some(ImmDt { imm_data: b }),
                ieth: set.contains(HeaderSet::IETH).then_some(Ieth { rkey: d[1] }),
            }
        })
    }

    /// A valid packet of any known opcode, with its parts.
    fn arb_packet() -> impl Strategy<Value = (Bth, ExtHeaders, Vec<u8>)> {
        (prop::sample::select(OPCODES), arb_bth(), 1u32..=0xff_ffff).prop_flat_map(
            |(info, bth, qpn)| {
                let bth = Bth {
                    opcode: info.opcode,
                    tver: 0,
                    dest_qpn: qpn,
                    ..bth
                };
                let max = if info.has_payload { 300 } else { 0 };
                (
                    Just(bth),
                    arb_ext(info.headers),
                    proptest::collection::vec(any::<u8>(), 0..=max),
                )
            },
        )
    }

    proptest! {
        #[test]
        fn never_panics(buf in proptest::collection::vec(any::<u8>(), 0..128)) {
            if let Ok(p) = parse_packet(&buf) {
                prop_assert!(p.payload().len() + p.header_len() + ICRC_LEN <= buf.len());
            }
        }

        #[test]
        fn roundtrip((bth, ext, payload) in arb_packet()) {
            let mut buf = vec![0u8; 400];
            let n = build_packet(&mut buf, &bth, &ext, &payload).unwrap();
            let info = bth.opcode.info().unwrap();
            prop_assert_eq!(Some(n), packet_len(info, payload.len()));
            prop_assert_eq!(n % 4, 0);
            let p = parse_packet(&buf[..n]).unwrap();
            prop_assert_eq!(p.bth(), &Bth { pad: pad_len(payload.len()), ..bth });
            prop_assert_eq!(p.ext(), &ext);
            prop_assert_eq!(p.payload(), &payload[..]);
            prop_assert_eq!(p.info(), info);
            // Re-encoding the parsed headers gives the same bytes.
            let mut again = vec![0u8; n];
            prop_assert_eq!(build_packet(&mut again, p.bth(), p.ext(), p.payload()), Ok(n));
            prop_assert_eq!(&again[..], &buf[..n]);
            // Cutting the packet short by 1-3 bytes always fails.
            for cut in 1..4 {
                prop_assert!(parse_packet(&buf[..n - cut]).is_err());
            }
        }

        #[test]
        fn mutated_packets_never_panic((bth, ext, payload) in arb_packet(), flips in proptest::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..6), cut in any::<prop::sample::Index>()) {
            let mut buf = vec![0u8; 400];
            let n = build_packet(&mut buf, &bth, &ext, &payload).unwrap();
            buf.truncate(n);
            for (at, x) in flips {
                let i = at.index(n);
                buf[i] ^= x;
            }
            let len = cut.index(n + 1);
            if let Ok(p) = parse_packet(&buf[..len]) {
                prop_assert!(p.payload().len() + p.header_len() + usize::from(p.bth().pad) + ICRC_LEN == len);
                prop_assert_eq!(p.ext().set(), p.info().headers);
            }
        }
    }
}
