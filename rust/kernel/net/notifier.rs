// SPDX-License-Identifier: GPL-2.0

//! Net device notifier: events about every net device of every namespace.
//!
//! C header: [`include/linux/netdevice.h`](srctree/include/linux/netdevice.h)

use crate::{
    bindings,
    net::Device, //
};
use kernel::{
    error::to_result,
    prelude::*,
    types::Opaque, //
};

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

/// A registered net device notifier with handler `T`.
///
/// The `struct notifier_block` is linked into the notifier chain, so it lives
/// pinned inside the registration and is unlinked when the registration is
/// dropped.
///
/// # Invariants
///
/// `nb` is registered with `register_netdevice_notifier`, and `handler` is
/// initialised, for as long as `self` exists.
#[pin_data(PinnedDrop)]
pub struct Registration<T: Handler> {
    #[pin]
    handler: T,
    #[pin]
    nb: Opaque<bindings::notifier_block>,
}

// SAFETY: The notifier block is only touched by the notifier chain under its lock; `T` is `Send`.
unsafe impl<T: Handler> Send for Registration<T> {}

// SAFETY: `&Registration` only gives shared access to `T`, which is `Sync`.
unsafe impl<T: Handler> Sync for Registration<T> {}

impl<T: Handler> Registration<T> {
    /// Initialises `handler` and registers it for net device events.
    pub fn new(handler: impl PinInit<T, Error>) -> impl PinInit<Self, Error> {
        // The handler is initialised first: registering replays events at once.
        try_pin_init!(Self {
            handler <- handler,
            nb <- Opaque::try_ffi_init(|slot: *mut bindings::notifier_block| {
                // SAFETY: `slot` is valid for writes.
                unsafe {
                    slot.write(bindings::notifier_block {
                        notifier_call: Some(Self::notifier_callback),
                        next: core::ptr::null_mut(),
                        priority: 0,
                    })
                };
                // SAFETY: `slot` is initialised and pinned, and is unregistered in `drop` before
                // its memory goes away. On error the pin-init machinery drops `handler`.
                // INVARIANT: On success `nb` is registered.
                to_result(unsafe { bindings::register_netdevice_notifier(slot) })
            }),
        })
    }

    /// `notifier_call` of the notifier block.
    ///
    /// # Safety
    ///
    /// Only called by the net device notifier chain, with the block registered in
    /// [`Registration::new`] and a `struct netdev_notifier_info`.
    unsafe extern "C" fn notifier_callback(
        nb: *mut bindings::notifier_block,
        event: c_ulong,
        ptr: *mut c_void,
    ) -> c_int {
        // CAST: `nb` is the `nb` field of a `Registration<T>`.
        let nb = Opaque::cast_from(nb);
        // SAFETY: The notifier chain only calls back with the block we registered, which is
        // embedded in a live, pinned `Registration<T>`.
        let this = unsafe { &*kernel::container_of!(nb, Self, nb) };
        // SAFETY: For net device notifiers `ptr` is a `struct netdev_notifier_info`.
        let ndev = unsafe { bindings::netdev_notifier_info_to_dev(ptr) };
        if !ndev.is_null() {
            // SAFETY: The notifier chain holds the device alive for the call.
            let dev = unsafe { Device::from_raw(ndev) };
            // CAST: `unsigned long` is 64-bit on the supported architectures.
            this.handler.notify(Event::from_raw(event as u64), dev);
        }
        // CAST: small positive constant.
        bindings::NOTIFY_DONE as c_int
    }
}

#[pinned_drop]
impl<T: Handler> PinnedDrop for Registration<T> {
    fn drop(self: Pin<&mut Self>) {
        // SAFETY: `nb` is registered by the type invariant. `unregister_netdevice_notifier`
        // waits for running callbacks, so `handler` outlives them.
        unsafe { bindings::unregister_netdevice_notifier(self.nb.get()) };
    }
}
