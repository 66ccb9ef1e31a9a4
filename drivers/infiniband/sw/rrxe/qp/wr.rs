// SPDX-License-Identifier: GPL-2.0

#![forbid(unsafe_code)]

//! Kernel work requests checked against the QP and encoded as the rxe
//! WQEs user space writes (`init_send_wqe`, `post_one_recv` in the C
//! driver), so that the transport reads both alike.

use crate::{
    proto::{
        wqe::{
            self as wqe_abi,
            RecvWqe,
            RegMr,
            SendWqe, //
        },
        wr::{
            self,
            Service,
            WcKind,
            WrOpcodeInfo, //
        },
    },
    rdma::{
        qp::{
            Qp,
            QpCap,
            QpType,
            RecvWr,
            SendFlag,
            SendWr,
            Sge, //
        },
        wc::WcOpcode,
    },
};
use kernel::prelude::*;

use crate::rrxe::verbs::Rrxe;

/// Largest message (`RXE_PORT_MAX_MSG_SZ`, IBTA: 2^31 bytes).
const MAX_MSG_SIZE: u64 = 1 << 31;

/// The QP types of the opcode table (`proto::wr`): GSI sends as UD; `None`
/// for a type rxe does not create.
pub(crate) fn service_of(ty: QpType) -> Option<Service> {
    match ty {
        QpType::Rc => Some(Service::Rc),
        QpType::Uc => Some(Service::Uc),
        QpType::Ud | QpType::Gsi => Some(Service::Ud),
        QpType::Smi => None,
    }
}

/// The kernel's completion opcode for the opcode table's (`proto::wr`),
/// which names them without numbers.
impl From<WcKind> for WcOpcode {
    fn from(k: WcKind) -> Self {
        match k {
            WcKind::Send => WcOpcode::Send,
            WcKind::RdmaWrite => WcOpcode::RdmaWrite,
            WcKind::RdmaRead => WcOpcode::RdmaRead,
            WcKind::CompSwap => WcOpcode::CompSwap,
            WcKind::FetchAdd => WcOpcode::FetchAdd,
            WcKind::BindMw => WcOpcode::BindMw,
            WcKind::LocalInv => WcOpcode::LocalInv,
            WcKind::AtomicWrite => WcOpcode::AtomicWrite,
            WcKind::RegMr => WcOpcode::RegMr,
            WcKind::Flush => WcOpcode::Flush,
        }
    }
}

// The opcode table and the WQE codec number the opcodes and send flags as
// user space does (rdma-core keeps `IBV_WR_*` and the `IBV_SEND_*` flags
// rxe reads equal to the kernel's); the kernel's own enums must agree, or
// kernel and user WQEs would differ.
const _: () = {
    use crate::rdma::qp::wr_opcode as k;
    let same = [
        (wr::IB_WR_RDMA_WRITE, k::RDMA_WRITE),
        (wr::IB_WR_RDMA_WRITE_WITH_IMM, k::RDMA_WRITE_WITH_IMM),
        (wr::IB_WR_SEND, k::SEND),
        (wr::IB_WR_SEND_WITH_IMM, k::SEND_WITH_IMM),
        (wr::IB_WR_RDMA_READ, k::RDMA_READ),
        (wr::IB_WR_ATOMIC_CMP_AND_SWP, k::ATOMIC_CMP_AND_SWP),
        (wr::IB_WR_ATOMIC_FETCH_AND_ADD, k::ATOMIC_FETCH_AND_ADD),
        (wr::IB_WR_LOCAL_INV, k::LOCAL_INV),
        (wr::IB_WR_BIND_MW, k::BIND_MW),
        (wr::IB_WR_SEND_WITH_INV, k::SEND_WITH_INV),
        (wr::IB_WR_LSO, k::LSO),
        (wr::IB_WR_RDMA_READ_WITH_INV, k::RDMA_READ_WITH_INV),
        (
            wr::IB_WR_MASKED_ATOMIC_CMP_AND_SWP,
            k::MASKED_ATOMIC_CMP_AND_SWP,
        ),
        (
            wr::IB_WR_MASKED_ATOMIC_FETCH_AND_ADD,
            k::MASKED_ATOMIC_FETCH_AND_ADD,
        ),
        (wr::IB_WR_FLUSH, k::FLUSH),
        (wr::IB_WR_ATOMIC_WRITE, k::ATOMIC_WRITE),
        (wr::IB_WR_REG_MR, k::REG_MR),
        (wqe_abi::IB_SEND_FENCE, SendFlag::Fence as u32),
        (wqe_abi::IB_SEND_SIGNALED, SendFlag::Signaled as u32),
        (wqe_abi::IB_SEND_SOLICITED, SendFlag::Solicited as u32),
        (wqe_abi::IB_SEND_INLINE, SendFlag::Inline as u32),
        (wqe_abi::IB_SEND_IP_CSUM, SendFlag::IpCsum as u32),
    ];
    let mut i = 0;
    while i < same.len() {
        assert!(same[i].0 == same[i].1);
        i += 1;
    }
};

fn to_wqe_sge(s: &Sge) -> wqe_abi::Sge {
    wqe_abi::Sge {
        addr: s.addr,
        length: s.length,
        lkey: s.lkey,
    }
}

/// Checks a kernel send WR as `validate_send_wr` and `init_send_wr` do
/// (`EINVAL`) and returns its WQE header and kind.
pub(super) fn check_send_wr(
    qp: &Qp<Rrxe>,
    cap: &QpCap,
    wr: &SendWr<'_, Rrxe>,
) -> Result<(SendWqe, &'static WrOpcodeInfo)> {
    let ty = qp.qp_type();
    let opcode = wr.opcode();
    let kind = service_of(ty)
        .and_then(|s| wr::info(opcode).filter(|e| e.posted_on(s)))
        .ok_or(EINVAL)?;
    let num_sge = wr.num_sge();
    if num_sge > cap.max_send_sge {
        return Err(EINVAL);
    }
    let mut length = 0u64;
    for i in 0..num_sge {
        length += u64::from(wr.sge(i).ok_or(EINVAL)?.length);
    }
    if length > MAX_MSG_SIZE {
        return Err(EINVAL);
    }
    let atomic = if kind.atomic {
        let a = wr.atomic().ok_or(EINVAL)?;
        if length != 8 || a.remote_addr & 7 != 0 {
            return Err(EINVAL);
        }
        Some(a)
    } else {
        None
    };
    let inline = wr.send_flags().contains(SendFlag::Inline);
    if inline && (!kind.inline || length > u64::from(cap.max_inline_data)) {
        return Err(EINVAL);
    }
    let mut w = SendWqe {
        wr_id: wr.wr_id(),
        opcode,
        send_flags: wr.send_flags().raw(),
        ..SendWqe::default()
    };
    match opcode {
        wr::IB_WR_SEND_WITH_IMM | wr::IB_WR_RDMA_WRITE_WITH_IMM => {
            w.imm_data = wr.imm_data();
        }
        wr::IB_WR_SEND_WITH_INV | wr::IB_WR_RDMA_READ_WITH_INV | wr::IB_WR_LOCAL_INV => {
            w.invalidate_rkey = wr.invalidate_rkey()
        }
        _ => {}
    }
    if matches!(ty, QpType::Ud | QpType::Gsi) {
        let ud = wr.ud().ok_or(EINVAL)?;
        // The transport looks the AH up by number, as for user WQEs.
        w.ah_num = ud.ah.num();
        w.remote_qpn = ud.remote_qpn;
        w.remote_qkey = ud.remote_qkey;
        if ty == QpType::Gsi {
            w.pkey_index = ud.pkey_index;
        }
    } else if kind.rdma {
        let r = wr.rdma().ok_or(EINVAL)?;
        w.remote_addr = r.remote_addr;
        w.rkey = r.rkey;
        w.iova = r.remote_addr;
    } else if let Some(a) = atomic {
        w.remote_addr = a.remote_addr;
        w.compare_add = a.compare_add;
        w.swap = a.swap;
        w.rkey = a.rkey;
        w.iova = a.remote_addr;
    } else if opcode == wr::IB_WR_REG_MR {
        let r = wr.reg().ok_or(EINVAL)?;
        w.reg = RegMr {
            mr_index: r.mr.index(),
            key: r.key,
            access: r.access.raw(),
            iova: r.iova,
            length: r.length,
        };
    }
    if !kind.is_local() {
        // CAST: at most `MAX_MSG_SIZE`, checked above.
        w.length = length as u32;
        w.num_sge = num_sge;
    }
    Ok((w, kind))
}

/// Encodes a checked kernel send WR into `slot` (`init_send_wqe`): the
/// header, then its inline data or its SGEs.
pub(super) fn write_send_wqe(
    wr: &SendWr<'_, Rrxe>,
    w: &SendWqe,
    kind: &WrOpcodeInfo,
    slot: &mut [u8],
) -> Result {
    w.write(slot).map_err(|_| EINVAL)?;
    if kind.is_local() {
        return Ok(());
    }
    if w.has_inline() {
        let area = wqe_abi::send_inline_mut(slot, w.length as usize).map_err(|_| EINVAL)?;
        if wr.copy_inline(area)? != area.len() {
            return Err(EINVAL);
        }
        return Ok(());
    }
    for i in 0..w.num_sge {
        let sge = wr.sge(i).ok_or(EINVAL)?;
        wqe_abi::write_send_sge(slot, i, &to_wqe_sge(&sge)).map_err(|_| EINVAL)?;
    }
    Ok(())
}

/// Checks a kernel receive WR (`post_one_recv`) and encodes it into
/// `slot`.
pub(crate) fn write_recv_wqe(wr: &RecvWr<'_>, slot: &mut [u8]) -> Result {
    let num_sge = wr.num_sge();
    let mut length = 0u64;
    for i in 0..num_sge {
        let sge = wr.sge(i).ok_or(EINVAL)?;
        length += u64::from(sge.length);
        wqe_abi::write_recv_sge(slot, i, &to_wqe_sge(&sge)).map_err(|_| EINVAL)?;
    }
    if length > MAX_MSG_SIZE {
        return Err(EINVAL);
    }
    let r = RecvWqe {
        wr_id: wr.wr_id(),
        // CAST: at most `MAX_MSG_SIZE`, checked above.
        length: length as u32,
        num_sge,
    };
    r.write(slot).map_err(|_| EINVAL)
}
