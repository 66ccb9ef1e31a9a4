// SPDX-License-Identifier: GPL-2.0

#![forbid(unsafe_code)]

//! UC responder: as RC's, without acknowledges, duplicates or READs; a
//! lost or bad packet drops the message in progress (IBTA Vol 1 §9.8.4).

use crate::proto::{
    opcode::{
        Operation,
        Transport, //
    },
    packet::Packet,
    psn::Psn,
    rc::{
        self,
        InProgress, //
    },
};

use crate::rrxe::odp;

use super::{
    accept_payload_len,
    responder::{
        Handled,
        Refusal,
        Request,
        Responder, //
    },
    wc, //
};
use crate::rdma::wc::WcOpcode;

impl Responder<'_> {
    /// UC responder: drops the message in progress (a packet was lost or
    /// bad); its receive WQE, if any, stays for the next message.
    fn uc_drop(&mut self, psn: Psn) -> Handled {
        self.st.resp.op = InProgress::None;
        if let Some(r) = &mut self.st.resp.recv {
            r.offset = 0;
        }
        self.st.resp.epsn = psn.next();
        Handled::Done
    }

    /// UC responder (IBTA Vol 1 §9.8.3): no acknowledges; a lost or bad
    /// packet drops its message, never the QP. SEND and WRITE run the RC
    /// responder's stages; what RC would NAK is dropped here, and a receive
    /// WQE whose data could not be placed completes in error.
    pub(super) fn on_uc_request(&mut self, pkt: &Packet<'_>) -> Handled {
        let info = pkt.info();
        if info.transport != Transport::Uc {
            return Handled::Done;
        }
        let psn = pkt.bth().psn;
        // The C driver counts no `out_of_seq_request` on UC: nothing is NAKed.
        if psn != self.st.resp.epsn {
            self.st.resp.op = InProgress::None;
            if let Some(r) = &mut self.st.resp.recv {
                r.offset = 0;
            }
            if !info.position.is_first() {
                return self.uc_drop(psn);
            }
        }
        let Ok(next_op) = rc::check_op_sequence(self.st.resp.op, info) else {
            return self.uc_drop(psn);
        };
        let payload = pkt.payload();
        let plen = u32::try_from(payload.len()).unwrap_or(u32::MAX);
        if !accept_payload_len(self.st, info.position, plen) {
            return self.uc_drop(psn);
        }
        let rq = Request::new(pkt, self.st);
        let executed = match info.operation {
            Operation::Send => self.execute_send(&rq),
            Operation::RdmaWrite => self.execute_write(&rq),
            _ => return self.uc_drop(psn),
        };
        match executed {
            Ok(_) => {
                self.st.resp.op = next_op;
                self.st.resp.epsn = psn.next();
                Handled::Done
            }
            Err(Refusal::Fault(f, _)) => {
                // The packet waits for its memory, as on RC; memory that
                // cannot be faulted in loses the message (a receive WQE stays
                // for the next one).
                if odp::request(self.qp, &mut self.st.odp, f) {
                    self.st.odp.responder_waits = true;
                    return Handled::Wait;
                }
                self.uc_drop(psn)
            }
            Err(refusal) => {
                if let (Refusal::Nak(_, Some(status)), Some(r)) = (refusal, self.st.resp.recv) {
                    let w = wc(self.qp, r.wr_id, status, WcOpcode::Recv, 0);
                    self.complete_recv(w, false);
                }
                self.uc_drop(psn)
            }
        }
    }
}
