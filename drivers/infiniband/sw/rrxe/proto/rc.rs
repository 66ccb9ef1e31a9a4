// SPDX-License-Identifier: GPL-2.0

//! Decisions of the reliable-connection transport that need no kernel
//! state: the responder's checks of a request's opcode sequence and payload
//! length (IBTA Vol 1 §9.7.5.1, §9.8.3), the completer's reading of an
//! acknowledge (§9.7.5.2), the requester's acknowledge-request pacing and
//! the local ACK timeout (§9.7.6.1.3).

#![forbid(unsafe_code)]

use core::ops::DerefMut;

use super::aeth::{
    NakCode,
    Syndrome, //
};
use super::opcode::{OpcodeInfo, Operation, Position};
use super::psn::{
    Psn,
    PsnRegion, //
};
use super::reth::Reth;
use super::segment::PathMtu;

/// Most packets the requester has outstanding (sent, not acknowledged);
/// past this it waits for acknowledges (as the C driver's
/// `RXE_MAX_UNACKED_PSNS`).
pub const MAX_UNACKED_PSNS: u32 = 128;

/// The requester sets AckReq at least every this many packets of a long
/// message, so that the completer retires its window and restarts its
/// local ACK timer without waiting for the last packet. As the C driver
/// (`RXE_MAX_PKT_PER_ACK`): 64 packets take about 3 ms between the test
/// VMs, far below a 67 ms ACK timeout, and every ACK costs both sides a
/// packet (rrxe asked every 16 until 2026-12-07: 64 ACKs per MiB, not 16).
pub const MAX_PKT_PER_ACK: u32 = 64;

/// The multi-packet request a responder is in the middle of.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum InProgress {
    /// Between messages: the next request must be a FIRST or an ONLY.
    #[default]
    None,
    /// A SEND whose FIRST has been accepted.
    Send,
    /// An RDMA WRITE whose FIRST has been accepted.
    Write,
}

/// Checks a request's opcode against the message in progress (IBTA Vol 1
/// §9.7.5.1.2, "opcode sequence") and returns the state after it.
///
/// FIRST and ONLY start a message and are valid only between messages;
/// MIDDLE and LAST continue the message in progress and must have its
/// operation. Operations that are single-packet by nature (READ requests,
/// atomics) are valid only between messages.
///
/// # Errors
///
/// `Err(())` for an out-of-sequence opcode: the responder answers with an
/// Invalid Request NAK.
#[expect(clippy::result_unit_err, reason = "one way to fail, named by the docs")]
pub const fn check_op_sequence(cur: InProgress, info: &OpcodeInfo) -> Result<InProgress, ()> {
    let op = match info.operation {
        Operation::Send => InProgress::Send,
        Operation::RdmaWrite => InProgress::Write,
        _ => {
            return match cur {
                InProgress::None => Ok(InProgress::None),
                _ => Err(()),
            };
        }
    };
    match (cur, info.position) {
        (InProgress::None, Position::Only) => Ok(InProgress::None),
        (InProgress::None, Position::First) => Ok(op),
        (InProgress::Send, Position::Middle) if matches!(op, InProgress::Send) => Ok(op),
        (InProgress::Write, Position::Middle) if matches!(op, InProgress::Write) => Ok(op),
        (InProgress::Send, Position::Last) if matches!(op, InProgress::Send) => {
            Ok(InProgress::None)
        }
        (InProgress::Write, Position::Last) if matches!(op, InProgress::Write) => {
            Ok(InProgress::None)
        }
        _ => Err(()),
    }
}

/// Checks the payload length of a SEND or RDMA WRITE packet against the
/// path MTU `mtu` in bytes (IBTA Vol 1 §9.7.5.1.4, C9-81..83): FIRST and
/// MIDDLE carry exactly one MTU, LAST carries 1 to MTU bytes, ONLY 0 to MTU.
pub const fn payload_len_ok(position: Position, len: u32, mtu: u32) -> bool {
    match position {
        Position::Only => len <= mtu,
        Position::First | Position::Middle => len == mtu,
        Position::Last => len != 0 && len <= mtu,
    }
}

/// The path MTU of the message a packet belongs to, if its payload length
/// is one a responder accepts; `None` otherwise (an Invalid Request).
///
/// `configured` is the QP's path MTU and `msg_mtu` the MTU of the message
/// in progress, which its FIRST packet sets. Every packet of a message but
/// the last carries the same payload (IBTA Vol 1 §9.7). It is the path MTU
/// on the C driver (`check_length`), and the QP's path MTU on rrxe unless
/// the net device's MTU shrank after RTR: the requester then begins new
/// messages at a lower MTU, finishing those begun at the old one, and the
/// two ends see the change at different moments. So a FIRST packet may
/// carry any path MTU up to the QP's, and fixes the message's.
pub const fn message_mtu(
    position: Position,
    len: u32,
    configured: u32,
    msg_mtu: u32,
) -> Option<u32> {
    let mtu = match position {
        Position::First if len.is_power_of_two() && len >= PathMtu::Mtu256.bytes() => len,
        Position::First | Position::Only => configured,
        Position::Middle | Position::Last => msg_mtu,
    };
    if mtu <= configured && payload_len_ok(position, len, mtu) {
        Some(mtu)
    } else {
        None
    }
}

/// The longest message (IBTA Vol 1 C9-94 for the RETH DMA length; the
/// port's `max_msg_sz`).
pub const MAX_MSG_LEN: u32 = 1 << 31;

/// Whether a RETH DMA length is allowed (C9-94; the C driver's
/// `check_length` refuses more than 2^31 with an Invalid Request NAK).
pub const fn dma_len_ok(len: u32) -> bool {
    len <= MAX_MSG_LEN
}

/// Checks the RETH of a READ or of the first packet of a WRITE before
/// anything is read or placed, as the C driver's `check_length` and
/// `check_rkey`: a DMA length above 2^31 is an Invalid Request (C9-94; it
/// also keeps a READ's responses within 2^23 PSNs at MTU 256), and
/// `range_ok`, which checks the R_Key and the whole `[va, va + len)`, a
/// Remote Access Error when it fails. A zero length is not checked against
/// the R_Key (C9-88), so `range_ok` is not called.
///
/// # Errors
///
/// The NAK code to answer with.
pub fn check_reth(dma_len: u32, range_ok: impl FnOnce() -> bool) -> Result<(), NakCode> {
    if !dma_len_ok(dma_len) {
        return Err(NakCode::InvalidRequest);
    }
    if dma_len > 0 && !range_ok() {
        return Err(NakCode::RemoteAccessError);
    }
    Ok(())
}

/// The length of a SEND message after a packet of `plen` bytes, `offset`
/// bytes having been placed before it; `None` past [`MAX_MSG_LEN`] (the
/// receive ends in a length error, whatever the receive WQE holds).
pub const fn message_len_after(offset: u32, plen: u32) -> Option<u32> {
    match offset.checked_add(plen) {
        Some(n) if n <= MAX_MSG_LEN => Some(n),
        _ => None,
    }
}

/// Whether an acknowledge for `psn` concerns a packet in flight, i.e. `psn`
/// is in `[oldest, next)` where `oldest` is the oldest unacknowledged PSN
/// and `next` the next PSN the requester will send. Acknowledges outside
/// are stale (or bogus) and ignored.
pub const fn ack_in_flight(psn: Psn, oldest: Psn, next: Psn) -> bool {
    psn.in_window(oldest, oldest.distance_to(next))
}

/// What the responder does with a request, by its PSN (IBTA Vol 1
/// §9.7.5.1.1, §9.7.5.1.2).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RequestPsn {
    /// The expected PSN: the request goes on to the opcode, length and
    /// R_Key checks.
    Execute,
    /// A PSN before the expected one (within 2^23): a duplicate, answered
    /// again as what it repeats needs and never executed again.
    Duplicate,
    /// The first request past a gap: a PSN Sequence Error NAK for the
    /// expected PSN.
    SequenceNak,
    /// Another request past the gap while that NAK stands: dropped, so
    /// that one gap gets one NAK (the C driver's `sent_psn_nak`).
    Drop,
}

/// Classifies the PSN of a request for a responder expecting `epsn`;
/// `nak_sent` says that a sequence NAK stands, and is updated: the
/// expected PSN ends it, the first packet past a gap starts it.
pub fn classify_request_psn(psn: Psn, epsn: Psn, nak_sent: &mut bool) -> RequestPsn {
    match psn.region(epsn) {
        PsnRegion::Expected => {
            *nak_sent = false;
            RequestPsn::Execute
        }
        PsnRegion::Duplicate => RequestPsn::Duplicate,
        PsnRegion::Ahead if *nak_sent => RequestPsn::Drop,
        PsnRegion::Ahead => {
            *nak_sent = true;
            RequestPsn::SequenceNak
        }
    }
}

/// What an acknowledge (an ACK or a NAK, not a READ response or an atomic
/// acknowledge) means to the requester (IBTA Vol 1 §9.7.5.2).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AckAction {
    /// Its PSN is not in flight: stale or bogus, ignored (C9-114 for a
    /// duplicate).
    Ignore,
    /// An ACK: everything up to its PSN is acknowledged (§9.7.5.2.1).
    Acknowledge,
    /// An RNR NAK: what precedes its PSN is acknowledged; the requester
    /// waits the RNR timer `timer` and sends again from the PSN, or fails
    /// the WQE when `rnr_retry` is spent (§9.7.5.2.8).
    RnrWait {
        /// The 5-bit timer code.
        timer: u8,
    },
    /// A PSN Sequence Error NAK: what precedes its PSN is acknowledged and
    /// the requester sends again from it (§9.7.5.2.4); no retry is spent.
    Resend,
    /// Any other NAK: what precedes its PSN is acknowledged and the WQE at
    /// the PSN completes in error, moving the QP to ERR (§9.7.5.2.5–7).
    Fail(NakCode),
}

/// Classifies an acknowledge of `psn` for a requester whose oldest
/// unacknowledged PSN is `oldest` and whose next PSN is `next`.
pub const fn classify_ack(psn: Psn, oldest: Psn, next: Psn, syndrome: Syndrome) -> AckAction {
    if !ack_in_flight(psn, oldest, next) {
        return AckAction::Ignore;
    }
    match syndrome {
        Syndrome::Ack { .. } => AckAction::Acknowledge,
        Syndrome::RnrNak { timer } => AckAction::RnrWait { timer },
        Syndrome::Nak(NakCode::PsnSequenceError) => AckAction::Resend,
        Syndrome::Nak(code) => AckAction::Fail(code),
    }
}

/// Number of packets in flight from `oldest` (unacknowledged) to `next`.
pub const fn in_flight(oldest: Psn, next: Psn) -> u32 {
    oldest.distance_to(next)
}

/// Whether packet `index` of `count` of a message should ask for an
/// acknowledge: the last packet always does, and a long message does every
/// [`MAX_PKT_PER_ACK`] packets.
pub const fn wants_ack(index: u32, count: u32) -> bool {
    index + 1 == count || (index + 1) % MAX_PKT_PER_ACK == 0
}

/// The local ACK timeout in microseconds for the QP attribute `timeout`
/// (4.096 µs × 2^timeout, IBTA Vol 1 §9.7.6.1.3); `None` for 0, which
/// means no timeout. Values above 31 are treated as 31.
pub const fn local_ack_timeout_usecs(timeout: u8) -> Option<u64> {
    if timeout == 0 {
        return None;
    }
    let t = if timeout > 31 { 31 } else { timeout };
    // 4.096 µs = 4096 ns.
    Some((4096u64 << t) / 1000)
}

/// Takes one retry from a 3-bit retry counter (`retry_cnt`, `rnr_retry`):
/// the counter after the retry, or `None` when no retry is left. A counter
/// of 7 never runs down: IBTA gives 7 that meaning for `rnr_retry`
/// (§9.7.5.2.8), and the C driver for `retry_cnt` as well.
pub const fn take_retry(left: u8) -> Option<u8> {
    if left == 7 {
        Some(7)
    } else if left > 0 {
        Some(left - 1)
    } else {
        None
    }
}

/// The responder's record of executed atomics, ATOMIC WRITEs and FLUSHes
/// (IBTA Vol 1 §9.4.5: a duplicate atomic request is answered with the
/// saved result, never executed again), one entry per PSN modulo
/// [`ATOMIC_REPLIES`]. A requester keeps at most [`MAX_UNACKED_PSNS`] PSNs
/// in flight, so the request a duplicate repeats is never older than that
/// many PSNs, however many of them are atomics (rxe and rrxe grant 128
/// outstanding).
///
/// The entries are storage `S` the owner provides (a slice behind a heap
/// vector in the kernel): kept in the QP's state by value, the 2 KiB table
/// was built and copied on the stack, and those frames overflowed the
/// 16 KiB kernel stack of the `rdma link add` that creates the GSI QP.
pub struct AtomicReplies<S> {
    entries: S,
}

/// Entries of an [`AtomicReplies`]: one per PSN a requester may have in
/// flight.
pub const ATOMIC_REPLIES: usize = MAX_UNACKED_PSNS as usize;

impl<S: DerefMut<Target = [Option<(Psn, u64)>]>> AtomicReplies<S> {
    /// A record kept in `entries` ([`ATOMIC_REPLIES`] of them), which it
    /// clears.
    pub fn new(entries: S) -> Self {
        let mut r = AtomicReplies { entries };
        r.clear();
        r
    }

    fn slot(&self, psn: Psn) -> usize {
        // CAST: a 24-bit PSN fits in usize.
        psn.get() as usize % self.entries.len().max(1)
    }

    /// Saves the original value `orig` of the atomic at `psn`.
    pub fn record(&mut self, psn: Psn, orig: u64) {
        let i = self.slot(psn);
        if let Some(e) = self.entries.get_mut(i) {
            *e = Some((psn, orig));
        }
    }

    /// The original value saved for the atomic at `psn`, if it is still
    /// kept.
    pub fn find(&self, psn: Psn) -> Option<u64> {
        match self.entries.get(self.slot(psn)) {
            Some(Some((p, orig))) if *p == psn => Some(*orig),
            _ => None,
        }
    }

    /// Forgets every atomic, in place.
    pub fn clear(&mut self) {
        self.entries.iter_mut().for_each(|e| *e = None);
    }
}

/// Most READs and atomics a QP may have outstanding, the device's
/// `max_qp_rd_atom` (as the C driver's `RXE_MAX_QP_RD_ATOM`): the largest
/// `max_rd_atomic`, and the largest `max_dest_rd_atomic` once rounded
/// ([`super::qp_check::round_rd_atomic`]).
pub const MAX_QP_RD_ATOM: u32 = 128;

/// READs the responder remembers for duplicates: as many as a requester
/// may have outstanding, [`MAX_QP_RD_ATOM`] (the C driver keeps
/// `max_dest_rd_atomic` of them, `qp->resp.resources`). With fewer, a
/// duplicate of a READ that was still outstanding could be forgotten and
/// dropped, and its requester retry until it gives up (RETRY_EXC_ERR).
pub const READ_HISTORY: usize = MAX_QP_RD_ATOM as usize;

/// An RDMA READ being answered (IBTA Vol 1 §9.7.4.1.6): the memory was
/// checked when the request was accepted, and the responses go out a batch
/// at a time, as the QP's transmit credit allows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ReadStream {
    /// PSN of the request, which the first response takes.
    pub psn: Psn,
    /// Remote address from the request's RETH.
    pub va: u64,
    /// R_Key from the request's RETH.
    pub rkey: u32,
    /// DMA length from the request's RETH.
    pub len: u32,
    /// Index of the next response packet to build.
    pub next: u32,
    /// Number of response packets.
    pub count: u32,
    /// MSN of the responses' AETH.
    pub msn: u32,
    /// Path MTU of the responses, fixed when the READ is accepted: a
    /// repeated READ is answered with the same packets.
    pub mtu: PathMtu,
}

/// The READs a responder accepted last, by arrival (a ring of
/// [`READ_HISTORY`]), so that a duplicate one is answered as a
/// continuation of the original's responses.
///
/// The ring is storage `S` the owner provides (a slice behind a heap
/// vector in the kernel), as for [`AtomicReplies`]: 128 entries of 40
/// bytes are too many for a stack frame.
pub struct ReadHistory<S> {
    reads: S,
    /// Where the next accepted READ goes.
    next: usize,
}

impl<S: DerefMut<Target = [Option<ReadStream>]>> ReadHistory<S> {
    /// A history kept in `reads` ([`READ_HISTORY`] of them), which it
    /// clears.
    pub fn new(reads: S) -> Self {
        let mut h = ReadHistory { reads, next: 0 };
        h.clear();
        h
    }

    /// Forgets every READ, in place (no copy of the table on the stack).
    pub fn clear(&mut self) {
        self.reads.iter_mut().for_each(|r| *r = None);
        self.next = 0;
    }

    /// Remembers the READ accepted with `r`, forgetting the oldest.
    pub fn record(&mut self, r: ReadStream) {
        if let Some(slot) = self.reads.get_mut(self.next) {
            *slot = Some(r);
        }
        self.next = (self.next + 1) % self.reads.len().max(1);
    }

    /// The remembered READ whose responses include `psn` (a zero-length
    /// READ has one response).
    pub fn find(&self, psn: Psn) -> Option<ReadStream> {
        self.reads
            .iter()
            .flatten()
            .find(|r| !psn.before(r.psn) && r.psn.distance_to(psn) < r.count.max(1))
            .copied()
    }

    /// How the duplicate READ request at `psn` for `reth` is answered at a
    /// path MTU of `mtu` bytes (IBTA Vol 1 §9.7.5.1.2), as the C driver
    /// does: with the remembered original's responses from `psn` on (a
    /// READ asked again from its middle gets middle and last responses),
    /// if the request names the rest of the original's range. `None` drops
    /// it: a READ not remembered, or not naming that range, is not run
    /// again (§9.9.3, class D), since a new READ would skip the QP's
    /// access, sequence and length checks; the requester times out.
    pub fn replay(&self, psn: Psn, reth: &Reth) -> Option<ReadStream> {
        let orig = self.find(psn)?;
        let next = orig.psn.distance_to(psn);
        let offset = next.saturating_mul(orig.mtu.bytes()).min(orig.len);
        let same = reth.rkey == orig.rkey
            && reth.va == orig.va.wrapping_add(u64::from(offset))
            && reth.dma_len == orig.len - offset;
        if same {
            Some(ReadStream { next, ..orig })
        } else {
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::opcode::Opcode;

    fn info(op: Opcode) -> &'static OpcodeInfo {
        op.info().unwrap()
    }

    #[test]
    fn op_sequence() {
        let n = InProgress::None;
        assert_eq!(
            check_op_sequence(n, info(Opcode::RC_SEND_FIRST)),
            Ok(InProgress::Send)
        );
        assert_eq!(
            check_op_sequence(InProgress::Send, info(Opcode::RC_SEND_MIDDLE)),
            Ok(InProgress::Send)
        );
        assert_eq!(
            check_op_sequence(InProgress::Send, info(Opcode::RC_SEND_LAST_WITH_IMMEDIATE)),
            Ok(n)
        );
        assert_eq!(check_op_sequence(n, info(Opcode::RC_SEND_ONLY)), Ok(n));
        // Continuations need a message in progress of the same operation.
        assert_eq!(check_op_sequence(n, info(Opcode::RC_SEND_MIDDLE)), Err(()));
        assert_eq!(
            check_op_sequence(n, info(Opcode::RC_RDMA_WRITE_LAST)),
            Err(())
        );
        assert_eq!(
            check_op_sequence(InProgress::Write, info(Opcode::RC_SEND_LAST)),
            Err(())
        );
        // A new message may not start inside another.
        assert_eq!(
            check_op_sequence(InProgress::Send, info(Opcode::RC_SEND_ONLY)),
            Err(())
        );
        assert_eq!(
            check_op_sequence(InProgress::Write, info(Opcode::RC_RDMA_WRITE_FIRST)),
            Err(())
        );
        assert_eq!(
            check_op_sequence(InProgress::Write, info(Opcode::RC_RDMA_READ_REQUEST)),
            Err(())
        );
        assert_eq!(
            check_op_sequence(n, info(Opcode::RC_RDMA_READ_REQUEST)),
            Ok(n)
        );
    }

    #[test]
    fn payload_lengths() {
        assert!(payload_len_ok(Position::Only, 0, 1024));
        assert!(payload_len_ok(Position::Only, 1024, 1024));
        assert!(!payload_len_ok(Position::Only, 1025, 1024));
        assert!(payload_len_ok(Position::First, 1024, 1024));
        assert!(!payload_len_ok(Position::First, 1020, 1024));
        assert!(!payload_len_ok(Position::Middle, 2048, 1024));
        assert!(!payload_len_ok(Position::Last, 0, 1024));
        assert!(payload_len_ok(Position::Last, 1, 1024));
        assert!(!payload_len_ok(Position::Last, 1025, 1024));
    }

    #[test]
    fn message_mtu_follows_the_first_packet() {
        use Position::{First, Last, Middle, Only};
        // As payload_len_ok at the QP's path MTU.
        for (pos, len) in [
            (Only, 0),
            (Only, 1024),
            (First, 1024),
            (Middle, 1024),
            (Last, 1),
        ] {
            assert_eq!(message_mtu(pos, len, 1024, 1024), Some(1024));
        }
        for (pos, len) in [
            (Only, 1025),
            (First, 1020),
            (First, 2048),
            (Middle, 2048),
            (Last, 0),
        ] {
            assert_eq!(message_mtu(pos, len, 1024, 1024), None);
        }
        // A QP at 4096 whose ends may have moved to a lower MTU: a message
        // begun at any path MTU up to 4096 keeps it.
        for mtu in [256, 512, 1024, 2048, 4096] {
            assert_eq!(message_mtu(First, mtu, 4096, 0), Some(mtu));
            assert_eq!(message_mtu(Middle, mtu, 4096, mtu), Some(mtu));
            assert_eq!(message_mtu(Last, mtu, 4096, mtu), Some(mtu));
            assert_eq!(message_mtu(Last, mtu + 1, 4096, mtu), None);
        }
        assert_eq!(message_mtu(Middle, 1024, 4096, 4096), None);
        assert_eq!(message_mtu(Middle, 4096, 4096, 1024), None);
        assert_eq!(message_mtu(Only, 4096, 4096, 1024), Some(4096));
        assert_eq!(message_mtu(Only, 4097, 4096, 1024), None);
        // Not a path MTU, or above the QP's.
        for len in [0, 128, 255, 1000, 1536, 3072, 8192] {
            assert_eq!(message_mtu(First, len, 4096, 0), None);
        }
        assert_eq!(message_mtu(First, 4096, 2048, 0), None);
    }

    #[test]
    fn message_lengths() {
        // C9-94: 2^31 is the largest DMA length; one byte more is refused.
        assert!(dma_len_ok(0));
        assert!(dma_len_ok(MAX_MSG_LEN));
        assert!(!dma_len_ok(MAX_MSG_LEN + 1));
        assert!(!dma_len_ok(u32::MAX));
        assert_eq!(message_len_after(0, 1024), Some(1024));
        assert_eq!(
            message_len_after(MAX_MSG_LEN - 1024, 1024),
            Some(MAX_MSG_LEN)
        );
        assert_eq!(message_len_after(MAX_MSG_LEN - 1023, 1024), None);
        // A SEND stream past 4 GiB fails instead of wrapping the offset.
        assert_eq!(message_len_after(u32::MAX - 100, 1024), None);
        // The longest READ at the smallest MTU spans less than half the PSN
        // space, so its responses never wrap onto the requests before it.
        let span = crate::segment::packet_count(MAX_MSG_LEN, crate::segment::PathMtu::Mtu256);
        assert_eq!(span, 1 << 23);
        assert!(span <= Psn::MASK / 2 + 1);
        assert!(
            crate::segment::packet_count(MAX_MSG_LEN + 1, crate::segment::PathMtu::Mtu256) > span
        );
    }

    #[test]
    fn reth_checks() {
        use crate::access::range_within;
        use core::cell::Cell;
        // An MR of 4 GiB + 4 KiB at 0x1000; `calls` counts range checks.
        let calls = Cell::new(0);
        let check = |va: u64, len: u32| {
            check_reth(len, || {
                calls.set(calls.get() + 1);
                range_within(0x1000, (1 << 32) + 0x1000, va, u64::from(len))
            })
        };
        assert_eq!(check(0x1000, 1), Ok(()));
        assert_eq!(check(0x1000, 1 << 31), Ok(()));
        assert_eq!(calls.get(), 2);
        // C9-94: one byte over 2^31 is an Invalid Request although the MR
        // holds it, before the key is looked at. Before 15d6b60 a WRITE
        // took it and a READ checked only the range: both Ok here.
        assert_eq!(check(0x1000, (1 << 31) + 1), Err(NakCode::InvalidRequest));
        assert_eq!(check(0x1000, u32::MAX), Err(NakCode::InvalidRequest));
        assert_eq!(calls.get(), 2);
        // The whole range, at the MR's end: the last 8 bytes, and a WRITE
        // of 8 KiB whose first packet (1 KiB) would fit but whose message
        // does not. Before 15d6b60 a WRITE's first packet checked only its
        // own bytes, so this was Ok and 1 KiB was placed.
        let end = 0x1000 + (1u64 << 32) + 0x1000;
        assert_eq!(check(end - 8, 8), Ok(()));
        assert_eq!(check(end - 1024, 8192), Err(NakCode::RemoteAccessError));
        assert_eq!(check(end, 1), Err(NakCode::RemoteAccessError));
        assert_eq!(check(0xfff, 2), Err(NakCode::RemoteAccessError));
        // va + len past 2^64.
        assert_eq!(check(u64::MAX - 3, 8), Err(NakCode::RemoteAccessError));
        assert_eq!(calls.get(), 7);
        // Length 0 (C9-88): no key or range check, wherever it points.
        assert_eq!(check(u64::MAX, 0), Ok(()));
        assert_eq!(check(0, 0), Ok(()));
        assert_eq!(calls.get(), 7);
    }

    #[test]
    fn acks_in_flight() {
        let o = Psn::new(Psn::MASK - 1);
        let next = o.add(4);
        assert!(ack_in_flight(o, o, next));
        assert!(ack_in_flight(Psn::new(1), o, next));
        assert!(!ack_in_flight(next, o, next));
        assert!(!ack_in_flight(o.sub(1), o, next));
        assert!(!ack_in_flight(o, o, o));
        assert_eq!(in_flight(o, next), 4);
    }

    #[test]
    fn ack_requests() {
        assert!(wants_ack(0, 1));
        assert!(!wants_ack(0, 2));
        assert!(wants_ack(1, 2));
        assert!(wants_ack(MAX_PKT_PER_ACK - 1, 1000));
        assert!(!wants_ack(MAX_PKT_PER_ACK, 1000));
        assert!(wants_ack(999, 1000));
    }

    #[test]
    fn timeouts() {
        assert_eq!(local_ack_timeout_usecs(0), None);
        // ibv_rc_pingpong's 14: 4.096 µs × 16384 = 67.1 ms.
        assert_eq!(local_ack_timeout_usecs(14), Some(67_108));
        assert_eq!(local_ack_timeout_usecs(1), Some(8));
        assert_eq!(local_ack_timeout_usecs(40), local_ack_timeout_usecs(31));
        assert_eq!(take_retry(1), Some(0));
        assert_eq!(take_retry(6), Some(5));
        assert_eq!(take_retry(0), None);
        assert_eq!(take_retry(7), Some(7));
    }

    #[test]
    fn atomic_replies_by_psn() {
        let mut r = AtomicReplies::new(vec![Some((Psn::new(5), 5)); ATOMIC_REPLIES]);
        let p = Psn::new(0x00ff_fff0);
        // New, it holds nothing, whatever its storage held.
        assert_eq!(r.find(Psn::new(5)), None);
        assert_eq!(r.find(p), None);
        r.record(p, 7);
        assert_eq!(r.find(p), Some(7));
        // A PSN sharing the slot is not mistaken for it.
        assert_eq!(r.find(p.add(MAX_UNACKED_PSNS)), None);
        // Across the 24-bit wrap, each of a window of PSNs keeps its own
        // value: a requester with all of its 128 PSNs in flight atomics
        // finds every one again.
        for i in 0..MAX_UNACKED_PSNS {
            r.record(p.add(i), u64::from(i) << 32);
        }
        for i in 0..MAX_UNACKED_PSNS {
            assert_eq!(r.find(p.add(i)), Some(u64::from(i) << 32));
        }
        // A window later, the old entries are gone.
        r.record(p.add(MAX_UNACKED_PSNS), 1);
        assert_eq!(r.find(p), None);
        assert_eq!(r.find(p.add(MAX_UNACKED_PSNS)), Some(1));
        // Cleared, nothing is found.
        r.clear();
        assert_eq!(r.find(p.add(MAX_UNACKED_PSNS)), None);
        assert_eq!(r.find(p.add(1)), None);
    }

    fn read_at(psn: u32, len: u32, msn: u32) -> ReadStream {
        ReadStream {
            psn: Psn::new(psn),
            va: 0x7f00_0000_1000,
            rkey: 0x0012_3456,
            len,
            next: 0,
            count: crate::segment::packet_count(len, PathMtu::Mtu1024),
            msn,
            mtu: PathMtu::Mtu1024,
        }
    }

    /// A history in storage that held stale READs, as the kernel's does
    /// after the QP's last reset.
    fn history() -> ReadHistory<Vec<Option<ReadStream>>> {
        ReadHistory::new(vec![Some(read_at(7, 8, 1)); READ_HISTORY])
    }

    fn reth(va: u64, rkey: u32, dma_len: u32) -> Reth {
        Reth { va, rkey, dma_len }
    }

    #[test]
    fn duplicate_reads() {
        let mut h = history();
        let orig = read_at(Psn::MASK - 1, 4096, 5);
        let (va, rkey) = (orig.va, orig.rkey);
        // Not remembered: dropped. Before 15d6b60 this READ was run as a
        // new one (responses from its PSN, MSN + 1) without the QP's
        // access, sequence or length checks.
        assert_eq!(h.replay(orig.psn, &reth(va, rkey, 4096)), None);
        h.record(orig);
        assert_eq!(orig.count, 4);
        // Remembered, asked again whole: all four responses.
        assert_eq!(h.replay(orig.psn, &reth(va, rkey, 4096)), Some(orig));
        // Asked again from its 2nd and (across the PSN wrap) 4th response.
        assert_eq!(
            h.replay(Psn::new(Psn::MASK), &reth(va + 1024, rkey, 3072)),
            Some(ReadStream { next: 1, ..orig })
        );
        assert_eq!(
            h.replay(Psn::new(1), &reth(va + 3072, rkey, 1024)),
            Some(ReadStream { next: 3, ..orig })
        );
        // Just outside its PSNs, on either side.
        assert_eq!(h.find(Psn::new(2)), None);
        assert_eq!(h.find(Psn::new(Psn::MASK - 2)), None);
        assert_eq!(h.replay(Psn::new(2), &reth(va + 4096, rkey, 0)), None);
        // A request that does not name the rest of the original's range.
        assert_eq!(h.replay(Psn::new(0), &reth(va, rkey, 4096)), None);
        assert_eq!(
            h.replay(Psn::new(0), &reth(va + 2048, rkey + 1, 2048)),
            None
        );
        assert_eq!(h.replay(Psn::new(0), &reth(va + 2048, rkey, 2049)), None);
        // A zero-length READ has one response to repeat.
        let empty = read_at(100, 0, 6);
        h.record(empty);
        assert_eq!(h.replay(Psn::new(100), &reth(va, rkey, 0)), Some(empty));
        assert_eq!(h.find(Psn::new(101)), None);
    }

    #[test]
    fn duplicate_read_keeps_its_mtu() {
        // Accepted at 4096; the MTU since dropped to 1024. The repeat from
        // its 2nd PSN is the rest of the original's packets, at 4096.
        let mut h = history();
        let orig = ReadStream {
            count: 4,
            mtu: PathMtu::Mtu4096,
            ..read_at(10, 16384, 1)
        };
        h.record(orig);
        let (va, rkey) = (orig.va, orig.rkey);
        assert_eq!(
            h.replay(Psn::new(11), &reth(va + 4096, rkey, 12288)),
            Some(ReadStream { next: 1, ..orig })
        );
        assert_eq!(h.replay(Psn::new(11), &reth(va + 1024, rkey, 15360)), None);
    }

    #[test]
    fn read_history_forgets_the_oldest() {
        let mut h = history();
        // READ_HISTORY single-packet READs, then one more.
        for i in 0..=READ_HISTORY as u32 {
            h.record(read_at(1000 + i, 8, i));
        }
        let r = |psn: u32| h.replay(Psn::new(psn), &reth(0x7f00_0000_1000, 0x0012_3456, 8));
        assert_eq!(r(1000), None);
        assert_eq!(r(1001), Some(read_at(1001, 8, 1)));
        assert_eq!(
            r(1000 + READ_HISTORY as u32),
            Some(read_at(1000 + READ_HISTORY as u32, 8, READ_HISTORY as u32))
        );
    }

    #[test]
    fn read_history_holds_max_dest_rd_atomic() {
        // A requester with the most READs a QP may have outstanding
        // (max_dest_rd_atomic of 128) gets its oldest answered again; a
        // 16-entry ring dropped it, and the requester ended in
        // RETRY_EXC_ERR.
        let mut h = history();
        assert_eq!(h.find(Psn::new(7)), None);
        let first = Psn::MASK - 9;
        for i in 0..MAX_QP_RD_ATOM {
            h.record(read_at((first + i) & Psn::MASK, 8, i));
        }
        let (va, rkey) = (0x7f00_0000_1000, 0x0012_3456);
        for i in 0..MAX_QP_RD_ATOM {
            let psn = (first + i) & Psn::MASK;
            assert_eq!(
                h.replay(Psn::new(psn), &reth(va, rkey, 8)),
                Some(read_at(psn, 8, i))
            );
        }
        // One more forgets the oldest only.
        h.record(read_at(
            first.wrapping_add(MAX_QP_RD_ATOM) & Psn::MASK,
            8,
            0,
        ));
        assert_eq!(h.find(Psn::new(first)), None);
        assert!(h.find(Psn::new(first + 1)).is_some());
    }

    #[test]
    fn request_psns() {
        let epsn = Psn::new(100);
        let mut nak = false;
        assert_eq!(
            classify_request_psn(Psn::new(100), epsn, &mut nak),
            RequestPsn::Execute
        );
        assert!(!nak);
        // Duplicates, up to 2^23 back, across the 24-bit wrap too.
        assert_eq!(
            classify_request_psn(Psn::new(99), epsn, &mut nak),
            RequestPsn::Duplicate
        );
        let far = Psn::new(100).sub(1 << 23);
        assert_eq!(
            classify_request_psn(far, epsn, &mut nak),
            RequestPsn::Duplicate
        );
        let wrapped = Psn::new(3);
        assert_eq!(
            classify_request_psn(Psn::new(0xff_fffe), wrapped, &mut nak),
            RequestPsn::Duplicate
        );
        assert!(!nak);
        // One NAK per gap: the first packet past it, then drops.
        assert_eq!(
            classify_request_psn(Psn::new(102), epsn, &mut nak),
            RequestPsn::SequenceNak
        );
        assert!(nak);
        assert_eq!(
            classify_request_psn(Psn::new(103), epsn, &mut nak),
            RequestPsn::Drop
        );
        assert_eq!(
            classify_request_psn(Psn::new(101), epsn, &mut nak),
            RequestPsn::Drop
        );
        // A duplicate does not end the NAK; the expected PSN does.
        assert_eq!(
            classify_request_psn(Psn::new(98), epsn, &mut nak),
            RequestPsn::Duplicate
        );
        assert!(nak);
        assert_eq!(
            classify_request_psn(Psn::new(100), epsn, &mut nak),
            RequestPsn::Execute
        );
        assert!(!nak);
        // A new gap gets its own NAK.
        let epsn = Psn::new(101);
        assert_eq!(
            classify_request_psn(Psn::new(105), epsn, &mut nak),
            RequestPsn::SequenceNak
        );
        // Ahead by up to 2^23 - 1 is a gap, past the wrap as well.
        let mut nak = false;
        let ahead = Psn::new(0xff_fffe).add((1 << 23) - 1);
        assert_eq!(
            classify_request_psn(ahead, Psn::new(0xff_fffe), &mut nak),
            RequestPsn::SequenceNak
        );
    }

    #[test]
    fn acknowledges() {
        let (oldest, next) = (Psn::new(0xff_fff0), Psn::new(0x10));
        let ack = Syndrome::Ack { credits: 31 };
        let nak = |c| Syndrome::Nak(c);
        // In flight: [oldest, next), across the wrap.
        for p in [0xff_fff0, 0xff_ffff, 0, 0xf] {
            assert_eq!(
                classify_ack(Psn::new(p), oldest, next, ack),
                AckAction::Acknowledge
            );
        }
        // Stale (already acknowledged) or not sent yet: ignored, whatever
        // the syndrome (C9-114: a duplicate ACK is discarded).
        for p in [0xff_ffef, 0x10, 0x7f_0000] {
            let p = Psn::new(p);
            assert_eq!(classify_ack(p, oldest, next, ack), AckAction::Ignore);
            let fatal = nak(NakCode::RemoteAccessError);
            assert_eq!(classify_ack(p, oldest, next, fatal), AckAction::Ignore);
        }
        // Nothing in flight: every acknowledge is stale.
        assert_eq!(classify_ack(next, next, next, ack), AckAction::Ignore);
        let p = Psn::new(5);
        assert_eq!(
            classify_ack(p, oldest, next, Syndrome::RnrNak { timer: 14 }),
            AckAction::RnrWait { timer: 14 }
        );
        assert_eq!(
            classify_ack(p, oldest, next, nak(NakCode::PsnSequenceError)),
            AckAction::Resend
        );
        for code in [
            NakCode::InvalidRequest,
            NakCode::RemoteAccessError,
            NakCode::RemoteOperationalError,
            NakCode::InvalidRdRequest,
        ] {
            assert_eq!(
                classify_ack(p, oldest, next, nak(code)),
                AckAction::Fail(code)
            );
        }
    }
}
