// SPDX-License-Identifier: GPL-2.0

//! Routes for locally generated packets (`struct rtable`, `struct
//! dst_entry`), as a UDP tunnel's transmit path needs them.
//!
//! The RoCEv2 transmit path these serve builds the IP and UDP headers into
//! the [`super::SkBuff`] itself, computes the ICRC over them, and only then
//! hands the packet to `ip_local_out`/`ip6_local_out` (neighbour
//! resolution by the IP stack, DF set on IPv4). `udp_tunnel_xmit_skb`
//! does not fit: it builds the headers and sends in one step, and the IPv4
//! identification it picks is covered by the ICRC.
//!
//! C headers: [`include/net/route.h`](srctree/include/net/route.h),
//! [`include/net/ip6_route.h`](srctree/include/net/ip6_route.h)

use crate::{
    bindings,
    net::{
        Device,
        Namespace, //
    },
};
use core::ptr::NonNull;
use kernel::{
    error::from_err_ptr,
    prelude::*, //
};

/// An IPv4 route (`struct rtable`) with a reference held.
///
/// # Invariants
///
/// `rt` is a valid route on which `self` holds one reference.
pub struct Route4 {
    rt: NonNull<bindings::rtable>,
}

// SAFETY: The reference may be dropped on any thread.
unsafe impl Send for Route4 {}

// SAFETY: `&Route4` only allows taking another reference, which is atomic.
unsafe impl Sync for Route4 {}

impl Route4 {
    /// Looks up the route from `saddr` to `daddr` (network byte order, as
    /// on the wire) out of `dev`, for UDP (`ip_route_output_key`).
    ///
    /// # Errors
    ///
    /// `ENETUNREACH`, `EHOSTUNREACH` and the like when there is no route.
    pub fn output(net: &Namespace, dev: &Device, saddr: [u8; 4], daddr: [u8; 4]) -> Result<Self> {
        // SAFETY: `net` and `dev` are valid; the addresses are passed by value.
        let rt = from_err_ptr(unsafe {
            bindings::ip_route_output_udp(
                net.as_raw(),
                dev.ifindex(),
                u32::from_ne_bytes(saddr),
                u32::from_ne_bytes(daddr),
            )
        })?;
        // INVARIANT: On success the lookup returned a route with a reference for us.
        Ok(Self {
            rt: NonNull::new(rt).ok_or(EINVAL)?,
        })
    }

    /// The route as a `struct dst_entry`, valid while `self` exists.
    pub(crate) fn dst(&self) -> *mut bindings::dst_entry {
        // SAFETY: `self.rt` is valid by the type invariant.
        unsafe { bindings::rtable_dst(self.rt.as_ptr()) }
    }

    /// Gives up the reference and returns the C pointer (for functions that
    /// consume it).
    #[expect(dead_code, reason = "for the transmit path")]
    pub(crate) fn into_raw(self) -> *mut bindings::rtable {
        let rt = self.rt.as_ptr();
        core::mem::forget(self);
        rt
    }
}

impl Clone for Route4 {
    fn clone(&self) -> Self {
        // SAFETY: The route is valid and `self` holds a reference, so the count is non-zero.
        unsafe { bindings::dst_hold(self.dst()) };
        // INVARIANT: The new object owns the reference just taken.
        Self { rt: self.rt }
    }
}

impl Drop for Route4 {
    fn drop(&mut self) {
        // SAFETY: We hold one reference by the type invariant.
        unsafe { bindings::ip_rt_put(self.rt.as_ptr()) };
    }
}

/// An IPv6 route (`struct dst_entry`) with a reference held.
///
/// # Invariants
///
/// `dst` is a valid, usable (no `error`) route on which `self` holds one
/// reference.
pub struct Route6 {
    dst: NonNull<bindings::dst_entry>,
    /// The FIB serial number at lookup, which `ip6_dst_check` compares.
    cookie: u32,
}

// SAFETY: The reference may be dropped on any thread.
unsafe impl Send for Route6 {}

// SAFETY: `&Route6` only allows taking another reference, which is atomic.
unsafe impl Sync for Route6 {}

impl Route6 {
    /// Looks up the route from `saddr` to `daddr` out of `dev`, for UDP
    /// (`ip6_dst_lookup_flow`).
    ///
    /// # Errors
    ///
    /// `ENETUNREACH`, `EHOSTUNREACH` and the like when there is no route.
    pub fn output(
        net: &Namespace,
        dev: &Device,
        saddr: &[u8; 16],
        daddr: &[u8; 16],
    ) -> Result<Self> {
        // SAFETY: `net` and `dev` are valid; the addresses point to 16 readable bytes.
        let dst = from_err_ptr(unsafe {
            bindings::ip6_route_output_udp(
                net.as_raw(),
                dev.ifindex(),
                saddr.as_ptr(),
                daddr.as_ptr(),
            )
        })?;
        let dst = NonNull::new(dst).ok_or(EINVAL)?;
        // SAFETY: `dst` is a valid IPv6 route on which we hold a reference.
        let cookie = unsafe { bindings::rt6_dst_cookie(dst.as_ptr()) };
        // INVARIANT: On success the helper returned a usable route with a reference for us.
        Ok(Self { dst, cookie })
    }

    /// The route, valid while `self` exists.
    pub(crate) fn dst(&self) -> *mut bindings::dst_entry {
        self.dst.as_ptr()
    }

    /// Gives up the reference and returns the C pointer (for functions that
    /// consume it).
    #[expect(dead_code, reason = "for the transmit path")]
    pub(crate) fn into_raw(self) -> *mut bindings::dst_entry {
        let dst = self.dst.as_ptr();
        core::mem::forget(self);
        dst
    }
}

impl Clone for Route6 {
    fn clone(&self) -> Self {
        // SAFETY: The route is valid and `self` holds a reference, so the count is non-zero.
        unsafe { bindings::dst_hold(self.dst.as_ptr()) };
        // INVARIANT: The new object owns the reference just taken.
        Self {
            dst: self.dst,
            cookie: self.cookie,
        }
    }
}

impl Drop for Route6 {
    fn drop(&mut self) {
        // SAFETY: We hold one reference by the type invariant.
        unsafe { bindings::dst_release(self.dst.as_ptr()) };
    }
}

/// Returns the IPv4 address of an IPv4-mapped IPv6 address
/// (`::ffff:a.b.c.d`, RFC 4291 §2.5.5.2), as RoCEv2 GIDs carry IPv4
/// addresses, or `None` for any other address.
pub fn ipv4_mapped(gid: &[u8; 16]) -> Option<[u8; 4]> {
    let (prefix, addr) = gid.split_last_chunk::<4>()?;
    (prefix == [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff]).then_some(*addr)
}

/// A route to a RoCEv2 peer, IPv4 or IPv6, with a reference held.
///
/// Cloning takes another reference (`dst_hold`); dropping releases one.
#[derive(Clone)]
pub enum Route {
    /// An IPv4 route (both GIDs IPv4-mapped).
    V4(Route4),
    /// An IPv6 route.
    V6(Route6),
}

impl Route {
    /// Looks up the route out of `dev` from `sgid` to `dgid`, 16-byte GIDs
    /// in network byte order: IPv4-mapped GIDs (`::ffff:a.b.c.d`) give an
    /// IPv4 route, any other GIDs an IPv6 one.
    ///
    /// # Errors
    ///
    /// `EINVAL` if one GID is IPv4-mapped and the other is not;
    /// `ENETUNREACH`, `EHOSTUNREACH` and the like when there is no route.
    pub fn output(net: &Namespace, dev: &Device, sgid: &[u8; 16], dgid: &[u8; 16]) -> Result<Self> {
        match (ipv4_mapped(sgid), ipv4_mapped(dgid)) {
            (Some(saddr), Some(daddr)) => Ok(Self::V4(Route4::output(net, dev, saddr, daddr)?)),
            (None, None) => Ok(Self::V6(Route6::output(net, dev, sgid, dgid)?)),
            _ => Err(EINVAL),
        }
    }

    /// Whether the route may still be used (`dst_check`, as the C driver
    /// checks its cached route): `false` once a route, address or device
    /// change made it stale, and a new lookup is needed. Any context.
    pub fn is_current(&self) -> bool {
        let cookie = match self {
            Self::V4(_) => 0,
            Self::V6(r) => r.cookie,
        };
        // SAFETY: The route is valid while `self` holds its reference; the check takes none.
        unsafe { bindings::dst_still_valid(self.dst(), cookie) }
    }

    /// Returns whether this is an IPv6 route.
    pub fn is_ipv6(&self) -> bool {
        matches!(self, Self::V6(_))
    }

    /// The route as a `struct dst_entry`, valid while `self` exists.
    pub(crate) fn dst(&self) -> *mut bindings::dst_entry {
        match self {
            Self::V4(r) => r.dst(),
            Self::V6(r) => r.dst(),
        }
    }
}
