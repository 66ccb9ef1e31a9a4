// SPDX-License-Identifier: GPL-2.0

#![forbid(unsafe_code)]

//! Memory windows, type 1 and type 2B (IBTA Vol 1 §10.6.7; rdma_rxe's
//! `rxe_mw.c`): a window gives remote access, through its own R_Key, to a
//! range of a user memory region with rights of its own.
//!
//! A type 1 window is bound by `ibv_bind_mw` and a type 2 window by a
//! BIND_MW work request; librxe turns both into a BIND_MW WQE, which the
//! requester executes in send queue order ([`RrxeMw::bind`]). A type 2
//! window is bound to the QP that bound it: only that QP's responder
//! accepts its R_Key. LOCAL_INV and SEND with invalidate free a type 2
//! window; a type 1 window is never invalidated (o10-37.2.26).
//!
//! The binding is under the window's lock: binds and invalidations run in
//! the requester and responder of any QP of the PD, on any CPU, while
//! responders read it. A bound window holds a reference on its region and
//! counts in the region's [`RrxeMr::bind_mw`], so that the region is not
//! deregistered under it (`EINVAL`, as rxe).
//!
//! Beyond the C driver: the responder checks the window's own range (rxe
//! checks only the region's), a window binds only to a region of its PD
//! and is bound only from a QP of its PD (rxe checks the QP's PD for type
//! 2 only), and remote invalidation of a type 2 window must come to the QP
//! it is bound to.

use crate::{
    proto::{
        access::range_within,
        index::make_key,
        wqe::BindMw, //
    },
    rdma::{
        access::{
            AccessFlag,
            AccessFlags, //
        },
        device::Device,
        lock::SpinLockIrq,
        mr::Mr,
        mw::{
            Mw,
            TYPE_1,
            TYPE_2, //
        },
    },
};
use kernel::{
    prelude::*,
    sync::aref::ARef, //
};

use super::{
    mem::{
        allows,
        MemError,
        Need, //
    },
    mr::{
        Mapping,
        ACCESS_SUPPORTED_MR, //
    },
    param,
    verbs::Rrxe, //
};

/// Access flags a window may grant (`RXE_ACCESS_SUPPORTED_MW` without
/// `IB_ZERO_BASED`: a window addressed from 0 is refused here as librxe
/// refuses it; rxe binds it for type 2 only).
const ACCESS_SUPPORTED_MW: AccessFlags = ACCESS_SUPPORTED_MR;

/// Why a bind or an invalidation was refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct MwError;

/// What a window is bound to.
struct Binding {
    /// Bound (rxe's VALID); otherwise FREE. A type 1 window starts valid
    /// with length 0 (no access until bound).
    valid: bool,
    /// The current R_Key: the index never changes, each bind sets the key
    /// byte the consumer chose.
    key: u32,
    /// Access flags the window grants.
    access: AccessFlags,
    /// Start of the window, in the region's address space.
    addr: u64,
    /// Length of the window in bytes; 0: no access.
    length: u64,
    /// The region, while bound with a length.
    mr: Option<ARef<Mr<Rrxe>>>,
    /// Type 2: the [`super::qp::RrxeQp::uid`] of the QP it is bound to.
    qp_uid: u64,
}

impl Binding {
    /// Drops the region (and its count of bound windows).
    fn release_mr(&mut self) {
        if let Some(mr) = self.mr.take() {
            mr.unbind_mw();
        }
    }
}

impl Drop for Binding {
    fn drop(&mut self) {
        // Deallocation drops the window bound or not: its region is free
        // to go then.
        self.release_mr();
    }
}

/// The state of a memory window.
#[pin_data]
pub(crate) struct RrxeMw {
    /// The binding.
    #[pin]
    bind: SpinLockIrq<Binding>,
}

/// The window and region a remote access through `rkey` uses.
pub(crate) struct Window {
    /// The region the window is bound to.
    pub(crate) mr: ARef<Mr<Rrxe>>,
    /// Start of the window, in the region's address space.
    pub(crate) addr: u64,
    /// Length of the window in bytes.
    pub(crate) length: u64,
}

/// Whether `key` names a memory window (its index is in the window range).
pub(crate) fn is_mw_key(key: u32) -> bool {
    (param::MIN_MW_INDEX..=param::MAX_MW_INDEX).contains(&(key >> 8))
}

impl RrxeMw {
    /// A new window of type `ty` in PD `_pd_id` (`rxe_alloc_mw`), with its
    /// R_Key: type 1 starts valid (with nothing bound), type 2 free.
    pub(crate) fn alloc(
        dev: &Device<Rrxe>,
        ty: u32,
        _pd_id: usize,
    ) -> Result<(impl PinInit<Self, Error>, u32)> {
        if ty != TYPE_1 && ty != TYPE_2 {
            return Err(EINVAL);
        }
        let (index, key) = dev.mw_pool.alloc_key()?;
        let rkey = make_key(index, key);
        let b = Binding {
            valid: ty == TYPE_1,
            key: rkey,
            access: AccessFlags::empty(),
            addr: 0,
            length: 0,
            mr: None,
            qp_uid: 0,
        };
        let init = try_pin_init!(Self {
            bind <- crate::rdma::lock::new_spinlock_irq!(b, "RrxeMw::bind"),
        });
        Ok((init, rkey))
    }

    /// `dealloc_mw`, once nothing else refers to the window: frees its
    /// index (dropping the state unbinds it, [`Binding`]'s `Drop`).
    pub(crate) fn dealloc(mw: &Mw<Rrxe>) {
        mw.device().mw_pool.free(mw.index());
    }

    /// Executes a BIND_MW WQE `w` of the QP `qp_uid` in PD `pd_id`
    /// (`rxe_bind_mw`): the window named by `w.mw_rkey` (its current key)
    /// is bound to `[w.addr, w.addr + w.length)` of the user region of
    /// `w.mr_lkey` with `w.access`, and takes the key byte of `w.rkey`. A
    /// length of 0 unbinds a type 1 window. Refused (the WQE completes with
    /// `IB_WC_MW_BIND_ERR`) as rxe refuses it: a type 1 window not valid, a
    /// type 2 window not free or without a region, a region without
    /// MW_BIND, a writable window on a region without local write, a range
    /// outside the region, unsupported or zero-based access.
    pub(crate) fn bind(
        dev: &Device<Rrxe>,
        pd_id: usize,
        qp_uid: u64,
        w: &BindMw,
    ) -> Result<(), MwError> {
        let mw = dev.lookup_mw(w.mw_rkey >> 8).ok_or(MwError)?;
        if mw.pd_id() != pd_id {
            return Err(MwError);
        }
        let ty = mw.mw_type();
        let acc = AccessFlags::from_raw(w.access);
        if !ACCESS_SUPPORTED_MW.contains_all(acc) || acc.contains(AccessFlag::ZeroBased) {
            return Err(MwError);
        }
        let mr = if w.length != 0 {
            let mr = dev.lookup_mr(w.mr_lkey >> 8).ok_or(MwError)?;
            if mr.lkey() != w.mr_lkey || mr.pd_id() != pd_id {
                return Err(MwError);
            }
            // Only user regions: a window's R_Key reaches the pages through
            // the region's translation, which fast-register regions keep
            // under their own key.
            if !matches!(mr.mapping, Mapping::User(_) | Mapping::Odp(_)) {
                return Err(MwError);
            }
            let ma = mr.access();
            // C10-73, C10-74; and persistence only where the region
            // promises it (on persistent memory, see `RrxeMr::user`).
            if !ma.contains(AccessFlag::MwBind)
                || (acc.contains_any(AccessFlag::RemoteWrite | AccessFlag::RemoteAtomic)
                    && !ma.contains(AccessFlag::LocalWrite))
                || (acc.contains(AccessFlag::FlushPersistent)
                    && !ma.contains(AccessFlag::FlushPersistent))
            {
                return Err(MwError);
            }
            // C10-75.
            if !range_within(mr.iova(), mr.length(), w.addr, w.length) {
                return Err(MwError);
            }
            Some(mr)
        } else {
            None
        };
        let mut b = mw.bind.lock();
        if b.key != w.mw_rkey {
            return Err(MwError);
        }
        match ty {
            // o10-36.2.2: valid (bound or not) to be bound again.
            TYPE_1 if !b.valid => return Err(MwError),
            // o10-37.2.30, o10-37.2.40: free, and to a region.
            TYPE_2 if b.valid || mr.is_none() => return Err(MwError),
            _ => {}
        }
        // The region counts the window before it is bound to it; a region
        // being deregistered takes none.
        if let Some(mr) = &mr {
            if !mr.bind_mw() {
                return Err(MwError);
            }
        }
        b.release_mr();
        b.key = (b.key & !0xff) | (w.rkey & 0xff);
        b.access = acc;
        b.addr = w.addr;
        b.length = w.length;
        b.mr = mr;
        b.valid = true;
        b.qp_uid = if ty == TYPE_2 { qp_uid } else { 0 };
        Ok(())
    }

    /// Invalidates the type 2 window of `rkey` (its current key) for a QP of
    /// PD `pd_id` (`rxe_invalidate_mw`): LOCAL_INV (`remote_qp` `None`) or
    /// a SEND with invalidate received by the QP `remote_qp`, which must be
    /// the one it is bound to. The window becomes free. Refused for a type
    /// 1 window (o10-37.2.26) and a window not bound.
    pub(crate) fn invalidate(
        dev: &Device<Rrxe>,
        pd_id: usize,
        rkey: u32,
        remote_qp: Option<u64>,
    ) -> Result<(), MwError> {
        let mw = dev.lookup_mw(rkey >> 8).ok_or(MwError)?;
        if mw.pd_id() != pd_id || mw.mw_type() != TYPE_2 {
            return Err(MwError);
        }
        let mut b = mw.bind.lock();
        if b.key != rkey || !b.valid || remote_qp.is_some_and(|uid| uid != b.qp_uid) {
            return Err(MwError);
        }
        b.release_mr();
        b.valid = false;
        b.access = AccessFlags::empty();
        b.addr = 0;
        b.length = 0;
        b.qp_uid = 0;
        Ok(())
    }

    /// The region behind a remote access through the window R_Key `rkey`
    /// at the responder of QP `qp_uid` in PD `pd_id` (`rxe_lookup_mw`): the
    /// key must be the window's current one, the window bound, of the PD
    /// (and for type 2 of the QP) and granting `need`, and the range
    /// `(addr, len)`, when given, inside the window.
    pub(crate) fn lookup(
        dev: &Device<Rrxe>,
        pd_id: usize,
        qp_uid: u64,
        rkey: u32,
        need: Need,
        range: Option<(u64, u64)>,
    ) -> Result<Window, MemError> {
        let mw = dev.lookup_mw(rkey >> 8).ok_or(MemError::Key)?;
        if mw.pd_id() != pd_id {
            return Err(MemError::Key);
        }
        let b = mw.bind.lock();
        if b.key != rkey
            || !b.valid
            || b.length == 0
            || (mw.mw_type() == TYPE_2 && b.qp_uid != qp_uid)
            || !allows(b.access, need)
        {
            return Err(MemError::Key);
        }
        if let Some((addr, len)) = range {
            if !range_within(b.addr, b.length, addr, len) {
                return Err(MemError::Range);
            }
        }
        let mr = b.mr.clone().ok_or(MemError::Key)?;
        Ok(Window {
            mr,
            addr: b.addr,
            length: b.length,
        })
    }
}
