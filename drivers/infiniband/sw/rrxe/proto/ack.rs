// SPDX-License-Identifier: GPL-2.0

//! The RC completer's rules as a state machine: what an acknowledge, a
//! READ response or a timer does to the requester's window, its retry
//! counts and its timers (IBTA Vol 1 §9.7.5.2, §9.7.6.1.3, §9.9).
//!
//! The machine owns no queue and sends nothing itself: it reads and writes
//! a [`Window`] and asks for everything else through [`Effects`] (retire
//! WQEs, point the requester at a PSN, arm or stop a timer, fail the oldest
//! WQE, count an event). The driver implements [`Effects`] over a QP; the
//! tests below implement it over a list of WQEs and a log.

#![forbid(unsafe_code)]

use super::aeth::{
    rnr_timer_usecs,
    NakCode,
    Syndrome, //
};
use super::psn::Psn;
use super::rc::{
    self,
    AckAction, //
};

/// The requester's window as the completer sees it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Window {
    /// Oldest unacknowledged PSN.
    pub comp_psn: Psn,
    /// One past the highest PSN sent.
    pub sent_end: Psn,
    /// Transport retries left (`retry_cnt`).
    pub retry_left: u8,
    /// RNR retries left (`rnr_retry`).
    pub rnr_left: u8,
    /// Waiting for the RNR timer: nothing is sent meanwhile.
    pub rnr_wait: bool,
    /// The retransmit timer is armed.
    pub timer_armed: bool,
    /// A READ response was missing and the READ was asked again; cleared
    /// by the next response in order (one request per gap).
    pub read_gap: bool,
    /// When the last request packet was queued to be sent, on the
    /// [`Effects::now`] clock.
    pub sent_at: u64,
    /// When the retransmit timer was last armed for a first packet or for
    /// progress (not when an expiry waited on, [`timer_fired`]).
    pub armed_at: u64,
}

/// The QP attributes the rules read.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Limits {
    /// `retry_cnt`: transport retries a message gets.
    pub retry_cnt: u8,
    /// `rnr_retry`: RNR retries a message gets (7: without end).
    pub rnr_retry: u8,
    /// `timeout`: the local ACK timeout code (0: none).
    pub timeout: u8,
}

/// The completer's timers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Timer {
    /// The local ACK timeout (§9.7.6.1.3).
    Retransmit,
    /// The RNR NAK wait (§9.7.5.2.8).
    Rnr,
}

/// Why the requester sends again from an earlier PSN.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Retransmit {
    /// A PSN Sequence Error NAK.
    SequenceNak,
    /// The local ACK timeout expired.
    Timeout,
    /// The RNR wait is over.
    Rnr,
    /// A response is missing although later ones arrived (§9.7.5.2.2).
    ImpliedNak,
}

/// Events the driver counts (`rdma statistic`, as the C driver does).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Event {
    /// An RNR NAK was received (`rcvd_rnr_err`).
    RnrNak,
    /// `rnr_retry` was spent (`retry_rnr_exceeded_err`).
    RnrRetryExceeded,
    /// A PSN Sequence Error NAK was received (`rcvd_seq_err`).
    SequenceNak,
    /// The completer started a retry (`completer_retry_err`).
    Retry,
    /// `retry_cnt` was spent (`retry_exceeded_err`).
    RetryExceeded,
}

/// Why the oldest WQE completes in error (the QP then moves to ERR).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Failure {
    /// `rnr_retry` spent (`IB_WC_RNR_RETRY_EXC_ERR`).
    RnrRetryExceeded,
    /// `retry_cnt` spent (`IB_WC_RETRY_EXC_ERR`).
    RetryExceeded,
    /// A NAK other than PSN Sequence Error (§9.7.5.2.5–7).
    Nak(NakCode),
}

/// What the caller does once a rule has run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[must_use]
pub enum Then {
    /// Run the requester: the window may allow more, or a resend starts.
    RunRequester,
    /// Nothing more: the event was ignored, the QP failed, or it waits for
    /// the RNR timer.
    Stop,
}

/// What to do with a READ response once its PSN is read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[must_use]
pub enum Response {
    /// In order: what precedes it is acknowledged; its data goes to the
    /// oldest WQE.
    Place,
    /// Not placed; then this.
    Skip(Then),
}

/// What the rules ask of the QP.
pub trait Effects {
    /// The window, read and changed in place.
    fn window(&mut self) -> &mut Window;
    /// The QP's retry and timeout attributes.
    fn limits(&self) -> Limits;
    /// A monotonic clock in microseconds; as coarse as the timers is
    /// enough.
    fn now(&self) -> u64;
    /// Packets built are still waiting to be handed to the network.
    fn queued(&self) -> bool;
    /// Completes, in order, every started WQE whose packets all end at or
    /// before `upto` (READs and atomics excepted: their responses complete
    /// them); whether any was.
    fn retire(&mut self, upto: Psn) -> bool;
    /// The first PSN of the oldest started WQE if it is a READ or an
    /// atomic, which a plain ACK does not complete.
    fn oldest_rd_atomic(&mut self) -> Option<Psn>;
    /// The PSN the requester sends next.
    fn position(&mut self) -> Psn;
    /// Points the requester at `psn` (a resend, or going on after an ACK).
    fn set_position(&mut self, psn: Psn);
    /// Reports a retransmission from `from` (the tracepoint).
    fn retransmit(&mut self, from: Psn, why: Retransmit);
    /// Reports a NAK or RNR NAK of `psn` (the tracepoint).
    fn nak(&mut self, psn: Psn);
    /// Arms `timer` to fire in `usecs` microseconds.
    fn arm(&mut self, timer: Timer, usecs: u64);
    /// Stops `timer`.
    fn cancel(&mut self, timer: Timer);
    /// Counts `event`.
    fn count(&mut self, event: Event);
    /// Completes the oldest WQE in error and moves the QP to ERR.
    fn fail_head(&mut self, why: Failure);
}

/// An acknowledge (ACK, RNR NAK or NAK) of `psn` with `syndrome` arrived.
pub fn acknowledge(fx: &mut impl Effects, psn: Psn, syndrome: Syndrome) -> Then {
    let w = *fx.window();
    let progress = match rc::classify_ack(psn, w.comp_psn, w.sent_end, syndrome) {
        AckAction::Ignore => return Then::Stop,
        AckAction::Acknowledge => positive_ack(fx, psn),
        AckAction::RnrWait { timer } => match rnr_nak(fx, psn, timer) {
            Some(p) => p,
            None => return Then::Stop,
        },
        AckAction::Resend => sequence_nak(fx, psn),
        AckAction::Fail(code) => {
            fatal_nak(fx, psn, code);
            return Then::Stop;
        }
    };
    let limits = fx.limits();
    let w = fx.window();
    // Progress gives the next message its full retry counts; the RNR count
    // runs on while the RNR wait lasts (§9.7.5.2.8, §9.7.6.1.3).
    if progress {
        w.retry_left = limits.retry_cnt;
        if !w.rnr_wait {
            w.rnr_left = limits.rnr_retry;
        }
    }
    if w.rnr_wait {
        return Then::Stop;
    }
    follow_window(fx)
}

/// An ACK of `psn` (§9.7.5.2.1): retires what it covers. It always counts
/// as progress: even without a retired WQE, the window moved.
fn positive_ack(fx: &mut impl Effects, psn: Psn) -> bool {
    fx.retire(psn);
    match fx.oldest_rd_atomic() {
        // Acknowledged past a READ whose responses did not all arrive, or
        // an atomic whose acknowledge was lost: ask again (the responder
        // replays an atomic's result).
        Some(first) if !first.after(psn) => {
            let w = fx.window();
            if w.comp_psn.before(first) {
                w.comp_psn = first;
            }
            let from = w.comp_psn;
            fx.retransmit(from, Retransmit::ImpliedNak);
            fx.set_position(from);
        }
        _ => {
            let next = psn.next();
            fx.window().comp_psn = next;
            if fx.position().before(next) {
                fx.set_position(next);
            }
        }
    }
    true
}

/// An RNR NAK at `psn` (§9.7.5.2.8): what precedes it is acknowledged; the
/// requester waits `timer` and sends again from `psn`, or, its `rnr_retry`
/// spent, the oldest WQE fails (`None`).
fn rnr_nak(fx: &mut impl Effects, psn: Psn, timer: u8) -> Option<bool> {
    fx.count(Event::RnrNak);
    fx.nak(psn);
    let progress = fx.retire(psn.sub(1));
    let w = fx.window();
    w.comp_psn = psn;
    let Some(left) = rc::take_retry(w.rnr_left) else {
        fx.count(Event::RnrRetryExceeded);
        fx.fail_head(Failure::RnrRetryExceeded);
        return None;
    };
    w.rnr_left = left;
    w.rnr_wait = true;
    w.timer_armed = false;
    fx.set_position(psn);
    fx.cancel(Timer::Retransmit);
    fx.arm(Timer::Rnr, u64::from(rnr_timer_usecs(timer)));
    Some(progress)
}

/// A PSN Sequence Error NAK at `psn` (§9.7.5.2.4): what precedes it is
/// acknowledged and the requester sends again from `psn`; no retry is
/// spent, but the C driver counts a completer retry, and so do we.
fn sequence_nak(fx: &mut impl Effects, psn: Psn) -> bool {
    fx.count(Event::SequenceNak);
    fx.count(Event::Retry);
    let progress = fx.retire(psn.sub(1));
    fx.window().comp_psn = psn;
    fx.nak(psn);
    fx.retransmit(psn, Retransmit::SequenceNak);
    fx.set_position(psn);
    progress
}

/// Any other NAK at `psn` (§9.7.5.2.5–7): what precedes it is
/// acknowledged; the oldest WQE fails with the NAK's status.
fn fatal_nak(fx: &mut impl Effects, psn: Psn, code: NakCode) {
    fx.nak(psn);
    fx.retire(psn.sub(1));
    fx.window().comp_psn = psn;
    fx.fail_head(Failure::Nak(code));
}

/// A READ response of `psn` arrived. In order, what precedes it is
/// retired and its data is to be placed. Past a gap, the READ is asked
/// again from the oldest unacknowledged PSN, once per gap (§9.7.5.2.2:
/// the missing response is an implied NAK).
pub fn read_response(fx: &mut impl Effects, psn: Psn) -> Response {
    let w = *fx.window();
    if !rc::ack_in_flight(psn, w.comp_psn, w.sent_end) {
        return Response::Skip(Then::Stop);
    }
    if psn != w.comp_psn {
        if w.read_gap {
            return Response::Skip(Then::Stop);
        }
        fx.window().read_gap = true;
        // No NAK was received (`rcvd_seq_err`): the completer retries.
        fx.count(Event::Retry);
        fx.retransmit(w.comp_psn, Retransmit::ImpliedNak);
        fx.set_position(w.comp_psn);
        return Response::Skip(Then::RunRequester);
    }
    fx.window().read_gap = false;
    fx.retire(psn.sub(1));
    Response::Place
}

/// An atomic acknowledge of `psn` arrived: in flight, what precedes it is
/// retired and its original value is to be placed.
pub fn atomic_ack(fx: &mut impl Effects, psn: Psn) -> Response {
    let w = *fx.window();
    if !rc::ack_in_flight(psn, w.comp_psn, w.sent_end) {
        return Response::Skip(Then::Stop);
    }
    fx.retire(psn.sub(1));
    Response::Place
}

/// A response up to `psn` was placed (READ response data, an atomic's
/// original value, an empty READ response): the message gets its full
/// retry count again, and the window moves.
pub fn response_placed(fx: &mut impl Effects, psn: Psn) -> Then {
    let retry_cnt = fx.limits().retry_cnt;
    let w = fx.window();
    w.comp_psn = psn.next();
    w.retry_left = retry_cnt;
    follow_window(fx)
}

/// The retransmit timer runs while packets are in flight (§9.7.6.1.3) and
/// stops when none is; then the requester sends what the window allows.
pub fn follow_window(fx: &mut impl Effects) -> Then {
    let w = *fx.window();
    if rc::in_flight(w.comp_psn, w.sent_end) > 0 {
        arm_retransmit(fx);
    } else {
        fx.cancel(Timer::Retransmit);
        fx.window().timer_armed = false;
    }
    Then::RunRequester
}

/// Arms the retransmit timer for the QP's local ACK timeout; a `timeout`
/// of 0 means none (§9.7.6.1.3).
pub fn arm_retransmit(fx: &mut impl Effects) {
    if let Some(usecs) = rc::local_ack_timeout_usecs(fx.limits().timeout) {
        let now = fx.now();
        fx.arm(Timer::Retransmit, usecs);
        let w = fx.window();
        w.timer_armed = true;
        w.armed_at = now;
    }
}

/// Longest a retry may wait, in local ACK timeouts from when the timer
/// was armed, for packets still being sent ([`timer_fired`]): new messages
/// posted all the while must not put a dead peer's RETRY_EXC_ERR off
/// without end.
pub const MAX_TIMEOUTS_PER_RETRY: u64 = 4;

/// How long an expired retransmit timer is to wait still, in
/// microseconds, rather than spend a retry; 0: not at all. It is armed
/// when a packet goes out with none running and again on progress, but
/// no acknowledge can come before the packet that asks for it is sent,
/// and a long message may take longer than the timeout to send: the
/// timeout counts from the last packet sent (or still queued to be), up
/// to [`MAX_TIMEOUTS_PER_RETRY`] timeouts after it was armed.
fn wait_longer(w: &Window, timeout: u64, now: u64, queued: bool) -> u64 {
    let idle = if queued {
        0
    } else {
        now.wrapping_sub(w.sent_at)
    };
    let waited = now.wrapping_sub(w.armed_at);
    let to_sent = timeout.saturating_sub(idle);
    let to_limit = timeout
        .saturating_mul(MAX_TIMEOUTS_PER_RETRY)
        .saturating_sub(waited);
    to_sent.min(to_limit)
}

/// `timer` fired.
pub fn timer_fired(fx: &mut impl Effects, timer: Timer) -> Then {
    match timer {
        Timer::Rnr => {
            fx.window().rnr_wait = false;
            let from = fx.position();
            fx.retransmit(from, Retransmit::Rnr);
        }
        Timer::Retransmit => {
            let now = fx.now();
            let queued = fx.queued();
            let timeout = rc::local_ack_timeout_usecs(fx.limits().timeout);
            let w = fx.window();
            w.timer_armed = false;
            if w.rnr_wait {
                return Then::Stop;
            }
            // With nothing in flight the timer was armed for a packet that
            // could not be built (no memory, no route yet): the requester
            // tries again, without using a retry.
            if rc::in_flight(w.comp_psn, w.sent_end) != 0 {
                if let Some(t) = timeout {
                    let left = wait_longer(w, t, now, queued);
                    if left > 0 {
                        w.timer_armed = true;
                        fx.arm(Timer::Retransmit, left);
                        return Then::RunRequester;
                    }
                }
                // As the C driver, a `retry_cnt` of 7 retries without end
                // (IBTA gives 7 that meaning for `rnr_retry` only);
                // ibv_rc_pingpong and perftest set 7, and a busy host can
                // delay an ACK past seven local ACK timeouts.
                let Some(left) = rc::take_retry(w.retry_left) else {
                    fx.count(Event::RetryExceeded);
                    fx.fail_head(Failure::RetryExceeded);
                    return Then::Stop;
                };
                w.retry_left = left;
                let from = w.comp_psn;
                fx.count(Event::Retry);
                fx.retransmit(from, Retransmit::Timeout);
                fx.set_position(from);
            }
        }
    }
    Then::RunRequester
}

#[cfg(test)]
#[path = "ack_tests.rs"]
mod tests;
