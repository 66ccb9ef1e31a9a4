// SPDX-License-Identifier: GPL-2.0

//! Module notifier: the life cycle of every module loaded after
//! registration (`register_module_notifier`), and whether a module of a
//! given name is loaded.
//!
//! The loader calls the chain with `MODULE_STATE_COMING` after a module is
//! formed and before its parameters are parsed and its init runs; an error
//! from a handler fails the load with that error, which `init_module`
//! returns to the caller (`prepare_coming_module` in
//! `kernel/module/main.c`). The handlers called before the one that refused
//! see `MODULE_STATE_GOING` for it; the refusing one and those after it see
//! nothing more. A module that got past `COMING` is reported `GOING` once:
//! after its exit function returned, or when its load fails later on.
//!
//! C header: [`include/linux/module.h`](srctree/include/linux/module.h)

use crate::{
    bindings,
    notifier::{
        Chain,
        NotifierBlock, //
    },
};
use core::marker::PhantomData;
use kernel::{
    prelude::*,
    types::Opaque,
    ThisModule, //
};

/// A loaded module (`struct module`).
///
/// # Invariants
///
/// The `struct module` is valid for as long as a reference to `Self`
/// exists.
#[repr(transparent)]
pub struct Module(Opaque<bindings::module>);

impl Module {
    /// Returns the module at `ptr`.
    ///
    /// # Safety
    ///
    /// `ptr` must point to a valid `struct module` that stays valid for `'a`.
    unsafe fn from_raw<'a>(ptr: *mut bindings::module) -> &'a Self {
        // CAST: `Self` is a transparent wrapper of `struct module`.
        // SAFETY: Valid for `'a` by the safety requirements.
        // INVARIANT: Valid for the lifetime of the reference.
        unsafe { &*ptr.cast::<Self>() }
    }

    /// The module's name, as `lsmod` shows it (`rdma_rxe`).
    pub fn name(&self) -> &CStr {
        // SAFETY: The module is valid by the type invariant; the loader fills `name` (a
        // NUL-terminated array) before the module is formed and never changes it.
        unsafe { CStr::from_char_ptr((*self.0.get()).name.as_ptr()) }
    }
}

/// Receives module life-cycle events.
pub trait Handler: Send + Sync {
    /// `module` is formed and about to run its init (`MODULE_STATE_COMING`).
    ///
    /// An error refuses the module: its load fails with that error. Process
    /// context, with the notifier chain's lock held for reading (do not load
    /// or unload a module from here).
    fn coming(&self, _module: &Module) -> Result {
        Ok(())
    }

    /// `module` goes away (`MODULE_STATE_GOING`): its exit function has
    /// returned, or its load failed after [`Handler::coming`] accepted it.
    fn going(&self, _module: &Module) {}
}

/// The module notifier chain, with handler `T`.
struct Modules<T>(PhantomData<T>);

// SAFETY: `register_module_notifier` links the block into the loader's chain, which calls it with
// an `enum module_state` and the `struct module` it is about; `unregister_module_notifier` takes
// the chain's lock for writing, so no callback runs after it returned.
unsafe impl<T: Handler> Chain for Modules<T> {
    type Handler = T;

    unsafe fn register(nb: *mut bindings::notifier_block) -> c_int {
        // SAFETY: By the safety requirements.
        unsafe { bindings::register_module_notifier(nb) }
    }

    unsafe fn unregister(nb: *mut bindings::notifier_block) {
        // SAFETY: By the safety requirements.
        unsafe { bindings::unregister_module_notifier(nb) };
    }

    unsafe fn call(handler: &T, state: c_ulong, ptr: *mut c_void) -> c_int {
        // CAST: For module notifiers `ptr` is the `struct module` the event is about.
        // SAFETY: The loader keeps the module's memory for the duration of the call.
        let module = unsafe { Module::from_raw(ptr.cast()) };
        // CAST: `enum module_state` values are small non-negative integers.
        match state as bindings::module_state {
            bindings::module_state_MODULE_STATE_COMING => match handler.coming(module) {
                Ok(()) => bindings::NOTIFY_OK as c_int,
                // SAFETY: Pure function of its argument.
                Err(e) => unsafe { bindings::notifier_from_errno(e.to_errno()) },
            },
            bindings::module_state_MODULE_STATE_GOING => {
                handler.going(module);
                bindings::NOTIFY_DONE as c_int
            }
            _ => bindings::NOTIFY_DONE as c_int,
        }
    }
}

/// A registered module notifier with handler `T`.
///
/// The `struct notifier_block` is linked into the loader's chain, so it lives
/// pinned inside the registration and is unlinked when the registration is
/// dropped. Modules that were loaded before the registration are not
/// reported; [`is_loaded`] tells whether one is.
#[pin_data]
pub struct Registration<T: Handler> {
    #[pin]
    block: NotifierBlock<Modules<T>>,
}

impl<T: Handler> Registration<T> {
    /// Initialises `handler` and registers it for module events.
    pub fn new(handler: impl PinInit<T, Error>) -> impl PinInit<Self, Error> {
        try_pin_init!(Self {
            block <- NotifierBlock::new(handler),
        })
    }
}

/// Whether a module called `name` is loaded: whether it has a `/sys/module`
/// entry, which the loader adds after `MODULE_STATE_COMING` and before the
/// module's init runs, and removes when it frees the module, after
/// `MODULE_STATE_GOING` (`mod_sysfs_setup`, `free_module`).
///
/// `this` is the calling module, whose own entry leads to the set of all
/// module entries. Built-in code has no module of its own here and gets
/// `false`, as does a kernel without sysfs; a built-in module is only found
/// if it has parameters (the only built-in modules with an entry).
pub fn is_loaded(this: &ThisModule, name: &CStr) -> bool {
    let module = this.as_ptr();
    if module.is_null() {
        return false;
    }
    // SAFETY: `module` is the calling module, which is live while its code runs; the loader set
    // its kobject's kset (the `/sys/module` set, or NULL without sysfs) before its init ran, and
    // it does not change until the module is freed.
    let kset = unsafe { (*module).mkobj.kobj.kset };
    if kset.is_null() {
        return false;
    }
    // SAFETY: `kset` is the module kset, which lives forever; `name` is a valid C string.
    let kobj = unsafe { bindings::kset_find_obj(kset, name.as_char_ptr()) };
    if kobj.is_null() {
        return false;
    }
    // SAFETY: `kset_find_obj` returned the entry with a reference taken for us.
    unsafe { bindings::kobject_put(kobj) };
    true
}
