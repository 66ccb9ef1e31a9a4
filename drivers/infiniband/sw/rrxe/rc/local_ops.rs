// SPDX-License-Identifier: GPL-2.0

#![forbid(unsafe_code)]

//! Local operations (IBTA Vol 1 §10.6.3.6 fast registration, §10.6.5 local
//! and remote invalidation, §10.6.7 memory window binding): `IB_WR_REG_MR`,
//! `IB_WR_LOCAL_INV` and `IB_WR_BIND_MW` run in the requester when reached
//! in send queue order, without packets; SEND with invalidate makes the
//! responder invalidate the R_Key its IETH names (a region or a window).

use crate::{
    proto::{
        packet::Packet,
        wqe::SendWqe,
        wr::{
            self,
            WcKind, //
        },
    },
    rdma::{qp::Qp, wc::WcStatus},
};
use kernel::prelude::*;

use crate::rrxe::{
    mr::RrxeMr,
    mw::{
        is_mw_key,
        RrxeMw, //
    }, //
};

use super::{
    complete_head,
    fail_head,
    meta,
    requester::Requester,
    sq_before,
    Rrxe,
    WqeMeta, //
};

impl Requester<'_> {
    /// Completes the executed local operations at the head of the send queue,
    /// in order (everything before them has completed); a failed one completes
    /// in error and moves the QP to ERR. `false` if the QP is in ERR now.
    pub(super) fn complete_local_ops(&mut self) -> bool {
        while sq_before(self.st, self.st.sq.consumer(), self.st.req.started_end) {
            let m = meta(self.st, self.st.sq.consumer());
            if !m.local {
                break;
            }
            if m.failed {
                let status = if m.wc_opcode == WcKind::BindMw {
                    WcStatus::MwBindErr
                } else {
                    WcStatus::LocQpOpErr
                };
                fail_head(self.qp, self.st, status);
                return false;
            }
            complete_head(self.qp, self.st, WcStatus::Success);
        }
        true
    }

    /// Executes the local operation `w` at send queue index `idx` (at
    /// `req.next`), as `rxe_do_local_ops`; `true` if the requester may go on
    /// with the next WQE.
    ///
    /// LOCAL_INV first waits until every earlier WQE has completed (the C
    /// driver makes the local invalidate fence of §10.6.5.1 mandatory);
    /// REG_MR and BIND_MW run at once. Each completes once it is the oldest
    /// WQE, with `IB_WC_REG_MR` / `IB_WC_LOCAL_INV` / `IB_WC_BIND_MW` (if
    /// signaled), or when refused with `IB_WC_LOC_QP_OP_ERR` (BIND_MW:
    /// `IB_WC_MW_BIND_ERR`). REG_MR names a region by key index, which only
    /// kernel WQEs may do. A retransmission never runs one twice.
    pub(super) fn run_local_op(&mut self, idx: u32, w: &SendWqe) -> bool {
        if sq_before(self.st, idx, self.st.req.started_end) {
            // Executed before the requester was rewound: skip it, unless it
            // failed (nothing after it runs).
            if meta(self.st, idx).failed {
                return false;
            }
            self.st.req.next = self.st.sq.geo.next(idx);
            self.st.req.offset = 0;
            return true;
        }
        if w.opcode == wr::IB_WR_LOCAL_INV && idx != self.st.sq.consumer() {
            return false;
        }
        let dev = self.qp.device();
        let pd_id = self.qp.pd_id();
        let (result, wc_opcode) = if w.opcode == wr::IB_WR_LOCAL_INV {
            (
                invalidate_key(self.qp, w.invalidate_rkey, None),
                WcKind::LocalInv,
            )
        } else if w.opcode == wr::IB_WR_BIND_MW {
            let r = RrxeMw::bind(dev, pd_id, self.qp.uid, &w.mw)
                .map_err(|_| crate::rrxe::mr::LocalOpError);
            (r, WcKind::BindMw)
        } else if self.qp.is_user() {
            (Err(crate::rrxe::mr::LocalOpError), WcKind::RegMr)
        } else {
            (RrxeMr::register(dev, pd_id, &w.reg), WcKind::RegMr)
        };
        // No PSN of its own: an empty range after the packets sent so far, so
        // that acknowledges retire it in order and no retransmission lands in it.
        let m = WqeMeta {
            wr_id: w.wr_id,
            wc_opcode,
            signaled: self.qp.sq_sig_all || w.is_signaled(),
            len: 0,
            first_psn: self.st.req.psn,
            last_psn: self.st.req.psn.sub(1),
            local: true,
            failed: result.is_err(),
            ..WqeMeta::default()
        };
        match self.st.sq_meta.get_mut(idx as usize) {
            Some(slot) => *slot = m,
            None => return false,
        }
        self.st.req.started_end = self.st.sq.geo.next(idx);
        if m.failed {
            self.complete_local_ops();
            return false;
        }
        self.st.req.next = self.st.req.started_end;
        self.st.req.offset = 0;
        self.complete_local_ops()
    }
}

/// The R_Key a SEND with invalidate's last packet names, invalidated for
/// the QP's PD (`invalidate_rkey` in the C responder); `None` for other
/// packets, `Err` if the key names no fast-register region or type 2
/// window (bound to this QP) of the PD, or is not its current key.
pub(super) fn invalidate_for_send(qp: &Qp<Rrxe>, pkt: &Packet<'_>) -> Result<Option<u32>, ()> {
    let Some(ieth) = pkt.ext().ieth else {
        return Ok(None);
    };
    invalidate_key(qp, ieth.rkey, Some(qp.uid)).map_err(|_| ())?;
    Ok(Some(ieth.rkey))
}

/// Invalidates the fast-register region or the type 2 memory window of
/// `key` for `qp` (`invalidate_rkey`/`rxe_do_local_ops` in the C driver),
/// by LOCAL_INV or, with `remote_qp`, by a SEND with invalidate received.
fn invalidate_key(
    qp: &Qp<Rrxe>,
    key: u32,
    remote_qp: Option<u64>,
) -> Result<(), crate::rrxe::mr::LocalOpError> {
    let (dev, pd_id) = (qp.device(), qp.pd_id());
    if is_mw_key(key) {
        RrxeMw::invalidate(dev, pd_id, key, remote_qp).map_err(|_| crate::rrxe::mr::LocalOpError)
    } else {
        RrxeMr::invalidate(dev, pd_id, key)
    }
}
