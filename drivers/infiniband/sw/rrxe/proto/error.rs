// SPDX-License-Identifier: GPL-2.0

//! Errors of the protocol core.

#![forbid(unsafe_code)]

use core::fmt;

/// Why a header or packet could not be parsed or written.
///
/// Every variant describes malformed input or an out-of-range argument; the
/// receive path drops the packet and counts it, the transmit path treats it
/// as a bug in the caller (`EINVAL`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Error {
    /// The buffer is shorter than the header or packet being read or written.
    Truncated,
    /// A value does not fit its wire field (a QPN or PSN above 24 bits, a pad
    /// count above 3, a transport version above 15, ...).
    FieldOutOfRange,
    /// The BTH TVer field is not 0 (IBTA Vol 1 §9.2).
    BadTransportVersion,
    /// The BTH OpCode is reserved, or belongs to a transport rrxe does not
    /// carry (RD, CNP, manufacturer specific).
    UnknownOpcode,
    /// The destination QPN is 0; QP0 does not exist on RoCE.
    InvalidQpn,
    /// The packet length does not match its opcode: shorter than headers,
    /// pad and ICRC, not a multiple of 4 bytes, or a payload on an opcode
    /// that carries none.
    BadLength,
    /// The extension headers given to the packet writer do not match the
    /// set the opcode carries.
    HeaderMismatch,
    /// The AETH syndrome uses a reserved encoding (IBTA Vol 1 §9.3.5).
    ReservedSyndrome,
    /// The IP header handed to the ICRC is not an option-less IPv4 header or
    /// a fixed IPv6 header, or the UDP header is short.
    BadIpHeader,
    /// The invariant CRC does not match the packet's contents.
    IcrcMismatch,
    /// A work queue entry claims more SGEs or inline bytes than its queue
    /// slot holds.
    WqeOverflow,
}

/// Result type of the protocol core.
pub type Result<T = (), E = Error> = core::result::Result<T, E>;

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let s = match self {
            Error::Truncated => "buffer too short",
            Error::FieldOutOfRange => "value out of range for its field",
            Error::BadTransportVersion => "unsupported BTH transport version",
            Error::UnknownOpcode => "unknown or unsupported BTH opcode",
            Error::InvalidQpn => "invalid destination QPN",
            Error::BadLength => "packet length inconsistent with opcode",
            Error::HeaderMismatch => "extension headers do not match opcode",
            Error::ReservedSyndrome => "reserved AETH syndrome",
            Error::BadIpHeader => "unsupported IP or UDP header",
            Error::IcrcMismatch => "ICRC mismatch",
            Error::WqeOverflow => "work queue entry overflows its slot",
        };
        f.write_str(s)
    }
}
