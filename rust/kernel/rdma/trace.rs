// SPDX-License-Identifier: GPL-2.0

//! The provider's tracepoints (system `rrxe`, declared in
//! `rust/helpers/rrxe_trace.h`): QP state changes, packets, retransmissions,
//! NAKs and error completions.
//!
//! `kernel::tracepoint::declare_trace!` only reaches tracepoints known to
//! the kernel crate's bindings, so each event is a C helper here; the
//! helper tests the tracepoint's static key before doing anything else.
//! The packet events come with an `*_enabled()` test so that callers decode
//! headers only when someone traces.

use crate::{
    bindings,
    rdma::{
        device::{
            Device,
            Driver, //
        },
        qp::QpState,
    },
};

/// Why the requester sends packets again (`enum rrxe_retransmit_reason`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u32)]
pub enum RetransmitReason {
    /// The local ACK timeout expired (IBTA Vol 1 §9.7.6.1.3).
    Timeout = bindings::rrxe_retransmit_reason_RRXE_RETRANSMIT_TIMEOUT,
    /// A PSN sequence error NAK arrived (§9.7.5.2.2).
    SequenceNak = bindings::rrxe_retransmit_reason_RRXE_RETRANSMIT_SEQ_NAK,
    /// The wait an RNR NAK asked for is over (§9.7.5.2.8).
    Rnr = bindings::rrxe_retransmit_reason_RRXE_RETRANSMIT_RNR,
    /// An ACK covered a READ or atomic whose response is missing (an
    /// implied NAK, §9.7.5.1.1).
    ImpliedNak = bindings::rrxe_retransmit_reason_RRXE_RETRANSMIT_IMPLIED_NAK,
}

/// One packet's fields as the packet events show them.
#[derive(Clone, Copy, Debug)]
pub struct PktFields {
    /// Sending QP (send) or the BTH's destination QP (receive).
    pub qpn: u32,
    /// The BTH's destination QP.
    pub dest_qpn: u32,
    /// The BTH's PSN.
    pub psn: u32,
    /// The BTH's opcode.
    pub opcode: u8,
    /// Payload bytes.
    pub len: u32,
    /// The BTH's AckReq bit.
    pub ackreq: bool,
}

/// Event `rrxe_qp_state`: QP `qpn` of `dev` moved from `old` to `new`
/// (`enum ib_qp_state`).
pub fn qp_state<T: Driver>(dev: &Device<T>, qpn: u32, old: QpState, new: QpState) {
    // SAFETY: `dev` is a valid device; the helper only reads its name.
    unsafe { bindings::trace_qp_state(dev.as_raw(), qpn, old.raw(), new.raw()) }
}

/// The C helper of an event of class `rrxe_pkt`.
type PktEvent = unsafe extern "C" fn(*const bindings::ib_device, u32, u32, u32, u8, u32, bool);

/// Calls `event`, an event of class `rrxe_pkt`, for a packet `p` of `dev`.
///
/// # Safety
///
/// `event` is a C helper of class `rrxe_pkt` (`trace_send_pkt`,
/// `trace_recv_pkt`).
unsafe fn pkt<T: Driver>(event: PktEvent, dev: &Device<T>, p: &PktFields) {
    // SAFETY: `event` is a helper of class `rrxe_pkt` (the caller's contract), which only reads
    // the name of `dev`, a valid device.
    unsafe {
        event(
            dev.as_raw(),
            p.qpn,
            p.dest_qpn,
            p.psn,
            p.opcode,
            p.len,
            p.ackreq,
        )
    }
}

/// Whether event `rrxe_send_pkt` is enabled.
pub fn send_pkt_enabled() -> bool {
    // SAFETY: Reads the tracepoint's static key only.
    unsafe { bindings::trace_send_pkt_enabled() }
}

/// Event `rrxe_send_pkt`: `dev` hands a packet to the IP stack (or to its
/// own receive path, for a local destination).
pub fn send_pkt<T: Driver>(dev: &Device<T>, p: &PktFields) {
    // SAFETY: `trace_send_pkt` is of class `rrxe_pkt`.
    unsafe { pkt(bindings::trace_send_pkt, dev, p) };
}

/// Whether event `rrxe_recv_pkt` is enabled.
pub fn recv_pkt_enabled() -> bool {
    // SAFETY: Reads the tracepoint's static key only.
    unsafe { bindings::trace_recv_pkt_enabled() }
}

/// Event `rrxe_recv_pkt`: `dev` received a valid packet for a QP.
pub fn recv_pkt<T: Driver>(dev: &Device<T>, p: &PktFields) {
    // SAFETY: `trace_recv_pkt` is of class `rrxe_pkt`.
    unsafe { pkt(bindings::trace_recv_pkt, dev, p) };
}

/// Event `rrxe_retransmit`: QP `qpn` sends again from `psn`.
pub fn retransmit<T: Driver>(dev: &Device<T>, qpn: u32, psn: u32, reason: RetransmitReason) {
    // SAFETY: `dev` is a valid device; the helper only reads its name.
    unsafe { bindings::trace_retransmit(dev.as_raw(), qpn, psn, reason as u32) }
}

/// Event `rrxe_nak`: a NAK or RNR NAK with AETH `syndrome` for `psn`,
/// `sent` by QP `qpn`'s responder or received by its requester.
pub fn nak<T: Driver>(dev: &Device<T>, qpn: u32, psn: u32, syndrome: u8, sent: bool) {
    // SAFETY: `dev` is a valid device; the helper only reads its name.
    unsafe { bindings::trace_nak(dev.as_raw(), qpn, psn, syndrome, sent) }
}

/// Event `rrxe_wc_error`: a completion with an error `status`
/// (`enum ib_wc_status`) for QP `qpn`.
pub fn wc_error<T: Driver>(dev: &Device<T>, qpn: u32, wr_id: u64, status: u32, opcode: u32) {
    // SAFETY: `dev` is a valid device; the helper only reads its name.
    unsafe { bindings::trace_wc_error(dev.as_raw(), qpn, wr_id, status, opcode) }
}
