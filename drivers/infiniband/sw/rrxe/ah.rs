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

/// State of an address handle.
#[pin_data]
pub(crate) struct RrxeAh {
    /// The address vector.
    pub(crate) attr: AhAttr,
    /// Index reported to user space (`struct rxe_create_ah_resp`).
    pub(crate) ah_num: u32,
    /// The route and headers to the destination, resolved at creation
    /// when interrupts are enabled there, else by the first sender's kick
    /// ([`RrxeAh::resolve`]): UD sends run with the QP's lock held, where
    /// no route lookup can run.
    #[pin]
    pub(crate) tx: SpinLockIrq<Option<TxCtx>>,
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
        Ok((
            try_pin_init!(Self {
                attr,
                ah_num,
                tx <- crate::rdma::lock::new_spinlock_irq!(tx, "RrxeAh::tx"),
            }),
            ah_num,
        ))
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
        if ah.tx.lock().is_some() || !xmit_allowed() {
            return;
        }
        let ctx = Self::resolve_attr(ah.device(), &ah.attr);
        let mut t = ah.tx.lock();
        if t.is_none() {
            *t = ctx;
        }
    }

    /// Network type of the source GID (RoCEv2 over IPv4 or IPv6; checked at
    /// creation).
    #[expect(dead_code, reason = "the UD transport comes with the next issue")]
    pub(crate) fn network_type(&self) -> Option<NetworkType> {
        self.attr.network_type()
    }

    /// Frees the AH number.
    pub(crate) fn destroy(ah: &Ah<Rrxe>) -> Result {
        ah.device().ah_pool.free(ah.ah_num);
        Ok(())
    }
}
