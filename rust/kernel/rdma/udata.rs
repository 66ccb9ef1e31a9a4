// SPDX-License-Identifier: GPL-2.0

//! Driver-specific data of a uverbs command (`struct ib_udata`).
//!
//! C header: [`include/rdma/uverbs_ioctl.h`](srctree/include/rdma/uverbs_ioctl.h)

use crate::bindings;
use kernel::{error::to_result, prelude::*, types::Opaque};

/// The driver-specific input and output buffers of one uverbs command.
///
/// The buffers are in user memory and follow the uverbs compatibility rules:
/// a shorter input is zero-extended, a longer one must be zero beyond what the
/// driver understands, and the output is truncated or zero-padded.
///
/// # Invariants
///
/// `self.0` is a valid `struct ib_udata` for the duration of the command.
#[repr(transparent)]
pub struct Udata(Opaque<bindings::ib_udata>);

impl Udata {
    /// Creates a reference from the pointer `ib_core` passes to a device op.
    ///
    /// Returns `None` for kernel callers, which pass no udata.
    ///
    /// # Safety
    ///
    /// `ptr` must be NULL or valid for the lifetime `'a`.
    pub(crate) unsafe fn from_raw<'a>(ptr: *mut bindings::ib_udata) -> Option<&'a Self> {
        // CAST: `Self` is a transparent wrapper of `ib_udata`.
        // SAFETY: `ptr` is NULL or valid for `'a` by the safety requirements.
        unsafe { ptr.cast::<Self>().as_ref() }
    }

    /// Length of the driver's input, in bytes.
    pub fn inlen(&self) -> usize {
        // SAFETY: `self.0` is valid by the type invariant; `inlen` is not written during the
        // command.
        unsafe { (*self.0.get()).inlen }
    }

    /// Length of the driver's output buffer, in bytes.
    pub fn outlen(&self) -> usize {
        // SAFETY: `self.0` is valid by the type invariant; `outlen` is not written during the
        // command.
        unsafe { (*self.0.get()).outlen }
    }

    /// Checks that the input carries no driver data: it is empty or all
    /// zeroes.
    ///
    /// Returns [`EOPNOTSUPP`] for non-zero input.
    pub fn check_in_empty(&self) -> Result {
        // SAFETY: `self.0` is valid by the type invariant.
        to_result(unsafe { bindings::ib_is_udata_in_empty(self.0.get()) })
    }

    /// Answers with no driver data: zeroes whatever output buffer user space
    /// provided.
    pub fn respond_empty(&self) -> Result {
        // SAFETY: `self.0` is valid by the type invariant.
        to_result(unsafe { bindings::ib_respond_empty_udata(self.0.get()) })
    }
}

impl Udata {
    /// Returns the C struct.
    pub(crate) fn as_raw(&self) -> *mut bindings::ib_udata {
        self.0.get()
    }

    /// Copies `src` to the driver's output buffer (truncated to its length,
    /// as `ib_copy_to_udata` requires the whole length to fit).
    pub fn copy_to(&self, src: &[u8]) -> Result {
        let len = src.len().min(self.outlen());
        // SAFETY: `self.0` is valid; `src` is valid for `len` bytes.
        to_result(unsafe { bindings::ib_copy_to_udata(self.as_raw(), src.as_ptr().cast(), len) })
    }

    /// Copies the driver's input into `dst` (at most `inlen` bytes; the rest
    /// of `dst` is left untouched).
    pub fn copy_from(&self, dst: &mut [u8]) -> Result {
        let len = dst.len().min(self.inlen());
        // SAFETY: `self.0` is valid; `dst` is valid for `len` bytes.
        to_result(unsafe {
            bindings::ib_copy_from_udata(dst.as_mut_ptr().cast(), self.as_raw(), len)
        })
    }
}
