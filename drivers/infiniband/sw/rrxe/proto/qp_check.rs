// SPDX-License-Identifier: GPL-2.0

//! The C driver's checks on QP creation and modification that come on top
//! of the IBTA transition table (`ib_modify_qp_is_ok`, applied by the
//! kernel glue), and the queue sizes it derives from the capabilities.
//! Every failure is `EINVAL` in the C driver.

#![forbid(unsafe_code)]

/// Size of `struct rxe_send_wqe` without its SGEs or inline data.
pub const SEND_WQE_SIZE: u32 = 208;
/// Size of `struct rxe_recv_wqe` without its SGEs.
pub const RECV_WQE_SIZE: u32 = 40;
/// Size of `struct ib_sge` / `struct rxe_sge`.
pub const SGE_SIZE: u32 = 16;
/// Largest `timeout` / `alt_timeout` exponent.
pub const MAX_TIMEOUT: u8 = 31;
/// `IB_MTU_4096`, the largest path MTU.
pub const MAX_PATH_MTU: u32 = 5;

/// Requested or granted work queue capabilities.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Caps {
    /// Send queue depth.
    pub max_send_wr: u32,
    /// Receive queue depth.
    pub max_recv_wr: u32,
    /// SGEs per send WR.
    pub max_send_sge: u32,
    /// SGEs per receive WR.
    pub max_recv_sge: u32,
    /// Inline bytes per send WR.
    pub max_inline_data: u32,
}

/// Device limits the capabilities are checked against.
#[derive(Clone, Copy, Debug)]
pub struct Limits {
    /// `max_qp_wr`.
    pub max_wr: u32,
    /// `max_send_sge` = `max_recv_sge`.
    pub max_sge: u32,
    /// Largest inline data.
    pub max_inline: u32,
}

/// `rxe_qp_chk_cap`: every capability within the device limits; the
/// receive side is ignored with an SRQ.
pub fn check_caps(c: &Caps, l: &Limits, has_srq: bool) -> bool {
    c.max_send_wr <= l.max_wr
        && c.max_send_sge <= l.max_sge
        && (has_srq || (c.max_recv_wr <= l.max_wr && c.max_recv_sge <= l.max_sge))
        && c.max_inline_data <= l.max_inline
}

/// Send WQE payload size and the granted SGE and inline limits
/// (`rxe_init_sq`): the larger of the SGE array and the inline buffer.
/// Returns `(wqe_size, max_send_sge, max_inline_data)`.
pub fn send_wqe_layout(max_send_sge: u32, max_inline: u32) -> (u32, u32, u32) {
    let payload = (max_send_sge * SGE_SIZE).max(max_inline);
    (SEND_WQE_SIZE + payload, payload / SGE_SIZE, payload)
}

/// Receive WQE size (`rxe_init_rq`).
pub fn recv_wqe_size(max_recv_sge: u32) -> u32 {
    RECV_WQE_SIZE + max_recv_sge * SGE_SIZE
}

/// `max_rd_atomic` / `max_dest_rd_atomic` as stored: rounded up to a power
/// of two, 0 stays 0.
pub fn round_rd_atomic(v: u8) -> u8 {
    if v == 0 {
        0
    } else {
        u8::try_from(u32::from(v).next_power_of_two()).unwrap_or(128)
    }
}

/// `timeout` and `alt_timeout` are at most 31.
pub fn timeout_ok(t: u8) -> bool {
    t <= MAX_TIMEOUT
}

/// `path_mtu` is at most 4096 (not checked against the active MTU).
pub fn path_mtu_ok(mtu: u32) -> bool {
    mtu <= MAX_PATH_MTU
}

#[cfg(test)]
mod tests {
    use super::*;

    const L: Limits = Limits {
        max_wr: 1 << 20,
        max_sge: 32,
        max_inline: 512,
    };

    #[test]
    fn caps() {
        let mut c = Caps {
            max_send_wr: 16,
            max_recv_wr: 16,
            max_send_sge: 32,
            max_recv_sge: 32,
            max_inline_data: 512,
        };
        assert!(check_caps(&c, &L, false));
        c.max_recv_sge = 33;
        assert!(!check_caps(&c, &L, false));
        // Ignored with an SRQ.
        assert!(check_caps(&c, &L, true));
        c.max_recv_sge = 1;
        c.max_inline_data = 513;
        assert!(!check_caps(&c, &L, false));
        c.max_inline_data = 0;
        c.max_send_wr = (1 << 20) + 1;
        assert!(!check_caps(&c, &L, false));
    }

    #[test]
    fn layouts() {
        assert_eq!(send_wqe_layout(1, 0), (224, 1, 16));
        assert_eq!(send_wqe_layout(1, 64), (272, 4, 64));
        assert_eq!(send_wqe_layout(32, 0), (720, 32, 512));
        assert_eq!(recv_wqe_size(1), 56);
    }

    #[test]
    fn attr_checks() {
        assert_eq!(round_rd_atomic(0), 0);
        assert_eq!(round_rd_atomic(3), 4);
        assert_eq!(round_rd_atomic(128), 128);
        assert!(timeout_ok(31) && !timeout_ok(32));
        assert!(path_mtu_ok(5) && !path_mtu_ok(6));
    }
}
