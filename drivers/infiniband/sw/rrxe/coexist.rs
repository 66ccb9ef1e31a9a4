// SPDX-License-Identifier: GPL-2.0

#![forbid(unsafe_code)]

//! rrxe and the C driver `rdma_rxe` are never active at the same time.
//!
//! Both register their devices with `RDMA_DRIVER_RXE`, the driver id
//! rdma-core's `rxe` provider matches on. `rdma_rxe` takes every device of
//! that id for its own `struct rxe_dev`: its net device notifier would write
//! past an rrxe device's allocation on an MTU change or a carrier loss, and
//! its unload (`ib_unregister_driver`) would unregister rrxe's devices. So:
//!
//! - while `rdma_rxe` is loaded (or loading), `rdma link add … type rrxe`
//!   fails with `EBUSY`;
//! - while an rrxe device exists (or is being added), loading `rdma_rxe`
//!   fails with `EBUSY` (a module notifier refuses it at
//!   `MODULE_STATE_COMING`, before its init runs);
//! - `rdma_rxe` may load while rrxe is loaded without devices, and rrxe may
//!   load while `rdma_rxe` is loaded; rrxe's unload only touches its own
//!   devices (see [`crate::rdma::device::Devices`]).
//!
//! Each refusal prints one kernel message. [`STATE`] keeps both sides in one
//! word, so that a device being added and `rdma_rxe` coming are decided
//! atomically. The notifier only sees modules that come after rrxe; an
//! `rdma_rxe` loaded before is found by its `/sys/module` entry. (An
//! `rdma_rxe` whose load is between its `COMING` event and its sysfs entry
//! exactly while rrxe registers its notifier is seen by neither: only a
//! concurrent load of both modules can get there.)

use crate::module_notifier::{
    self,
    Module, //
};
use kernel::prelude::*;
use kernel::sync::atomic::{
    Atomic,
    Full,
    Relaxed, //
};

/// The name of the C driver's module.
const RDMA_RXE: &CStr = c"rdma_rxe";

/// Bit of [`STATE`]: `rdma_rxe` is loaded, or loading past `COMING`.
const RXE_LOADED: u32 = 1 << 31;

/// `RXE_LOADED`, plus the number of [`Claim`]s (rrxe devices, and link adds
/// under way) in the low bits.
static STATE: Atomic<u32> = Atomic::new(0);

/// Whether `rdma_rxe` is loaded but came before rrxe's notifier: found in
/// `/sys/module`, or built in.
fn rxe_loaded_before() -> bool {
    cfg!(CONFIG_RDMA_RXE = "y") || module_notifier::is_loaded(&crate::THIS_MODULE, RDMA_RXE)
}

/// The right of one rrxe device to exist: `rdma_rxe` cannot load while a
/// claim is held. Each device holds one in its state, from before it is
/// allocated until its state is dropped (`dealloc_driver`, after the RDMA
/// core has unbound it from its net device).
pub(crate) struct Claim(());

impl Claim {
    /// Claims the right to add the device `name`; `EBUSY` while `rdma_rxe`
    /// is loaded.
    pub(crate) fn new(name: &CStr) -> Result<Self> {
        let refuse = || {
            pr_err!(
                "cannot add {} while rdma_rxe is loaded (both drivers use RDMA_DRIVER_RXE); unload rdma_rxe first\n",
                name
            );
            EBUSY
        };
        if rxe_loaded_before() {
            return Err(refuse());
        }
        let mut cur = STATE.load(Relaxed);
        loop {
            if cur & RXE_LOADED != 0 {
                return Err(refuse());
            }
            // The count cannot reach the flag: each claim is a device or a `newlink` call.
            let next = cur
                .checked_add(1)
                .filter(|n| n & RXE_LOADED == 0)
                .ok_or(EBUSY)?;
            match STATE.cmpxchg(cur, next, Full) {
                Ok(_) => return Ok(Self(())),
                Err(now) => cur = now,
            }
        }
    }
}

impl Drop for Claim {
    fn drop(&mut self) {
        STATE.fetch_sub(1u32, Full);
    }
}

/// Refuses `rdma_rxe` while rrxe devices exist, and tracks whether it is
/// loaded.
pub(crate) struct RxeGuard;

impl module_notifier::Handler for RxeGuard {
    fn coming(&self, module: &Module) -> Result {
        if module.name() != RDMA_RXE {
            return Ok(());
        }
        let mut cur = STATE.load(Relaxed);
        loop {
            if cur & !RXE_LOADED != 0 {
                pr_err!(
                    "refusing to load rdma_rxe while rrxe devices exist (both drivers use RDMA_DRIVER_RXE); delete them (rdma link delete) or unload rrxe first\n"
                );
                return Err(EBUSY);
            }
            match STATE.cmpxchg(cur, cur | RXE_LOADED, Full) {
                Ok(_) => return Ok(()),
                Err(now) => cur = now,
            }
        }
    }

    fn going(&self, module: &Module) {
        if module.name() != RDMA_RXE {
            return;
        }
        let mut cur = STATE.load(Relaxed);
        while let Err(now) = STATE.cmpxchg(cur, cur & !RXE_LOADED, Full) {
            cur = now;
        }
    }
}

/// The registration of [`RxeGuard`].
pub(crate) type Registration = module_notifier::Registration<RxeGuard>;
