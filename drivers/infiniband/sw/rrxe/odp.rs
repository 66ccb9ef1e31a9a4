// SPDX-License-Identifier: GPL-2.0

#![forbid(unsafe_code)]

//! On-demand paging (`IB_ACCESS_ON_DEMAND` regions, as rdma_rxe's
//! `rxe_odp.c`): nothing is pinned at registration; a page the data path
//! needs and finds unmapped is faulted in, then the access is retried.
//!
//! The C driver faults pages in where it copies, in its work-queue tasks.
//! rrxe's data path runs in softirq or under the QP's spinlock, where
//! `hmm_range_fault` cannot run, so the access that misses asks the QP's
//! sleepable work ([`request`]) for the range and waits:
//!
//! - the responder answers the request with an RNR NAK (IBTA Vol 1
//!   §9.7.5.2.8), as ODP hardware does, and executes it when the requester
//!   sends it again; a READ stream in progress pauses until the work kicks
//!   the QP; a UC message is dropped (UC has no retry);
//! - the requester stops at the packet whose data it could not gather (or,
//!   for a READ or an atomic, whose local buffer is not mapped) until the
//!   work kicks the QP;
//! - the completer drops a response it could not place; the retransmission
//!   brings it again.
//!
//! A range the work cannot fault in (unmapped by the process, or
//! read-only for a write) is remembered, and the access that asks for it
//! again fails as an access to unregistered memory would.

use crate::{
    proto::access::range_within,
    rdma::{
        device::Device,
        eopnotsupp,
        mr::{
            advise,
            AdviseSge, //
        },
        qp::Qp,
        umem_odp::UmemOdp, //
    },
};
use core::ops::Deref;
use kernel::{
    prelude::*,
    sync::atomic::{
        Atomic,
        Relaxed, //
    },
};

use super::{
    mr::{
        access,
        Mapping, //
    },
    verbs::Rrxe, //
};

/// On-demand regions registered, on every device: while there are none,
/// the requester does not look up the local buffer of each READ and
/// atomic ([`any_regions`]).
static REGIONS: Atomic<u32> = Atomic::new(0);

/// Whether any on-demand region exists (a hint: one registered meanwhile
/// is caught by the access itself, which then drops or stalls once).
pub(crate) fn any_regions() -> bool {
    REGIONS.load(Relaxed) != 0
}

/// The on-demand memory of a region, counted in [`REGIONS`] while it
/// exists.
pub(crate) struct OdpRegion(UmemOdp);

impl OdpRegion {
    pub(crate) fn new(umem: UmemOdp) -> Self {
        REGIONS.fetch_add(1, Relaxed);
        Self(umem)
    }
}

impl Deref for OdpRegion {
    type Target = UmemOdp;

    fn deref(&self) -> &UmemOdp {
        &self.0
    }
}

impl Drop for OdpRegion {
    fn drop(&mut self) {
        REGIONS.fetch_sub(1, Relaxed);
    }
}

/// Most bytes one fault asks for: the rest of a long READ or message is
/// faulted in by the accesses that follow.
const MAX_FAULT_LEN: u32 = 1 << 20;

/// A range of an on-demand region that the data path found unmapped.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct OdpFault {
    /// The region's lkey: its index and key byte, so that a region
    /// registered in its place meanwhile (the index reused) is not the
    /// one faulted in.
    pub(crate) lkey: u32,
    /// Offset from the region's first user byte.
    pub(crate) offset: usize,
    /// Length in bytes (at most [`MAX_FAULT_LEN`]).
    pub(crate) len: u32,
    /// Needed writable.
    pub(crate) write: bool,
}

impl OdpFault {
    /// The fault of `len` bytes from `offset` of the region of `lkey`,
    /// capped.
    pub(crate) fn new(lkey: u32, offset: usize, len: usize, write: bool) -> Self {
        Self {
            lkey,
            offset,
            // CAST: capped at MAX_FAULT_LEN.
            len: len.min(MAX_FAULT_LEN as usize) as u32,
            write,
        }
    }
}

/// What the QP's sleepable work has to fault in, and what it could not.
#[derive(Default)]
pub(crate) struct OdpState {
    /// The next range to fault in; one at a time (an access that misses
    /// meanwhile misses again after the retry and asks then).
    pending: Option<OdpFault>,
    /// The last range that could not be faulted in.
    failed: Option<OdpFault>,
}

/// Asks for `f` to be faulted in (`odp`: the QP's [`OdpState`]): `true` if the access is to wait and be
/// retried (the QP is kicked once the work ran), `false` if the range
/// could not be faulted in before and the access is to fail now.
pub(crate) fn request(qp: &Qp<Rrxe>, odp: &mut OdpState, f: OdpFault) -> bool {
    if odp.failed.take() == Some(f) {
        return false;
    }
    if odp.pending.is_none() {
        odp.pending = Some(f);
    }
    qp.queue_sleepable();
    true
}

/// The QP's sleepable work: faults the pending range in (this may sleep),
/// then kicks the QP so that the access that waited is retried.
pub(crate) fn run(qp: &Qp<Rrxe>) {
    let Some(f) = qp.state.lock().odp.pending.take() else {
        return;
    };
    let ok = match qp.device().lookup_mr(f.lkey >> 8) {
        Some(mr) if mr.lkey() == f.lkey => match &mr.mapping {
            Mapping::Odp(odp) => odp.fault(f.offset, f.len as usize, f.write).is_ok(),
            _ => false,
        },
        _ => false,
    };
    if !ok {
        qp.state.lock().odp.failed = Some(f);
    }
    qp.kick();
}

/// `ibv_advise_mr` (as rdma_rxe's `rxe_ib_advise_mr`): faults in the
/// on-demand memory of each SGE of PD `pd_id`, for reading or writing, or
/// takes only the pages already present (`PREFETCH_NO_FAULT`). Each SGE
/// must name an on-demand region of the PD with local write access
/// (`EINVAL`); a write needs writable memory (`EPERM`). The C driver
/// faults an asynchronous request in from a work item and drops its
/// errors; here the call is in process context already, so it is done at
/// once, and only a synchronous (`FLAG_FLUSH`) one reports a failed fault.
pub(crate) fn advise(
    dev: &Device<Rrxe>,
    pd_id: usize,
    advice: u32,
    flags: u32,
    sges: &[AdviseSge],
) -> Result {
    let (write, fault) = match advice {
        advise::PREFETCH => (false, true),
        advise::PREFETCH_WRITE => (true, true),
        advise::PREFETCH_NO_FAULT => (false, false),
        _ => return Err(eopnotsupp()),
    };
    for sge in sges {
        let mr = dev.lookup_mr(sge.lkey >> 8).ok_or(EINVAL)?;
        if mr.lkey() != sge.lkey || mr.pd_id() != pd_id || mr.access() & access::LOCAL_WRITE == 0 {
            return Err(EINVAL);
        }
        let Mapping::Odp(odp) = &mr.mapping else {
            return Err(EINVAL);
        };
        if write && !odp.is_writable() {
            return Err(EPERM);
        }
        let len = u64::from(sge.length);
        if !range_within(mr.iova(), mr.length(), sge.addr, len) {
            return Err(EFAULT);
        }
        let offset = usize::try_from(sge.addr - mr.iova()).map_err(|_| EFAULT)?;
        if len == 0 {
            continue;
        }
        let done = if fault {
            odp.fault(offset, sge.length as usize, write)
        } else {
            odp.snapshot(offset, sge.length as usize)
        };
        if flags & advise::FLAG_FLUSH != 0 {
            done?;
        }
    }
    Ok(())
}
