// SPDX-License-Identifier: GPL-2.0

//! Socket buffers (`struct sk_buff`).
//!
//! C header: [`include/linux/skbuff.h`](srctree/include/linux/skbuff.h)

use crate::bindings;
use core::ptr::NonNull;
use kernel::{
    error::to_result,
    prelude::*, //
};

/// EtherType of IPv4 (`ETH_P_IP`), host byte order.
pub const ETH_P_IP: u16 = 0x0800;
/// EtherType of IPv6 (`ETH_P_IPV6`), host byte order.
pub const ETH_P_IPV6: u16 = 0x86dd;

/// An owned socket buffer.
///
/// Whoever holds an `SkBuff` owns the packet: dropping it frees it
/// (`kfree_skb`, which counts as a drop for the drop monitor), and functions
/// that hand the packet on (transmit, queueing) take it by value.
///
/// # Invariants
///
/// `ptr` is a valid `struct sk_buff` of which `self` owns one reference, and
/// no one else accesses its data or length while `self` exists.
pub struct SkBuff {
    ptr: NonNull<bindings::sk_buff>,
}

// SAFETY: An skb may be handed from one context to another (e.g. from softirq to a workqueue);
// the owner has exclusive access.
unsafe impl Send for SkBuff {}

// SAFETY: `&SkBuff` only gives read access to the packet, which no one else modifies.
unsafe impl Sync for SkBuff {}

impl SkBuff {
    /// Takes ownership of `ptr`.
    ///
    /// # Safety
    ///
    /// `ptr` must be a valid skb whose reference the caller gives to the
    /// returned object, and no one else may access the skb afterwards.
    pub(crate) unsafe fn from_raw(ptr: NonNull<bindings::sk_buff>) -> Self {
        // INVARIANT: By the safety requirements.
        Self { ptr }
    }

    /// Gives up ownership and returns the C pointer (for functions that
    /// consume the skb).
    #[expect(dead_code, reason = "for the transmit path")]
    pub(crate) fn into_raw(self) -> NonNull<bindings::sk_buff> {
        let ptr = self.ptr;
        core::mem::forget(self);
        ptr
    }

    fn as_raw(&self) -> *mut bindings::sk_buff {
        self.ptr.as_ptr()
    }

    /// Returns the C pointer, for abstractions that read fields.
    pub(crate) fn as_raw_ptr(&self) -> *mut bindings::sk_buff {
        self.as_raw()
    }

    /// Length of the data from `data` on, linear and paged, in bytes.
    pub fn len(&self) -> usize {
        // SAFETY: `self.ptr` is valid by the type invariant.
        let len = unsafe { bindings::skb_len(self.as_raw()) };
        // CAST: `u32` to `usize` is lossless on the supported architectures.
        len as usize
    }

    /// Returns whether there is no data.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The linear part of the data (`skb_headlen` bytes from `data`); the
    /// whole data after [`SkBuff::linearize`].
    pub fn data(&self) -> &[u8] {
        // SAFETY: `self.ptr` is valid by the type invariant.
        let (p, n) = unsafe {
            (
                bindings::skb_data(self.as_raw()),
                bindings::skb_headlen(self.as_raw()),
            )
        };
        if p.is_null() || n == 0 {
            return &[];
        }
        // SAFETY: The linear part is `skb_headlen` readable bytes at `data`, which no one
        // modifies while `self` is borrowed (type invariant).
        // CAST: `u32` to `usize` is lossless.
        unsafe { core::slice::from_raw_parts(p, n as usize) }
    }

    /// The bytes from the network header up to `data`: at a UDP tunnel's
    /// receive hook, the IP header (with any IPv6 extension headers).
    ///
    /// `None` if the network header is not set or lies after `data`.
    pub fn network_to_data(&self) -> Option<&[u8]> {
        let mut n = 0u32;
        // SAFETY: `self.ptr` is valid by the type invariant; `n` is valid for writes.
        let p = unsafe { bindings::skb_network_to_data(self.as_raw(), &mut n) };
        if p.is_null() {
            return None;
        }
        // SAFETY: The network header lies in the linear buffer at or before `data`, so the `n`
        // bytes up to `data` are readable; no one modifies them while `self` is borrowed.
        // CAST: `u32` to `usize` is lossless.
        Some(unsafe { core::slice::from_raw_parts(p, n as usize) })
    }

    /// The link-layer protocol (`skb->protocol`), as a host-order EtherType
    /// such as [`ETH_P_IP`] or [`ETH_P_IPV6`].
    pub fn protocol(&self) -> u16 {
        // SAFETY: `self.ptr` is valid by the type invariant.
        unsafe { bindings::skb_protocol(self.as_raw()) }
    }

    /// Makes all data linear (`skb_linearize`), so that [`SkBuff::data`]
    /// covers [`SkBuff::len`] bytes.
    ///
    /// # Errors
    ///
    /// `ENOMEM` if the data could not be copied.
    pub fn linearize(&mut self) -> Result {
        // SAFETY: `self.ptr` is valid and exclusively owned by the type invariant.
        to_result(unsafe { bindings::skb_linearize(self.as_raw()) })
    }

    /// Removes `n` bytes from the start of the data (`skb_pull`).
    ///
    /// # Errors
    ///
    /// `EINVAL` if the linear part is shorter than `n` bytes; nothing is
    /// removed then.
    pub fn pull(&mut self, n: usize) -> Result {
        if n > self.data().len() {
            return Err(EINVAL);
        }
        // CAST: `n` is at most `skb_headlen`, a `u32`.
        // SAFETY: `self.ptr` is valid and exclusively owned; `n` is within the linear part.
        unsafe { bindings::skb_pull(self.as_raw(), n as u32) };
        Ok(())
    }
}

impl Drop for SkBuff {
    fn drop(&mut self) {
        // SAFETY: We own one reference by the type invariant.
        unsafe { bindings::kfree_skb(self.as_raw()) };
    }
}
