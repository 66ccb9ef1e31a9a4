// SPDX-License-Identifier: GPL-2.0

//! Net device notifier: events about every net device of every namespace.
//!
//! C header: [`include/linux/netdevice.h`](srctree/include/linux/netdevice.h)

use crate::{
    bindings,
    net::Device,
    notifier::{
        Chain,
        NotifierBlock, //
    }, //
};
use core::marker::PhantomData;
use kernel::prelude::*;

/// A net device event (`enum netdev_cmd`).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Event {
    /// The device was opened.
    Up,
    /// The device was closed.
    Down,
    /// The device is about to close.
    GoingDown,
    /// Carrier or operational state changed.
    Change,
    /// The MTU changed.
    ChangeMtu,
    /// The hardware address changed.
    ChangeAddr,
    /// The device was renamed.
    ChangeName,
    /// The device was registered.
    Register,
    /// The device is being unregistered; references must be dropped.
    Unregister,
    /// Any other event, with its C value.
    Other(u64),
}

impl Event {
    fn from_raw(v: u64) -> Self {
        // CAST: `enum netdev_cmd` values are small positive integers.
        match v as bindings::netdev_cmd {
            bindings::netdev_cmd_NETDEV_UP => Self::Up,
            bindings::netdev_cmd_NETDEV_DOWN => Self::Down,
            bindings::netdev_cmd_NETDEV_GOING_DOWN => Self::GoingDown,
            bindings::netdev_cmd_NETDEV_CHANGE => Self::Change,
            bindings::netdev_cmd_NETDEV_CHANGEMTU => Self::ChangeMtu,
            bindings::netdev_cmd_NETDEV_CHANGEADDR => Self::ChangeAddr,
            bindings::netdev_cmd_NETDEV_CHANGENAME => Self::ChangeName,
            bindings::netdev_cmd_NETDEV_REGISTER => Self::Register,
            bindings::netdev_cmd_NETDEV_UNREGISTER => Self::Unregister,
            _ => Self::Other(v),
        }
    }
}

/// Receives net device events.
pub trait Handler: Send + Sync {
    /// Called for each event, in process context with RTNL held.
    ///
    /// At registration, `Register` and `Up` are replayed for the devices that
    /// already exist.
    fn notify(&self, event: Event, dev: &Device);
}

/// The net device notifier chain, with handler `T`.
struct Netdevs<T>(PhantomData<T>);

// SAFETY: `register_netdevice_notifier` links the block into the chain, which calls it with an
// `enum netdev_cmd` and a `struct netdev_notifier_info`; `unregister_netdevice_notifier` waits for
// running callbacks.
unsafe impl<T: Handler> Chain for Netdevs<T> {
    type Handler = T;

    unsafe fn register(nb: *mut bindings::notifier_block) -> c_int {
        // SAFETY: By the safety requirements.
        unsafe { bindings::register_netdevice_notifier(nb) }
    }

    unsafe fn unregister(nb: *mut bindings::notifier_block) {
        // SAFETY: By the safety requirements.
        unsafe { bindings::unregister_netdevice_notifier(nb) };
    }

    unsafe fn call(handler: &T, event: c_ulong, ptr: *mut c_void) -> c_int {
        // SAFETY: For net device notifiers `ptr` is a `struct netdev_notifier_info`.
        let ndev = unsafe { bindings::netdev_notifier_info_to_dev(ptr) };
        if !ndev.is_null() {
            // SAFETY: The notifier chain holds the device alive for the call.
            let dev = unsafe { Device::from_raw(ndev) };
            // CAST: `unsigned long` is 64-bit on the supported architectures.
            handler.notify(Event::from_raw(event as u64), dev);
        }
        // CAST: small positive constant.
        bindings::NOTIFY_DONE as c_int
    }
}

/// A registered net device notifier with handler `T`.
///
/// The `struct notifier_block` is linked into the notifier chain, so it lives
/// pinned inside the registration and is unlinked when the registration is
/// dropped.
#[pin_data]
pub struct Registration<T: Handler> {
    #[pin]
    block: NotifierBlock<Netdevs<T>>,
}

impl<T: Handler> Registration<T> {
    /// Initialises `handler` and registers it for net device events.
    pub fn new(handler: impl PinInit<T, Error>) -> impl PinInit<Self, Error> {
        // The handler is initialised first: registering replays events at once.
        try_pin_init!(Self {
            block <- NotifierBlock::new(handler),
        })
    }
}
