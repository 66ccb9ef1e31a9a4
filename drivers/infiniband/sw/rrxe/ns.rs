// SPDX-License-Identifier: GPL-2.0

#![forbid(unsafe_code)]

//! The RoCEv2 UDP sockets of each network namespace.
//!
//! Every namespace with at least one rrxe device has one UDP tunnel socket
//! on port 4791 for IPv4 and, when IPv6 is available, one for IPv6. The
//! first device created on a net device of a namespace opens them; they are
//! closed when the last such device goes away, or with the namespace, or at
//! module unload (whichever comes first). The count and the sockets are kept
//! in per-namespace state under a mutex, as `rxe_ns.c` does with RCU
//! pointers and socket reference counts.

use crate::{
    net::{
        self,
        pernet::{
            self,
            PernetData, //
        },
        udp_tunnel::{
            self,
            Family,
            UdpTunnelSock, //
        },
        Namespace,
        PassiveRef, //
    },
    proto::ROCEV2_UDP_PORT,
};
use kernel::{
    new_mutex,
    prelude::*,
    sync::Mutex, //
};

use super::recv::Rx;

/// Slot of [`NsState`] in every namespace.
static NS_ID: pernet::Id = pernet::Id::new();

/// The sockets of a namespace and how many devices use them.
struct Sockets {
    /// Number of [`NsUse`] of this namespace.
    users: usize,
    /// IPv4 socket; present while `users > 0`.
    v4: Option<UdpTunnelSock>,
    /// IPv6 socket; present while `users > 0`, unless IPv6 is unavailable.
    v6: Option<UdpTunnelSock>,
}

/// Per-namespace state of rrxe.
#[pin_data]
pub(crate) struct NsState {
    #[pin]
    sockets: Mutex<Sockets>,
}

impl PernetData for NsState {
    fn id() -> &'static pernet::Id {
        &NS_ID
    }

    fn init(_net: &Namespace) -> impl PinInit<Self, Error> {
        // Sockets are opened with the first device, not with every namespace.
        try_pin_init!(Self {
            sockets <- new_mutex!(Sockets {
                users: 0,
                v4: None,
                v6: None,
            }),
        })
    }
}

/// Opens the sockets of `net`.
fn open(net: &Namespace) -> Result<(UdpTunnelSock, Option<UdpTunnelSock>)> {
    let v4 = UdpTunnelSock::new::<Rx>(net, Family::Ipv4, ROCEV2_UDP_PORT).inspect_err(|e| {
        pr_err!("failed to create IPv4 UDP tunnel: error {}\n", e.to_errno());
    })?;
    let v6 = match UdpTunnelSock::new::<Rx>(net, Family::Ipv6, ROCEV2_UDP_PORT) {
        Ok(s) => Some(s),
        Err(e) if udp_tunnel::is_family_unsupported(e) => {
            pr_warn!("IPv6 is not supported, can not create a UDPv6 socket\n");
            None
        }
        Err(e) => {
            pr_err!("failed to create IPv6 UDP tunnel: error {}\n", e.to_errno());
            // `v4` is released.
            return Err(e);
        }
    };
    Ok((v4, v6))
}

/// A device's use of the sockets of its namespace: they stay open while it
/// exists.
pub(crate) struct NsUse {
    net: PassiveRef,
}

impl NsUse {
    /// Opens the sockets of `ndev`'s namespace if no device uses them yet,
    /// and counts one more user.
    pub(crate) fn new(ndev: &net::Device) -> Result<Self> {
        let net = ndev.net();
        let state = NsState::get(net).ok_or(ENODEV)?;
        let mut s = state.sockets.lock();
        if s.users == 0 {
            let (v4, v6) = open(net)?;
            s.v4 = Some(v4);
            s.v6 = v6;
        }
        s.users += 1;
        Ok(Self {
            net: PassiveRef::new(net),
        })
    }
}

impl Drop for NsUse {
    fn drop(&mut self) {
        // A namespace that is being dismantled releases its sockets itself.
        let Some(net) = self.net.get() else {
            return;
        };
        let Some(state) = NsState::get(&net) else {
            return;
        };
        let closing = {
            let mut s = state.sockets.lock();
            s.users = s.users.saturating_sub(1);
            if s.users == 0 {
                Some((s.v4.take(), s.v6.take()))
            } else {
                None
            }
        };
        // The sockets are released here, outside the lock (release waits for RCU readers).
        drop(closing);
    }
}

/// The registration of the per-namespace state.
pub(crate) type Registration = pernet::Registration<NsState>;
