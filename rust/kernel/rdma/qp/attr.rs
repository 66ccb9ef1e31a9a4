// SPDX-License-Identifier: GPL-2.0

//! QP attributes: types, states, attribute masks, capabilities and the
//! `struct ib_qp_attr` the driver stores (`include/rdma/ib_verbs.h`).

use crate::{
    bindings,
    rdma::{
        access::AccessFlags,
        ah::Av, //
    },
};

/// The QP types (`enum ib_qp_type`) a driver of this layer creates; it
/// refuses the RDMA core's others (XRC, raw packet, driver-defined), which
/// reach its `create_qp` as `None`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u32)]
pub enum QpType {
    /// `IB_QPT_SMI`, QP 0.
    Smi = bindings::ib_qp_type_IB_QPT_SMI,
    /// `IB_QPT_GSI`, QP 1.
    Gsi = bindings::ib_qp_type_IB_QPT_GSI,
    /// `IB_QPT_RC`.
    Rc = bindings::ib_qp_type_IB_QPT_RC,
    /// `IB_QPT_UC`.
    Uc = bindings::ib_qp_type_IB_QPT_UC,
    /// `IB_QPT_UD`.
    Ud = bindings::ib_qp_type_IB_QPT_UD,
}

impl QpType {
    const ALL: [QpType; 5] = [QpType::Smi, QpType::Gsi, QpType::Rc, QpType::Uc, QpType::Ud];

    /// The type of the C value `v`, or `None` for a type not named here.
    pub fn from_raw(v: u32) -> Option<Self> {
        Self::ALL.into_iter().find(|t| t.raw() == v)
    }

    /// The C value.
    pub const fn raw(self) -> u32 {
        self as u32
    }

    /// A datagram type (UD, GSI, SMI): its work requests carry an address
    /// handle.
    pub fn is_datagram(self) -> bool {
        matches!(self, QpType::Ud | QpType::Gsi | QpType::Smi)
    }
}

/// A QP state (`enum ib_qp_state`, IBTA Vol 1 §10.3.1). The order is the
/// enum's: a QP that is at least [`QpState::Rtr`] has a remote peer, and
/// [`QpState::Err`] comes last.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
#[repr(u32)]
pub enum QpState {
    /// `IB_QPS_RESET`.
    Reset = bindings::ib_qp_state_IB_QPS_RESET,
    /// `IB_QPS_INIT`.
    Init = bindings::ib_qp_state_IB_QPS_INIT,
    /// `IB_QPS_RTR`.
    Rtr = bindings::ib_qp_state_IB_QPS_RTR,
    /// `IB_QPS_RTS`.
    Rts = bindings::ib_qp_state_IB_QPS_RTS,
    /// `IB_QPS_SQD`.
    Sqd = bindings::ib_qp_state_IB_QPS_SQD,
    /// `IB_QPS_SQE`.
    Sqe = bindings::ib_qp_state_IB_QPS_SQE,
    /// `IB_QPS_ERR`.
    Err = bindings::ib_qp_state_IB_QPS_ERR,
}

impl QpState {
    const ALL: [QpState; 7] = [
        QpState::Reset,
        QpState::Init,
        QpState::Rtr,
        QpState::Rts,
        QpState::Sqd,
        QpState::Sqe,
        QpState::Err,
    ];

    /// The state of the C value `v`, or `None` outside `enum ib_qp_state`.
    pub fn from_raw(v: u32) -> Option<Self> {
        Self::ALL.into_iter().find(|s| s.raw() == v)
    }

    /// The C value.
    pub const fn raw(self) -> u32 {
        self as u32
    }
}

kernel::impl_flags!(
    /// The attributes a `modify_qp` call changes (`enum ib_qp_attr_mask`
    /// bits).
    #[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
    pub struct QpAttrMask(u32);

    /// One attribute of a `modify_qp` mask.
    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    pub enum QpAttrBit {
        /// `IB_QP_STATE`.
        State = bindings::ib_qp_attr_mask_IB_QP_STATE,
        /// `IB_QP_CUR_STATE`.
        CurState = bindings::ib_qp_attr_mask_IB_QP_CUR_STATE,
        /// `IB_QP_EN_SQD_ASYNC_NOTIFY`.
        EnSqdAsyncNotify = bindings::ib_qp_attr_mask_IB_QP_EN_SQD_ASYNC_NOTIFY,
        /// `IB_QP_ACCESS_FLAGS`.
        AccessFlags = bindings::ib_qp_attr_mask_IB_QP_ACCESS_FLAGS,
        /// `IB_QP_PKEY_INDEX`.
        PkeyIndex = bindings::ib_qp_attr_mask_IB_QP_PKEY_INDEX,
        /// `IB_QP_PORT`.
        Port = bindings::ib_qp_attr_mask_IB_QP_PORT,
        /// `IB_QP_QKEY`.
        Qkey = bindings::ib_qp_attr_mask_IB_QP_QKEY,
        /// `IB_QP_AV`.
        Av = bindings::ib_qp_attr_mask_IB_QP_AV,
        /// `IB_QP_PATH_MTU`.
        PathMtu = bindings::ib_qp_attr_mask_IB_QP_PATH_MTU,
        /// `IB_QP_TIMEOUT`.
        Timeout = bindings::ib_qp_attr_mask_IB_QP_TIMEOUT,
        /// `IB_QP_RETRY_CNT`.
        RetryCnt = bindings::ib_qp_attr_mask_IB_QP_RETRY_CNT,
        /// `IB_QP_RNR_RETRY`.
        RnrRetry = bindings::ib_qp_attr_mask_IB_QP_RNR_RETRY,
        /// `IB_QP_RQ_PSN`.
        RqPsn = bindings::ib_qp_attr_mask_IB_QP_RQ_PSN,
        /// `IB_QP_MAX_QP_RD_ATOMIC`.
        MaxQpRdAtomic = bindings::ib_qp_attr_mask_IB_QP_MAX_QP_RD_ATOMIC,
        /// `IB_QP_ALT_PATH`.
        AltPath = bindings::ib_qp_attr_mask_IB_QP_ALT_PATH,
        /// `IB_QP_MIN_RNR_TIMER`.
        MinRnrTimer = bindings::ib_qp_attr_mask_IB_QP_MIN_RNR_TIMER,
        /// `IB_QP_SQ_PSN`.
        SqPsn = bindings::ib_qp_attr_mask_IB_QP_SQ_PSN,
        /// `IB_QP_MAX_DEST_RD_ATOMIC`.
        MaxDestRdAtomic = bindings::ib_qp_attr_mask_IB_QP_MAX_DEST_RD_ATOMIC,
        /// `IB_QP_PATH_MIG_STATE`.
        PathMigState = bindings::ib_qp_attr_mask_IB_QP_PATH_MIG_STATE,
        /// `IB_QP_CAP`.
        Cap = bindings::ib_qp_attr_mask_IB_QP_CAP,
        /// `IB_QP_DEST_QPN`.
        DestQpn = bindings::ib_qp_attr_mask_IB_QP_DEST_QPN,
    }
);

impl QpAttrMask {
    /// The mask of the C value `v`, unknown bits included.
    pub fn from_raw(v: u32) -> Self {
        Self(v)
    }

    /// The C value.
    pub fn raw(self) -> u32 {
        self.0
    }

    /// Whether no bit from `IB_QP_RATE_LIMIT` up is set
    /// (`IB_QP_ATTR_STANDARD_BITS`).
    pub fn is_standard(self) -> bool {
        self.0 & !((bindings::ib_qp_attr_mask_IB_QP_RATE_LIMIT << 1) - 1) == 0
    }
}

/// Capabilities of a QP's work queues (`struct ib_qp_cap`).
#[derive(Clone, Copy, Debug, Default)]
pub struct QpCap {
    /// Send queue depth.
    pub max_send_wr: u32,
    /// Receive queue depth.
    pub max_recv_wr: u32,
    /// SGEs per send WR.
    pub max_send_sge: u32,
    /// SGEs per receive WR.
    pub max_recv_sge: u32,
    /// Inline data per send WR, in bytes.
    pub max_inline_data: u32,
}

impl QpCap {
    pub(super) fn from_raw(c: &bindings::ib_qp_cap) -> Self {
        Self {
            max_send_wr: c.max_send_wr,
            max_recv_wr: c.max_recv_wr,
            max_send_sge: c.max_send_sge,
            max_recv_sge: c.max_recv_sge,
            max_inline_data: c.max_inline_data,
        }
    }

    pub(super) fn write_raw(&self, c: &mut bindings::ib_qp_cap) {
        c.max_send_wr = self.max_send_wr;
        c.max_recv_wr = self.max_recv_wr;
        c.max_send_sge = self.max_send_sge;
        c.max_recv_sge = self.max_recv_sge;
        c.max_inline_data = self.max_inline_data;
    }
}

/// Creation attributes of a QP (`struct ib_qp_init_attr`).
#[derive(Clone, Copy, Debug)]
pub struct QpInitAttr {
    /// The QP type; `None` for one [`QpType`] does not name, which the
    /// driver refuses.
    pub qp_type: Option<QpType>,
    /// Requested capabilities; the driver writes back what it allocated.
    pub cap: QpCap,
    /// Every send WR completes (`IB_SIGNAL_ALL_WR`).
    pub sq_sig_all: bool,
    /// `enum ib_qp_create_flags`.
    pub create_flags: u32,
    /// Port (GSI/SMI only).
    pub port_num: u32,
    /// Whether both CQs are given.
    pub has_cqs: bool,
    /// Whether the QP receives from an SRQ.
    pub has_srq: bool,
}

/// Attributes of a QP (`struct ib_qp_attr`), as the driver stores and
/// reports them.
///
/// The address vectors are kept without their `sgid_attr` references (the
/// RDMA core only lends those for the duration of a call).
pub struct QpAttr(bindings::ib_qp_attr);

impl Clone for QpAttr {
    fn clone(&self) -> Self {
        Self(self.0.clone_raw())
    }
}

// SAFETY: The only pointers (`sgid_attr`, `xmit_slave`) are always NULL in a stored `QpAttr`.
unsafe impl Send for QpAttr {}
// SAFETY: As above.
unsafe impl Sync for QpAttr {}

macro_rules! qp_attr_accessors {
    ($($(#[$m:meta])* $get:ident, $set:ident: $t:ty;)*) => {
        $(
            $(#[$m])*
            pub fn $get(&self) -> $t { self.0.$get }
            /// Sets the field of the same name.
            pub fn $set(&mut self, v: $t) { self.0.$get = v; }
        )*
    };
}

impl QpAttr {
    /// All-zero attributes (state RESET).
    pub fn new() -> Self {
        // SAFETY: All-zero is a valid `ib_qp_attr`.
        Self(unsafe { core::mem::zeroed() })
    }

    pub(super) fn from_raw(a: &bindings::ib_qp_attr) -> Self {
        // SAFETY: `ib_qp_attr` is plain data; the copy is a bitwise snapshot.
        let mut c = Self(unsafe { core::ptr::read(a) });
        c.0.ah_attr.grh.sgid_attr = core::ptr::null();
        c.0.alt_ah_attr.grh.sgid_attr = core::ptr::null();
        c.0.xmit_slave = core::ptr::null_mut();
        c
    }

    /// `qp_state` of attributes the driver keeps, which only
    /// [`QpAttr::set_qp_state`] writes.
    pub fn qp_state(&self) -> QpState {
        // The fallback is never taken: the stored value came from a
        // `QpState` (or is RESET, all zero).
        QpState::from_raw(self.0.qp_state).unwrap_or(QpState::Err)
    }

    /// Sets `qp_state`.
    pub fn set_qp_state(&mut self, s: QpState) {
        self.0.qp_state = s.raw();
    }

    /// Sets `cur_qp_state`.
    pub fn set_cur_qp_state(&mut self, s: QpState) {
        self.0.cur_qp_state = s.raw();
    }

    /// `qp_state` as a caller of `modify_qp` asked for it, or `None` if it
    /// names no state.
    pub fn requested_state(&self) -> Option<QpState> {
        QpState::from_raw(self.0.qp_state)
    }

    /// `cur_qp_state` as a caller of `modify_qp` gave it, or `None` if it
    /// names no state.
    pub fn requested_cur_state(&self) -> Option<QpState> {
        QpState::from_raw(self.0.cur_qp_state)
    }

    /// A copy of the C struct, for the RDMA core's `query_qp` answer.
    pub(super) fn to_raw(&self) -> bindings::ib_qp_attr {
        self.0.clone_raw()
    }

    /// `qp_access_flags`: the remote operations the responder accepts.
    pub fn qp_access_flags(&self) -> AccessFlags {
        // CAST: the C field is an `int` holding flag bits.
        AccessFlags::from_raw(self.0.qp_access_flags as u32)
    }

    /// Sets `qp_access_flags`.
    pub fn set_qp_access_flags(&mut self, v: AccessFlags) {
        // CAST: as above, the bits back into the `int`.
        self.0.qp_access_flags = v.raw() as i32;
    }

    qp_attr_accessors! {
        /// `path_mtu` (`enum ib_mtu`).
        path_mtu, set_path_mtu: u32;
        /// `port_num`.
        port_num, set_port_num: u32;
        /// `alt_port_num`.
        alt_port_num, set_alt_port_num: u32;
        /// `timeout` (4.096 µs × 2^timeout).
        timeout, set_timeout: u8;
        /// `alt_timeout`.
        alt_timeout, set_alt_timeout: u8;
        /// `max_rd_atomic`.
        max_rd_atomic, set_max_rd_atomic: u8;
        /// `max_dest_rd_atomic`.
        max_dest_rd_atomic, set_max_dest_rd_atomic: u8;
        /// `sq_draining`.
        sq_draining, set_sq_draining: u8;
        /// `sq_psn`.
        sq_psn, set_sq_psn: u32;
        /// `rq_psn`.
        rq_psn, set_rq_psn: u32;
        /// `dest_qp_num`: the remote QPN (RC, UC).
        dest_qp_num, set_dest_qp_num: u32;
        /// `retry_cnt`: transport retries before an error (0..=7).
        retry_cnt, set_retry_cnt: u8;
        /// `rnr_retry`: RNR NAK retries (0..=6; 7 means unlimited).
        rnr_retry, set_rnr_retry: u8;
        /// `min_rnr_timer`: the RNR NAK timer field sent to the requester
        /// (IBTA Vol 1 §9.7.5.2.8, table of encoded times).
        min_rnr_timer, set_min_rnr_timer: u8;
        /// `qkey` (UD, GSI).
        qkey, set_qkey: u32;
        /// `pkey_index`.
        pkey_index, set_pkey_index: u16;
    }

    /// The GRH of the primary path: destination GID, source GID index, flow
    /// label, traffic class and hop limit; and the destination MAC.
    pub fn av(&self) -> Av {
        Av::from_ah_attr(&self.0.ah_attr)
    }

    /// `cap`.
    pub fn cap(&self) -> QpCap {
        QpCap::from_raw(&self.0.cap)
    }

    /// Sets `cap`.
    pub fn set_cap(&mut self, cap: &QpCap) {
        cap.write_raw(&mut self.0.cap);
    }

    /// Port of the primary address vector.
    pub fn ah_port_num(&self) -> u32 {
        self.0.ah_attr.port_num
    }

    /// Copies the fields of `new` selected by `mask` (`IB_QP_*`), except the
    /// state, which the caller sets after its checks.
    pub fn merge(&mut self, new: &QpAttr, m: QpAttrMask) {
        let (d, s) = (&mut self.0, &new.0);
        macro_rules! take {
            ($bit:expr, $($f:ident),+) => {
                if m.contains($bit) { $(d.$f = s.$f;)+ }
            };
        }
        take!(QpAttrBit::CurState, cur_qp_state);
        take!(QpAttrBit::EnSqdAsyncNotify, en_sqd_async_notify);
        take!(QpAttrBit::AccessFlags, qp_access_flags);
        take!(QpAttrBit::PkeyIndex, pkey_index);
        take!(QpAttrBit::Port, port_num);
        take!(QpAttrBit::Qkey, qkey);
        if m.contains(QpAttrBit::Av) {
            // SAFETY: Plain data copy; the `sgid_attr` reference is dropped below.
            d.ah_attr = unsafe { core::ptr::read(&s.ah_attr) };
            d.ah_attr.grh.sgid_attr = core::ptr::null();
        }
        if m.contains(QpAttrBit::AltPath) {
            // SAFETY: As above.
            d.alt_ah_attr = unsafe { core::ptr::read(&s.alt_ah_attr) };
            d.alt_ah_attr.grh.sgid_attr = core::ptr::null();
            d.alt_port_num = s.alt_port_num;
            d.alt_pkey_index = s.alt_pkey_index;
            d.alt_timeout = s.alt_timeout;
        }
        take!(QpAttrBit::PathMtu, path_mtu);
        take!(QpAttrBit::Timeout, timeout);
        take!(QpAttrBit::RetryCnt, retry_cnt);
        take!(QpAttrBit::RnrRetry, rnr_retry);
        take!(QpAttrBit::RqPsn, rq_psn);
        take!(QpAttrBit::MaxQpRdAtomic, max_rd_atomic);
        take!(QpAttrBit::MinRnrTimer, min_rnr_timer);
        take!(QpAttrBit::SqPsn, sq_psn);
        take!(QpAttrBit::MaxDestRdAtomic, max_dest_rd_atomic);
        take!(QpAttrBit::PathMigState, path_mig_state);
        take!(QpAttrBit::DestQpn, dest_qp_num);
    }
}

impl Default for QpAttr {
    fn default() -> Self {
        Self::new()
    }
}

/// Whether the IBTA transition table allows going from `cur` to `next` for
/// a QP of type `ty` with attribute mask `mask` (`ib_modify_qp_is_ok`).
pub fn modify_is_ok(cur: QpState, next: QpState, ty: QpType, mask: QpAttrMask) -> bool {
    // SAFETY: Pure function over its arguments.
    unsafe { bindings::ib_modify_qp_is_ok(cur.raw(), next.raw(), ty.raw(), mask.raw()) }
}
trait CloneRaw {
    fn clone_raw(&self) -> Self;
}

impl CloneRaw for bindings::ib_qp_attr {
    fn clone_raw(&self) -> Self {
        // SAFETY: Plain data.
        unsafe { core::ptr::read(self) }
    }
}
