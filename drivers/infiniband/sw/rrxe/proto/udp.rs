// SPDX-License-Identifier: GPL-2.0

//! The UDP source port of RoCEv2 packets.
//!
//! RoCEv2 uses the UDP source port as flow entropy for ECMP (IBTA Vol 1
//! Annex A17): every packet of a QP carries the same source port, from the
//! dynamic range `0xc000..=0xffff`. rxe derives it from the QPN when a QP is
//! created, and from the GRH flow label (or, if that is 0, from the two
//! QPNs) when the QP is given an address vector; `rdma_get_udp_sport()` in
//! `include/rdma/ib_verbs.h` defines the latter for all RoCE providers.

#![forbid(unsafe_code)]

use super::bth::QPN_MASK;

/// Lowest UDP source port of RoCEv2 packets.
pub const UDP_SPORT_MIN: u16 = 0xc000;

/// Mask of the 20-bit GRH flow label.
pub const FLOW_LABEL_MASK: u32 = 0x000f_ffff;

/// Source port for a QP before it has an address vector with a GRH, as
/// rxe computes it: `0xc000` plus a 14-bit multiplicative hash of the QPN
/// (the kernel's generic `hash_32(qpn, 14)`).
pub const fn sport_from_qpn(qpn: u32) -> u16 {
    const GOLDEN_RATIO_32: u32 = 0x61c8_8647;
    let hash = (qpn & QPN_MASK).wrapping_mul(GOLDEN_RATIO_32) >> 18;
    UDP_SPORT_MIN | (hash as u16)
}

/// Symmetric flow label of a connection, from the local and remote QPN
/// (`rdma_calc_flow_label()`): both ends compute the same value.
pub const fn flow_label(lqpn: u32, rqpn: u32) -> u32 {
    let mut v = (lqpn as u64) * (rqpn as u64);
    v ^= v >> 20;
    v ^= v >> 40;
    let [a, b, c, ..] = v.to_le_bytes();
    u32::from_le_bytes([a, b, c, 0]) & FLOW_LABEL_MASK
}

/// Source port for a flow label (`rdma_flow_label_to_udp_sport()`): the low
/// 14 bits of the label folded with its high 6 bits, in the dynamic range.
pub const fn sport_from_flow_label(fl: u32) -> u16 {
    let low = fl & 0x3fff;
    let high = (fl & 0xf_c000) >> 14;
    UDP_SPORT_MIN | ((low ^ high) & 0x3fff) as u16
}

/// Source port for a QP with a GRH (`rdma_get_udp_sport()`): from the flow
/// label, or from the QPN pair when the label is 0.
pub const fn udp_sport(flow_label_in: u32, lqpn: u32, rqpn: u32) -> u16 {
    let fl = if flow_label_in == 0 {
        flow_label(lqpn, rqpn)
    } else {
        flow_label_in
    };
    sport_from_flow_label(fl)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Values computed with the C formulas in Python.
    #[test]
    fn known_values() {
        assert_eq!(sport_from_qpn(0x11), 0xdf94);
        assert_eq!(sport_from_qpn(1), 0xd872);
        assert_eq!(sport_from_qpn(0xff_ffff), 0xf94d);
        assert_eq!(flow_label(0x11, 0x12), 0x132);
        assert_eq!(flow_label(0xff_ffff, 0xff_fffe), 0xf_ff2d);
        assert_eq!(udp_sport(0, 0xff_ffff, 0xff_fffe), 0xff12);
        assert_eq!(udp_sport(0x1_2345, 1, 2), 0xe341);
        assert_eq!(flow_label(7, 9), flow_label(9, 7));
        for q in [0, 1, 2, 0x1234, 0xff_ffff] {
            assert!(sport_from_qpn(q) >= UDP_SPORT_MIN);
        }
    }
}
