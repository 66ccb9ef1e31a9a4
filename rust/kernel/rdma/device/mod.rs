// SPDX-License-Identifier: GPL-2.0

//! RDMA devices (`struct ib_device`) of a Rust provider.
//!
//! A provider implements [`Driver`]. Its ops table ([`Driver`]'s `#[vtable]`
//! turned into a `const struct ib_device_ops`) is built at compile time, and
//! its per-device state ([`Driver::Data`]) lives in the same allocation as
//! the `struct ib_device`, right after it.
//!
//! Life cycle:
//!
//! 1. [`UnregisteredDevice::new`] allocates the device and initialises the
//!    driver's state in place; dropping it frees both.
//! 2. [`UnregisteredDevice::register`] binds a net device to a port and
//!    registers the device; from then on the RDMA core owns it.
//! 3. Any unregistration (`rdma link delete`, [`RegisteredDevice::unregister_queued`],
//!    [`DriverRegistration`] going away at module unload) drops the driver's
//!    state from `dealloc_driver` and frees the device.
//!
//! The driver's [`Devices`] list keeps every device it registered until its
//! `dealloc_driver` has returned, so that module unload unregisters the
//! driver's own devices, one by one, and waits for those already on their
//! way out. Other drivers with the same driver id (`rdma_rxe` and rrxe share
//! `RDMA_DRIVER_RXE`) are never touched.
//!
//! C header: [`include/rdma/ib_verbs.h`](srctree/include/rdma/ib_verbs.h)

use crate::{
    bindings, net,
    rdma::{
        ah::Ah,
        attr::NODE_DESC_LEN,
        mr::Mr,
        mw::Mw,
        port::PortState,
        qp::Qp,
        table::Table,
        Guid, //
    },
};
use core::{
    marker::PhantomData,
    ops::Deref,
    ptr::{
        self,
        NonNull, //
    },
};
use kernel::{
    error::{
        from_err_ptr,
        to_result, //
    },
    prelude::*,
    sync::{
        aref::ARef,
        atomic::{
            Acquire,
            Atomic, //
        }, //
    },
    types::Opaque, //
};

mod driver;
mod ops;

pub use driver::Driver;
pub(crate) use ops::OpsTable;

/// A device of driver `T`: the C `struct ib_device` followed by the driver's
/// state.
///
/// # Invariants
///
/// - `ib` is at offset 0 and is a valid `struct ib_device` allocated by
///   `_ib_alloc_device` with `size_of::<Self>()` bytes.
/// - `qps`, `mrs` and `ahs` are initialised before the ops are installed and
///   destroyed in `dealloc_driver`, after the data.
/// - `owned` and `released` are initialised before the ops are installed and
///   stay valid until the memory is freed; `released` is set once, at the end
///   of `dealloc_driver`.
/// - `data` is initialised for as long as a reference to `Self` exists; it is
///   dropped in `dealloc_driver`, which the RDMA core calls last.
#[repr(C)]
pub struct Device<T: Driver> {
    ib: Opaque<bindings::ib_device>,
    /// Published QPs by QPN.
    pub(crate) qps: Table<Qp<T>>,
    /// Published memory regions by key index (`lkey >> 8`).
    pub(crate) mrs: Table<Mr<T>>,
    /// Published address handles by AH number.
    pub(crate) ahs: Table<Ah<T>>,
    /// Published memory windows by R_Key index (`rkey >> 8`).
    pub(crate) mws: Table<Mw<T>>,
    /// Link in the driver's [`Devices`] list.
    owned: Opaque<bindings::llist_node>,
    /// Whether `dealloc_driver` has dropped the data.
    released: Atomic<bool>,
    data: T::Data,
}

// SAFETY: The C part is synchronised by the RDMA core, and `T::Data` is `Send`.
unsafe impl<T: Driver> Send for Device<T> {}

// SAFETY: The C part is synchronised by the RDMA core, and `T::Data` is `Sync`.
unsafe impl<T: Driver> Sync for Device<T> {}

impl<T: Driver> Device<T> {
    /// Size of the allocation, checked against the allocator's guarantees.
    const SIZE: usize = {
        assert!(core::mem::offset_of!(Self, ib) == 0);
        assert!(core::mem::align_of::<Self>() <= bindings::ARCH_KMALLOC_MINALIGN);
        core::mem::size_of::<Self>()
    };

    /// Returns a reference to the device that contains `ptr`.
    ///
    /// # Safety
    ///
    /// `ptr` must point to the `ib_device` of a `Device<T>` whose data is
    /// initialised, and the device must stay valid for `'a`.
    pub(crate) unsafe fn from_raw<'a>(ptr: *mut bindings::ib_device) -> &'a Self {
        // CAST: `ib` is the first field of the `#[repr(C)]` struct `Self`.
        // SAFETY: Valid for `'a` by the safety requirements.
        unsafe { &*ptr.cast::<Self>() }
    }

    /// Returns the C device.
    pub(crate) fn as_raw(&self) -> *mut bindings::ib_device {
        self.ib.get()
    }

    /// Returns whether `ptr` is a device of driver `T`.
    ///
    /// # Safety
    ///
    /// `ptr` must point to a valid `struct ib_device`.
    unsafe fn is_ours(ptr: *mut bindings::ib_device) -> bool {
        // SAFETY: `ptr` is valid by the safety requirements; the ops are not changed after
        // registration.
        let dealloc = unsafe { (*ptr).ops.dealloc_driver };
        let ours: unsafe extern "C" fn(*mut bindings::ib_device) =
            OpsTable::<T>::dealloc_driver_callback;
        dealloc.is_some_and(|f| ptr::fn_addr_eq(f, ours))
    }

    /// Returns the embedded `struct device`, for `dev_*!` printing.
    pub fn as_dev(&self) -> &kernel::device::Device {
        // SAFETY: `dev` is initialised by `_ib_alloc_device` and lives as long as `self`.
        unsafe { kernel::device::Device::from_raw(bindings::ib_device_dev(self.as_raw())) }
    }

    /// Returns the net device bound to port `port`, if any.
    pub fn netdev(&self, port: u32) -> Option<ARef<net::Device>> {
        // SAFETY: `self.ib` is valid by the type invariant.
        let ndev = unsafe { bindings::ib_device_get_netdev(self.as_raw(), port) };
        // SAFETY: `ib_device_get_netdev` returns NULL or a net device with a reference taken
        // for the caller, which the `ARef` now owns.
        NonNull::new(ndev).map(|p| unsafe { ARef::from_raw(p.cast::<net::Device>()) })
    }

    /// Returns the speed and width of Ethernet port `port`, as
    /// `(enum ib_port_speed, enum ib_port_width)`.
    ///
    /// Takes the RTNL lock.
    pub fn eth_speed(&self, port: u32) -> Result<(u16, u8)> {
        let mut speed = 0u16;
        let mut width = 0u8;
        // SAFETY: `self.ib` is valid; the out pointers are valid for writes.
        to_result(unsafe {
            bindings::ib_get_eth_speed(self.as_raw(), port, &mut speed, &mut width)
        })?;
        Ok((speed, width))
    }

    /// The QP numbered `qpn` (QPN 1 is the GSI QP) with a reference, unless
    /// it does not exist or its destruction has begun. Any context
    /// (softirq, interrupts off).
    pub fn lookup_qp(&self, qpn: u32) -> Option<ARef<Qp<T>>> {
        self.qps.get(qpn)
    }

    /// The memory region whose keys have index `index` (`lkey >> 8`; the
    /// low byte is the rolling key, which the caller compares), with a
    /// reference, unless there is none or its deregistration has begun.
    /// Any context.
    pub fn lookup_mr(&self, index: u32) -> Option<ARef<Mr<T>>> {
        self.mrs.get(index)
    }

    /// The address handle numbered `ah_num` (the number
    /// [`Driver::create_ah`] returned, which user and kernel UD WQEs carry)
    /// with a reference, unless there is none or its destruction has begun.
    /// Any context.
    ///
    /// The reference must not be held across sleeping: destruction in
    /// atomic context busy-waits for it.
    pub fn lookup_ah(&self, ah_num: u32) -> Option<ARef<Ah<T>>> {
        self.ahs.get(ah_num)
    }

    /// The memory window whose R_Key has index `index` (`rkey >> 8`; the
    /// low byte is the key the caller compares), with a reference, unless
    /// there is none or its deallocation has begun. Any context.
    pub fn lookup_mw(&self, index: u32) -> Option<ARef<Mw<T>>> {
        self.mws.get(index)
    }

    /// The GID at `index` of port `port` in the RDMA core's GID table
    /// (`rdma_get_gid_attr`), in network byte order. `EINVAL` for a bad port
    /// or index, `ENODATA` for an empty entry. Any context.
    pub fn gid_at(&self, port: u32, index: u32) -> Result<[u8; 16]> {
        let index = c_int::try_from(index).map_err(|_| EINVAL)?;
        // SAFETY: The device is valid; the call checks `port` and `index` itself.
        let attr = unsafe { bindings::rdma_get_gid_attr(self.as_raw(), port, index) };
        let attr = from_err_ptr(attr.cast_mut())?;
        // SAFETY: `attr` is a valid GID entry on which we hold a reference; every bit pattern
        // is a valid `[u8; 16]`.
        let gid = unsafe { *(*attr).gid.raw.as_ref() };
        // SAFETY: Drops the reference taken by `rdma_get_gid_attr`.
        unsafe { bindings::rdma_put_gid_attr(attr) };
        Ok(gid)
    }

    /// Returns the GID at `index` of port `port` and the net device it
    /// belongs to, with a reference: a VLAN device for the GIDs of a VLAN's
    /// addresses (the RDMA core adds those to the real device's table), the
    /// port's own net device otherwise. `None` for an entry without one.
    pub fn gid_with_netdev(
        &self,
        port: u32,
        index: u32,
    ) -> Result<([u8; 16], Option<ARef<net::Device>>)> {
        let index = c_int::try_from(index).map_err(|_| EINVAL)?;
        // SAFETY: The device is valid; the call checks `port` and `index` itself.
        let attr = unsafe { bindings::rdma_get_gid_attr(self.as_raw(), port, index) };
        let attr = from_err_ptr(attr.cast_mut())?;
        // SAFETY: `attr` is a valid GID entry on which we hold a reference; every bit pattern
        // is a valid `[u8; 16]`.
        let gid = unsafe { *(*attr).gid.raw.as_ref() };
        // SAFETY: `attr` is valid for the call.
        let ndev = unsafe { bindings::gid_attr_ndev_get(attr) };
        // SAFETY: The helper returned NULL or a net device with a reference taken for the
        // caller, which the `ARef` now owns.
        let ndev = NonNull::new(ndev).map(|p| unsafe { ARef::from_raw(p.cast::<net::Device>()) });
        // SAFETY: Drops the reference taken by `rdma_get_gid_attr`.
        unsafe { bindings::rdma_put_gid_attr(attr) };
        Ok((gid, ndev))
    }

    /// The network namespace of the net device bound to port `port`, with a
    /// reference, for transmitting; `None` without a net device or while
    /// the namespace is being dismantled. Any context.
    pub fn netdev_net(&self, port: u32) -> Option<ARef<net::namespace::Namespace>> {
        let ndev = self.netdev(port)?;
        // SAFETY: `ndev` is held, so its namespace's `struct net` is allocated; `maybe_get_net`
        // only takes a reference if the namespace is alive.
        let net = unsafe { bindings::maybe_get_net(bindings::dev_net(ndev.as_raw())) };
        // SAFETY: `maybe_get_net` returned NULL or took a reference, which the `ARef` owns.
        NonNull::new(net).map(|p| unsafe { ARef::from_raw(p.cast()) })
    }

    /// Replaces the node description of a registered device (sysfs
    /// `node_desc`, the NodeDescription SMP attribute).
    pub fn store_node_desc(&self, desc: &[u8; NODE_DESC_LEN]) {
        let nd = self.as_raw();
        for (i, b) in desc.iter().enumerate() {
            // SAFETY: `nd` is a valid `ib_device` (type invariant), `i` within its `node_desc`;
            // its reader (sysfs) takes no lock, as with the C drivers' `memcpy`: one marked byte
            // store each, so a reader may see old and new bytes mixed, never a torn one.
            unsafe { ptr::write_volatile((&raw mut (*nd).node_desc).cast::<u8>().add(i), *b) };
        }
    }

    /// Reports the state of `netdev`'s port to the RDMA core's clients as a
    /// `PORT_ACTIVE` or `PORT_ERR` event, unless the last event reported the
    /// same state.
    pub fn dispatch_port_state_event(&self, netdev: &net::Device) {
        // SAFETY: Both pointers are valid by the type invariants.
        unsafe { bindings::ib_dispatch_port_state_event(self.as_raw(), netdev.as_raw()) };
    }
}

impl<T: Driver> Deref for Device<T> {
    type Target = T::Data;

    fn deref(&self) -> &T::Data {
        &self.data
    }
}

/// The current state of a port bound to `netdev`: active when the net device
/// is running and has carrier (`ib_get_curr_port_state`).
pub fn port_state_of(netdev: &net::Device) -> PortState {
    // SAFETY: `netdev` is valid by its type invariant.
    PortState::from_raw(unsafe { bindings::ib_get_curr_port_state(netdev.as_raw()) })
}

/// Commands of the legacy uverbs `write()` interface a device can enable on
/// top of the RDMA core's default set.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum UverbsCmd {
    /// `IB_USER_VERBS_CMD_POST_SEND` (rdma-core's rxe provider rings its send
    /// doorbell with it).
    PostSend,
    /// `IB_USER_VERBS_CMD_REQ_NOTIFY_CQ`.
    ReqNotifyCq,
}

impl UverbsCmd {
    const fn bit(self) -> u64 {
        let cmd = match self {
            Self::PostSend => bindings::ib_uverbs_write_cmds_IB_USER_VERBS_CMD_POST_SEND,
            Self::ReqNotifyCq => bindings::ib_uverbs_write_cmds_IB_USER_VERBS_CMD_REQ_NOTIFY_CQ,
        };
        1u64 << cmd
    }
}

/// A device of driver `T` that is allocated but not registered.
///
/// Dropping it frees the device and the driver's state.
///
/// # Invariants
///
/// `ptr` points to a valid `Device<T>` with initialised data, owned by `self`
/// (the reference from `_ib_alloc_device`), not registered, whose ops are
/// those of [`OpsTable<T>`]. `net` is the namespace the device was
/// allocated in, which the RDMA core records without a reference and needs
/// until registration.
pub struct UnregisteredDevice<T: Driver> {
    ptr: NonNull<Device<T>>,
    net: ARef<net::namespace::Namespace>,
}

impl<T: Driver> UnregisteredDevice<T> {
    /// Allocates a device in network namespace `net` and initialises the
    /// driver's state in place. The RDMA core puts it in `init_net` instead
    /// unless the RDMA subsystem is in exclusive mode (`rdma system set
    /// netns exclusive`).
    pub fn new(
        net: &net::namespace::Namespace,
        data: impl PinInit<T::Data, Error>,
    ) -> Result<Self> {
        // SAFETY: `net` is alive for the call, and `Self` keeps a reference to it until the
        // device is registered, as `_ib_alloc_device` requires. `SIZE` is at least the size of
        // `struct ib_device` (the C struct is the first field).
        let raw = unsafe { bindings::_ib_alloc_device(Device::<T>::SIZE, net.as_raw()) };
        let raw = NonNull::new(raw).ok_or(ENOMEM)?;
        // CAST: `ib` is the first field of the `#[repr(C)]` struct `Device<T>`.
        let dev = raw.cast::<Device<T>>();

        // SAFETY: The tables are uninitialised memory inside the allocation, which does not move
        // until it is freed. Empty tables hold no memory, so the error path below need not
        // destroy them.
        let Ok(()) = unsafe { Table::new().__pinned_init(&raw mut (*dev.as_ptr()).qps) };
        // SAFETY: As above.
        let Ok(()) = unsafe { Table::new().__pinned_init(&raw mut (*dev.as_ptr()).mrs) };
        // SAFETY: As above.
        let Ok(()) = unsafe { Table::new().__pinned_init(&raw mut (*dev.as_ptr()).ahs) };
        // SAFETY: As above.
        let Ok(()) = unsafe { Table::new().__pinned_init(&raw mut (*dev.as_ptr()).mws) };
        // SAFETY: Both fields are uninitialised memory inside the allocation; neither needs
        // dropping.
        unsafe {
            (&raw mut (*dev.as_ptr()).owned).write(Opaque::new(bindings::llist_node {
                next: ptr::null_mut(),
            }));
            (&raw mut (*dev.as_ptr()).released).write(Atomic::new(false));
        }

        // SAFETY: `data` is uninitialised memory inside the allocation, which does not move
        // until it is freed.
        if let Err(e) = unsafe { data.__pinned_init(&raw mut (*dev.as_ptr()).data) } {
            // SAFETY: `raw` came from `_ib_alloc_device` and has no ops yet, so
            // `ib_dealloc_device` does not call `dealloc_driver` on the uninitialised data.
            unsafe { bindings::ib_dealloc_device(raw.as_ptr()) };
            return Err(e);
        }

        // The ops table is copied by `ib_set_device_ops`; only the owner and the sysfs group
        // are not constants.
        let mut ops = OpsTable::<T>::VTABLE;
        ops.owner = T::OWNER.as_ptr();
        if T::SYSFS_PARENT {
            ops.device_group = super::sysfs::parent_group();
        }
        // SAFETY: `raw` is valid and not registered. From here on `ib_dealloc_device` drops the
        // data through `dealloc_driver`, which is correct as the data is initialised.
        unsafe { bindings::ib_set_device_ops(raw.as_ptr(), &ops) };

        // INVARIANT: The device is valid, initialised, unregistered and owned by `Self`.
        Ok(Self {
            ptr: dev,
            net: net.into(),
        })
    }

    fn ib(&mut self) -> &mut bindings::ib_device {
        // SAFETY: The device is valid by the type invariant, and nobody else accesses it before
        // registration.
        unsafe { &mut *Opaque::cast_into(&raw const (*self.ptr.as_ptr()).ib) }
    }

    /// Sets the node description (at most 63 bytes are kept).
    pub fn set_node_desc(&mut self, desc: &CStr) {
        let ib = self.ib();
        let bytes = desc.to_bytes();
        let n = bytes.len().min(ib.node_desc.len() - 1);
        ib.node_desc.fill(0);
        for (d, s) in ib.node_desc.iter_mut().zip(&bytes[..n]) {
            // CAST: a byte of a C string.
            *d = *s as c_char;
        }
    }

    /// Sets the node GUID.
    pub fn set_node_guid(&mut self, guid: Guid) {
        self.ib().node_guid = guid.to_be64_raw();
    }

    /// Makes the device a channel adapter (`RDMA_NODE_IB_CA`) with `ports`
    /// ports.
    pub fn set_ca_ports(&mut self, ports: u32) {
        let ib = self.ib();
        // CAST: `node_type` is a `u8` holding small enum values.
        ib.node_type = bindings::RDMA_NODE_IB_CA as u8;
        ib.phys_port_cnt = ports;
    }

    /// Sets the number of completion vectors.
    pub fn set_num_comp_vectors(&mut self, n: u32) {
        self.ib().num_comp_vectors = i32::try_from(n).unwrap_or(i32::MAX);
    }

    /// Sets the lkey that gives kernel consumers access to all memory.
    pub fn set_local_dma_lkey(&mut self, lkey: u32) {
        self.ib().local_dma_lkey = lkey;
    }

    /// Enables a legacy uverbs command.
    pub fn enable_uverbs_cmd(&mut self, cmd: UverbsCmd) {
        self.ib().uverbs_cmd_mask |= cmd.bit();
    }

    /// Records that the device name was chosen by the user (as with
    /// `rdma link add NAME`), so that it is not renamed.
    pub fn mark_name_assigned_by_user(&mut self) {
        self.ib().name_assign_type = bindings::rdma_nl_name_assign_type_RDMA_NAME_ASSIGN_TYPE_USER;
    }

    /// Binds `netdev` to port `port` and registers the device as `name`.
    ///
    /// On success the RDMA core owns the device; it can be found again with
    /// [`RegisteredDevice::get_by_netdev`], and the driver's [`Devices`] list
    /// holds it until its module unloads or the device is gone.  On failure the
    /// device is freed.
    pub fn register(self, name: &CStr, netdev: &net::Device, port: u32) -> Result {
        let dev = self.ptr;
        let raw = dev.as_ptr().cast::<bindings::ib_device>();
        // Devices unregistered since the last registration leave the list first.
        T::devices().reap();
        // SAFETY: The device is valid and unregistered; `netdev` is valid. The RDMA core takes
        // its own reference on the net device.
        to_result(unsafe { bindings::ib_device_set_netdev(raw, netdev.as_raw(), port) })?;
        // SAFETY: The device is valid (its `struct device` is initialised by
        // `_ib_alloc_device`). This reference is the list's: taken now, while the device is
        // surely alive, as it may be unregistered and freed as soon as it is registered.
        unsafe { bindings::get_device(bindings::ib_device_dev(raw)) };
        // SAFETY: The device is valid and unregistered; `name` is a valid C string. Passing no
        // DMA device makes the core use the virtual-address DMA mapping (software device).
        let ret = unsafe { bindings::ib_register_device(raw, name.as_char_ptr(), ptr::null_mut()) };
        if let Err(e) = to_result(ret) {
            // SAFETY: Drops the reference taken above; `self` still owns the allocation's own.
            unsafe { bindings::put_device(bindings::ib_device_dev(raw)) };
            return Err(e);
        }
        // The RDMA core owns the device now: do not free it, but drop the
        // namespace reference, which registration no longer needs.
        let this = core::mem::ManuallyDrop::new(self);
        // SAFETY: `this.net` is read once and `this` is never dropped, so the reference is
        // released exactly once.
        drop(unsafe { ptr::read(&this.net) });
        // SAFETY: `dev` is registered and was never linked, and the reference taken above goes
        // to the list.
        unsafe { T::devices().push(dev) };
        Ok(())
    }
}

impl<T: Driver> Deref for UnregisteredDevice<T> {
    type Target = Device<T>;

    fn deref(&self) -> &Device<T> {
        // SAFETY: The device is valid by the type invariant.
        unsafe { self.ptr.as_ref() }
    }
}

impl<T: Driver> Drop for UnregisteredDevice<T> {
    fn drop(&mut self) {
        // SAFETY: We own the unregistered device; `dealloc_driver` drops the data, then the
        // memory is released.
        unsafe { bindings::ib_dealloc_device(self.ptr.as_ptr().cast()) };
    }
}

/// A registered device of driver `T`, held with a registration reference
/// (`ib_device_try_get`): while it exists the device stays registered or in
/// the middle of unregistering, and its driver state stays valid.
///
/// # Invariants
///
/// `ptr` points to a `Device<T>` on which `self` holds a registration
/// reference.
pub struct RegisteredDevice<T: Driver> {
    ptr: NonNull<Device<T>>,
}

// SAFETY: The reference can be dropped (`ib_device_put`) from any thread.
unsafe impl<T: Driver> Send for RegisteredDevice<T> {}

// SAFETY: Only shared access to `Device<T>`, which is `Sync`.
unsafe impl<T: Driver> Sync for RegisteredDevice<T> {}

impl<T: Driver> RegisteredDevice<T> {
    /// Returns the registered device of driver `T` bound to `netdev`.
    pub fn get_by_netdev(netdev: &net::Device) -> Option<Self> {
        // SAFETY: `netdev` is valid by its type invariant.
        let raw =
            unsafe { bindings::ib_device_get_by_netdev(netdev.as_raw(), T::DRIVER_ID.as_raw()) };
        let raw = NonNull::new(raw)?;
        // SAFETY: `ib_device_get_by_netdev` returned a device with a registration reference.
        if !unsafe { Device::<T>::is_ours(raw.as_ptr()) } {
            // Same driver id, other driver (the C `rdma_rxe`).
            // SAFETY: We hold the registration reference taken above.
            unsafe { bindings::ib_device_put(raw.as_ptr()) };
            return None;
        }
        // INVARIANT: The device is ours and we hold a registration reference.
        Some(Self { ptr: raw.cast() })
    }

    /// Unregisters the device from a workqueue (safe under RTNL, e.g. from a
    /// netdev notifier).
    ///
    /// Pending unregistrations complete before [`DriverRegistration`] is
    /// dropped.
    pub fn unregister_queued(self) {
        // SAFETY: We hold a registration reference, as `ib_unregister_device_queued` requires;
        // the device uses `dealloc_driver`.
        unsafe { bindings::ib_unregister_device_queued(self.ptr.as_ptr().cast()) };
        // `self` drops the registration reference.
    }
}

impl<T: Driver> Deref for RegisteredDevice<T> {
    type Target = Device<T>;

    fn deref(&self) -> &Device<T> {
        // SAFETY: The registration reference keeps the device and its data valid.
        unsafe { self.ptr.as_ref() }
    }
}

impl<T: Driver> Drop for RegisteredDevice<T> {
    fn drop(&mut self) {
        // SAFETY: We hold a registration reference by the type invariant.
        unsafe { bindings::ib_device_put(self.ptr.as_ptr().cast()) };
    }
}

/// Owns all devices of driver `T`: dropping it unregisters every device in
/// `T`'s [`Devices`] list that is still registered, and waits for the
/// unregistrations already under way, so that no callback of `T` runs
/// afterwards.
///
/// Only `T`'s own devices are touched: unlike `ib_unregister_driver`, which
/// unregisters every device with `T`'s driver id, whichever driver it belongs
/// to.
///
/// A module that registers devices keeps one of these in its state, so that
/// no device outlives the module's code.
pub struct DriverRegistration<T: Driver>(PhantomData<T>);

impl<T: Driver> DriverRegistration<T> {
    /// Creates the owner of the driver's devices.
    pub fn new() -> Self {
        Self(PhantomData)
    }
}

impl<T: Driver> Default for DriverRegistration<T> {
    fn default() -> Self {
        Self::new()
    }
}

impl<T: Driver> Drop for DriverRegistration<T> {
    fn drop(&mut self) {
        T::devices().unregister_all();
    }
}

/// The devices a driver registered: a `static` of the driver, returned by
/// [`Driver::devices`].
///
/// [`UnregisteredDevice::register`] links each device here with a reference
/// on its `struct device`, which keeps the `struct ib_device` (not the
/// driver's state) allocated. A device stays linked after its unregistration
/// until it is reaped: at the next registration, or at module unload by
/// [`DriverRegistration`]. Reaping waits until the device's
/// `dealloc_driver` has returned: the RDMA core calls it, last of all ops,
/// under the device's unregistration lock, which `ib_unregister_device`
/// takes as well. That is the fence `ib_unregister_driver` gives, without
/// its side effect on other drivers of the same driver id.
///
/// # Invariants
///
/// `head` is a lock-less list (`struct llist_head`) of the `owned` links of
/// registered (or formerly registered) `Device<T>`s, each holding one
/// `struct device` reference that the list owns.
pub struct Devices<T: Driver> {
    head: Opaque<bindings::llist_head>,
    _t: PhantomData<T>,
}

// SAFETY: The list is only changed with the lock-less list's atomic operations
// (`llist_add`, `llist_del_all`), and the devices it links are owned by the
// list, not by a thread.
unsafe impl<T: Driver> Sync for Devices<T> {}

impl<T: Driver> Devices<T> {
    /// Creates an empty list.
    pub const fn new() -> Self {
        // INVARIANT: The list is empty.
        Self {
            head: Opaque::new(bindings::llist_head {
                first: ptr::null_mut(),
            }),
            _t: PhantomData,
        }
    }

    /// Links `dev`.
    ///
    /// # Safety
    ///
    /// `dev` must be a registered device that is not linked, and the caller
    /// gives the list a reference on its `struct device`.
    unsafe fn push(&self, dev: NonNull<Device<T>>) {
        // SAFETY: The device is valid (the list's reference keeps it allocated), and its link is
        // in no list. `llist_add` is safe against concurrent adds and removals.
        // INVARIANT: The link of a `Device<T>`, with a reference for the list.
        unsafe {
            bindings::llist_add(
                Opaque::cast_into(&raw const (*dev.as_ptr()).owned),
                self.head.get(),
            )
        };
    }

    /// Unlinks every device and calls `f` on each, with the list's
    /// reference, which `f` drops or gives back with [`Devices::push`].
    fn take_each(&self, mut f: impl FnMut(NonNull<Device<T>>)) {
        // SAFETY: `head` is a valid list head; `llist_del_all` is atomic.
        let mut node = unsafe { bindings::llist_del_all(self.head.get()) };
        while let Some(n) = NonNull::new(node) {
            // SAFETY: `n` is the `owned` link of a valid `Device<T>` by the type invariant, now
            // out of the list; the next link is read before `f` may link `n` again.
            let (dev, next) = unsafe {
                let dev = kernel::container_of!(Opaque::cast_from(n.as_ptr()), Device<T>, owned);
                (NonNull::new_unchecked(dev.cast_mut()), (*n.as_ptr()).next)
            };
            node = next;
            f(dev);
        }
    }

    /// Unregisters `dev` if it is still registered, or waits until the
    /// unregistration under way has returned from `dealloc_driver`, then
    /// drops the list's reference, which the caller took out of the list.
    fn release(dev: NonNull<Device<T>>) {
        let raw = dev.as_ptr().cast::<bindings::ib_device>();
        // SAFETY: The list's reference keeps the `struct ib_device` allocated. The device was
        // registered and uses `dealloc_driver`. `ib_unregister_device` takes the device's
        // unregistration lock, which a concurrent unregistration holds until `dealloc_driver`
        // has returned; on a device already unregistered it does nothing else.
        unsafe { bindings::ib_unregister_device(raw) };
        // SAFETY: Drops the list's reference.
        unsafe { bindings::put_device(bindings::ib_device_dev(raw)) };
    }

    /// Drops the devices whose `dealloc_driver` has run, once it has
    /// returned. Process context.
    fn reap(&self) {
        self.take_each(|dev| {
            // SAFETY: The list's reference keeps the device allocated, and `released` with it.
            if unsafe { (*dev.as_ptr()).released.load(Acquire) } {
                Self::release(dev);
            } else {
                // SAFETY: `dev` is not linked; it was registered when it was linked first, and
                // its reference goes back to the list.
                unsafe { self.push(dev) };
            }
        });
    }

    /// Unregisters every device still registered and waits for those on
    /// their way out. Process context; no device may be registered
    /// concurrently.
    fn unregister_all(&self) {
        self.take_each(Self::release);
    }
}

impl<T: Driver> Default for Devices<T> {
    fn default() -> Self {
        Self::new()
    }
}
