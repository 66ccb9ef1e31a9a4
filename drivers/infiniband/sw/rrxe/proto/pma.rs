// SPDX-License-Identifier: GPL-2.0

//! The port's Performance Management Agent (IBTA Vol 1 §16.1): answers to
//! `Get(ClassPortInfo)`, `Get(PortCounters)` and `Get(PortCountersExtended)`
//! from the port's counters, as the C driver's `rxe_mad.c` gives them.
//!
//! The RDMA core asks a device's `process_mad` for these to fill
//! `/sys/class/infiniband/DEV/ports/N/counters/` (`get_perf_mad`), and offers
//! it every MAD the GSI QP receives first; a MAD this agent does not answer
//! goes on to the core's own agents (the connection manager's, ...).
//!
//! Offsets are those of `struct ib_mad` (a 24-byte common header, then the
//! class data) and of the PM class, whose attribute data starts 40 bytes
//! into the class data (IBTA Vol 1 §16.1.1, Table 218).

#![forbid(unsafe_code)]

/// Size of a MAD (`struct ib_mad`).
pub const MAD_SIZE: usize = 256;

/// Management class of performance management (`IB_MGMT_CLASS_PERF_MGMT`).
pub const MGMT_CLASS_PERF_MGMT: u8 = 0x04;
/// Method `Get` (`IB_MGMT_METHOD_GET`).
pub const METHOD_GET: u8 = 0x01;
/// Method `GetResp` (`IB_MGMT_METHOD_GET_RESP`).
pub const METHOD_GET_RESP: u8 = 0x81;

/// Attribute `ClassPortInfo` (`IB_PMA_CLASS_PORT_INFO`).
pub const ATTR_CLASS_PORT_INFO: u16 = 0x0001;
/// Attribute `PortCounters` (`IB_PMA_PORT_COUNTERS`).
pub const ATTR_PORT_COUNTERS: u16 = 0x0012;
/// Attribute `PortCountersExtended` (`IB_PMA_PORT_COUNTERS_EXT`).
pub const ATTR_PORT_COUNTERS_EXT: u16 = 0x001d;

/// MAD status: the class or method is not supported
/// (`IB_MGMT_MAD_STATUS_UNSUPPORTED_METHOD`).
pub const STATUS_UNSUPPORTED_METHOD: u16 = 0x0008;
/// MAD status: the attribute is not supported for the method
/// (`IB_MGMT_MAD_STATUS_UNSUPPORTED_METHOD_ATTRIB`).
pub const STATUS_UNSUPPORTED_METHOD_ATTRIB: u16 = 0x000c;

/// `ClassPortInfo:CapabilityMask` bit: `PortCountersExtended` has the
/// full set of 64-bit counters (`IB_PMA_CLASS_CAP_EXT_WIDTH`).
pub const CAP_EXT_WIDTH: u16 = 1 << 9;

/// Header field offsets (`struct ib_mad_hdr`).
const HDR_MGMT_CLASS: usize = 1;
const HDR_METHOD: usize = 3;
const HDR_STATUS: usize = 4;
const HDR_ATTR_ID: usize = 16;
/// Where the PM attribute data starts: the 24-byte header and the PM
/// class's 40 reserved bytes.
const PM_DATA: usize = 24 + 40;

/// `PortCounters:LinkDownedCounter` (8 bits).
const PC_LINK_DOWNED: usize = PM_DATA + 7;
/// `PortCountersExtended`: `PortXmitData`, `PortRcvData`,
/// `PortXmitPkts`, `PortRcvPkts` (64 bits each).
const PCE_XMIT_DATA: usize = PM_DATA + 8;
const PCE_RCV_DATA: usize = PM_DATA + 16;
const PCE_XMIT_PKTS: usize = PM_DATA + 24;
const PCE_RCV_PKTS: usize = PM_DATA + 32;

/// The port counters the agent reports.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PortCounters {
    /// Times the link went down.
    pub link_downed: u64,
    /// Bytes sent (RoCE headers and payload, as the C driver counts them).
    pub sent_bytes: u64,
    /// Bytes received.
    pub rcvd_bytes: u64,
    /// Packets sent.
    pub sent_pkts: u64,
    /// Packets received.
    pub rcvd_pkts: u64,
}

/// What became of a MAD offered to the agent.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// `out` holds the response (`IB_MAD_RESULT_SUCCESS | IB_MAD_RESULT_REPLY`).
    Reply,
    /// Not for this agent; `out` holds the status saying why, and the MAD
    /// goes on to the RDMA core's agents (`IB_MAD_RESULT_SUCCESS`).
    NotHandled,
}

/// Answers the MAD `mad`, writing the response into `out`; `counters` is
/// read only for a `Get(PortCounters)` or `Get(PortCountersExtended)`.
///
/// As `rxe_process_mad`, except that a response's header is that of a
/// `GetResp` to the request (the C driver leaves it zero, which only its
/// sysfs caller, reading the data alone, tolerates), and a PM MAD of
/// another method is not answered (the C driver answers it with a MAD of
/// zeros).
pub fn process(
    mad: &[u8; MAD_SIZE],
    counters: impl FnOnce() -> PortCounters,
    out: &mut [u8; MAD_SIZE],
) -> Outcome {
    out.fill(0);
    if mad[HDR_MGMT_CLASS] != MGMT_CLASS_PERF_MGMT || mad[HDR_METHOD] != METHOD_GET {
        set_status(out, STATUS_UNSUPPORTED_METHOD);
        return Outcome::NotHandled;
    }
    match u16::from_be_bytes([mad[HDR_ATTR_ID], mad[HDR_ATTR_ID + 1]]) {
        ATTR_CLASS_PORT_INFO => {
            // ClassPortInfo:CapabilityMask is its bytes 2..4.
            put(out, PM_DATA + 2, &CAP_EXT_WIDTH.to_be_bytes());
        }
        ATTR_PORT_COUNTERS => {
            // IBTA Vol 1 §16.1.3.5: counters stop at all ones instead of
            // wrapping.
            let c = counters();
            put(
                out,
                PC_LINK_DOWNED,
                &[u8::try_from(c.link_downed).unwrap_or(u8::MAX)],
            );
        }
        ATTR_PORT_COUNTERS_EXT => {
            let c = counters();
            // PortXmitData and PortRcvData count 32-bit words.
            put(out, PCE_XMIT_DATA, &(c.sent_bytes >> 2).to_be_bytes());
            put(out, PCE_RCV_DATA, &(c.rcvd_bytes >> 2).to_be_bytes());
            put(out, PCE_XMIT_PKTS, &c.sent_pkts.to_be_bytes());
            put(out, PCE_RCV_PKTS, &c.rcvd_pkts.to_be_bytes());
        }
        _ => {
            set_status(out, STATUS_UNSUPPORTED_METHOD_ATTRIB);
            return Outcome::NotHandled;
        }
    }
    // The response's header: the request's, as a GetResp (IBTA Vol 1
    // §13.4.6.1: TransactionID and AttributeID are echoed).
    put(out, 0, mad.get(..HDR_STATUS).unwrap_or_default());
    out[HDR_METHOD] = METHOD_GET_RESP;
    put(out, 8, mad.get(8..24).unwrap_or_default());
    Outcome::Reply
}

/// Writes `status` into the header of `out`.
fn set_status(out: &mut [u8; MAD_SIZE], status: u16) {
    put(out, HDR_STATUS, &status.to_be_bytes());
}

/// Copies `bytes` into `out` at `at`; the offsets are constants within the
/// MAD, so nothing is ever cut off.
fn put(out: &mut [u8; MAD_SIZE], at: usize, bytes: &[u8]) {
    if let Some(dst) = out.get_mut(at..at + bytes.len()) {
        dst.copy_from_slice(bytes);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A request as the RDMA core's `get_perf_mad` builds it for sysfs.
    fn get(attr: u16, port: u8) -> [u8; MAD_SIZE] {
        let mut m = [0u8; MAD_SIZE];
        m[0] = 1; // base version
        m[HDR_MGMT_CLASS] = MGMT_CLASS_PERF_MGMT;
        m[2] = 1; // class version
        m[HDR_METHOD] = METHOD_GET;
        m[8..16].copy_from_slice(&0x0102_0304_0506_0708u64.to_be_bytes());
        m[HDR_ATTR_ID..HDR_ATTR_ID + 2].copy_from_slice(&attr.to_be_bytes());
        if attr != ATTR_CLASS_PORT_INFO {
            m[24 + 41] = port; // PortSelect
        }
        m
    }

    fn be64(out: &[u8; MAD_SIZE], at: usize) -> u64 {
        let mut b = [0u8; 8];
        b.copy_from_slice(&out[at..at + 8]);
        u64::from_be_bytes(b)
    }

    const COUNTERS: PortCounters = PortCounters {
        link_downed: 3,
        sent_bytes: 4099,
        rcvd_bytes: 8192,
        sent_pkts: 7,
        rcvd_pkts: 9,
    };

    #[test]
    fn class_port_info_has_extended_width() {
        let mut out = [0xffu8; MAD_SIZE];
        let r = process(&get(ATTR_CLASS_PORT_INFO, 0), || unreachable!(), &mut out);
        assert_eq!(r, Outcome::Reply);
        // sysfs picks the 64-bit counter table when this bit is set.
        assert_eq!(&out[PM_DATA..PM_DATA + 4], &[0, 0, 0x02, 0x00]);
    }

    #[test]
    fn port_counters_ext_count_words_and_packets() {
        let mut out = [0u8; MAD_SIZE];
        let r = process(&get(ATTR_PORT_COUNTERS_EXT, 1), || COUNTERS, &mut out);
        assert_eq!(r, Outcome::Reply);
        assert_eq!(be64(&out, PCE_XMIT_DATA), 4099 >> 2);
        assert_eq!(be64(&out, PCE_RCV_DATA), 8192 >> 2);
        assert_eq!(be64(&out, PCE_XMIT_PKTS), 7);
        assert_eq!(be64(&out, PCE_RCV_PKTS), 9);
        // Nothing else of the attribute data is set.
        assert!(out[PM_DATA..PCE_XMIT_DATA].iter().all(|&b| b == 0));
        assert!(out[PCE_RCV_PKTS + 8..].iter().all(|&b| b == 0));
    }

    #[test]
    fn link_downed_stops_at_all_ones() {
        let mut out = [0u8; MAD_SIZE];
        let c = PortCounters {
            link_downed: 300,
            ..COUNTERS
        };
        assert_eq!(
            process(&get(ATTR_PORT_COUNTERS, 1), || c, &mut out),
            Outcome::Reply
        );
        assert_eq!(out[PC_LINK_DOWNED], 0xff);
        assert_eq!(
            process(&get(ATTR_PORT_COUNTERS, 1), || COUNTERS, &mut out),
            Outcome::Reply
        );
        assert_eq!(out[PC_LINK_DOWNED], 3);
        // The 32-bit counters the C driver does not keep read zero.
        assert!(out[PM_DATA..PC_LINK_DOWNED].iter().all(|&b| b == 0));
    }

    #[test]
    fn response_header_is_a_get_resp_of_the_request() {
        let mut out = [0u8; MAD_SIZE];
        let req = get(ATTR_PORT_COUNTERS_EXT, 1);
        process(&req, || COUNTERS, &mut out);
        assert_eq!(&out[..3], &req[..3]);
        assert_eq!(out[HDR_METHOD], METHOD_GET_RESP);
        assert_eq!(&out[HDR_STATUS..HDR_STATUS + 2], &[0, 0]);
        assert_eq!(&out[8..24], &req[8..24]);
    }

    /// `mad` is left to the core without reading the counters, with
    /// `status` in the reply's status field.
    fn assert_not_handled(mad: &[u8; MAD_SIZE], status: u16) {
        let mut out = [0u8; MAD_SIZE];
        assert_eq!(
            process(mad, || unreachable!(), &mut out),
            Outcome::NotHandled
        );
        assert_eq!(&out[HDR_STATUS..HDR_STATUS + 2], &status.to_be_bytes());
    }

    #[test]
    fn other_classes_go_to_the_core() {
        let mut cm = get(ATTR_PORT_COUNTERS, 1);
        cm[HDR_MGMT_CLASS] = 0x07; // connection management
        assert_not_handled(&cm, STATUS_UNSUPPORTED_METHOD);
    }

    #[test]
    fn a_set_is_not_answered() {
        let mut set = get(ATTR_PORT_COUNTERS, 1);
        set[HDR_METHOD] = 0x02; // Set
        assert_not_handled(&set, STATUS_UNSUPPORTED_METHOD);
    }

    #[test]
    fn unknown_attributes_are_refused() {
        for attr in [0x0000, 0x0013, 0x001e, 0xffff] {
            assert_not_handled(&get(attr, 1), STATUS_UNSUPPORTED_METHOD_ATTRIB);
        }
    }

    #[test]
    fn any_mad_is_safe() {
        // Whatever a peer sends on the GSI QP: no panic, and a reply only
        // for the three PM Gets.
        let mut state = 0x1234_5678u32;
        for _ in 0..20_000 {
            let mut m = [0u8; MAD_SIZE];
            for b in &mut m {
                state ^= state << 13;
                state ^= state >> 17;
                state ^= state << 5;
                *b = state.to_le_bytes()[0];
            }
            if state % 3 == 0 {
                m[HDR_MGMT_CLASS] = MGMT_CLASS_PERF_MGMT;
                m[HDR_METHOD] = METHOD_GET;
            }
            let mut out = [0u8; MAD_SIZE];
            let attr = u16::from_be_bytes([m[HDR_ATTR_ID], m[HDR_ATTR_ID + 1]]);
            let answerable = m[HDR_MGMT_CLASS] == MGMT_CLASS_PERF_MGMT
                && m[HDR_METHOD] == METHOD_GET
                && matches!(
                    attr,
                    ATTR_CLASS_PORT_INFO | ATTR_PORT_COUNTERS | ATTR_PORT_COUNTERS_EXT
                );
            let r = process(&m, || COUNTERS, &mut out);
            assert_eq!(r == Outcome::Reply, answerable);
        }
    }
}
