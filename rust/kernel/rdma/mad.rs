// SPDX-License-Identifier: GPL-2.0

//! Management datagrams offered to a device (`ib_device_ops.process_mad`).
//!
//! C header: [`include/rdma/ib_mad.h`](srctree/include/rdma/ib_mad.h)

use crate::bindings;

/// Size of a MAD (`struct ib_mad`): a 24-byte common header and the class
/// data.
pub const MAD_SIZE: usize = 256;

const _: () = assert!(core::mem::size_of::<bindings::ib_mad>() == MAD_SIZE);

/// What a device did with a MAD offered to it (`IB_MAD_RESULT_*`).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum MadResult {
    /// The MAD could not be processed (`IB_MAD_RESULT_FAILURE`): sysfs
    /// reports an error; the MAD layer still hands a received MAD on, but
    /// sends no reply of its own for it.
    Failure,
    /// Not the device's to answer: the MAD layer hands it on to its agents
    /// (`IB_MAD_RESULT_SUCCESS`).
    Pass,
    /// The response is in the output MAD (`IB_MAD_RESULT_SUCCESS |
    /// IB_MAD_RESULT_REPLY`).
    Reply,
}

impl MadResult {
    /// The C value.
    pub(crate) fn as_raw(self) -> u32 {
        match self {
            Self::Failure => bindings::ib_mad_result_IB_MAD_RESULT_FAILURE,
            Self::Pass => bindings::ib_mad_result_IB_MAD_RESULT_SUCCESS,
            Self::Reply => {
                bindings::ib_mad_result_IB_MAD_RESULT_SUCCESS
                    | bindings::ib_mad_result_IB_MAD_RESULT_REPLY
            }
        }
    }
}
