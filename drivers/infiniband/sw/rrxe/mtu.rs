// SPDX-License-Identifier: GPL-2.0

#![forbid(unsafe_code)]

//! Active path MTU of the port from the net device MTU.

use crate::rdma::port::Mtu;
use kernel::prelude::*;

use super::param::MAX_HDR_LENGTH;

/// Returns the largest RoCE path MTU whose packets fit in frames of a net
/// device with MTU `netdev_mtu` (in bytes), never less than 256 bytes.
///
/// `MAX_HDR_LENGTH` bytes are reserved for the IP, UDP and IBA headers and
/// the ICRC, so an Ethernet MTU of 1500 gives 1024 and 9000 gives 4096.
pub(crate) fn active_mtu(netdev_mtu: u32) -> Mtu {
    Mtu::at_most(netdev_mtu.saturating_sub(MAX_HDR_LENGTH)).unwrap_or(Mtu::Mtu256)
}

#[kunit_tests(rrxe_mtu)]
mod tests {
    use super::*;

    #[test]
    fn standard_frames() {
        assert_eq!(active_mtu(1500), Mtu::Mtu1024);
        assert_eq!(active_mtu(9000), Mtu::Mtu4096);
    }

    #[test]
    fn thresholds() {
        // Each step needs the IB MTU plus the 80 bytes of headers.
        assert_eq!(active_mtu(591), Mtu::Mtu256);
        assert_eq!(active_mtu(592), Mtu::Mtu512);
        assert_eq!(active_mtu(1103), Mtu::Mtu512);
        assert_eq!(active_mtu(1104), Mtu::Mtu1024);
        assert_eq!(active_mtu(2127), Mtu::Mtu1024);
        assert_eq!(active_mtu(2128), Mtu::Mtu2048);
        assert_eq!(active_mtu(4175), Mtu::Mtu2048);
        assert_eq!(active_mtu(4176), Mtu::Mtu4096);
    }

    #[test]
    fn clamped() {
        // Too small for any IB MTU: the C driver clamps to 256.
        assert_eq!(active_mtu(0), Mtu::Mtu256);
        assert_eq!(active_mtu(68), Mtu::Mtu256);
        assert_eq!(active_mtu(335), Mtu::Mtu256);
        // Jumbo frames never exceed 4096.
        assert_eq!(active_mtu(65535), Mtu::Mtu4096);
        assert_eq!(active_mtu(u32::MAX), Mtu::Mtu4096);
    }

    #[test]
    fn mtu_bytes_round_trip() {
        for mtu in [
            Mtu::Mtu256,
            Mtu::Mtu512,
            Mtu::Mtu1024,
            Mtu::Mtu2048,
            Mtu::Mtu4096,
        ] {
            assert_eq!(Mtu::at_most(mtu.bytes()), Some(mtu));
        }
        assert_eq!(Mtu::at_most(255), None);
    }
}
