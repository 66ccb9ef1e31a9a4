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
//! - the responder holds the request, and the requests after it, on the
//!   QP's `rxq` and executes them when the work kicks the QP (as the C
//!   driver, which faults in place, the requester sees nothing: no RNR
//!   NAK, which would cost it an `rnr_retry`); a READ stream in progress
//!   pauses the same way. Each fault is short ([`MAX_FAULT_LEN`]): the
//!   requester counts the silence against its `retry_cnt`. UC packets wait
//!   too, up to the QP's bound on held packets; past it a UC message is
//!   lost, as UC loses messages;
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
        access::AccessFlag,
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
    mr::Mapping,
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

/// Most bytes one fault names: a WRITE's first miss asks for the rest of
/// its message up to this, a READ's for the start of its memory. The
/// responder holds its requests while a fault runs, and the requester
/// counts that silence against its `retry_cnt` after each local ACK
/// timeout; a step of 64 pages keeps it short (the C driver faults a
/// packet's pages at a time), and the next miss asks for the next step.
pub(crate) const MAX_FAULT_LEN: usize = 1 << 18;

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
    pub(crate) len: usize,
    /// Needed writable.
    pub(crate) write: bool,
}

impl OdpFault {
    /// The fault of `len` bytes from `offset` of the region of `lkey`.
    pub(crate) fn new(lkey: u32, offset: usize, len: usize, write: bool) -> Self {
        Self {
            lkey,
            offset,
            len: len.min(MAX_FAULT_LEN),
            write,
        }
    }

    /// The same fault, `more` bytes longer: the rest of the message the
    /// access belongs to, so that the requester is turned away once per
    /// message, not once per packet (its RNR retries are counted).
    pub(crate) fn and_more(self, more: usize) -> Self {
        Self {
            len: self.len.saturating_add(more).min(MAX_FAULT_LEN),
            ..self
        }
    }

    /// Whether an access asking for `f` would touch what `self` (a range
    /// that could not be faulted in) names: the same region and access,
    /// starting inside it.
    fn covers(&self, f: &OdpFault) -> bool {
        self.lkey == f.lkey
            && self.write == f.write
            && f.offset >= self.offset
            && f.offset - self.offset < self.len.max(1)
    }
}

/// What the QP's sleepable work has to fault in, and what it could not.
#[derive(Default)]
pub(crate) struct OdpState {
    /// The next range to fault in; one at a time (an access that misses
    /// meanwhile misses again after the retry and asks then).
    pending: Option<OdpFault>,
    /// The last range that could not be faulted in: the access that asks
    /// for it again fails (once: the one after that tries again, as the
    /// process may have mapped the memory meanwhile).
    failed: Option<OdpFault>,
    /// The responder holds the requests that arrive until the work ran.
    pub(crate) responder_waits: bool,
    /// Moved on by each RESET: a fault that ends after one does not reach
    /// the QP's next connection.
    generation: u32,
}

impl OdpState {
    /// Forgets what the QP waited for (it is reset).
    pub(crate) fn clear(&mut self) {
        *self = Self {
            generation: self.generation.wrapping_add(1),
            ..Self::default()
        };
    }
}

/// Asks for `f` to be faulted in (`odp`: the QP's [`OdpState`]): `true` if
/// the access is to wait and be retried (the QP is kicked once the work
/// ran), `false` if the range could not be faulted in and the access is to
/// fail now.
pub(crate) fn request(qp: &Qp<Rrxe>, odp: &mut OdpState, f: OdpFault) -> bool {
    if odp.failed.is_some_and(|failed| failed.covers(&f)) {
        odp.failed = None;
        return false;
    }
    if odp.pending.is_none() {
        odp.pending = Some(f);
    }
    qp.queue_sleepable();
    true
}

/// The QP's sleepable work: faults the pending range in (this may sleep),
/// step by step, then kicks the QP so that the access that waited is
/// retried.
pub(crate) fn run(qp: &Qp<Rrxe>) {
    let (f, generation) = {
        let mut st = qp.state.lock();
        let Some(f) = st.odp.pending.take() else {
            return;
        };
        (f, st.odp.generation)
    };
    let ok = match qp.device().lookup_mr(f.lkey >> 8) {
        Some(mr) if mr.lkey() == f.lkey && mr.pd_id() == qp.pd_id() => match &mr.mapping {
            Mapping::Odp(odp) => fault_range(odp, f),
            _ => false,
        },
        _ => false,
    };
    {
        let mut st = qp.state.lock();
        if st.odp.generation == generation {
            if !ok {
                st.odp.failed = Some(f);
            }
            st.odp.responder_waits = false;
        }
    }
    qp.kick();
}

/// Faults `f` in, up to the end of the region.
fn fault_range(odp: &UmemOdp, f: OdpFault) -> bool {
    let end = f.offset.saturating_add(f.len).min(odp.len());
    end > f.offset && odp.fault(f.offset, end - f.offset, f.write).is_ok()
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
        if mr.lkey() != sge.lkey
            || mr.pd_id() != pd_id
            || !mr.access().contains(AccessFlag::LocalWrite)
        {
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
