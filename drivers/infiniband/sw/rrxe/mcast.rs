// SPDX-License-Identifier: GPL-2.0

#![forbid(unsafe_code)]

//! UD multicast (IBTA Vol 1 §10.5): groups of QPs attached to a multicast
//! GID, and one copy of each multicast packet for every attached QP.
//!
//! A device keeps at most [`MAX_GROUPS`] groups of at most
//! [`MAX_QP_PER_GROUP`] QPs, as the C driver. The first attachment to a
//! group adds the group's link-layer address to the net device's filter
//! (the IPv6 multicast mapping of the GID, as `rxe_mcast_add` does; the IP
//! layer's group membership is the connection manager's business), the last
//! detachment removes it. A QP attached to any group cannot be destroyed
//! (`EBUSY`).

use crate::rdma::{
    lock::SpinLockIrq,
    qp::Qp,
    Gid, //
};
use kernel::{
    prelude::*,
    sync::atomic::Relaxed, //
};

use super::verbs::Rrxe;

/// Most multicast groups per device (`max_mcast_grp`).
pub(crate) const MAX_GROUPS: usize = 8192;
/// Most QPs per group (`max_mcast_qp_attach`).
pub(crate) const MAX_QP_PER_GROUP: usize = 56;

/// One group: its GID and the QPNs attached.
pub(crate) struct Group {
    mgid: [u8; 16],
    qpns: KVec<u32>,
}

/// The groups of a device.
pub(crate) type Groups = SpinLockIrq<KVec<Group>>;

/// The Ethernet multicast address of a multicast GID, by the IPv6 mapping
/// (RFC 2464 §7: `33:33` and the last four bytes).
fn ll_addr(mgid: &[u8; 16]) -> [u8; 6] {
    [0x33, 0x33, mgid[12], mgid[13], mgid[14], mgid[15]]
}

/// Attaches `qp` to `mgid`.
pub(crate) fn attach(qp: &Qp<Rrxe>, mgid: &Gid) -> Result {
    let dev = qp.device();
    let qpn = qp.qp_num();
    // Allocate outside the lock.
    let mut fresh = KVec::with_capacity(MAX_QP_PER_GROUP, GFP_KERNEL)?;
    fresh.push(qpn, GFP_KERNEL)?;
    let new_group = {
        let mut groups = dev.mcast.lock();
        if let Some(g) = groups.iter_mut().find(|g| g.mgid == mgid.0) {
            if g.qpns.contains(&qpn) {
                return Ok(());
            }
            if g.qpns.len() >= MAX_QP_PER_GROUP {
                return Err(ENOMEM);
            }
            g.qpns.push(qpn, GFP_ATOMIC)?;
            false
        } else {
            if groups.len() >= MAX_GROUPS {
                return Err(ENOMEM);
            }
            groups.push(
                Group {
                    mgid: mgid.0,
                    qpns: fresh,
                },
                GFP_ATOMIC,
            )?;
            true
        }
    };
    qp.mcast_count.fetch_add(1, Relaxed);
    if new_group {
        // The filter only lets more traffic in: a failure is not fatal.
        if dev.ndev().mc_add(&ll_addr(&mgid.0)).is_err() {
            pr_warn!("rrxe: cannot add a multicast address to the net device\n");
        }
    }
    Ok(())
}

/// Detaches `qp` from `mgid`; `EINVAL` if it is not attached.
pub(crate) fn detach(qp: &Qp<Rrxe>, mgid: &Gid) -> Result {
    let dev = qp.device();
    let qpn = qp.qp_num();
    let (removed_group, dropped) = {
        let mut groups = dev.mcast.lock();
        let gi = groups.iter().position(|g| g.mgid == mgid.0).ok_or(EINVAL)?;
        let g = groups.get_mut(gi).ok_or(EINVAL)?;
        let qi = g.qpns.iter().position(|&n| n == qpn).ok_or(EINVAL)?;
        g.qpns.remove(qi).map_err(|_| EINVAL)?;
        if g.qpns.is_empty() {
            // Freed after the lock is dropped.
            (true, Some(groups.remove(gi).map_err(|_| EINVAL)?))
        } else {
            (false, None)
        }
    };
    drop(dropped);
    qp.mcast_count.fetch_sub(1, Relaxed);
    if removed_group {
        let _ = dev.ndev().mc_del(&ll_addr(&mgid.0));
    }
    Ok(())
}

/// Calls `f` with every QPN attached to `mgid` (from a snapshot taken under
/// the lock, so `f` runs without it).
pub(crate) fn for_each_member(groups: &Groups, mgid: &[u8; 16], mut f: impl FnMut(u32)) {
    let mut snap = [0u32; MAX_QP_PER_GROUP];
    let n = {
        let g = groups.lock();
        let Some(group) = g.iter().find(|x| &x.mgid == mgid) else {
            return;
        };
        let n = group.qpns.len().min(MAX_QP_PER_GROUP);
        if let (Some(dst), Some(src)) = (snap.get_mut(..n), group.qpns.get(..n)) {
            dst.copy_from_slice(src);
        }
        n
    };
    for &qpn in snap.get(..n).unwrap_or(&[]) {
        f(qpn);
    }
}
