// SPDX-License-Identifier: GPL-2.0

//! The BTH OpCode table (IBTA Vol 1 §9.2.1, Table 38; FLUSH and ATOMIC WRITE
//! from Annex A19).
//!
//! The upper 3 bits of an opcode select the transport service (RC `0x00`,
//! UC `0x20`, RD `0x40`, UD `0x60`), the lower 5 bits the operation. rrxe
//! carries RC, UC and UD; RD, CNP (`0x80`) and the manufacturer range are
//! unknown here and dropped on receive.
//!
//! For each known opcode, [`OpcodeInfo`] says which extension headers follow
//! the BTH, in which order, how long they are, whether a payload follows, and
//! where the packet sits in its message.

#![forbid(unsafe_code)]

use core::fmt;

use super::aeth::Aeth;
use super::atmack::AtomicAckEth;
use super::atmeth::AtomicEth;
use super::bth::Bth;
use super::deth::Deth;
use super::feth::Feth;
use super::ieth::Ieth;
use super::immdt::ImmDt;
use super::reth::Reth;

/// A BTH OpCode byte, possibly one rrxe does not know.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Opcode(pub u8);

/// Transport service of an opcode (its upper 3 bits).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Transport {
    /// Reliable Connection, opcodes `0x00..=0x1f`.
    Rc,
    /// Unreliable Connection, opcodes `0x20..=0x3f`.
    Uc,
    /// Unreliable Datagram, opcodes `0x60..=0x7f`.
    Ud,
}

/// `enum ib_qp_type` values (`include/rdma/ib_verbs.h`, a stable kernel
/// ABI) of the QP types whose packets rrxe receives; the module build
/// checks them against the bindings.
pub mod qp_type {
    /// `IB_QPT_SMI` (no RoCE SMI: rrxe has no QP 0).
    pub const SMI: u32 = 0;
    /// `IB_QPT_GSI`, QP 1.
    pub const GSI: u32 = 1;
    /// `IB_QPT_RC`.
    pub const RC: u32 = 2;
    /// `IB_QPT_UC`.
    pub const UC: u32 = 3;
    /// `IB_QPT_UD`.
    pub const UD: u32 = 4;
}

/// The transport service whose opcodes a QP of `qp_type` (an `enum
/// ib_qp_type` value) receives, as the C driver's `check_type_state`: RC
/// opcodes for RC, UC for UC, UD for UD and GSI (IBTA Vol 1 §9.2: the
/// opcode's upper bits name the service). `None` for every other type:
/// such a QP takes no packet.
pub const fn qp_service(qp_type: u32) -> Option<Transport> {
    match qp_type {
        qp_type::RC => Some(Transport::Rc),
        qp_type::UC => Some(Transport::Uc),
        qp_type::UD | qp_type::GSI => Some(Transport::Ud),
        _ => None,
    }
}

/// Whether a QP of `qp_type` takes a packet whose opcode is of `transport`
/// (see [`qp_service`]); the others are dropped and counted
/// (`rcvd_drop_bad_transport`).
pub const fn qp_accepts(qp_type: u32, transport: Transport) -> bool {
    matches!(
        (qp_service(qp_type), transport),
        (Some(Transport::Rc), Transport::Rc)
            | (Some(Transport::Uc), Transport::Uc)
            | (Some(Transport::Ud), Transport::Ud)
    )
}

/// The operation a packet belongs to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Operation {
    /// SEND, with or without immediate data or invalidate.
    Send,
    /// RDMA WRITE, with or without immediate data.
    RdmaWrite,
    /// RDMA READ request.
    RdmaReadRequest,
    /// RDMA READ response.
    RdmaReadResponse,
    /// Acknowledge (ACK or NAK).
    Acknowledge,
    /// Atomic acknowledge, carrying the original remote data.
    AtomicAcknowledge,
    /// Atomic CmpSwap request.
    CompareSwap,
    /// Atomic FetchAdd request.
    FetchAdd,
    /// FLUSH request (Annex A19).
    Flush,
    /// ATOMIC WRITE request (Annex A19).
    AtomicWrite,
}

/// Position of a packet within its message.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Position {
    /// First packet of a multi-packet message.
    First,
    /// Neither first nor last.
    Middle,
    /// Last packet of a multi-packet message.
    Last,
    /// The message fits in this one packet.
    Only,
}

impl Position {
    /// Whether this packet starts a message (FIRST or ONLY).
    pub const fn is_first(self) -> bool {
        matches!(self, Position::First | Position::Only)
    }

    /// Whether this packet ends a message (LAST or ONLY).
    pub const fn is_last(self) -> bool {
        matches!(self, Position::Last | Position::Only)
    }

    /// Position of packet `index` (from 0) in a message of `count` packets.
    ///
    /// Returns `None` if `index >= count`.
    pub const fn of(index: u32, count: u32) -> Option<Self> {
        if index >= count {
            None
        } else if count == 1 {
            Some(Position::Only)
        } else if index == 0 {
            Some(Position::First)
        } else if index + 1 == count {
            Some(Position::Last)
        } else {
            Some(Position::Middle)
        }
    }
}

/// A set of extension transport headers.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Default)]
#[must_use]
pub struct HeaderSet(u16);

impl HeaderSet {
    /// No extension header.
    pub const NONE: HeaderSet = HeaderSet(0);
    /// Datagram ETH, [`Deth`].
    pub const DETH: HeaderSet = HeaderSet(1 << 0);
    /// Flush ETH, [`Feth`].
    pub const FETH: HeaderSet = HeaderSet(1 << 1);
    /// RDMA ETH, [`Reth`].
    pub const RETH: HeaderSet = HeaderSet(1 << 2);
    /// Atomic ETH, [`AtomicEth`].
    pub const ATMETH: HeaderSet = HeaderSet(1 << 3);
    /// ACK ETH, [`Aeth`].
    pub const AETH: HeaderSet = HeaderSet(1 << 4);
    /// Atomic ACK ETH, [`AtomicAckEth`].
    pub const ATMACK: HeaderSet = HeaderSet(1 << 5);
    /// Immediate data, [`ImmDt`].
    pub const IMMDT: HeaderSet = HeaderSet(1 << 6);
    /// Invalidate ETH, [`Ieth`].
    pub const IETH: HeaderSet = HeaderSet(1 << 7);

    /// Every header in wire order with its length in bytes. Extension headers
    /// follow the BTH in this order in every opcode that carries them.
    pub const WIRE_ORDER: [(HeaderSet, usize); 8] = [
        (Self::DETH, Deth::LEN),
        (Self::FETH, Feth::LEN),
        (Self::RETH, Reth::LEN),
        (Self::ATMETH, AtomicEth::LEN),
        (Self::AETH, Aeth::LEN),
        (Self::ATMACK, AtomicAckEth::LEN),
        (Self::IMMDT, ImmDt::LEN),
        (Self::IETH, Ieth::LEN),
    ];

    /// The union of two sets.
    pub const fn with(self, other: HeaderSet) -> HeaderSet {
        HeaderSet(self.0 | other.0)
    }

    /// Whether every header of `other` is in `self`.
    pub const fn contains(self, other: HeaderSet) -> bool {
        self.0 & other.0 == other.0
    }

    /// Total length in bytes of the headers in the set.
    pub const fn len(self) -> usize {
        let mut len = 0;
        let mut rest: &[(HeaderSet, usize)] = &Self::WIRE_ORDER;
        while let [(h, l), tail @ ..] = rest {
            if self.contains(*h) {
                len += *l;
            }
            rest = tail;
        }
        len
    }

    /// Whether the set is empty.
    pub const fn is_empty(self) -> bool {
        self.0 == 0
    }

    /// Byte offset of header `h` from the start of the BTH, if the set
    /// contains it.
    pub const fn offset_of(self, h: HeaderSet) -> Option<usize> {
        if h.0.count_ones() != 1 || !self.contains(h) {
            return None;
        }
        let mut off = Bth::LEN;
        let mut rest: &[(HeaderSet, usize)] = &Self::WIRE_ORDER;
        while let [(x, l), tail @ ..] = rest {
            if x.0 == h.0 {
                return Some(off);
            }
            if self.contains(*x) {
                off += *l;
            }
            rest = tail;
        }
        None
    }
}

impl fmt::Debug for HeaderSet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        const NAMES: [&str; 8] = [
            "DETH", "FETH", "RETH", "ATMETH", "AETH", "ATMACK", "IMMDT", "IETH",
        ];
        let mut set = f.debug_set();
        for (i, name) in NAMES.iter().enumerate() {
            if self.0 & (1 << i) != 0 {
                set.entry(&format_args!("{name}"));
            }
        }
        set.finish()
    }
}

/// Static facts about one opcode.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct OpcodeInfo {
    /// The opcode itself.
    pub opcode: Opcode,
    /// The IBTA name, e.g. `"RC_SEND_FIRST"`.
    pub name: &'static str,
    /// Transport service.
    pub transport: Transport,
    /// Operation.
    pub operation: Operation,
    /// Position within the message.
    pub position: Position,
    /// Extension headers that follow the BTH.
    pub headers: HeaderSet,
    /// Whether a payload follows the headers. Packets of opcodes without one
    /// must end right after the headers (with a pad count of 0).
    pub has_payload: bool,
    /// Length in bytes of the BTH plus all extension headers.
    pub header_len: usize,
}

impl OpcodeInfo {
    const fn new(
        op: u8,
        name: &'static str,
        transport: Transport,
        operation: Operation,
        position: Position,
        headers: HeaderSet,
        has_payload: bool,
    ) -> Self {
        Self {
            opcode: Opcode(op),
            name,
            transport,
            operation,
            position,
            headers,
            has_payload,
            header_len: Bth::LEN + headers.len(),
        }
    }

    /// Whether the packet is a request (handled by the responder), as opposed
    /// to a response (ACK, atomic ACK, READ response; handled by the
    /// completer).
    pub const fn is_request(&self) -> bool {
        !matches!(
            self.operation,
            Operation::RdmaReadResponse | Operation::Acknowledge | Operation::AtomicAcknowledge
        )
    }

    /// Whether the packet carries immediate data.
    pub const fn has_immediate(&self) -> bool {
        self.headers.contains(HeaderSet::IMMDT)
    }

    /// Whether the packet carries an invalidate R_Key.
    pub const fn has_invalidate(&self) -> bool {
        self.headers.contains(HeaderSet::IETH)
    }

    /// Whether the responder needs a receive WQE for this packet: the first
    /// packet of a SEND, or the packet of an RDMA WRITE that carries
    /// immediate data.
    pub const fn needs_recv_wqe(&self) -> bool {
        match self.operation {
            Operation::Send => self.position.is_first(),
            Operation::RdmaWrite => self.has_immediate(),
            _ => false,
        }
    }

    /// Whether the responder completes a receive WQE with this packet: the
    /// last packet of a SEND, or an RDMA WRITE with immediate data.
    pub const fn completes_recv_wqe(&self) -> bool {
        match self.operation {
            Operation::Send => self.position.is_last(),
            Operation::RdmaWrite => self.has_immediate(),
            _ => false,
        }
    }
}

macro_rules! opcodes {
    ($($name:ident = $val:literal, $tr:ident, $op:ident, $pos:ident, [$($h:ident)|*], $pay:literal;)*) => {
        impl Opcode {
            $(
                #[doc = concat!("`", stringify!($name), "` (`", stringify!($val), "`).")]
                pub const $name: Opcode = Opcode($val);
            )*
        }

        const TABLE: &[OpcodeInfo] = &[
            $(
                OpcodeInfo::new(
                    $val,
                    stringify!($name),
                    Transport::$tr,
                    Operation::$op,
                    Position::$pos,
                    HeaderSet::NONE$(.with(HeaderSet::$h))*,
                    $pay,
                ),
            )*
        ];

        /// Every opcode rrxe knows, in numerical order.
        pub static OPCODES: &[OpcodeInfo] = TABLE;
    };
}

opcodes! {
    RC_SEND_FIRST = 0x00, Rc, Send, First, [], true;
    RC_SEND_MIDDLE = 0x01, Rc, Send, Middle, [], true;
    RC_SEND_LAST = 0x02, Rc, Send, Last, [], true;
    RC_SEND_LAST_WITH_IMMEDIATE = 0x03, Rc, Send, Last, [IMMDT], true;
    RC_SEND_ONLY = 0x04, Rc, Send, Only, [], true;
    RC_SEND_ONLY_WITH_IMMEDIATE = 0x05, Rc, Send, Only, [IMMDT], true;
    RC_RDMA_WRITE_FIRST = 0x06, Rc, RdmaWrite, First, [RETH], true;
    RC_RDMA_WRITE_MIDDLE = 0x07, Rc, RdmaWrite, Middle, [], true;
    RC_RDMA_WRITE_LAST = 0x08, Rc, RdmaWrite, Last, [], true;
    RC_RDMA_WRITE_LAST_WITH_IMMEDIATE = 0x09, Rc, RdmaWrite, Last, [IMMDT], true;
    RC_RDMA_WRITE_ONLY = 0x0a, Rc, RdmaWrite, Only, [RETH], true;
    RC_RDMA_WRITE_ONLY_WITH_IMMEDIATE = 0x0b, Rc, RdmaWrite, Only, [RETH | IMMDT], true;
    RC_RDMA_READ_REQUEST = 0x0c, Rc, RdmaReadRequest, Only, [RETH], false;
    RC_RDMA_READ_RESPONSE_FIRST = 0x0d, Rc, RdmaReadResponse, First, [AETH], true;
    RC_RDMA_READ_RESPONSE_MIDDLE = 0x0e, Rc, RdmaReadResponse, Middle, [], true;
    RC_RDMA_READ_RESPONSE_LAST = 0x0f, Rc, RdmaReadResponse, Last, [AETH], true;
    RC_RDMA_READ_RESPONSE_ONLY = 0x10, Rc, RdmaReadResponse, Only, [AETH], true;
    RC_ACKNOWLEDGE = 0x11, Rc, Acknowledge, Only, [AETH], false;
    RC_ATOMIC_ACKNOWLEDGE = 0x12, Rc, AtomicAcknowledge, Only, [AETH | ATMACK], false;
    RC_COMPARE_SWAP = 0x13, Rc, CompareSwap, Only, [ATMETH], false;
    RC_FETCH_ADD = 0x14, Rc, FetchAdd, Only, [ATMETH], false;
    RC_SEND_LAST_WITH_INVALIDATE = 0x16, Rc, Send, Last, [IETH], true;
    RC_SEND_ONLY_WITH_INVALIDATE = 0x17, Rc, Send, Only, [IETH], true;
    RC_FLUSH = 0x1c, Rc, Flush, Only, [FETH | RETH], false;
    RC_ATOMIC_WRITE = 0x1d, Rc, AtomicWrite, Only, [RETH], true;
    UC_SEND_FIRST = 0x20, Uc, Send, First, [], true;
    UC_SEND_MIDDLE = 0x21, Uc, Send, Middle, [], true;
    UC_SEND_LAST = 0x22, Uc, Send, Last, [], true;
    UC_SEND_LAST_WITH_IMMEDIATE = 0x23, Uc, Send, Last, [IMMDT], true;
    UC_SEND_ONLY = 0x24, Uc, Send, Only, [], true;
    UC_SEND_ONLY_WITH_IMMEDIATE = 0x25, Uc, Send, Only, [IMMDT], true;
    UC_RDMA_WRITE_FIRST = 0x26, Uc, RdmaWrite, First, [RETH], true;
    UC_RDMA_WRITE_MIDDLE = 0x27, Uc, RdmaWrite, Middle, [], true;
    UC_RDMA_WRITE_LAST = 0x28, Uc, RdmaWrite, Last, [], true;
    UC_RDMA_WRITE_LAST_WITH_IMMEDIATE = 0x29, Uc, RdmaWrite, Last, [IMMDT], true;
    UC_RDMA_WRITE_ONLY = 0x2a, Uc, RdmaWrite, Only, [RETH], true;
    UC_RDMA_WRITE_ONLY_WITH_IMMEDIATE = 0x2b, Uc, RdmaWrite, Only, [RETH | IMMDT], true;
    UD_SEND_ONLY = 0x64, Ud, Send, Only, [DETH], true;
    UD_SEND_ONLY_WITH_IMMEDIATE = 0x65, Ud, Send, Only, [DETH | IMMDT], true;
}

/// Opcode → index into [`OPCODES`] plus one (0 = unknown), built at compile
/// time so that a lookup is one load.
#[expect(
    clippy::indexing_slicing,
    clippy::cast_possible_truncation,
    reason = "evaluated at compile time; opcodes index 256 entries and the table has fewer than 255"
)]
static INDEX: [u8; 256] = {
    let mut index = [0u8; 256];
    let mut i = 0;
    while i < TABLE.len() {
        // The table has fewer than 255 entries, so `i + 1` fits in a u8.
        index[TABLE[i].opcode.0 as usize] = (i + 1) as u8;
        i += 1;
    }
    index
};

/// Message kinds the requester and responder segment into packets.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MessageKind {
    /// SEND.
    Send,
    /// SEND with immediate data (ImmDt on the LAST or ONLY packet).
    SendWithImm,
    /// SEND with invalidate (IETH on the LAST or ONLY packet; RC only).
    SendWithInv,
    /// RDMA WRITE (RETH on the FIRST or ONLY packet).
    RdmaWrite,
    /// RDMA WRITE with immediate data (RETH first, ImmDt last).
    RdmaWriteWithImm,
    /// RDMA READ response (AETH on FIRST, LAST and ONLY; RC only).
    RdmaReadResponse,
}

impl Opcode {
    /// The table entry of this opcode, or `None` if rrxe does not know it.
    pub fn info(self) -> Option<&'static OpcodeInfo> {
        let slot = INDEX.get(usize::from(self.0)).copied()?;
        OPCODES.get(usize::from(slot).checked_sub(1)?)
    }

    /// Transport service encoded in the upper 3 bits, if rrxe carries it.
    pub const fn transport(self) -> Option<Transport> {
        match self.0 >> 5 {
            0 => Some(Transport::Rc),
            1 => Some(Transport::Uc),
            3 => Some(Transport::Ud),
            _ => None,
        }
    }

    /// The opcode of packet `position` of a message of `kind` on `transport`.
    ///
    /// Returns `None` for combinations the IBTA does not define (an RDMA
    /// WRITE on UD, a multi-packet UD message, SEND with invalidate or a READ
    /// response on UC).
    pub const fn for_message(
        transport: Transport,
        kind: MessageKind,
        position: Position,
    ) -> Option<Opcode> {
        use MessageKind as K;
        use Position as P;
        let base = match transport {
            Transport::Rc => 0x00,
            Transport::Uc => 0x20,
            Transport::Ud => {
                return match (kind, position) {
                    (K::Send, P::Only) => Some(Opcode::UD_SEND_ONLY),
                    (K::SendWithImm, P::Only) => Some(Opcode::UD_SEND_ONLY_WITH_IMMEDIATE),
                    _ => None,
                };
            }
        };
        let op: u8 = match (kind, position) {
            (K::Send | K::SendWithImm | K::SendWithInv, P::First) => 0x00,
            (K::Send | K::SendWithImm | K::SendWithInv, P::Middle) => 0x01,
            (K::Send, P::Last) => 0x02,
            (K::SendWithImm, P::Last) => 0x03,
            (K::Send, P::Only) => 0x04,
            (K::SendWithImm, P::Only) => 0x05,
            (K::SendWithInv, P::Last) => 0x16,
            (K::SendWithInv, P::Only) => 0x17,
            (K::RdmaWrite | K::RdmaWriteWithImm, P::First) => 0x06,
            (K::RdmaWrite | K::RdmaWriteWithImm, P::Middle) => 0x07,
            (K::RdmaWrite, P::Last) => 0x08,
            (K::RdmaWriteWithImm, P::Last) => 0x09,
            (K::RdmaWrite, P::Only) => 0x0a,
            (K::RdmaWriteWithImm, P::Only) => 0x0b,
            (K::RdmaReadResponse, P::First) => 0x0d,
            (K::RdmaReadResponse, P::Middle) => 0x0e,
            (K::RdmaReadResponse, P::Last) => 0x0f,
            (K::RdmaReadResponse, P::Only) => 0x10,
        };
        if base != 0 && matches!(kind, K::SendWithInv | K::RdmaReadResponse) {
            return None;
        }
        Some(Opcode(base | op))
    }
}

impl fmt::Debug for Opcode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.info() {
            Some(info) => write!(f, "{}({:#04x})", info.name, self.0),
            None => write!(f, "Opcode({:#04x})", self.0),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_is_consistent() {
        let mut last = None;
        for info in OPCODES {
            // Sorted, unique, found by lookup.
            assert!(last < Some(info.opcode.0), "{:?}", info.opcode);
            last = Some(info.opcode.0);
            assert_eq!(info.opcode.info(), Some(info));
            assert_eq!(info.opcode.transport(), Some(info.transport));
            assert!(info.name.starts_with(match info.transport {
                Transport::Rc => "RC_",
                Transport::Uc => "UC_",
                Transport::Ud => "UD_",
            }));
            assert_eq!(info.has_immediate(), info.name.contains("IMMEDIATE"));
            assert_eq!(info.has_invalidate(), info.name.contains("INVALIDATE"));
            assert_eq!(info.header_len % 4, 0);
        }
        assert_eq!(OPCODES.len(), 39);
    }

    #[test]
    fn unknown_opcodes() {
        for op in [
            0x15u8, 0x18, 0x1b, 0x1e, 0x1f, 0x2c, 0x40, 0x44, 0x60, 0x63, 0x66, 0x80, 0x81, 0xe0,
            0xff,
        ] {
            assert_eq!(Opcode(op).info(), None, "{op:#x}");
        }
        let known = (0..=255u8)
            .filter(|&op| Opcode(op).info().is_some())
            .count();
        assert_eq!(known, OPCODES.len());
    }

    /// Header lengths and offsets agree with the C driver's `rxe_opcode[]`
    /// (`length` and `offset[RXE_PAYLOAD]`).
    #[test]
    fn header_lengths_match_rxe() {
        let cases: &[(Opcode, usize)] = &[
            (Opcode::RC_SEND_FIRST, 12),
            (Opcode::RC_SEND_LAST_WITH_IMMEDIATE, 16),
            (Opcode::RC_RDMA_WRITE_FIRST, 28),
            (Opcode::RC_RDMA_WRITE_ONLY_WITH_IMMEDIATE, 32),
            (Opcode::RC_RDMA_READ_REQUEST, 28),
            (Opcode::RC_RDMA_READ_RESPONSE_FIRST, 16),
            (Opcode::RC_RDMA_READ_RESPONSE_MIDDLE, 12),
            (Opcode::RC_ACKNOWLEDGE, 16),
            (Opcode::RC_ATOMIC_ACKNOWLEDGE, 24),
            (Opcode::RC_COMPARE_SWAP, 40),
            (Opcode::RC_FETCH_ADD, 40),
            (Opcode::RC_SEND_ONLY_WITH_INVALIDATE, 16),
            (Opcode::RC_FLUSH, 32),
            (Opcode::RC_ATOMIC_WRITE, 28),
            (Opcode::UD_SEND_ONLY, 20),
            (Opcode::UD_SEND_ONLY_WITH_IMMEDIATE, 24),
        ];
        for &(op, len) in cases {
            assert_eq!(op.info().map(|i| i.header_len), Some(len), "{op:?}");
        }
    }

    #[test]
    fn offsets() {
        let h = HeaderSet::RETH.with(HeaderSet::IMMDT);
        assert_eq!(h.offset_of(HeaderSet::RETH), Some(12));
        assert_eq!(h.offset_of(HeaderSet::IMMDT), Some(28));
        assert_eq!(h.offset_of(HeaderSet::AETH), None);
        let a = HeaderSet::AETH.with(HeaderSet::ATMACK);
        assert_eq!(a.offset_of(HeaderSet::AETH), Some(12));
        assert_eq!(a.offset_of(HeaderSet::ATMACK), Some(16));
        let f = HeaderSet::FETH.with(HeaderSet::RETH);
        assert_eq!(f.offset_of(HeaderSet::FETH), Some(12));
        assert_eq!(f.offset_of(HeaderSet::RETH), Some(16));
        let d = HeaderSet::DETH.with(HeaderSet::IMMDT);
        assert_eq!(d.offset_of(HeaderSet::IMMDT), Some(20));
        assert_eq!(d.offset_of(d), None);
    }

    #[test]
    fn recv_wqe_rules() {
        let first = |op: Opcode| op.info().map(OpcodeInfo::needs_recv_wqe);
        let last = |op: Opcode| op.info().map(OpcodeInfo::completes_recv_wqe);
        assert_eq!(first(Opcode::RC_SEND_FIRST), Some(true));
        assert_eq!(first(Opcode::RC_SEND_MIDDLE), Some(false));
        assert_eq!(first(Opcode::RC_SEND_ONLY_WITH_INVALIDATE), Some(true));
        assert_eq!(first(Opcode::RC_RDMA_WRITE_FIRST), Some(false));
        assert_eq!(first(Opcode::UC_RDMA_WRITE_LAST_WITH_IMMEDIATE), Some(true));
        assert_eq!(last(Opcode::RC_SEND_FIRST), Some(false));
        assert_eq!(last(Opcode::RC_SEND_LAST), Some(true));
        assert_eq!(last(Opcode::UD_SEND_ONLY), Some(true));
        assert_eq!(last(Opcode::RC_RDMA_WRITE_ONLY), Some(false));
        assert_eq!(last(Opcode::RC_RDMA_READ_RESPONSE_LAST), Some(false));
        assert!(!Opcode::RC_ACKNOWLEDGE
            .info()
            .is_some_and(OpcodeInfo::is_request));
        assert!(Opcode::RC_FLUSH.info().is_some_and(OpcodeInfo::is_request));
    }

    #[test]
    fn message_opcodes() {
        use MessageKind as K;
        use Position as P;
        let kinds = [
            K::Send,
            K::SendWithImm,
            K::SendWithInv,
            K::RdmaWrite,
            K::RdmaWriteWithImm,
            K::RdmaReadResponse,
        ];
        for tr in [Transport::Rc, Transport::Uc, Transport::Ud] {
            for kind in kinds {
                for pos in [P::First, P::Middle, P::Last, P::Only] {
                    let Some(op) = Opcode::for_message(tr, kind, pos) else {
                        continue;
                    };
                    let info = op.info().expect("defined opcode");
                    assert_eq!(info.transport, tr);
                    assert_eq!(info.position, pos);
                    let want = match kind {
                        K::Send | K::SendWithImm | K::SendWithInv => Operation::Send,
                        K::RdmaWrite | K::RdmaWriteWithImm => Operation::RdmaWrite,
                        K::RdmaReadResponse => Operation::RdmaReadResponse,
                    };
                    assert_eq!(info.operation, want);
                    let last = pos.is_last();
                    assert_eq!(
                        info.has_immediate(),
                        last && matches!(kind, K::SendWithImm | K::RdmaWriteWithImm)
                    );
                    assert_eq!(info.has_invalidate(), last && kind == K::SendWithInv);
                }
            }
        }
        assert_eq!(
            Opcode::for_message(Transport::Uc, K::SendWithInv, P::Only),
            None
        );
        assert_eq!(Opcode::for_message(Transport::Ud, K::Send, P::First), None);
        assert_eq!(
            Opcode::for_message(Transport::Ud, K::RdmaWrite, P::Only),
            None
        );
        assert_eq!(
            Opcode::for_message(Transport::Rc, K::RdmaWriteWithImm, P::Only),
            Some(Opcode::RC_RDMA_WRITE_ONLY_WITH_IMMEDIATE)
        );
    }

    #[test]
    fn transport_of_qp() {
        use Transport::{Rc, Uc, Ud};
        // Every QP type x every transport service. Before the check
        // (15d6b60) every cell was true: a UD opcode reached an RC QP's
        // responder.
        let table: [(u32, [bool; 3]); 9] = [
            (qp_type::SMI, [false, false, false]),
            (qp_type::GSI, [false, false, true]),
            (qp_type::RC, [true, false, false]),
            (qp_type::UC, [false, true, false]),
            (qp_type::UD, [false, false, true]),
            // IB_QPT_RAW_PACKET, XRC_INI, XRC_TGT, DRIVER: not rrxe's.
            (8, [false, false, false]),
            (9, [false, false, false]),
            (10, [false, false, false]),
            (0xff, [false, false, false]),
        ];
        for (ty, want) in table {
            for (tr, ok) in [Rc, Uc, Ud].into_iter().zip(want) {
                assert_eq!(qp_accepts(ty, tr), ok, "qp type {ty}, {tr:?}");
            }
        }
        assert_eq!(qp_service(qp_type::GSI), Some(Ud));
        assert_eq!(qp_service(qp_type::SMI), None);
        // The service follows the opcode's upper bits.
        let op = |o: Opcode| o.info().expect("known opcode").transport;
        assert!(qp_accepts(qp_type::RC, op(Opcode::RC_RDMA_READ_REQUEST)));
        assert!(!qp_accepts(qp_type::UC, op(Opcode::RC_SEND_ONLY)));
        assert!(!qp_accepts(qp_type::RC, op(Opcode::UC_SEND_ONLY)));
        assert!(!qp_accepts(qp_type::RC, op(Opcode::UD_SEND_ONLY)));
        assert!(qp_accepts(qp_type::GSI, op(Opcode::UD_SEND_ONLY)));
        assert!(!qp_accepts(qp_type::UD, op(Opcode::UC_SEND_ONLY)));
    }

    #[test]
    fn positions() {
        assert_eq!(Position::of(0, 1), Some(Position::Only));
        assert_eq!(Position::of(0, 3), Some(Position::First));
        assert_eq!(Position::of(1, 3), Some(Position::Middle));
        assert_eq!(Position::of(2, 3), Some(Position::Last));
        assert_eq!(Position::of(3, 3), None);
        assert_eq!(Position::of(0, 0), None);
    }
}
