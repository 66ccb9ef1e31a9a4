// SPDX-License-Identifier: GPL-2.0

//! The `parent` sysfs attribute of software RDMA devices
//! (`ib_device_ops.device_group`): the name of the net device a device is
//! bound to, as `rdma_rxe` and `siw` show it in
//! `/sys/class/infiniband/DEV/parent`.
//!
//! The RDMA core asks new drivers to use netlink instead (`rdma link show`
//! says the same); this exists because tools written for the C drivers read
//! the file.
//!
//! C header: [`include/rdma/ib_verbs.h`](srctree/include/rdma/ib_verbs.h)

use crate::{bindings, net};
use core::{
    cell::UnsafeCell,
    ptr::{self, NonNull},
};
use kernel::{
    ffi::{c_char, c_int},
    sync::aref::ARef,
};

/// The attribute `parent`, read-only for everyone.
#[repr(transparent)]
struct Attr(UnsafeCell<bindings::device_attribute>);

// SAFETY: The attribute is never written after its static initialisation: sysfs only reads it
// (and, under lockdep, treats a static attribute's key as static without writing it).
unsafe impl Sync for Attr {}

static PARENT: Attr = Attr(UnsafeCell::new(bindings::device_attribute {
    attr: bindings::attribute {
        name: kernel::str::as_char_ptr_in_const_context(c"parent"),
        mode: 0o444,
        // SAFETY: The other fields (lockdep's keys) are integers and pointers, all-zero valid.
        ..unsafe { core::mem::MaybeUninit::<bindings::attribute>::zeroed().assume_init() }
    },
    // `show` and `store` are each in a union with their `const` variant.
    __bindgen_anon_1: bindings::device_attribute__bindgen_ty_1 {
        show: Some(parent_show),
    },
    __bindgen_anon_2: bindings::device_attribute__bindgen_ty_2 { store: None },
}));

/// The group's NULL-terminated list of attributes.
#[repr(transparent)]
struct AttrList([*mut bindings::attribute; 2]);

// SAFETY: A constant list of pointers to the static `PARENT`, only read.
unsafe impl Sync for AttrList {}

static ATTRS: AttrList = AttrList([
    // CAST: `device_attribute` starts with its `attribute`; `Attr` is transparent.
    (&raw const PARENT).cast_mut().cast::<bindings::attribute>(),
    ptr::null_mut(),
]);

// `parent_show` finds the `ib_core_device` from its `struct device` (`rdma_device_to_ibdev`).
const _: () = assert!(core::mem::offset_of!(bindings::ib_core_device, dev) == 0);

/// The group the RDMA core adds to each device (`ops.device_group`).
#[repr(transparent)]
struct Group(bindings::attribute_group);

// SAFETY: A constant group of static attributes, only read.
unsafe impl Sync for Group {}

static GROUP: Group = Group(bindings::attribute_group {
    __bindgen_anon_2: bindings::attribute_group__bindgen_ty_2 {
        // CAST: sysfs takes the list as `struct attribute **` but does not write it.
        attrs: (&raw const ATTRS)
            .cast_mut()
            .cast::<*mut bindings::attribute>(),
    },
    // SAFETY: The other fields are pointers and callbacks, for which all-zero means "none".
    ..unsafe { core::mem::MaybeUninit::<bindings::attribute_group>::zeroed().assume_init() }
});

/// The attribute group holding `parent`, for `ib_device_ops.device_group`.
pub(crate) fn parent_group() -> *const bindings::attribute_group {
    &raw const GROUP.0
}

/// `show` of `parent`: the name of the net device of port 1, and a newline.
///
/// # Safety
///
/// Called by sysfs with the `struct device` of a registered `ib_device` whose ops name
/// [`parent_group`], and a buffer of `PAGE_SIZE` bytes.
unsafe extern "C" fn parent_show(
    dev: *mut bindings::device,
    _attr: *mut bindings::device_attribute,
    buf: *mut c_char,
) -> isize {
    // CAST: The `struct device` of an `ib_device` is the first field of its `ib_core_device`
    // (`rdma_device_to_ibdev`).
    let core = dev.cast::<bindings::ib_core_device>();
    // SAFETY: `dev` belongs to a live `ib_device` (sysfs removes the group before the device
    // goes), whose `coredev.owner` points back to it.
    let ib = unsafe { (*core).owner };
    // SAFETY: `ib` is a live `ib_device`.
    let ndev = unsafe { bindings::ib_device_get_netdev(ib, 1) };
    let Some(ndev) = NonNull::new(ndev) else {
        // The RDMA device is being unregistered and has let its net device go.
        return (-(bindings::ENODEV as c_int)) as isize;
    };
    // SAFETY: `ib_device_get_netdev` took a reference for the caller, which the `ARef` owns.
    let ndev: ARef<net::Device> = unsafe { ARef::from_raw(ndev.cast::<net::Device>()) };
    // Unlocked against a rename, as the C drivers' `parent`: a read racing one may see a mix
    // of the two names, never more than `IFNAMSIZ` bytes.
    let name = ndev.name();
    let bytes = name.as_bytes();
    for (i, b) in Iterator::chain(bytes.iter(), b"\n").enumerate() {
        // SAFETY: At most `IFNAMSIZ` bytes, within the `PAGE_SIZE` bytes of `buf`.
        // CAST: a byte of a C string.
        unsafe { *buf.add(i) = *b as c_char };
    }
    // CAST: at most `IFNAMSIZ`.
    (bytes.len() + 1) as isize
}
