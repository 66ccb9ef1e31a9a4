// SPDX-License-Identifier: GPL-2.0

//! Atomic Acknowledge Extended Transport Header (IBTA Vol 1 §9.3.6), 8
//! bytes: the original value of the remote operand, big-endian. Follows the
//! AETH in an RC ATOMIC ACKNOWLEDGE.

#![forbid(unsafe_code)]

use super::wire::header;

header! {
    /// A decoded AtomicAckETH.
    #[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
    pub struct AtomicAckEth("AtomicAckETH", 8) {
        /// OrigRemDt: the 64-bit value at the remote address before the atomic.
        pub orig: u64,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::proto::wire::tests::assert_known_bytes;

    #[test]
    fn known_bytes() {
        assert_known_bytes(
            AtomicAckEth { orig: 0x1234 },
            &[0, 0, 0, 0, 0, 0, 0x12, 0x34],
        );
    }
}
