// SPDX-License-Identifier: GPL-2.0

#![forbid(unsafe_code)]

//! RC READ responder (IBTA Vol 1 §9.7.4.1.4, §9.7.5.1.3): a READ request
//! is checked once, then answered as a stream of responses that goes out
//! as the transmit credit allows; a repeated request reads the memory
//! again at the PSNs of the original.

use crate::proto::{
    aeth::{
        Aeth,
        NakCode, //
    },
    bth::Bth,
    opcode::{
        MessageKind,
        Opcode,
        Position,
        Transport, //
    },
    packet::ExtHeaders,
    psn::Psn,
    rc::ReadStream,
    reth::Reth,
    segment::{
        packet_count,
        segment_at, //
    },
};
use kernel::prelude::*;

use crate::rrxe::{
    mem::{
        self,
        CopyDir,
        MemError,
        Need, //
    },
    odp, //
};

use super::{
    path_mtu,
    qp_counts,
    responder::{
        ack,
        Responder, //
    },
    Counter,
    State, //
};

impl Responder<'_> {
    /// Accepts a READ request at `psn` for the memory `reth` names: checks the
    /// whole range before anything is read, then starts its responses, which
    /// [`Self::stream_read`] continues later if the transmit credit runs out. Returns
    /// the number of PSNs the responses take.
    pub(super) fn start_read(&mut self, psn: Psn, reth: &Reth, msn: u32) -> Result<u32, NakCode> {
        self.check_reth(reth, Need::RemoteRead)?;
        // The requester reserved the responses' PSNs at the path MTU set at
        // RTR, whatever the net device carries now (`current_mtu`).
        let mtu = path_mtu(self.st);
        let count = packet_count(reth.dma_len, mtu);
        let r = ReadStream {
            psn,
            va: reth.va,
            rkey: reth.rkey,
            len: reth.dma_len,
            next: 0,
            count,
            msn,
            mtu,
        };
        self.st.resp.reads.record(r);
        self.st.resp.read = Some(r);
        self.stream_read();
        Ok(count)
    }

    /// Answers a duplicate READ for `reth` with the responses `r` that
    /// [`ReadHistory::replay`] chose, after checking that the memory is still
    /// readable. Otherwise it is dropped: the requester times out.
    pub(super) fn replay_read(&mut self, r: ReadStream, reth: &Reth) {
        if reth.dma_len > 0
            && mem::check_remote(
                self.qp.device(),
                self.qp.pd_id(),
                self.qp.uid,
                reth.rkey,
                Need::RemoteRead,
                reth.va,
                reth.dma_len,
            )
            .is_err()
        {
            return;
        }
        self.st.resp.read = Some(r);
        self.stream_read();
    }

    /// Queues the next READ responses of the stream in progress, as many as
    /// the transmit credit allows; the stream ends with its last response (or
    /// when a response cannot be built: the requester asks again after its
    /// timeout).
    pub(super) fn stream_read(&mut self) {
        let Some(mut r) = self.st.resp.read else {
            return;
        };
        let dev = self.qp.device();
        let pd_id = self.qp.pd_id();
        let pmtu = r.mtu;
        let dest_qpn = self.st.attr.dest_qp_num();
        let State { tx, resp, odp, .. } = &mut *self.st;
        let Some(tx) = tx.as_ref() else {
            qp_counts(self.qp).inc(Counter::SendErr);
            resp.read = None;
            return;
        };
        while r.next < r.count {
            if !crate::rrxe::tx::tx_room(self.qp) {
                // Resumed from the QP's kick when credit comes back.
                resp.read = Some(r);
                return;
            }
            let Some(seg) = segment_at(r.len, pmtu, r.next) else {
                break;
            };
            let Some(opcode) =
                Opcode::for_message(Transport::Rc, MessageKind::RdmaReadResponse, seg.position)
            else {
                break;
            };
            let mut ext = ExtHeaders::default();
            if !matches!(seg.position, Position::Middle) {
                ext.aeth = Aeth::new(ack(), r.msn).ok();
            }
            let bth = Bth::new(opcode, dest_qpn, r.psn.add(r.next));
            let va = r.va.wrapping_add(u64::from(seg.offset));
            let at = mem::Access::rkey(self.qp.uid, r.rkey, Need::RemoteRead, va);
            let mut fault = None;
            let built = tx.build(&bth, &ext, seg.len as usize, |buf| {
                let from = CopyDir::FromMr(buf);
                mem::copy(dev, pd_id, at, from).map_err(|e| {
                    if let MemError::Fault(f) = e {
                        fault = Some(f);
                    }
                    EFAULT
                })
            });
            match built {
                Ok(skb) => self.qp.txq.push_back(skb),
                Err(_) => {
                    if let Some(f) = fault {
                        // A page went since the request was checked: the
                        // stream waits for it (the QP is kicked after)...
                        resp.read = Some(r);
                        if odp::request(self.qp, odp, f) {
                            return;
                        }
                        // ... and when it cannot be faulted in, the READ gets
                        // the remote access error the C driver's
                        // `read_reply` answers, rather than nothing: at the
                        // PSN of the response it takes the place of, which the
                        // requester still waits for (its earlier responses may
                        // be acknowledged already).
                        resp.read = None;
                        self.access_violation(false, r.psn.add(r.next));
                        return;
                    }
                    qp_counts(self.qp).inc(Counter::SendErr);
                    break;
                }
            }
            r.next += 1;
        }
        resp.read = None;
    }
}
