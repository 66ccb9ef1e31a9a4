// SPDX-License-Identifier: GPL-2.0

//! Base Transport Header (IBTA Vol 1 §9.2), 12 bytes, first in every RoCEv2
//! UDP payload.
//!
//! ```text
//!  byte 0     OpCode
//!  byte 1     SE (bit 7) | MigReq (bit 6) | PadCnt (bits 5:4) | TVer (bits 3:0)
//!  bytes 2-3  P_Key
//!  byte 4     FECN (bit 7) | BECN (bit 6) | reserved (bits 5:0)   ("resv8a")
//!  bytes 5-7  DestQP
//!  byte 8     AckReq (bit 7) | reserved (bits 6:0)
//!  bytes 9-11 PSN
//! ```
//!
//! Multi-byte fields are big-endian. In RoCEv2 the byte holding FECN/BECN is
//! replaced by ones when the ICRC is computed (Annex A17).

#![forbid(unsafe_code)]

use super::error::{Error, Result};
use super::opcode::Opcode;
use super::psn::Psn;
use super::wire::{check_len, Reader, Writer};

/// The only BTH transport header version defined (TVer), IBTA Vol 1 §9.2.
pub const BTH_TVER: u8 = 0;
/// The default (full membership) partition key.
pub const DEFAULT_PKEY: u16 = 0xffff;

/// Whether a received P_Key matches the port's only P_Key, the full-member
/// [`DEFAULT_PKEY`] (IBTA Vol 1 §10.9.3: the low 15 bits equal, and one of
/// the two a full member, which the port's key always is). 0x0000 and
/// 0x8000 are invalid keys and match nothing.
pub const fn pkey_matches_default(pkey: u16) -> bool {
    pkey & 0x7fff == DEFAULT_PKEY & 0x7fff
}
/// Mask of the 24-bit QPN fields (BTH DestQP, DETH SrcQP).
pub const QPN_MASK: u32 = 0x00ff_ffff;
/// The multicast destination QPN, `0xff_ffff` (UD only).
pub const MULTICAST_QPN: u32 = 0x00ff_ffff;

// The BTH's flag and small fields (IBTA Vol 1 §9.2), by the byte or
// big-endian word they sit in.
/// Byte 1: Solicited Event.
const SE: u8 = 0x80;
/// Byte 1: MigReq, the path migration state.
const MIG: u8 = 0x40;
/// Byte 1: the Pad Count, bytes that pad the payload to 4.
const PAD_MASK: u8 = 0x30;
const PAD_SHIFT: u8 = 4;
/// Byte 1: Transport Header Version.
const TVER_MASK: u8 = 0x0f;
/// Word 1: FECN and BECN, which RoCEv2 takes from the IP header's ECN
/// instead (Annex A17.9.4).
const FECN: u32 = 0x8000_0000;
const BECN: u32 = 0x4000_0000;
/// Word 2: AckReq, above the PSN.
const ACK_REQ: u32 = 0x8000_0000;

/// A decoded BTH.
///
/// Reserved bits are ignored on parse and written as zero.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
#[expect(clippy::struct_excessive_bools, reason = "the BTH has five flag bits")]
pub struct Bth {
    /// OpCode; see [`Opcode::info`] for whether it is known.
    pub opcode: Opcode,
    /// Solicited Event: the responder should raise a completion event.
    pub se: bool,
    /// MigReq: path migration state.
    pub mig: bool,
    /// PadCnt: bytes (0-3) of padding after the payload to a 4-byte boundary.
    pub pad: u8,
    /// TVer: transport header version, 4 bits; must be [`BTH_TVER`].
    pub tver: u8,
    /// P_Key: partition key.
    pub pkey: u16,
    /// FECN: forward explicit congestion notification.
    pub fecn: bool,
    /// BECN: backward explicit congestion notification.
    pub becn: bool,
    /// DestQP: destination QPN, 24 bits.
    pub dest_qpn: u32,
    /// AckReq: the requester asks for an acknowledge of this packet.
    pub ack_req: bool,
    /// PSN: packet sequence number.
    pub psn: Psn,
}

impl Bth {
    /// Length of the BTH in bytes.
    pub const LEN: usize = 12;

    /// The BTH of a packet rrxe sends to `dest_qpn`: the port's only
    /// P_Key, [`DEFAULT_PKEY`], TVer [`BTH_TVER`], pad 0 (the packet writer
    /// sets it) and every flag clear. SE and AckReq are set with struct
    /// update syntax where the packet asks for them.
    pub const fn new(opcode: Opcode, dest_qpn: u32, psn: Psn) -> Self {
        Self {
            opcode,
            se: false,
            mig: false,
            pad: 0,
            tver: BTH_TVER,
            pkey: DEFAULT_PKEY,
            fecn: false,
            becn: false,
            dest_qpn,
            ack_req: false,
            psn,
        }
    }

    /// Decodes the BTH at the start of `buf`.
    ///
    /// Only the length is checked here; the TVer and opcode are checked by
    /// [`super::packet::parse_packet`] (or the caller).
    ///
    /// # Errors
    ///
    /// [`Error::Truncated`] if `buf` is shorter than [`Bth::LEN`].
    pub fn parse(buf: &[u8]) -> Result<Self> {
        let mut r = Reader::new(buf);
        let opcode = Opcode(r.u8()?);
        let flags = r.u8()?;
        let pkey = r.u16()?;
        let qpn = r.u32()?;
        let apsn = r.u32()?;
        Ok(Self {
            opcode,
            se: flags & SE != 0,
            mig: flags & MIG != 0,
            pad: (flags & PAD_MASK) >> PAD_SHIFT,
            tver: flags & TVER_MASK,
            pkey,
            fecn: qpn & FECN != 0,
            becn: qpn & BECN != 0,
            dest_qpn: qpn & QPN_MASK,
            ack_req: apsn & ACK_REQ != 0,
            psn: Psn::new(apsn),
        })
    }

    /// Encodes the BTH into the first [`Bth::LEN`] bytes of `buf`.
    ///
    /// # Errors
    ///
    /// [`Error::Truncated`] if `buf` is too short, [`Error::FieldOutOfRange`]
    /// if `pad`, `tver` or `dest_qpn` do not fit their fields. Nothing is
    /// written on error.
    pub fn write(&self, buf: &mut [u8]) -> Result {
        check_len(buf, Self::LEN)?;
        if self.pad > 3 || self.tver > TVER_MASK || self.dest_qpn > QPN_MASK {
            return Err(Error::FieldOutOfRange);
        }
        let mut flags = (self.pad << PAD_SHIFT) | self.tver;
        if self.se {
            flags |= SE;
        }
        if self.mig {
            flags |= MIG;
        }
        let mut qpn = self.dest_qpn;
        if self.fecn {
            qpn |= FECN;
        }
        if self.becn {
            qpn |= BECN;
        }
        let mut apsn = self.psn.get();
        if self.ack_req {
            apsn |= ACK_REQ;
        }
        let mut w = Writer::new(buf);
        w.u8(self.opcode.0)?;
        w.u8(flags)?;
        w.u16(self.pkey)?;
        w.u32(qpn)?;
        w.u32(apsn)
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn pkeys() {
        assert!(pkey_matches_default(0xffff));
        // A limited member matches the port's full-member key.
        assert!(pkey_matches_default(0x7fff));
        assert!(!pkey_matches_default(0x0000));
        assert!(!pkey_matches_default(0x8000));
        assert!(!pkey_matches_default(0xfffe));
        assert!(!pkey_matches_default(0x1234));
    }

    #[test]
    fn new_is_a_plain_request() {
        let psn = Psn::new(7);
        assert_eq!(
            Bth::new(Opcode::RC_SEND_ONLY, 0x11, psn),
            Bth {
                opcode: Opcode::RC_SEND_ONLY,
                pkey: DEFAULT_PKEY,
                dest_qpn: 0x11,
                psn,
                ..Bth::default()
            }
        );
    }

    #[test]
    fn known_bytes() {
        // RC SEND ONLY, SE, pad 2, P_Key 0xffff, FECN, QPN 0x000011,
        // AckReq, PSN 0xabcdef.
        let bytes = [
            0x04, 0xa0, 0xff, 0xff, 0x80, 0x00, 0x00, 0x11, 0x80, 0xab, 0xcd, 0xef,
        ];
        let bth = Bth::parse(&bytes).unwrap();
        let want = Bth {
            opcode: Opcode::RC_SEND_ONLY,
            se: true,
            mig: false,
            pad: 2,
            tver: 0,
            pkey: DEFAULT_PKEY,
            fecn: true,
            becn: false,
            dest_qpn: 0x11,
            ack_req: true,
            psn: Psn::new(0xab_cdef),
        };
        assert_eq!(bth, want);
        let mut out = [0u8; 12];
        want.write(&mut out).unwrap();
        assert_eq!(out, bytes);
    }

    #[test]
    fn reserved_bits_ignored() {
        let bytes = [
            0x11, 0x5f, 0x12, 0x34, 0x7f, 0xff, 0xff, 0xfe, 0x7f, 0x00, 0x00, 0x01,
        ];
        let bth = Bth::parse(&bytes).unwrap();
        assert!(!bth.se && bth.mig && bth.becn && !bth.fecn && !bth.ack_req);
        assert_eq!(bth.pad, 1);
        assert_eq!(bth.tver, 0xf);
        assert_eq!(bth.dest_qpn, 0xff_fffe);
        assert_eq!(bth.psn.get(), 1);
        let mut out = [0u8; 12];
        bth.write(&mut out).unwrap();
        // Reserved bits come back as zero.
        assert_eq!(
            out,
            [0x11, 0x5f, 0x12, 0x34, 0x40, 0xff, 0xff, 0xfe, 0x00, 0x00, 0x00, 0x01]
        );
    }

    #[test]
    fn bounds() {
        assert_eq!(Bth::parse(&[0; 11]), Err(Error::Truncated));
        let mut short = [0u8; 11];
        assert_eq!(Bth::default().write(&mut short), Err(Error::Truncated));
        let mut buf = [0xaau8; 12];
        for bad in [
            Bth {
                pad: 4,
                ..Bth::default()
            },
            Bth {
                tver: 16,
                ..Bth::default()
            },
            Bth {
                dest_qpn: 1 << 24,
                ..Bth::default()
            },
        ] {
            assert_eq!(bad.write(&mut buf), Err(Error::FieldOutOfRange));
        }
        assert_eq!(buf, [0xaa; 12], "nothing written on error");
    }

    pub(crate) fn arb_bth() -> impl Strategy<Value = Bth> {
        (
            any::<u8>(),
            any::<[bool; 5]>(),
            0u8..4,
            0u8..16,
            any::<u16>(),
            0u32..=QPN_MASK,
            0u32..=Psn::MASK,
        )
            .prop_map(
                |(op, [se, mig, fecn, becn, ack_req], pad, tver, pkey, qpn, psn)| Bth {
                    opcode: Opcode(op),
                    se,
                    mig,
                    pad,
                    tver,
                    pkey,
                    fecn,
                    becn,
                    dest_qpn: qpn,
                    ack_req,
                    psn: Psn::new(psn),
                },
            )
    }

    proptest! {
        #[test]
        fn roundtrip(bth in arb_bth()) {
            let mut buf = [0u8; 12];
            bth.write(&mut buf).unwrap();
            prop_assert_eq!(Bth::parse(&buf).unwrap(), bth);
        }

        #[test]
        fn parse_then_write_clears_only_reserved(bytes in any::<[u8; 12]>()) {
            let bth = Bth::parse(&bytes).unwrap();
            let mut out = [0u8; 12];
            bth.write(&mut out).unwrap();
            let mut want = bytes;
            want[4] &= 0xc0;
            want[8] &= 0x80;
            prop_assert_eq!(out, want);
        }
    }
}
