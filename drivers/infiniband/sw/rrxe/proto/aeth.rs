// SPDX-License-Identifier: GPL-2.0

//! ACK Extended Transport Header (IBTA Vol 1 §9.3.5), 4 bytes.
//!
//! ```text
//!  byte 0     Syndrome
//!  bytes 1-3  MSN: message sequence number
//! ```
//!
//! The syndrome (§9.7.5.2, Table 44) encodes in bits 6:5 whether the packet
//! is an ACK, an RNR NAK or a NAK, and in bits 4:0 the credit count, the
//! minimum RNR NAK timer or the NAK code. Bit 7 is reserved.

#![forbid(unsafe_code)]

use super::error::{Error, Result};
use super::wire::header;
use super::wire::U24;

/// Mask of the 24-bit MSN.
pub const MSN_MASK: u32 = 0x00ff_ffff;

/// The ACK credit count code that means "no credit information" (credits are
/// not limited); rxe always sends it.
pub const CREDITS_UNLIMITED: u8 = 0x1f;

header! {
    /// A decoded AETH. The syndrome is kept raw, and not checked by
    /// `parse`: a reserved syndrome is the completer's business, not a
    /// malformed packet. Decode it with [`Syndrome::decode`] (or
    /// [`Aeth::syndrome`]).
    #[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
    pub struct Aeth("AETH", 4) {
        /// Syndrome byte, as on the wire.
        pub syndrome: u8,
        /// MSN: sequence number of the last message completed by the
        /// responder, 24 bits.
        pub msn: u32 as U24,
    }
}

/// NAK codes of the AETH syndrome (IBTA Vol 1 Table 44).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NakCode {
    /// PSN sequence error: the requester retransmits from the NAK's PSN.
    PsnSequenceError,
    /// Invalid request (bad opcode sequence, length or pad, unsupported
    /// operation).
    InvalidRequest,
    /// Remote access error (R_Key, bounds or permission violation).
    RemoteAccessError,
    /// Remote operational error.
    RemoteOperationalError,
    /// Invalid RD request (RD only; never sent by rrxe).
    InvalidRdRequest,
}

/// A decoded AETH syndrome.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Syndrome {
    /// ACK, with the 5-bit credit count code ([`CREDITS_UNLIMITED`] for none).
    Ack {
        /// Credit count code, 0-31.
        credits: u8,
    },
    /// Receiver not ready NAK, with the 5-bit minimum RNR NAK timer code
    /// (see [`rnr_timer_usecs`]).
    RnrNak {
        /// Timer code, 0-31.
        timer: u8,
    },
    /// NAK.
    Nak(NakCode),
}

// The syndrome byte (§9.7.5.2, Table 44): a reserved bit,
// two bits of type, five of value (credit count, RNR timer or NAK code).
const RESERVED: u8 = 0x80;
const TYPE_MASK: u8 = 0x60;
/// Type 00: ACK; the value is the credit count.
const TYPE_ACK: u8 = 0x00;
/// Type 01: RNR NAK; the value is the timer code.
const TYPE_RNR_NAK: u8 = 0x20;
/// Type 11: NAK; the value is the [`NakCode`]. (Type 10 is reserved.)
const TYPE_NAK: u8 = 0x60;
const VALUE_MASK: u8 = 0x1f;

impl Syndrome {
    /// The RNR NAK a responder sends for its QP's `min_rnr_timer`
    /// attribute: the AETH has five bits for the timer code (§9.7.5.2.8),
    /// and like the C driver rrxe sends the attribute's low five bits, so
    /// that a value above 31 (which `modify_qp` stores as given) still
    /// makes an RNR NAK instead of a syndrome [`Syndrome::encode`] refuses.
    pub const fn rnr_nak(min_rnr_timer: u8) -> Self {
        Syndrome::RnrNak {
            timer: min_rnr_timer & VALUE_MASK,
        }
    }

    /// Decodes a syndrome byte.
    ///
    /// # Errors
    ///
    /// [`Error::ReservedSyndrome`] for the reserved type (`0b10`), a set bit
    /// 7, or a reserved NAK code.
    pub const fn decode(syndrome: u8) -> Result<Self> {
        if syndrome & RESERVED != 0 {
            return Err(Error::ReservedSyndrome);
        }
        let value = syndrome & VALUE_MASK;
        match syndrome & TYPE_MASK {
            TYPE_ACK => Ok(Syndrome::Ack { credits: value }),
            TYPE_RNR_NAK => Ok(Syndrome::RnrNak { timer: value }),
            TYPE_NAK => match value {
                0 => Ok(Syndrome::Nak(NakCode::PsnSequenceError)),
                1 => Ok(Syndrome::Nak(NakCode::InvalidRequest)),
                2 => Ok(Syndrome::Nak(NakCode::RemoteAccessError)),
                3 => Ok(Syndrome::Nak(NakCode::RemoteOperationalError)),
                4 => Ok(Syndrome::Nak(NakCode::InvalidRdRequest)),
                _ => Err(Error::ReservedSyndrome),
            },
            _ => Err(Error::ReservedSyndrome),
        }
    }

    /// Encodes the syndrome byte.
    ///
    /// # Errors
    ///
    /// [`Error::FieldOutOfRange`] if a credit count or timer code exceeds 31.
    pub const fn encode(self) -> Result<u8> {
        match self {
            Syndrome::Ack { credits: v } | Syndrome::RnrNak { timer: v } if v > VALUE_MASK => {
                Err(Error::FieldOutOfRange)
            }
            Syndrome::Ack { credits } => Ok(TYPE_ACK | credits),
            Syndrome::RnrNak { timer } => Ok(TYPE_RNR_NAK | timer),
            Syndrome::Nak(code) => Ok(TYPE_NAK
                | match code {
                    NakCode::PsnSequenceError => 0,
                    NakCode::InvalidRequest => 1,
                    NakCode::RemoteAccessError => 2,
                    NakCode::RemoteOperationalError => 3,
                    NakCode::InvalidRdRequest => 4,
                }),
        }
    }
}

/// Minimum RNR NAK timer in microseconds for a 5-bit timer code (IBTA Vol 1
/// §9.7.5.2.8, Table 45): code 0 is 655.36 ms, codes 1-31 run from 0.01 ms
/// to 491.52 ms. The code is reduced modulo 32.
#[expect(clippy::indexing_slicing, reason = "the index is masked to 0..32")]
pub const fn rnr_timer_usecs(code: u8) -> u32 {
    const USECS: [u32; 32] = [
        655_360, 10, 20, 30, 40, 60, 80, 120, 160, 240, 320, 480, 640, 960, 1280, 1920, 2560, 3840,
        5120, 7680, 10_240, 15_360, 20_480, 30_720, 40_960, 61_440, 81_920, 122_880, 163_840,
        245_760, 327_680, 491_520,
    ];
    USECS[(code & VALUE_MASK) as usize]
}

impl Aeth {
    /// Builds an AETH from a decoded syndrome and an MSN.
    ///
    /// # Errors
    ///
    /// [`Error::FieldOutOfRange`] if the syndrome does not encode or the MSN
    /// does not fit in 24 bits.
    pub const fn new(syndrome: Syndrome, msn: u32) -> Result<Self> {
        if msn > MSN_MASK {
            return Err(Error::FieldOutOfRange);
        }
        match syndrome.encode() {
            Ok(syndrome) => Ok(Self { syndrome, msn }),
            Err(e) => Err(e),
        }
    }

    /// The decoded syndrome.
    ///
    /// # Errors
    ///
    /// [`Error::ReservedSyndrome`] as [`Syndrome::decode`].
    pub const fn syndrome(&self) -> Result<Syndrome> {
        Syndrome::decode(self.syndrome)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::proto::wire::tests::{assert_known_bytes, assert_out_of_range};
    use proptest::prelude::*;

    #[test]
    fn known_bytes() {
        // ACK, unlimited credits, MSN 0x012345 (what rxe sends).
        let aeth = Aeth {
            syndrome: 0x1f,
            msn: 0x01_2345,
        };
        assert_known_bytes(aeth, &[0x1f, 0x01, 0x23, 0x45]);
        assert_eq!(
            aeth.syndrome(),
            Ok(Syndrome::Ack {
                credits: CREDITS_UNLIMITED
            })
        );
        assert_out_of_range(Aeth {
            syndrome: 0,
            msn: 1 << 24,
        });
    }

    /// The syndrome values the C driver uses (`rxe_hdr.h`, `enum aeth_syndrome`).
    #[test]
    fn rxe_syndromes() {
        assert_eq!(
            Syndrome::decode(0x60),
            Ok(Syndrome::Nak(NakCode::PsnSequenceError))
        );
        assert_eq!(
            Syndrome::decode(0x61),
            Ok(Syndrome::Nak(NakCode::InvalidRequest))
        );
        assert_eq!(
            Syndrome::decode(0x62),
            Ok(Syndrome::Nak(NakCode::RemoteAccessError))
        );
        assert_eq!(
            Syndrome::decode(0x63),
            Ok(Syndrome::Nak(NakCode::RemoteOperationalError))
        );
        assert_eq!(Syndrome::decode(0x2e), Ok(Syndrome::RnrNak { timer: 14 }));
        assert_eq!(Syndrome::decode(0x40), Err(Error::ReservedSyndrome));
        assert_eq!(Syndrome::decode(0x65), Err(Error::ReservedSyndrome));
        assert_eq!(Syndrome::decode(0x9f), Err(Error::ReservedSyndrome));
        assert_eq!(
            Syndrome::RnrNak { timer: 32 }.encode(),
            Err(Error::FieldOutOfRange)
        );
        assert_eq!(
            Aeth::new(Syndrome::Nak(NakCode::InvalidRequest), 7),
            Ok(Aeth {
                syndrome: 0x61,
                msn: 7
            })
        );
    }

    #[test]
    fn rnr_nak_timer_field() {
        // min_rnr_timer -> AETH syndrome byte: RNR NAK type (0b01 in bits
        // 6:5) with the attribute's low five bits. Before 15d6b60 the
        // attribute went into the syndrome whole, and 32, 0x45 and 0xff
        // failed to encode (FieldOutOfRange): no RNR NAK was sent at all.
        for (attr, byte, timer) in [
            (0u8, 0x20u8, 0u8),
            (31, 0x3f, 31),
            (32, 0x20, 0),
            (0x45, 0x25, 5),
            (0xff, 0x3f, 31),
        ] {
            let s = Syndrome::rnr_nak(attr);
            assert_eq!(s, Syndrome::RnrNak { timer }, "min_rnr_timer {attr:#x}");
            assert_eq!(s.encode(), Ok(byte), "min_rnr_timer {attr:#x}");
            assert_eq!(
                Aeth::new(s, 9),
                Ok(Aeth {
                    syndrome: byte,
                    msn: 9
                })
            );
            assert_eq!(Syndrome::decode(byte), Ok(s));
        }
        // 32 is 655.36 ms on the wire (code 0), not the 0.01 ms of 33.
        assert_eq!(
            rnr_timer_usecs(Syndrome::rnr_nak(32).encode().unwrap() & 0x1f),
            655_360
        );
    }

    #[test]
    fn rnr_timer() {
        assert_eq!(rnr_timer_usecs(0), 655_360);
        assert_eq!(rnr_timer_usecs(1), 10);
        assert_eq!(rnr_timer_usecs(14), 1280);
        assert_eq!(rnr_timer_usecs(31), 491_520);
        assert_eq!(rnr_timer_usecs(33), 10);
    }

    proptest! {
        #[test]
        fn syndrome_roundtrip(byte in any::<u8>()) {
            if let Ok(s) = Syndrome::decode(byte) {
                prop_assert_eq!(s.encode(), Ok(byte));
            }
        }
    }
}
