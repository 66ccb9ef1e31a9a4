// SPDX-License-Identifier: GPL-2.0

#![forbid(unsafe_code)]

//! Address handles. User space gets an `ah_num` (1..32767) that its UD
//! WQEs carry instead of a full address vector; kernel UD work requests
//! are encoded with the same number, and the transport finds the handle
//! by it ([`crate::rdma::device::Device::lookup_ah`]) for both.

use crate::rdma::{
    ah::{
        Ah,
        AhAttr,
        NetworkType, //
    },
    device::Device,
    lock::SpinLockIrq,
    udata::Udata, //
};
use kernel::prelude::*;

use super::{
    param::PORT_GID_TBL_LEN,
    tx::{
        Path,
        TxCtx, //
    },
    verbs::Rrxe, //
};
use crate::net::skbuff::xmit_allowed;

/// The address vector of an address handle and the route resolved from
/// it, which a modify replaces together.
pub(crate) struct AhRoute {
    /// The address vector.
    attr: AhAttr,
    /// Counts the modifies, so that a route resolved from an older vector
    /// is not stored over a newer one's.
    version: u64,
    /// The route and headers to the destination, resolved at creation or
    /// modify when interrupts are enabled there, else by the first sender's
    /// kick ([`RrxeAh::resolve`]): UD sends run with the QP's lock held,
    /// where no route lookup can run.
    pub(crate) tx: Option<TxCtx>,
}

/// State of an address handle.
#[pin_data]
pub(crate) struct RrxeAh {
    /// Index reported to user space (`struct rxe_create_ah_resp`).
    pub(crate) ah_num: u32,
    /// The address vector and its route.
    #[pin]
    pub(crate) route: SpinLockIrq<AhRoute>,
}

/// Checks an address vector as `rxe_av_chk_attr` does, with its errno
/// (`EINVAL`): port 1, a GRH (RoCE routes by GID), a source GID inside the
/// table, and a RoCEv2 (IPv4 or IPv6) source GID.
fn check_attr(attr: &AhAttr) -> Result {
    if attr.port_num() != 1 || !attr.has_grh() {
        return Err(EINVAL);
    }
    if i32::from(attr.sgid_index()) >= PORT_GID_TBL_LEN {
        return Err(EINVAL);
    }
    match attr.network_type() {
        Some(NetworkType::Ipv4 | NetworkType::Ipv6) => Ok(()),
        _ => Err(EINVAL),
    }
}

impl RrxeAh {
    /// Creates an address handle (`rxe_create_ah`) and returns it with its
    /// number. Does not sleep (kernel callers may hold locks).
    pub(crate) fn create(
        dev: &Device<Rrxe>,
        attr: AhAttr,
        udata: Option<&Udata>,
    ) -> Result<(impl PinInit<Self, Error>, u32)> {
        check_attr(&attr)?;
        let ah_num = dev.ah_pool.alloc()?;
        if let Some(udata) = udata {
            // Old providers pass no response buffer; they build the AV themselves.
            if udata.outlen() >= 8 {
                let mut resp = [0u8; 8];
                resp[..4].copy_from_slice(&ah_num.to_ne_bytes());
                if let Err(e) = udata.copy_to(&resp) {
                    dev.ah_pool.free(ah_num);
                    return Err(e);
                }
            }
        }
        let tx = if xmit_allowed() {
            Self::resolve_attr(dev, &attr)
        } else {
            None
        };
        let route = AhRoute {
            attr,
            version: 0,
            tx,
        };
        Ok((
            try_pin_init!(Self {
                ah_num,
                route <- crate::rdma::lock::new_spinlock_irq!(route, "RrxeAh::route"),
            }),
            ah_num,
        ))
    }

    /// Replaces the address vector (`rxe_modify_ah`, with its checks and
    /// errno) and the route with one resolved from the new vector; the
    /// next datagram through the handle goes to the new destination.
    pub(crate) fn modify(ah: &Ah<Rrxe>, attr: AhAttr) -> Result {
        check_attr(&attr)?;
        let tx = if xmit_allowed() {
            Self::resolve_attr(ah.device(), &attr)
        } else {
            None
        };
        let old = {
            let mut r = ah.route.lock();
            r.attr = attr;
            r.version = r.version.wrapping_add(1);
            core::mem::replace(&mut r.tx, tx)
        };
        // The old route is released outside the lock, keeping the time
        // with interrupts off short.
        drop(old);
        Ok(())
    }

    /// The address vector.
    pub(crate) fn attr(ah: &Ah<Rrxe>) -> AhAttr {
        ah.route.lock().attr.clone()
    }

    fn resolve_attr(dev: &Device<Rrxe>, attr: &AhAttr) -> Option<TxCtx> {
        let av = attr.av();
        let path = Path {
            dgid: av.dgid,
            sgid_index: av.sgid_index,
            flow_label: av.flow_label,
            traffic_class: av.traffic_class,
            hop_limit: av.hop_limit,
        };
        TxCtx::resolve(dev, &path, 0, 0).ok()
    }

    /// Resolves the route now if it is missing; only where interrupts are
    /// enabled (e.g. a QP's kick).
    pub(crate) fn resolve(ah: &Ah<Rrxe>) {
        if !xmit_allowed() {
            return;
        }
        let (attr, version) = {
            let r = ah.route.lock();
            if r.tx.is_some() {
                return;
            }
            (r.attr.clone(), r.version)
        };
        let ctx = Self::resolve_attr(ah.device(), &attr);
        let mut r = ah.route.lock();
        if r.tx.is_none() && r.version == version {
            r.tx = ctx;
        }
    }

    /// Frees the AH number.
    pub(crate) fn destroy(ah: &Ah<Rrxe>) -> Result {
        ah.device().ah_pool.free(ah.ah_num);
        Ok(())
    }
}
