// SPDX-License-Identifier: GPL-2.0

#![forbid(unsafe_code)]

//! The RoCEv2 UDP sockets of each network namespace.
//!
//! Every namespace with at least one rrxe device has one UDP tunnel socket
//! on port 4791 for IPv4 and, when IPv6 is available, one for IPv6. The
//! first device created on a net device of a namespace opens them; they are
//! closed when the last such device goes away, or with the namespace, or at
//! module unload (whichever comes first). The count and the sockets are kept
//! under a mutex in an object that the namespace's state and every device
//! of the namespace share, so that a device never needs the `struct net`
//! again: it may go away after its namespace (a module cannot hold a
//! passive namespace reference).

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
        Namespace, //
    },
    proto::ROCEV2_UDP_PORT,
};
use kernel::{
    new_mutex,
    prelude::*,
    sync::{
        Arc,
        Mutex, //
    }, //
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

/// The sockets of a namespace, shared by its state and its devices.
#[pin_data]
struct Shared {
    #[pin]
    sockets: Mutex<Sockets>,
}

/// Per-namespace state of rrxe.
pub(crate) struct NsState {
    shared: Arc<Shared>,
}

impl PernetData for NsState {
    fn id() -> &'static pernet::Id {
        &NS_ID
    }

    fn init(_net: &Namespace) -> impl PinInit<Self, Error> {
        // Sockets are opened with the first device, not with every namespace.
        let shared = Arc::pin_init(
            pin_init!(Shared {
                sockets <- new_mutex!(Sockets {
                    users: 0,
                    v4: None,
                    v6: None,
                }),
            }),
            GFP_KERNEL,
        );
        shared.map(|shared| Self { shared })
    }
}

impl Drop for NsState {
    fn drop(&mut self) {
        // The namespace is being dismantled (or the module unloaded): its
        // sockets close now, whatever devices still count on them.
        let closing = {
            let mut s = self.shared.sockets.lock();
            (s.v4.take(), s.v6.take())
        };
        drop(closing);
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
/// exists, or until the namespace is dismantled.
pub(crate) struct NsUse {
    shared: Arc<Shared>,
}

impl NsUse {
    /// Opens the sockets of `ndev`'s namespace if no device uses them yet,
    /// and counts one more user.
    pub(crate) fn new(ndev: &net::Device) -> Result<Self> {
        let net = ndev.net();
        let state = NsState::get(net).ok_or(ENODEV)?;
        let shared = state.shared.clone();
        {
            let mut s = shared.sockets.lock();
            if s.users == 0 {
                let (v4, v6) = open(net)?;
                s.v4 = Some(v4);
                s.v6 = v6;
            }
            s.users += 1;
        }
        Ok(Self { shared })
    }
}

impl Drop for NsUse {
    fn drop(&mut self) {
        let closing = {
            let mut s = self.shared.sockets.lock();
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
