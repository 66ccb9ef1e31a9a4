// SPDX-License-Identifier: GPL-2.0

//! The completer's rules ([`super`]) driven over a send queue of WQEs
//! given by their PSN ranges, with every effect logged.

#![forbid(unsafe_code)]

use super::*;
use crate::proto::aeth::CREDITS_UNLIMITED;
use std::collections::VecDeque;
use std::vec::Vec;

/// What the machine asked for, in order.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Fx {
    /// The WQE starting at this PSN completed successfully.
    Completed(u32),
    SetPosition(u32),
    Retransmit(u32, Retransmit),
    Nak(u32),
    Arm(Timer, u64),
    Cancel(Timer),
    Count(Event),
    /// The oldest WQE (starting at this PSN) failed.
    Failed(u32, Failure),
}

#[derive(Clone, Copy)]
struct Wqe {
    first: Psn,
    last: Psn,
    rd_atomic: bool,
}

struct Qp {
    win: Window,
    limits: Limits,
    /// Started WQEs, oldest first.
    sq: VecDeque<Wqe>,
    position: Psn,
    /// The clock [`Effects::now`] reads.
    now: u64,
    /// What [`Effects::queued`] answers.
    queued: bool,
    log: Vec<Fx>,
}

impl Effects for Qp {
    fn window(&mut self) -> &mut Window {
        &mut self.win
    }
    fn limits(&self) -> Limits {
        self.limits
    }
    fn now(&self) -> u64 {
        self.now
    }
    fn queued(&self) -> bool {
        self.queued
    }
    fn retire(&mut self, upto: Psn) -> bool {
        let mut any = false;
        while let Some(w) = self.sq.front().copied() {
            if w.last.after(upto) || w.rd_atomic {
                break;
            }
            self.sq.pop_front();
            self.log.push(Fx::Completed(w.first.get()));
            any = true;
        }
        any
    }
    fn oldest_rd_atomic(&mut self) -> Option<Psn> {
        self.sq.front().filter(|w| w.rd_atomic).map(|w| w.first)
    }
    fn position(&mut self) -> Psn {
        self.position
    }
    fn set_position(&mut self, psn: Psn) {
        self.position = psn;
        self.log.push(Fx::SetPosition(psn.get()));
    }
    fn retransmit(&mut self, from: Psn, why: Retransmit) {
        self.log.push(Fx::Retransmit(from.get(), why));
    }
    fn nak(&mut self, psn: Psn) {
        self.log.push(Fx::Nak(psn.get()));
    }
    fn arm(&mut self, timer: Timer, usecs: u64) {
        self.log.push(Fx::Arm(timer, usecs));
    }
    fn cancel(&mut self, timer: Timer) {
        self.log.push(Fx::Cancel(timer));
    }
    fn count(&mut self, event: Event) {
        self.log.push(Fx::Count(event));
    }
    fn fail_head(&mut self, why: Failure) {
        let first = self.sq.pop_front().map_or(u32::MAX, |w| w.first.get());
        self.log.push(Fx::Failed(first, why));
    }
}

/// Local ACK timeout code 14: 4.096 µs × 2^14 = 67.1 ms.
const TIMEOUT: u8 = 14;
const TIMEOUT_USECS: u64 = 67_108;

fn psn(v: u32) -> Psn {
    Psn::new(v)
}

/// A QP that sent `wqes` (first and last PSN; `true`: a READ or an atomic)
/// back to back from the first one's PSN, every packet in flight, with
/// `retry_cnt` 3 and `rnr_retry` 2 fresh, the last packet sent one local
/// ACK timeout ago.
fn qp(wqes: &[(u32, u32, bool)]) -> Qp {
    let start = psn(wqes.first().map_or(0, |w| w.0));
    let end = psn(wqes.last().map_or(0, |w| w.1)).next();
    let limits = Limits {
        retry_cnt: 3,
        rnr_retry: 2,
        timeout: TIMEOUT,
    };
    Qp {
        win: Window {
            comp_psn: start,
            sent_end: end,
            retry_left: limits.retry_cnt,
            rnr_left: limits.rnr_retry,
            timer_armed: true,
            ..Window::default()
        },
        limits,
        sq: wqes
            .iter()
            .map(|&(f, l, rd_atomic)| Wqe {
                first: psn(f),
                last: psn(l),
                rd_atomic,
            })
            .collect(),
        position: end,
        now: TIMEOUT_USECS,
        queued: false,
        log: Vec::new(),
    }
}

const ACK: Syndrome = Syndrome::Ack {
    credits: CREDITS_UNLIMITED,
};

fn take(q: &mut Qp) -> Vec<Fx> {
    core::mem::take(&mut q.log)
}

#[test]
fn ack_outside_the_window_is_ignored() {
    // C9-114: a duplicate acknowledge changes nothing; nor does one for a
    // PSN never sent.
    for p in [9, 20, 21, 0x80_0000] {
        for s in [
            ACK,
            Syndrome::RnrNak { timer: 1 },
            Syndrome::Nak(NakCode::InvalidRequest),
        ] {
            let mut q = qp(&[(10, 12, false), (13, 19, false)]);
            let before = q.win;
            assert_eq!(acknowledge(&mut q, psn(p), s), Then::Stop, "psn {p} {s:?}");
            assert_eq!(q.win, before);
            assert_eq!(q.sq.len(), 2);
            assert!(q.log.is_empty(), "{:?}", q.log);
        }
    }
}

#[test]
fn ack_retires_what_it_covers_and_keeps_the_timer_for_the_rest() {
    // §9.7.5.2.1: an ACK acknowledges every packet up to its PSN; the
    // retransmit timer goes on while packets are in flight (§9.7.6.1.3).
    let mut q = qp(&[(10, 12, false), (13, 15, false), (16, 19, false)]);
    q.win.retry_left = 1;
    q.win.rnr_left = 0;
    assert_eq!(acknowledge(&mut q, psn(15), ACK), Then::RunRequester);
    assert_eq!(
        take(&mut q),
        [
            Fx::Completed(10),
            Fx::Completed(13),
            Fx::Arm(Timer::Retransmit, TIMEOUT_USECS)
        ]
    );
    assert_eq!(q.win.comp_psn, psn(16));
    // Progress gives back the full retry counts.
    assert_eq!((q.win.retry_left, q.win.rnr_left), (3, 2));
    assert!(q.win.timer_armed);
}

#[test]
fn ack_inside_a_message_retires_nothing_but_moves_the_window() {
    let mut q = qp(&[(10, 19, false)]);
    q.win.retry_left = 0;
    assert_eq!(acknowledge(&mut q, psn(14), ACK), Then::RunRequester);
    assert_eq!(take(&mut q), [Fx::Arm(Timer::Retransmit, TIMEOUT_USECS)]);
    assert_eq!(q.win.comp_psn, psn(15));
    assert_eq!(q.win.retry_left, 3);
}

#[test]
fn ack_of_everything_stops_the_timer() {
    let mut q = qp(&[(10, 12, false)]);
    assert_eq!(acknowledge(&mut q, psn(12), ACK), Then::RunRequester);
    assert_eq!(
        take(&mut q),
        [Fx::Completed(10), Fx::Cancel(Timer::Retransmit)]
    );
    assert!(!q.win.timer_armed);
    assert_eq!(q.win.comp_psn, q.win.sent_end);
}

#[test]
fn ack_moves_a_resend_position_forward_only() {
    // The requester went back to 11 (a resend): an ACK of 14 makes it skip
    // what was acknowledged meanwhile.
    let mut q = qp(&[(10, 19, false)]);
    q.position = psn(11);
    let _ = acknowledge(&mut q, psn(14), ACK);
    assert_eq!(q.position, psn(15));
    assert!(q.log.contains(&Fx::SetPosition(15)));
    // Sending past the ACK already: the position stays.
    let mut q = qp(&[(10, 19, false)]);
    let _ = acknowledge(&mut q, psn(14), ACK);
    assert_eq!(q.position, psn(20));
    assert!(!q.log.iter().any(|f| matches!(f, Fx::SetPosition(_))));
}

#[test]
fn ack_past_a_read_is_an_implied_nak() {
    // §9.7.5.2.2: an ACK past a READ whose responses did not all come says
    // they were lost: the READ is asked again from its first PSN, and is
    // not completed by the ACK.
    let mut q = qp(&[(10, 10, false), (11, 14, true), (15, 15, false)]);
    assert_eq!(acknowledge(&mut q, psn(15), ACK), Then::RunRequester);
    assert_eq!(
        take(&mut q),
        [
            Fx::Completed(10),
            Fx::Retransmit(11, Retransmit::ImpliedNak),
            Fx::SetPosition(11),
            Fx::Arm(Timer::Retransmit, TIMEOUT_USECS)
        ]
    );
    assert_eq!(q.win.comp_psn, psn(11));
    assert_eq!(q.sq.len(), 2);
    // An ACK of the READ's own first PSN is one too.
    let mut q = qp(&[(10, 10, false), (11, 14, true)]);
    let _ = acknowledge(&mut q, psn(11), ACK);
    assert!(q.log.contains(&Fx::Retransmit(11, Retransmit::ImpliedNak)));
    // Some responses came already: asked again from the first missing one.
    let mut q = qp(&[(11, 14, true), (15, 15, false)]);
    q.win.comp_psn = psn(13);
    let _ = acknowledge(&mut q, psn(15), ACK);
    assert_eq!(
        take(&mut q)[..2],
        [
            Fx::Retransmit(13, Retransmit::ImpliedNak),
            Fx::SetPosition(13)
        ]
    );
}

#[test]
fn ack_before_a_read_is_plain() {
    let mut q = qp(&[(10, 10, false), (11, 14, true)]);
    assert_eq!(acknowledge(&mut q, psn(10), ACK), Then::RunRequester);
    assert_eq!(
        take(&mut q),
        [Fx::Completed(10), Fx::Arm(Timer::Retransmit, TIMEOUT_USECS)]
    );
    assert_eq!(q.win.comp_psn, psn(11));
}

/// An RNR NAK of PSN 11 with `timer` for a QP whose WQE at 10 ends there:
/// the effects after the ones every RNR NAK has (count, trace, the WQE
/// before retired), and the machine stops either way.
fn rnr_nak_at_11(q: &mut Qp, timer: u8) -> Vec<Fx> {
    assert_eq!(
        acknowledge(q, psn(11), Syndrome::RnrNak { timer }),
        Then::Stop
    );
    let log = take(q);
    assert_eq!(
        log[..3],
        [Fx::Count(Event::RnrNak), Fx::Nak(11), Fx::Completed(10)]
    );
    log[3..].to_vec()
}

#[test]
fn rnr_nak_waits_its_timer_and_resends_from_its_psn() {
    // §9.7.5.2.8: what precedes the RNR NAK's PSN is acknowledged; the
    // requester stops, waits the timer the NAK names, and sends again from
    // the PSN, using one of its `rnr_retry`.
    let mut q = qp(&[(10, 10, false), (11, 13, false)]);
    assert_eq!(
        rnr_nak_at_11(&mut q, 14),
        [
            Fx::SetPosition(11),
            Fx::Cancel(Timer::Retransmit),
            // Timer code 14: 1.28 ms (Table 45).
            Fx::Arm(Timer::Rnr, 1280)
        ]
    );
    assert!(q.win.rnr_wait && !q.win.timer_armed);
    assert_eq!(q.win.comp_psn, psn(11));
    assert_eq!(q.win.rnr_left, 1);
    // The retry count is given back (the ACK part was progress), the RNR
    // count is not: the wait is not over.
    assert_eq!(q.win.retry_left, 3);

    // Timer code 0 is the longest wait, 655.36 ms.
    let mut q = qp(&[(10, 13, false)]);
    let _ = acknowledge(&mut q, psn(10), Syndrome::RnrNak { timer: 0 });
    assert!(q.log.contains(&Fx::Arm(Timer::Rnr, 655_360)));
}

#[test]
fn rnr_wait_ends_with_its_timer() {
    let mut q = qp(&[(10, 13, false)]);
    let _ = acknowledge(&mut q, psn(10), Syndrome::RnrNak { timer: 1 });
    take(&mut q);
    // The retransmit timer, stale, does not send during the wait.
    assert_eq!(timer_fired(&mut q, Timer::Retransmit), Then::Stop);
    assert!(take(&mut q).is_empty());
    assert_eq!(q.win.retry_left, 3);
    // An ACK during the wait (for packets before the NAK's) keeps the
    // requester waiting and the RNR count as it is.
    q.win.comp_psn = psn(9);
    q.sq.push_front(Wqe {
        first: psn(9),
        last: psn(9),
        rd_atomic: false,
    });
    assert_eq!(acknowledge(&mut q, psn(9), ACK), Then::Stop);
    assert_eq!(q.win.rnr_left, 1);
    assert!(q.win.rnr_wait);
    take(&mut q);
    assert_eq!(timer_fired(&mut q, Timer::Rnr), Then::RunRequester);
    assert_eq!(take(&mut q), [Fx::Retransmit(10, Retransmit::Rnr)]);
    assert!(!q.win.rnr_wait);
}

#[test]
fn rnr_retry_runs_out() {
    // §9.7.5.2.8: with `rnr_retry` spent the WQE completes with RNR Retry
    // Exceeded (and the QP goes to ERR).
    let mut q = qp(&[(10, 10, false), (11, 13, false)]);
    q.win.rnr_left = 0;
    assert_eq!(
        rnr_nak_at_11(&mut q, 1),
        [
            Fx::Count(Event::RnrRetryExceeded),
            Fx::Failed(11, Failure::RnrRetryExceeded)
        ]
    );
    assert!(!q.win.rnr_wait);
}

#[test]
fn rnr_retry_seven_never_runs_out() {
    // §9.7.5.2.8: an `rnr_retry` of 7 means retry without end.
    let mut q = qp(&[(10, 13, false)]);
    q.limits.rnr_retry = 7;
    q.win.rnr_left = 7;
    for _ in 0..100 {
        let _ = acknowledge(&mut q, psn(10), Syndrome::RnrNak { timer: 1 });
        assert_eq!(q.win.rnr_left, 7);
        assert_eq!(timer_fired(&mut q, Timer::Rnr), Then::RunRequester);
    }
    assert!(!q.log.iter().any(|f| matches!(f, Fx::Failed(..))));
}

#[test]
fn rnr_count_is_given_back_by_an_ack_after_the_wait() {
    let mut q = qp(&[(10, 10, false), (11, 13, false)]);
    let _ = acknowledge(&mut q, psn(10), Syndrome::RnrNak { timer: 1 });
    assert_eq!(q.win.rnr_left, 1);
    let _ = timer_fired(&mut q, Timer::Rnr);
    assert_eq!(acknowledge(&mut q, psn(10), ACK), Then::RunRequester);
    assert_eq!(q.win.rnr_left, 2);
}

#[test]
fn sequence_nak_resends_from_its_psn_without_using_a_retry() {
    // §9.7.5.2.4: what precedes the NAK's PSN is acknowledged and the
    // requester sends again from it.
    let mut q = qp(&[(10, 11, false), (12, 15, false)]);
    q.win.retry_left = 1;
    let then = acknowledge(&mut q, psn(13), Syndrome::Nak(NakCode::PsnSequenceError));
    assert_eq!(then, Then::RunRequester);
    assert_eq!(
        take(&mut q),
        [
            Fx::Count(Event::SequenceNak),
            Fx::Count(Event::Retry),
            Fx::Completed(10),
            Fx::Nak(13),
            Fx::Retransmit(13, Retransmit::SequenceNak),
            Fx::SetPosition(13),
            Fx::Arm(Timer::Retransmit, TIMEOUT_USECS)
        ]
    );
    assert_eq!(q.win.comp_psn, psn(13));
    // A WQE was retired: progress, so the retry count is full again.
    assert_eq!(q.win.retry_left, 3);

    // At the oldest PSN nothing is retired, and the count stays as it is.
    let mut q = qp(&[(10, 15, false)]);
    q.win.retry_left = 1;
    let _ = acknowledge(&mut q, psn(10), Syndrome::Nak(NakCode::PsnSequenceError));
    assert_eq!(q.win.retry_left, 1);
    assert_eq!(q.position, psn(10));
}

#[test]
fn other_naks_fail_the_wqe_at_their_psn() {
    // §9.7.5.2.5–7: what precedes the NAK's PSN is acknowledged; the WQE
    // the PSN belongs to completes in error with the NAK's meaning.
    for code in [
        NakCode::InvalidRequest,
        NakCode::RemoteAccessError,
        NakCode::RemoteOperationalError,
        NakCode::InvalidRdRequest,
    ] {
        let mut q = qp(&[(10, 11, false), (12, 15, false)]);
        assert_eq!(
            acknowledge(&mut q, psn(14), Syndrome::Nak(code)),
            Then::Stop
        );
        assert_eq!(
            take(&mut q),
            [
                Fx::Nak(14),
                Fx::Completed(10),
                Fx::Failed(12, Failure::Nak(code))
            ]
        );
        assert_eq!(q.win.comp_psn, psn(14));
    }
}

#[test]
fn timeout_resends_from_the_oldest_unacknowledged_psn() {
    // §9.7.6.1.3: on the local ACK timeout the requester sends again from
    // the oldest unacknowledged packet, using one retry.
    let mut q = qp(&[(10, 15, false)]);
    q.win.comp_psn = psn(12);
    assert_eq!(timer_fired(&mut q, Timer::Retransmit), Then::RunRequester);
    assert_eq!(
        take(&mut q),
        [
            Fx::Count(Event::Retry),
            Fx::Retransmit(12, Retransmit::Timeout),
            Fx::SetPosition(12)
        ]
    );
    assert_eq!(q.win.retry_left, 2);
    assert!(!q.win.timer_armed);
}

#[test]
fn timeout_counts_from_the_last_packet_sent() {
    // Armed at the message's first packet, the timer fires while its last
    // packets are still being sent: it waits out the timeout from the last
    // one, and spends no retry meanwhile.
    let mut q = qp(&[(10, 73, false)]);
    q.win.sent_at = q.now - 1_000;
    assert_eq!(timer_fired(&mut q, Timer::Retransmit), Then::RunRequester);
    assert_eq!(
        take(&mut q),
        [Fx::Arm(Timer::Retransmit, TIMEOUT_USECS - 1_000)]
    );
    assert!(q.win.timer_armed);
    assert_eq!(q.win.retry_left, 3);
    // Then, with nothing sent and nothing acknowledged, it retries.
    q.now += TIMEOUT_USECS - 1_000;
    assert_eq!(timer_fired(&mut q, Timer::Retransmit), Then::RunRequester);
    assert_eq!(
        take(&mut q),
        [
            Fx::Count(Event::Retry),
            Fx::Retransmit(10, Retransmit::Timeout),
            Fx::SetPosition(10)
        ]
    );
    assert_eq!(q.win.retry_left, 2);
    // A send clock ahead of the timer's (never in the driver) retries
    // rather than waits without end.
    q.win.sent_at = q.now + 1;
    assert_eq!(timer_fired(&mut q, Timer::Retransmit), Then::RunRequester);
    assert_eq!(q.win.retry_left, 1);
}

#[test]
fn timeout_waits_for_packets_still_queued() {
    // Built long ago but not yet handed to the network (the sender's
    // context is late): the timeout starts again, and no retry is spent.
    let mut q = qp(&[(10, 15, false)]);
    q.queued = true;
    assert_eq!(timer_fired(&mut q, Timer::Retransmit), Then::RunRequester);
    assert_eq!(take(&mut q), [Fx::Arm(Timer::Retransmit, TIMEOUT_USECS)]);
    assert_eq!(q.win.retry_left, 3);
    q.queued = false;
    q.now += TIMEOUT_USECS;
    assert_eq!(timer_fired(&mut q, Timer::Retransmit), Then::RunRequester);
    assert_eq!(q.win.retry_left, 2);
}

#[test]
fn waiting_for_sends_ends_four_timeouts_after_arming() {
    // Packets queued or sent all the while (a stuck transmit queue, or an
    // application posting to a dead peer) put the retry off for at most
    // four timeouts from when the timer was armed, then it is spent.
    for queued in [true, false] {
        let mut q = qp(&[(10, 15, false)]);
        q.now = 1_000_000;
        q.win.armed_at = q.now;
        let end = q.now + MAX_TIMEOUTS_PER_RETRY * TIMEOUT_USECS;
        q.now += TIMEOUT_USECS;
        let mut expiries = 0;
        while q.win.retry_left == 3 {
            q.queued = queued;
            // A new packet went out just before each expiry.
            q.win.sent_at = q.now - 10;
            let _ = timer_fired(&mut q, Timer::Retransmit);
            expiries += 1;
            assert!(expiries <= 8, "queued {queued}: no retry after {expiries}");
            if let Some(Fx::Arm(Timer::Retransmit, usecs)) = q.log.last().copied() {
                q.now += usecs;
            }
        }
        assert_eq!(q.now, end, "queued {queued}");
        assert!(q.log.contains(&Fx::Count(Event::Retry)));
    }
}

#[test]
fn retry_cnt_retries_then_the_wqe_fails() {
    // `retry_cnt` 3: three resends, and the fourth timeout fails the WQE
    // with Retry Exceeded.
    let mut q = qp(&[(10, 15, false), (16, 16, false)]);
    for left in [2, 1, 0] {
        assert_eq!(timer_fired(&mut q, Timer::Retransmit), Then::RunRequester);
        assert_eq!(q.win.retry_left, left);
    }
    take(&mut q);
    assert_eq!(timer_fired(&mut q, Timer::Retransmit), Then::Stop);
    assert_eq!(
        take(&mut q),
        [
            Fx::Count(Event::RetryExceeded),
            Fx::Failed(10, Failure::RetryExceeded)
        ]
    );
}

#[test]
fn progress_gives_back_the_retries() {
    let mut q = qp(&[(10, 15, false), (16, 16, false)]);
    let _ = timer_fired(&mut q, Timer::Retransmit);
    let _ = timer_fired(&mut q, Timer::Retransmit);
    assert_eq!(q.win.retry_left, 1);
    let _ = acknowledge(&mut q, psn(15), ACK);
    assert_eq!(q.win.retry_left, 3);
}

#[test]
fn retry_cnt_seven_retries_without_end() {
    // The C driver's reading: 7 retries forever, as for `rnr_retry`.
    let mut q = qp(&[(10, 15, false)]);
    q.win.retry_left = 7;
    for _ in 0..100 {
        assert_eq!(timer_fired(&mut q, Timer::Retransmit), Then::RunRequester);
    }
    assert_eq!(q.win.retry_left, 7);
}

#[test]
fn timeout_with_nothing_in_flight_uses_no_retry() {
    // Armed for a packet that could not be built: the requester tries
    // again, and no retry is spent.
    let mut q = qp(&[(10, 15, false)]);
    q.win.comp_psn = q.win.sent_end;
    q.win.retry_left = 0;
    assert_eq!(timer_fired(&mut q, Timer::Retransmit), Then::RunRequester);
    assert!(take(&mut q).is_empty());
}

#[test]
fn timeout_zero_arms_no_timer() {
    // `timeout` 0: no local ACK timeout (§9.7.6.1.3).
    let mut q = qp(&[(10, 15, false)]);
    q.limits.timeout = 0;
    q.win.timer_armed = false;
    assert_eq!(acknowledge(&mut q, psn(11), ACK), Then::RunRequester);
    assert!(take(&mut q).is_empty());
    assert!(!q.win.timer_armed);
}

#[test]
fn read_responses_in_order_are_placed() {
    let mut q = qp(&[(10, 10, false), (11, 14, true)]);
    q.win.comp_psn = psn(11);
    q.sq.pop_front();
    assert_eq!(read_response(&mut q, psn(11)), Response::Place);
    assert!(take(&mut q).is_empty());
    assert_eq!(response_placed(&mut q, psn(11)), Then::RunRequester);
    assert_eq!(q.win.comp_psn, psn(12));
    assert_eq!(take(&mut q), [Fx::Arm(Timer::Retransmit, TIMEOUT_USECS)]);
}

#[test]
fn read_response_acknowledges_what_precedes_it() {
    // §9.7.5.2.2: a READ response implicitly acknowledges the earlier
    // packets.
    let mut q = qp(&[(9, 10, false), (11, 14, true)]);
    q.win.comp_psn = psn(11);
    assert_eq!(read_response(&mut q, psn(11)), Response::Place);
    assert_eq!(take(&mut q), [Fx::Completed(9)]);
}

#[test]
fn missing_read_response_asks_again_once_per_gap() {
    let mut q = qp(&[(11, 14, true)]);
    // 11 lost, 12 arrives: the READ is asked again from 11.
    assert_eq!(
        read_response(&mut q, psn(12)),
        Response::Skip(Then::RunRequester)
    );
    assert_eq!(
        take(&mut q),
        [
            Fx::Count(Event::Retry),
            Fx::Retransmit(11, Retransmit::ImpliedNak),
            Fx::SetPosition(11)
        ]
    );
    // 13 and 14 of the old stream change nothing more.
    for p in [13, 14] {
        assert_eq!(read_response(&mut q, psn(p)), Response::Skip(Then::Stop));
    }
    assert!(take(&mut q).is_empty());
    // The repeated stream comes in order: the gap is over.
    assert_eq!(read_response(&mut q, psn(11)), Response::Place);
    assert!(!q.win.read_gap);
}

#[test]
fn stale_responses_are_ignored() {
    let mut q = qp(&[(11, 14, true)]);
    q.win.comp_psn = psn(13);
    for p in [10, 12, 15] {
        assert_eq!(read_response(&mut q, psn(p)), Response::Skip(Then::Stop));
        assert_eq!(atomic_ack(&mut q, psn(p)), Response::Skip(Then::Stop));
    }
    assert!(q.log.is_empty());
}

#[test]
fn atomic_ack_acknowledges_what_precedes_it() {
    let mut q = qp(&[(10, 10, false), (11, 11, true)]);
    assert_eq!(atomic_ack(&mut q, psn(11)), Response::Place);
    assert_eq!(take(&mut q), [Fx::Completed(10)]);
    assert_eq!(response_placed(&mut q, psn(11)), Then::RunRequester);
    assert_eq!(take(&mut q), [Fx::Cancel(Timer::Retransmit)]);
}

#[test]
fn the_window_wraps_at_two_to_the_24() {
    let mut q = qp(&[(0xff_fffe, 0xff_ffff, false), (0, 2, false)]);
    q.win.sent_end = psn(3);
    assert_eq!(acknowledge(&mut q, psn(0), ACK), Then::RunRequester);
    assert_eq!(
        take(&mut q),
        [
            Fx::Completed(0xff_fffe),
            Fx::Arm(Timer::Retransmit, TIMEOUT_USECS)
        ]
    );
    assert_eq!(q.win.comp_psn, psn(1));
    assert_eq!(acknowledge(&mut q, psn(2), ACK), Then::RunRequester);
    assert_eq!(
        take(&mut q),
        [Fx::Completed(0), Fx::Cancel(Timer::Retransmit)]
    );
    // A duplicate of the ACK from before the wrap is stale.
    assert_eq!(acknowledge(&mut q, psn(0xff_ffff), ACK), Then::Stop);
}
