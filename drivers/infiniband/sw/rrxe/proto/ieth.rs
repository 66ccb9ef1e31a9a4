// SPDX-License-Identifier: GPL-2.0

//! Invalidate Extended Transport Header (IBTA Vol 1 §9.3.8), 4 bytes.
//!
//! Carried by the last (or only) packet of SEND with invalidate: the R_Key
//! the responder invalidates before completing the receive. Big-endian.

#![forbid(unsafe_code)]

use super::wire::header;

header! {
    /// A decoded IETH.
    #[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
    pub struct Ieth("IETH", 4) {
        /// R_Key to invalidate.
        pub rkey: u32,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::proto::wire::tests::assert_known_bytes;

    #[test]
    fn known_bytes() {
        assert_known_bytes(Ieth { rkey: 0x0001_027f }, &[0x00, 0x01, 0x02, 0x7f]);
    }
}
