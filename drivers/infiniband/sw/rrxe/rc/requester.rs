// SPDX-License-Identifier: GPL-2.0

#![forbid(unsafe_code)]

//! RC and UC requester: cuts send WQEs into request packets, in send
//! queue order, within the PSN window and the transmit credit.

use crate::{
    proto::{
        atmeth::AtomicEth,
        bth::Bth,
        feth::Feth,
        ieth::Ieth,
        opcode::{
            MessageKind,
            Opcode,
            Position,
            Transport, //
        },
        packet::ExtHeaders,
        rc::{
            self,
            MAX_UNACKED_PSNS, //
        },
        reth::Reth,
        segment::{
            packet_count,
            segment_at,
            PathMtu, //
        },
        wqe::{
            self,
            SendWqe, //
        },
        wr::{
            self,
            Service,
            WcKind,
            Work, //
        },
    },
    rdma::{
        qp::{
            Qp,
            QpState,
            QpType, //
        },
        timer,
        wc::WcStatus, //
    },
};
use kernel::prelude::*;

use crate::rrxe::{
    mem::{
        self,
        MemError,
        Sges, //
    },
    odp, //
};

use super::{
    arm_retransmit,
    complete_head,
    current_mtu,
    fail_head,
    meta,
    path_mtu,
    qp_counts,
    sq_before,
    tx_ctx,
    Counter,
    Rrxe,
    State,
    WqeMeta, //
};

/// Largest message (IBTA: 2^31 bytes).
pub(super) const MAX_MSG_SIZE: u32 = 1 << 31;

/// The requester of an RC or UC QP at work, with the QP's state locked:
/// what every step of cutting WQEs into packets reads and changes.
pub(super) struct Requester<'a> {
    pub(super) qp: &'a Qp<Rrxe>,
    pub(super) st: &'a mut State,
}

/// Sends what the send queue and the window allow.
pub(crate) fn run_requester(qp: &Qp<Rrxe>, st: &mut State) {
    let mut r = Requester { qp, st };
    let start = r.st.req.psn;
    r.send_requests();
    // The retransmit timer counts from the last request queued
    // ([`timer_fired`](crate::proto::ack::timer_fired)): the clock is read
    // once a run, not once a packet.
    if r.st.req.psn != start {
        r.st.req.win.sent_at = timer::tick_usecs();
    }
    r.check_sq_drained();
}

/// The WQE the requester works on, once started: its slot, its snapshot,
/// the MTU its packets are cut at and how many it has, and the index of
/// the next one to send.
struct Current {
    idx: u32,
    w: SendWqe,
    pmtu: PathMtu,
    count: u32,
    index: u32,
}

/// The send WQE in `snap`, with what the requester does for it and its
/// completion opcode, if rxe can execute it on a QP of `service` (the
/// opcode table, `proto::wr`).
fn executable(snap: &[u8], service: Service) -> Option<(SendWqe, Work, WcKind)> {
    let w = SendWqe::parse(snap).ok()?;
    let e = wr::info(w.opcode)?;
    let work = e.work_on(service)?;
    let fits = match work {
        // Nothing is sent: the length says nothing.
        Work::Local => true,
        // A FLUSH's length is a range, not a message size: sent as the C
        // requester sends it (the responder refuses one past 2^31, C9-94).
        Work::Flush => true,
        // An atomic reads and writes one aligned 8-byte word.
        Work::Atomic => w.length >= 8 && w.remote_addr & 7 == 0 && w.length <= MAX_MSG_SIZE,
        // An ATOMIC WRITE carries exactly its 8-byte value (the provider
        // sets the length to 8).
        Work::AtomicWrite => w.length as usize == wqe::ATOMIC_WRITE_SIZE,
        Work::Msg(_) | Work::Read => w.length <= MAX_MSG_SIZE,
    };
    fits.then_some((w, work, e.wc_opcode))
}

impl Requester<'_> {
    /// Queues the READ request of the WQE at `req.next` for its packets from
    /// `index` on (all of them, or the rest after a retry); `false` if it could
    /// not be built.
    fn send_read_request(&mut self, w: &SendWqe, mtu: PathMtu, index: u32, count: u32) -> bool {
        if !self.local_buffer_ready(w, w.length) {
            return false;
        }
        let mtu = mtu.bytes();
        let done = index.saturating_mul(mtu).min(w.length);
        let ext = ExtHeaders {
            reth: Some(Reth {
                va: w.remote_addr.wrapping_add(u64::from(done)),
                rkey: w.rkey,
                dma_len: w.length - done,
            }),
            ..ExtHeaders::default()
        };
        // The responses take the PSNs of the packets still to come.
        self.queue_request(
            Opcode::RC_RDMA_READ_REQUEST,
            &ext,
            count.saturating_sub(index).max(1),
            &[],
        )
    }

    /// Whether the local buffer of the READ or atomic WQE `w` (`len` bytes)
    /// can take the response: on-demand memory that is not mapped is faulted
    /// in first, and the requester waits for the QP's kick (`false`), so that
    /// the response is not dropped for want of a page ([`super::super::odp`]).
    fn local_buffer_ready(&mut self, w: &SendWqe, len: u32) -> bool {
        if !odp::any_regions() {
            return true;
        }
        let (dev, pd_id) = (self.qp.device(), self.qp.pd_id());
        let sges = Sges::Send(&self.st.sq_snap);
        match mem::probe_sges(dev, pd_id, sges, w.num_sge, len as usize) {
            Err(MemError::Fault(f)) => {
                if !odp::request(self.qp, &mut self.st.odp, f) {
                    // It cannot be faulted in: the WQE fails here, as the C
                    // driver's would when placing the response (a WQE behind
                    // the head waits to be the head).
                    if self.st.req.next == self.st.sq.consumer() {
                        fail_head(self.qp, self.st, WcStatus::LocProtErr);
                    }
                }
                false
            }
            _ => true,
        }
    }

    /// Queues the one request packet of the WQE at `req.next` (a READ request,
    /// an atomic or an ATOMIC WRITE with its value as `payload`), asking for an
    /// acknowledge, whose responses take `psns` PSNs, and moves to the next
    /// WQE; `false` if it could not be built (the retransmit timer tries again).
    fn queue_request(
        &mut self,
        opcode: Opcode,
        ext: &ExtHeaders,
        psns: u32,
        payload: &[u8],
    ) -> bool {
        let bth = Bth {
            ack_req: true,
            ..Bth::new(opcode, self.st.attr.dest_qp_num(), self.st.req.psn)
        };
        let Some(tx) = tx_ctx(self.qp, self.st) else {
            return false;
        };
        let built = tx.build(&bth, ext, payload.len(), |buf| {
            buf.get_mut(..payload.len())
                .ok_or(EINVAL)?
                .copy_from_slice(payload);
            Ok(())
        });
        let ok = match built {
            Ok(skb) => {
                self.qp.txq.push_back(skb);
                true
            }
            Err(_) => false,
        };
        if ok {
            self.sent(psns);
            self.st.req.next = self.st.sq.geo.next(self.st.req.next);
            self.st.req.offset = 0;
        }
        if !self.st.req.win.timer_armed {
            arm_retransmit(self.qp, self.st);
        }
        ok
    }

    /// A request of `psns` PSNs was queued: the position moves past it.
    fn sent(&mut self, psns: u32) {
        let req = &mut self.st.req;
        req.psn = req.psn.add(psns);
        if req.win.sent_end.before(req.psn) {
            req.win.sent_end = req.psn;
        }
    }

    /// Queues the atomic request of the WQE at `req.next` (CmpSwap or
    /// FetchAdd, IBTA Vol 1 §9.4.5); `false` if it could not be built.
    fn send_atomic_request(&mut self, w: &SendWqe) -> bool {
        if !self.local_buffer_ready(w, 8) {
            return false;
        }
        let (opcode, atmeth) = if w.opcode == wr::IB_WR_ATOMIC_CMP_AND_SWP {
            (
                Opcode::RC_COMPARE_SWAP,
                AtomicEth {
                    va: w.remote_addr,
                    rkey: w.rkey,
                    swap_add: w.swap,
                    compare: w.compare_add,
                },
            )
        } else {
            (
                Opcode::RC_FETCH_ADD,
                AtomicEth {
                    va: w.remote_addr,
                    rkey: w.rkey,
                    swap_add: w.compare_add,
                    compare: 0,
                },
            )
        };
        let ext = ExtHeaders {
            atmeth: Some(atmeth),
            ..ExtHeaders::default()
        };
        self.queue_request(opcode, &ext, 1, &[])
    }

    /// Queues the ATOMIC WRITE request of the WQE at `req.next` (IBTA Vol 1
    /// Annex A19): a RETH for the 8 bytes at the remote address and the value
    /// itself, as the provider stored it in the WQE; `false` if it could not be
    /// built.
    fn send_atomic_write_request(&mut self, w: &SendWqe) -> bool {
        let Ok(value) = wqe::send_atomic_write_value(&self.st.sq_snap) else {
            return false;
        };
        let ext = ExtHeaders {
            reth: Some(Reth {
                va: w.remote_addr,
                rkey: w.rkey,
                // CAST: 8.
                dma_len: wqe::ATOMIC_WRITE_SIZE as u32,
            }),
            ..ExtHeaders::default()
        };
        self.queue_request(Opcode::RC_ATOMIC_WRITE, &ext, 1, &value)
    }

    /// Queues the FLUSH request of the WQE at `req.next` (IBTA Vol 1 Annex
    /// A19): the FETH with the placement type and selectivity, and a RETH for
    /// the range (librxe, like the C requester, keeps the length in
    /// `dma.length`); no payload. `false` if it could not be built.
    fn send_flush_request(&mut self, w: &SendWqe) -> bool {
        let ext = ExtHeaders {
            // The FETH fields are 4 and 2 bits wide: the rest of the user's
            // bytes is dropped, as the C requester's `feth_init` masks them.
            feth: Some(Feth {
                placement_type: w.flush_type & 0xf,
                selectivity: w.flush_level & 0x3,
            }),
            reth: Some(Reth {
                va: w.remote_addr,
                rkey: w.rkey,
                dma_len: w.length,
            }),
            ..ExtHeaders::default()
        };
        self.queue_request(Opcode::RC_FLUSH, &ext, 1, &[])
    }

    /// In SQD, once every message started before the move has completed (all
    /// its packets acknowledged, its responses in), the send queue is drained:
    /// `sq_draining` clears and SQ Drained is reported (IBTA Vol 1 §10.3.1;
    /// as the C driver's requester and completer check after each step).
    fn check_sq_drained(&mut self) {
        if self.st.attr.qp_state() != QpState::Sqd || self.st.attr.sq_draining() == 0 {
            return;
        }
        let idle = self.st.req.offset == 0
            && !sq_before(self.st, self.st.sq.consumer(), self.st.req.started_end)
            && self.st.req.win.comp_psn == self.st.req.psn;
        if idle {
            self.st.attr.set_sq_draining(0);
            // Reported once the state lock is released, as every caller does
            // (`RrxeQp::report_events`).
            crate::rrxe::qp::RrxeQp::sq_drained(self.qp);
        }
    }

    /// The requester: sends the packets of the WQEs at `req.next` while the
    /// window, the transmit credit and `max_rd_atomic` allow. In SQD it only
    /// finishes (or sends again) the messages already started.
    fn send_requests(&mut self) {
        let draining = match self.st.attr.qp_state() {
            QpState::Rts => false,
            QpState::Sqd => true,
            _ => return,
        };
        if self.st.req.win.rnr_wait {
            return;
        }
        if !self.complete_local_ops() {
            return;
        }
        // UC sends without acknowledges: no window, and a WQE completes once
        // its last packet is queued.
        let uc = self.qp.qp_type() == QpType::Uc;
        let service = if uc { Service::Uc } else { Service::Rc };
        loop {
            // Nothing to send first: the stops below are counted only when
            // something waits, and credit is not asked for in vain.
            let idx = self.st.req.next;
            if self.st.sq.geo.is_empty(self.st.sq.producer(), idx) {
                break;
            }
            if draining && !sq_before(self.st, idx, self.st.req.started_end) {
                break;
            }
            if !uc && rc::in_flight(self.st.req.win.comp_psn, self.st.req.psn) >= MAX_UNACKED_PSNS {
                qp_counts(self.qp).inc(Counter::ReqWindowFull);
                break;
            }
            // Resumed from the QP's kick when transmit credit comes back.
            if !crate::rrxe::tx::tx_room(self.qp) {
                qp_counts(self.qp).inc(Counter::ReqCreditStall);
                break;
            }
            if self.st.snap_index != Some(idx) {
                let State { sq, sq_snap, .. } = &mut *self.st;
                if sq.read_slot(idx, sq_snap).is_err() {
                    break;
                }
                self.st.snap_index = Some(idx);
            }
            let Some((w, work, wc_opcode)) = executable(&self.st.sq_snap, service) else {
                self.fail_unexecutable(idx);
                break;
            };
            if work == Work::Local {
                if self.run_local_op(idx, &w) {
                    continue;
                }
                break;
            }
            let Some(cur) = self.start_wqe(idx, w, work, wc_opcode) else {
                break;
            };
            let sent = match work {
                Work::Read => self.send_read_request(&cur.w, cur.pmtu, cur.index, cur.count),
                Work::Atomic => self.send_atomic_request(&cur.w),
                Work::AtomicWrite => self.send_atomic_write_request(&cur.w),
                Work::Flush => self.send_flush_request(&cur.w),
                Work::Msg(kind) => self.send_message_packet(&cur, kind, uc),
                // Run above, never started.
                Work::Local => false,
            };
            if !sent {
                break;
            }
        }
    }

    /// A WQE rxe cannot execute completes in error once it is the oldest.
    fn fail_unexecutable(&mut self, idx: u32) {
        if idx != self.st.sq.consumer() {
            return;
        }
        // `wr_id` is the first field of every send WQE.
        let wr_id = self
            .st
            .sq_snap
            .first_chunk::<8>()
            .map_or(0, |b| u64::from_ne_bytes(*b));
        let m = WqeMeta {
            wr_id,
            ..WqeMeta::default()
        };
        if let Some(slot) = self.st.sq_meta.get_mut(idx as usize) {
            *slot = m;
        }
        fail_head(self.qp, self.st, WcStatus::LocQpOpErr);
    }

    /// Starts the WQE at `idx` (its PSN range and what completion needs, the
    /// first time; its first PSN again, when it is sent again), or `None` if
    /// it must wait (`max_rd_atomic` reached).
    fn start_wqe(
        &mut self,
        idx: u32,
        w: SendWqe,
        work: Work,
        wc_opcode: WcKind,
    ) -> Option<Current> {
        let atomic = work == Work::Atomic;
        let empty_read_response = matches!(work, Work::AtomicWrite | Work::Flush);
        let started = sq_before(self.st, idx, self.st.req.started_end);
        let pmtu = if started {
            meta(self.st, idx).mtu
        } else if work == Work::Read {
            // The responder spends the PSNs this end reserves for the
            // responses: both count them at the MTU agreed at RTR.
            path_mtu(self.st)
        } else {
            current_mtu(self.qp, self.st)
        };
        let count = if atomic || empty_read_response {
            1
        } else {
            packet_count(w.length, pmtu)
        };
        // An ATOMIC WRITE or FLUSH counts against `max_rd_atomic` like a READ
        // (the C requester counts ATOMIC WRITE, not FLUSH; both use a
        // responder resource).
        let rd_atomic = atomic || empty_read_response || work == Work::Read;
        if self.st.req.offset == 0 {
            if started {
                self.st.req.psn = meta(self.st, idx).first_psn;
            } else {
                // At most `max_rd_atomic` READs and atomics outstanding (at
                // least one).
                if rd_atomic
                    && self.st.req.reads_in_flight >= u32::from(self.st.attr.max_rd_atomic()).max(1)
                {
                    return None;
                }
                let m = WqeMeta {
                    wr_id: w.wr_id,
                    wc_opcode,
                    signaled: self.qp.sq_sig_all || w.is_signaled(),
                    len: w.length,
                    first_psn: self.st.req.psn,
                    last_psn: self.st.req.psn.add(count - 1),
                    mtu: pmtu,
                    rd_atomic,
                    atomic,
                    empty_read_response,
                    send: matches!(
                        work,
                        Work::Msg(
                            MessageKind::Send | MessageKind::SendWithImm | MessageKind::SendWithInv
                        )
                    ),
                    ..WqeMeta::default()
                };
                if rd_atomic {
                    self.st.req.reads_in_flight += 1;
                }
                *self.st.sq_meta.get_mut(idx as usize)? = m;
                self.st.req.started_end = self.st.sq.geo.next(idx);
            }
        }
        Some(Current {
            idx,
            w,
            pmtu,
            count,
            index: self.st.req.offset / pmtu.bytes(),
        })
    }

    /// The headers of the packet of a SEND or WRITE message at `seg`.
    fn message_headers(
        &self,
        cur: &Current,
        kind: MessageKind,
        position: Position,
        uc: bool,
    ) -> Option<(Bth, ExtHeaders)> {
        let w = &cur.w;
        let transport = if uc { Transport::Uc } else { Transport::Rc };
        let opcode = Opcode::for_message(transport, kind, position)?;
        let last = matches!(position, Position::Last | Position::Only);
        let first = matches!(position, Position::First | Position::Only);
        let bth = Bth {
            se: last && w.is_solicited(),
            ack_req: !uc && rc::wants_ack(cur.index, cur.count),
            ..Bth::new(opcode, self.st.attr.dest_qp_num(), self.st.req.psn)
        };
        let mut ext = ExtHeaders::default();
        let is_write = matches!(kind, MessageKind::RdmaWrite | MessageKind::RdmaWriteWithImm);
        if first && is_write {
            ext.reth = Some(Reth {
                va: w.remote_addr,
                rkey: w.rkey,
                dma_len: w.length,
            });
        }
        if last
            && matches!(
                kind,
                MessageKind::SendWithImm | MessageKind::RdmaWriteWithImm
            )
        {
            ext.immdt = Some(w.immdt());
        }
        if last && kind == MessageKind::SendWithInv {
            ext.ieth = Some(Ieth {
                rkey: w.invalidate_rkey,
            });
        }
        Some((bth, ext))
    }

    /// Builds and queues the next packet of a SEND or WRITE message; `false`
    /// if the requester must stop (no route yet, no memory, or the gather
    /// failed).
    fn send_message_packet(&mut self, cur: &Current, kind: MessageKind, uc: bool) -> bool {
        let w = &cur.w;
        let Some(seg) = segment_at(w.length, cur.pmtu, cur.index) else {
            return false;
        };
        let Some((bth, ext)) = self.message_headers(cur, kind, seg.position, uc) else {
            return false;
        };
        let last = matches!(seg.position, Position::Last | Position::Only);
        let Some(_) = tx_ctx(self.qp, self.st) else {
            // No route yet: the timer (which resolves it) tries again.
            if !self.st.req.win.timer_armed {
                arm_retransmit(self.qp, self.st);
            }
            return false;
        };
        let mut gather_err = None;
        let built = {
            let qp = self.qp;
            let State { tx, sq_snap, .. } = &*self.st;
            let Some(tx) = tx.as_ref() else {
                return false;
            };
            tx.build(&bth, &ext, seg.len as usize, |buf| {
                mem::gather(qp.device(), qp.pd_id(), sq_snap, w, seg.offset, buf).map_err(|e| {
                    gather_err = Some(e);
                    EFAULT
                })
            })
        };
        let skb = match built {
            Ok(skb) => skb,
            Err(_) => {
                // On-demand memory not mapped: the requester waits for the
                // QP's kick once it is faulted in.
                if let Some(MemError::Fault(f)) = gather_err {
                    if odp::request(self.qp, &mut self.st.odp, f) {
                        return false;
                    }
                    gather_err = Some(MemError::Range);
                }
                if let Some(e) = gather_err {
                    // Local memory the WQE names is bad for good: it completes
                    // in error whatever packet found it (as the C driver's),
                    // once it is the head.
                    if cur.idx == self.st.sq.consumer() {
                        fail_head(self.qp, self.st, e.local_status());
                    }
                } else if !self.st.req.win.timer_armed {
                    // Out of memory: the retransmit timer tries again.
                    arm_retransmit(self.qp, self.st);
                }
                return false;
            }
        };
        self.qp.txq.push_back(skb);
        self.sent(1);
        if last {
            self.st.req.next = self.st.sq.geo.next(cur.idx);
            self.st.req.offset = 0;
        } else {
            self.st.req.offset += seg.len;
        }
        if uc {
            if last {
                complete_head(self.qp, self.st, WcStatus::Success);
                self.st.req.win.comp_psn = self.st.req.psn;
            }
        } else if !self.st.req.win.timer_armed {
            arm_retransmit(self.qp, self.st);
        }
        true
    }
}
