// SPDX-License-Identifier: GPL-2.0

//! UDP tunnel sockets: kernel UDP sockets whose datagrams are handed to an
//! encapsulation handler in softirq instead of being queued to a reader.
//!
//! C header: [`include/net/udp_tunnel.h`](srctree/include/net/udp_tunnel.h)

use crate::{
    bindings,
    net::{
        Device,
        Namespace,
        SkBuff, //
    },
};
use core::ptr::NonNull;
use kernel::{
    error::to_result,
    prelude::*, //
};

/// `encap_type` of the socket. Any non-zero value enables the `encap_rcv`
/// hook; 1 is what the kernel's UDP tunnels (VXLAN, GENEVE, rxe) pass.
const UDP_ENCAP_TUNNEL: u8 = 1;

/// Returns whether `e` is `EAFNOSUPPORT`: the address family is not
/// available (IPv6 disabled with `ipv6.disable=1`).
pub fn is_family_unsupported(e: Error) -> bool {
    // CAST: a small positive errno constant.
    e.to_errno() == -(bindings::EAFNOSUPPORT as c_int)
}

/// Address family of a tunnel socket.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Family {
    /// IPv4 (`AF_INET`).
    Ipv4,
    /// IPv6 only (`AF_INET6` with `IPV6_V6ONLY`).
    Ipv6,
}

/// Receives the datagrams of a tunnel socket.
pub trait EncapRcv: 'static {
    /// Called in softirq for every datagram that arrives on the socket.
    ///
    /// `dev` is the device the packet arrived on. `skb` is owned by the
    /// handler: its `data` points to the UDP header, the network header is
    /// set, and the UDP length has been checked against the skb and the
    /// skb trimmed to it. The UDP checksum has been verified when present.
    fn encap_rcv(dev: &Device, skb: SkBuff);
}

/// A kernel UDP socket set up as a tunnel with handler `T`
/// (`udp_sock_create4`/`udp_sock_create6` and `setup_udp_tunnel_sock`).
///
/// Dropping it releases the socket (`udp_tunnel_sock_release`); the handler
/// is not called for new datagrams afterwards.
///
/// # Invariants
///
/// `sk` is the `struct sock` of a kernel socket owned by `self` and set up
/// as a UDP tunnel with `T`'s trampoline.
pub struct UdpTunnelSock {
    sk: NonNull<bindings::sock>,
}

// SAFETY: The socket may be released from any thread.
unsafe impl Send for UdpTunnelSock {}

// SAFETY: `&UdpTunnelSock` exposes nothing mutable.
unsafe impl Sync for UdpTunnelSock {}

impl UdpTunnelSock {
    /// Creates a socket in `net` bound to UDP port `port` (host byte
    /// order) on all addresses of `family`, whose datagrams go to `T`.
    ///
    /// # Errors
    ///
    /// Those of socket creation and bind: e.g. `EADDRINUSE` if the port is
    /// taken, `EAFNOSUPPORT` if IPv6 is disabled.
    pub fn new<T: EncapRcv>(net: &Namespace, family: Family, port: u16) -> Result<Self> {
        // SAFETY: All-zero is a valid `udp_port_cfg` (any address, no options).
        let mut cfg: bindings::udp_port_cfg = unsafe { core::mem::zeroed() };
        cfg.local_udp_port = port.to_be();
        let mut sock: *mut bindings::socket = core::ptr::null_mut();
        match family {
            Family::Ipv4 => {
                // CAST: `AF_INET` is a small constant.
                cfg.family = bindings::AF_INET as u8;
                // SAFETY: `net` is alive; `cfg` and `sock` are valid for the call.
                to_result(unsafe {
                    bindings::udp_sock_create4(net.as_raw(), &mut cfg, &mut sock)
                })?;
            }
            Family::Ipv6 => {
                // CAST: `AF_INET6` is a small constant.
                cfg.family = bindings::AF_INET6 as u8;
                cfg.set_ipv6_v6only(1);
                // SAFETY: `net` is alive; `cfg` and `sock` are valid for the call.
                to_result(unsafe {
                    bindings::udp_sock_create6(net.as_raw(), &mut cfg, &mut sock)
                })?;
            }
        }
        // SAFETY: On success `sock` is a valid socket with its `sock`.
        let sk = NonNull::new(unsafe { bindings::socket_sk(sock) }).ok_or(EINVAL)?;

        // SAFETY: All-zero is a valid config (no callbacks).
        let mut tnl: bindings::udp_tunnel_sock_cfg = unsafe { core::mem::zeroed() };
        tnl.encap_type = UDP_ENCAP_TUNNEL;
        tnl.encap_rcv = Some(Self::encap_rcv_callback::<T>);
        // SAFETY: `sk` is a fresh UDP socket of `net`; `tnl` is valid for the call. From here on
        // the trampoline may run; it only needs `T`, which is `'static`.
        unsafe { bindings::setup_udp_tunnel_sock(net.as_raw(), sk.as_ptr(), &mut tnl) };
        // INVARIANT: The socket is set up and owned by us.
        Ok(Self { sk })
    }

    /// `encap_rcv` trampoline.
    ///
    /// # Safety
    ///
    /// Called by the UDP receive path in softirq (under RCU), with a valid skb whose ownership
    /// passes to the callee, whose `dev` is valid for the call.
    unsafe extern "C" fn encap_rcv_callback<T: EncapRcv>(
        _sk: *mut bindings::sock,
        skb: *mut bindings::sk_buff,
    ) -> c_int {
        let Some(skb) = NonNull::new(skb) else {
            return 0;
        };
        // SAFETY: The UDP stack hands over its reference: returning 0 means "consumed".
        let skb = unsafe { SkBuff::from_raw(skb) };
        // SAFETY: `skb` is valid.
        let dev = unsafe { bindings::skb_dev(skb.as_raw_ptr()) };
        if dev.is_null() {
            // `skb` is dropped.
            return 0;
        }
        // SAFETY: The receiving device stays valid under RCU for the softirq.
        let dev = unsafe { Device::from_raw(dev) };
        T::encap_rcv(dev, skb);
        0
    }
}

impl Drop for UdpTunnelSock {
    fn drop(&mut self) {
        // SAFETY: We own the socket by the type invariant. This waits for RCU readers, so no
        // trampoline still runs on the socket's behalf for packets looked up before.
        unsafe { bindings::udp_tunnel_sock_release(self.sk.as_ptr()) };
    }
}
