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
/// local ACK timer without waiting for the last packet. The C driver asks
/// about every 64 (`RXE_MAX_PKT_PER_ACK`: every 66th packet, counted
/// across messages), and so does rrxe: each ACK costs both sides a packet.
/// rrxe asked every 16 until 2026-12-07, because a timer armed at a long
/// message's first packet could expire before its 64th was even sent (a
/// 4.2 ms timeout, and the debug kernel's loopback sending slowly); the
/// timeout now counts from the last packet sent
/// ([`super::ack::timer_fired`]). Any 64 consecutive PSNs hold
/// an AckReq, so the [`MAX_UNACKED_PSNS`] window always has one
/// outstanding.
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
    /// READ has one response), the newest if several do: an old entry
    /// kept across a PSN wrap may cover the PSN of a new READ too.
    pub fn find(&self, psn: Psn) -> Option<ReadStream> {
        let n = self.reads.len();
        (1..=n)
            .filter_map(|back| self.reads.get((self.next + n - back) % n))
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
#[path = "rc_tests.rs"]
mod tests;
