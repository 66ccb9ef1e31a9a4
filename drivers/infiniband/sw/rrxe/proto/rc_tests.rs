// SPDX-License-Identifier: GPL-2.0

//! The responder's rules ([`super`]): PSN classification, opcode
//! sequence, RETH checks, duplicate READs and atomics, ACK cadence and
//! timers, one case per rule.

#![forbid(unsafe_code)]

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
    assert!(crate::segment::packet_count(MAX_MSG_LEN + 1, crate::segment::PathMtu::Mtu256) > span);
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
fn read_history_finds_the_newest() {
    // An old READ of 64 KiB (64 responses from PSN 100), still kept, and
    // a new 8-byte one at PSN 130 after a PSN wrap: both "cover" 130. The
    // duplicate of the new one is answered from the new one; found in
    // slot order, the old one was compared, did not match, and the
    // duplicate was dropped at every retry.
    let mut h = history();
    h.record(read_at(100, 65536, 1));
    h.record(read_at(130, 8, 2));
    let (va, rkey) = (0x7f00_0000_1000, 0x0012_3456);
    assert_eq!(h.find(Psn::new(130)), Some(read_at(130, 8, 2)));
    assert_eq!(
        h.replay(Psn::new(130), &reth(va, rkey, 8)),
        Some(read_at(130, 8, 2))
    );
    assert_eq!(h.find(Psn::new(129)).map(|r| r.msn), Some(1));
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
