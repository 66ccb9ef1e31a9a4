// SPDX-License-Identifier: GPL-2.0

//! Network devices (`struct net_device`).
//!
//! C header: [`include/linux/netdevice.h`](srctree/include/linux/netdevice.h)

use crate::bindings;
use core::ptr::NonNull;
use kernel::{
    fmt,
    sync::aref::AlwaysRefCounted,
    types::Opaque, //
};

/// Maximum length of an interface name, NUL included (`IFNAMSIZ`).
const IFNAMSIZ: usize = 16;

/// A network device.
///
/// Held by reference count: `ARef<Device>` takes a `dev_hold` reference.
///
/// # Invariants
///
/// `self.0` is a valid `struct net_device` whose reference count is non-zero
/// while a reference to `Self` exists.
#[repr(transparent)]
pub struct Device(Opaque<bindings::net_device>);

// SAFETY: The C side synchronises access to `struct net_device`; the reference count may be
// dropped from any thread.
unsafe impl Send for Device {}

// SAFETY: All `&self` methods are safe to call concurrently (they read fields with the C side's
// own synchronisation, or call thread-safe C functions).
unsafe impl Sync for Device {}

impl Device {
    /// Creates a reference from a raw pointer.
    ///
    /// # Safety
    ///
    /// `ptr` must be valid and hold a non-zero reference count for `'a`.
    pub(crate) unsafe fn from_raw<'a>(ptr: *mut bindings::net_device) -> &'a Self {
        // CAST: `Self` is a transparent wrapper of `net_device`.
        // SAFETY: Valid for `'a` by the safety requirements.
        unsafe { &*ptr.cast::<Self>() }
    }

    /// Returns the C pointer.
    pub(crate) fn as_raw(&self) -> *mut bindings::net_device {
        self.0.get()
    }

    /// Returns a copy of the interface name (it may change under RTNL).
    pub fn name(&self) -> Name {
        // SAFETY: `self` is valid; `name` is a NUL-terminated array of `IFNAMSIZ` bytes.
        let src = unsafe { bindings::netdev_name(self.as_raw()) };
        let mut name = Name([0; IFNAMSIZ]);
        for (i, b) in name.0.iter_mut().take(IFNAMSIZ - 1).enumerate() {
            // SAFETY: `src` points to `IFNAMSIZ` readable bytes.
            // CAST: a byte of a C string.
            *b = unsafe { *src.add(i) } as u8;
            if *b == 0 {
                break;
            }
        }
        name
    }

    /// Returns the interface index.
    pub fn ifindex(&self) -> i32 {
        // SAFETY: `self` is valid.
        unsafe { bindings::netdev_ifindex(self.as_raw()) }
    }

    /// Returns the MTU, in bytes of L3 payload.
    pub fn mtu(&self) -> u32 {
        // SAFETY: `self` is valid.
        unsafe { bindings::netdev_mtu(self.as_raw()) }
    }

    /// Copies the hardware address into `addr` and returns its length (0 for
    /// devices without one, such as `tun`).
    pub fn hw_addr(&self, addr: &mut [u8]) -> usize {
        let len = u32::try_from(addr.len()).unwrap_or(u32::MAX);
        // SAFETY: `self` is valid; `addr` is valid for `len` bytes of writes.
        let n = unsafe { bindings::netdev_hw_addr(self.as_raw(), addr.as_mut_ptr(), len) };
        // CAST: at most `addr.len()`.
        n as usize
    }

    /// Returns whether this is a VLAN device (`is_vlan_dev`).
    pub fn is_vlan(&self) -> bool {
        // SAFETY: `self` is valid.
        unsafe { bindings::is_vlan_dev(self.as_raw()) }
    }

    /// Returns the VLAN id of a VLAN device (`vlan_dev_vlan_id`), or `None`
    /// if this is not a VLAN device.
    pub fn vlan_id(&self) -> Option<u16> {
        // SAFETY: `self` is a valid net device; the helper checks `is_vlan_dev` first.
        let id = unsafe { bindings::vlan_dev_vlan_id(self.as_raw()) };
        (id != 0xffff).then_some(id)
    }

    /// Returns the real device under a VLAN device (`vlan_dev_real_dev`),
    /// or `None` if this is not a VLAN device.
    pub fn vlan_real_dev(&self) -> Option<&Device> {
        // SAFETY: `self` is valid.
        let real = unsafe { bindings::vlan_dev_real_dev(self.as_raw()) };
        if real.is_null() {
            return None;
        }
        // SAFETY: A VLAN device holds a reference on its real device for as long as it exists.
        Some(unsafe { Device::from_raw(real) })
    }

    /// Adds the link-layer multicast address `addr` to the device's filter
    /// (`dev_mc_add`; counted, so every add needs a [`Device::mc_del`]).
    pub fn mc_add(&self, addr: &[u8; 6]) -> kernel::error::Result {
        // SAFETY: The device is valid; `addr` points to 6 readable bytes.
        kernel::error::to_result(unsafe { bindings::netdev_mc_add(self.as_raw(), addr.as_ptr()) })
    }

    /// Removes one use of the link-layer multicast address `addr`.
    pub fn mc_del(&self, addr: &[u8; 6]) -> kernel::error::Result {
        // SAFETY: As in `mc_add`.
        kernel::error::to_result(unsafe { bindings::netdev_mc_del(self.as_raw(), addr.as_ptr()) })
    }

    /// Returns whether the device is administratively up (`IFF_UP`).
    pub fn is_up(&self) -> bool {
        // SAFETY: `self` is valid.
        let flags = unsafe { bindings::netif_get_flags(self.as_raw()) };
        flags & bindings::net_device_flags_IFF_UP != 0
    }

    /// Returns whether the device has been opened (`netif_running`).
    pub fn is_running(&self) -> bool {
        // SAFETY: `self` is valid.
        unsafe { bindings::netif_running(self.as_raw()) }
    }

    /// Returns whether the device has carrier (`netif_carrier_ok`).
    pub fn has_carrier(&self) -> bool {
        // SAFETY: `self` is valid.
        unsafe { bindings::netif_carrier_ok(self.as_raw()) }
    }
}

// SAFETY: `dev_hold` and `dev_put` maintain the reference count; the device is freed only after
// the last `dev_put`.
unsafe impl AlwaysRefCounted for Device {
    fn inc_ref(&self) {
        // SAFETY: The existence of `&self` means the count is non-zero.
        unsafe { bindings::dev_hold(self.as_raw()) };
    }

    unsafe fn dec_ref(obj: NonNull<Self>) {
        // SAFETY: The caller owns one reference.
        unsafe { bindings::dev_put(obj.as_ptr().cast()) };
    }
}

/// A copy of an interface name.
#[derive(Clone, Copy)]
pub struct Name([u8; IFNAMSIZ]);

impl Name {
    /// Returns the name as bytes, without the NUL terminator.
    pub fn as_bytes(&self) -> &[u8] {
        let len = self.0.iter().position(|&b| b == 0).unwrap_or(IFNAMSIZ);
        &self.0[..len]
    }
}

impl fmt::Display for Name {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for &b in self.as_bytes() {
            // Interface names are printable ASCII without '/' or whitespace.
            write!(f, "{}", char::from(b))?;
        }
        Ok(())
    }
}

/// Returns a random, unicast, locally administered Ethernet address
/// (`eth_random_addr`).
pub fn random_ether_addr() -> [u8; 6] {
    let mut addr = [0u8; 6];
    // SAFETY: `addr` is valid for writes of `ETH_ALEN` (6) bytes.
    unsafe { bindings::eth_random_addr(addr.as_mut_ptr()) };
    addr
}
