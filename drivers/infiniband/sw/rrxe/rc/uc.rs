// SPDX-License-Identifier: GPL-2.0

#![forbid(unsafe_code)]

//! UC responder: as RC's, without acknowledges, duplicates or READs; a
//! lost or bad packet drops the message in progress (IBTA Vol 1 §9.8.4).

use crate::{
    proto::{
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
    },
    rdma::qp::Qp, //
};

use crate::rrxe::odp;

use super::{
    accept_payload_len,
    responder::{
        complete_recv,
        execute_send,
        execute_write,
        Handled,
        Refusal,
        Request, //
    },
    wc,
    Rrxe,
    State, //
};
use crate::proto::wr::wc as wc_op;

/// UC responder: drops the message in progress (a packet was lost or
/// bad); its receive WQE, if any, stays for the next message.
fn uc_drop(st: &mut State, psn: Psn) -> Handled {
    st.resp.op = InProgress::None;
    if let Some(r) = &mut st.resp.recv {
        r.offset = 0;
    }
    st.resp.epsn = psn.next();
    Handled::Done
}

/// UC responder (IBTA Vol 1 §9.8.3): no acknowledges; a lost or bad
/// packet drops its message, never the QP. SEND and WRITE run the RC
/// responder's stages; what RC would NAK is dropped here, and a receive
/// WQE whose data could not be placed completes in error.
pub(super) fn on_uc_request(qp: &Qp<Rrxe>, st: &mut State, pkt: &Packet<'_>) -> Handled {
    let info = pkt.info();
    if info.transport != Transport::Uc {
        return Handled::Done;
    }
    let psn = pkt.bth().psn;
    // The C driver counts no `out_of_seq_request` on UC: nothing is NAKed.
    if psn != st.resp.epsn {
        st.resp.op = InProgress::None;
        if let Some(r) = &mut st.resp.recv {
            r.offset = 0;
        }
        if !info.position.is_first() {
            return uc_drop(st, psn);
        }
    }
    let Ok(next_op) = rc::check_op_sequence(st.resp.op, info) else {
        return uc_drop(st, psn);
    };
    let payload = pkt.payload();
    let plen = u32::try_from(payload.len()).unwrap_or(u32::MAX);
    if !accept_payload_len(st, info.position, plen) {
        return uc_drop(st, psn);
    }
    let rq = Request::new(pkt, st);
    let executed = match info.operation {
        Operation::Send => execute_send(qp, st, &rq),
        Operation::RdmaWrite => execute_write(qp, st, &rq),
        _ => return uc_drop(st, psn),
    };
    match executed {
        Ok(_) => {
            st.resp.op = next_op;
            st.resp.epsn = psn.next();
            Handled::Done
        }
        Err(Refusal::Fault(f, _)) => {
            // The packet waits for its memory, as on RC; memory that
            // cannot be faulted in loses the message (a receive WQE stays
            // for the next one).
            if odp::request(qp, &mut st.odp, f) {
                st.odp.responder_waits = true;
                return Handled::Wait;
            }
            uc_drop(st, psn)
        }
        Err(refusal) => {
            if let (Refusal::Nak(_, Some(status)), Some(r)) = (refusal, st.resp.recv) {
                let w = wc(qp, r.wr_id, status, wc_op::RECV, 0);
                complete_recv(qp, st, w, false);
            }
            uc_drop(st, psn)
        }
    }
}
