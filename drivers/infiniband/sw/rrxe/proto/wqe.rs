// SPDX-License-Identifier: GPL-2.0

//! Work queue entries of the rxe user ABI (`include/uapi/rdma/rdma_user_rxe.h`):
//! `struct rxe_send_wqe` in send queue slots and `struct rxe_recv_wqe` in
//! receive and shared receive queue slots.
//!
//! User space (rdma-core's `rxe` provider) writes these entries into queue
//! memory that it maps; everything decoded here is untrusted input. Pass a
//! private copy of one slot (its full [`super::queue::QueueGeometry::elem_size`]
//! bytes), never the shared mapping itself: user space may rewrite it at any
//! time. Parsing only fails when the slot cannot hold what is asked for; the
//! values themselves (opcode, lengths, keys, counts) are for the caller to
//! validate against the QP.
//!
//! # Layout
//!
//! Offsets are those of the C compiler on the 64-bit targets rxe supports
//! (`RDMA_RXE` depends on `CONFIG_64BIT`); the layout tests `rrxe_rdma_layout`
//! compare the constants below with C's `offsetof`. All fields are in the
//! CPU's byte order, because the provider and the kernel share the CPU,
//! except `ex.imm_data`, a `__be32` that is carried to the wire unchanged.
//!
//! ```text
//! struct rxe_send_wqe (208 bytes, then the payload union)
//!    0  wr.wr_id        u64
//!    8  wr.reserved     u32
//!   12  wr.opcode       u32   IB_WR_* (= IBV_WR_* = IB_UVERBS_WR_*)
//!   16  wr.send_flags   u32   IB_SEND_* (= IBV_SEND_*)
//!   20  wr.ex           u32   imm_data (__be32) | invalidate_rkey
//!   24  wr.wr           120-byte union:
//!         rdma   { remote_addr u64 @24, rkey @32 }
//!         atomic { remote_addr u64 @24, compare_add u64 @32, swap u64 @40, rkey @48 }
//!         ud     { remote_qpn @24, remote_qkey @28, pkey_index u16 @32, ah_num @36,
//!                  pad[4] @40, struct rxe_av @56 (88 bytes) }
//!         mw     { addr u64 @24, length u64 @32, mr_lkey @40, mw_rkey @44, rkey @48, access @52 }
//!         flush  { remote_addr u64 @24, length @32, rkey @36, type u8 @40, level u8 @41 }
//!  144  status, 148 state, 152 iova u64, 160 mask, 164 first_psn, 168 last_psn,
//!  172  ack_length, 176 ssn, 180 has_rd_atomic
//!  184  dma: length @184, resid @188, cur_sge @192, num_sge @196, sge_offset @200,
//!       reserved @204
//!  208  union { inline_data[] | atomic_wr[8] | struct rxe_sge sge[] }
//!
//! struct rxe_recv_wqe (40 bytes, then the SGEs)
//!    0  wr_id u64, 8 reserved, 12 padding
//!   16  dma: length @16, resid @20, cur_sge @24, num_sge @28, sge_offset @32, reserved @36
//!   40  struct rxe_sge sge[]
//!
//! struct rxe_sge (16 bytes): addr u64 @0, length @8, lkey @12
//! ```
//!
//! # What the provider writes (rdma-core 56.1, `providers/rxe/rxe.c`)
//!
//! Send queue, through `ibv_post_send` (`post_one_send`, `init_send_wqe`)
//! and through the `ibv_wr_*` builders of the extended QP, which clear the
//! whole entry first:
//!
//! - `wr_id`, `opcode` (an `IBV_WR_*` value, numerically the kernel's
//!   `IB_WR_*` for every opcode user space can post), `send_flags`
//!   (`IBV_SEND_*`, numerically `IB_SEND_*`) and `ex`: the immediate data
//!   for the `_WITH_IMM` opcodes, the rkey to invalidate for
//!   `SEND_WITH_INV` and `LOCAL_INV`.
//! - The `wr.wr` member the opcode uses: `rdma` for RDMA WRITE/READ and
//!   `ATOMIC_WRITE`, `atomic` for compare-and-swap and fetch-and-add, `ud`
//!   (`remote_qpn`, `remote_qkey`, `ah_num`) for sends on a UD QP, `mw` for
//!   `BIND_MW` and `flush` for `FLUSH`. The `ud.av` copy of the address vector
//!   is only written when `create_ah` returned `ah_num` 0 (kernels older
//!   than the AH pool); a driver that always returns a non-zero `ah_num`
//!   must reject 0. `ud.pkey_index` is never written.
//! - `iova`: the remote address (`rdma` or `atomic` `remote_addr`, the same
//!   bytes), which the C requester puts in the RETH/AtomicETH and advances
//!   on retries. 0 for sends.
//! - `dma.length`: the message length, the sum of the SGE lengths or the
//!   inline byte count. It is not checked against the SGEs; recompute or
//!   check it. `dma.num_sge`: the number of entries in `dma.sge[]`, which
//!   the provider bounds by the QP's `max_send_sge` (bound it again).
//! - Inline (`IB_SEND_INLINE`): the data itself is copied to the start of
//!   the payload union (`dma.inline_data`) and its size is `dma.length`.
//!   `dma.num_sge` then says nothing about the slot: `ibv_post_send` stores
//!   the number of source buffers, `ibv_wr_set_inline_data*` leaves 0.
//! - `ATOMIC_WRITE`: the 8-byte value, in wire order, is in `dma.atomic_wr`
//!   (the start of the payload union), see [`send_atomic_write_value`].
//! - Kernel scratch state (`status`, `state`, `mask`, `first_psn`,
//!   `last_psn`, `ack_length`, `ssn`, `has_rd_atomic`, `dma.resid`,
//!   `dma.cur_sge`, `dma.sge_offset`) is written as 0 or a provider
//!   counter, and is not decoded: a driver keeps that state privately.
//!
//! Receive queue and SRQ (`rxe_post_one_recv`): `wr_id`, the SGEs in
//! `dma.sge[]`, `dma.num_sge` (bounded by the queue's `max_recv_sge`),
//! `dma.length` (their sum, unchecked) and 0 in the scratch fields.
//!
//! # Kernel work requests
//!
//! The driver encodes the work requests of kernel consumers
//! (`ib_post_send`, `ib_post_recv`) into slots of the same layout with
//! [`SendWqe::write`], [`write_send_sge`], [`write_send_inline`],
//! [`RecvWqe::write`] and [`write_recv_sge`], as the C driver's
//! `init_send_wqe` and `post_one_recv` do, so that the transport reads
//! both kinds of queue alike. The one difference: `REG_MR` (kernel only)
//! carries the region's key index where the C driver stores a pointer.

#![forbid(unsafe_code)]

use super::error::{Error, Result};
use super::immdt::ImmDt;
use super::wr::{
    IB_WR_ATOMIC_CMP_AND_SWP, IB_WR_ATOMIC_FETCH_AND_ADD, IB_WR_ATOMIC_WRITE, IB_WR_BIND_MW,
    IB_WR_FLUSH, IB_WR_LOCAL_INV, IB_WR_RDMA_READ, IB_WR_RDMA_READ_WITH_INV, IB_WR_RDMA_WRITE,
    IB_WR_RDMA_WRITE_WITH_IMM, IB_WR_REG_MR, IB_WR_SEND, IB_WR_SEND_WITH_IMM, IB_WR_SEND_WITH_INV,
};

/// `IB_SEND_FENCE`: wait for earlier RDMA READs and atomics to complete.
pub const IB_SEND_FENCE: u32 = 1 << 0;
/// `IB_SEND_SIGNALED`: generate a completion even if the QP's
/// `sq_sig_type` does not ask for one.
pub const IB_SEND_SIGNALED: u32 = 1 << 1;
/// `IB_SEND_SOLICITED`: set the BTH SE bit on the last packet.
pub const IB_SEND_SOLICITED: u32 = 1 << 2;
/// `IB_SEND_INLINE`: the payload is in the WQE, not behind SGEs.
pub const IB_SEND_INLINE: u32 = 1 << 3;
/// `IB_SEND_IP_CSUM`: checksum offload; rxe does not support it.
pub const IB_SEND_IP_CSUM: u32 = 1 << 4;

/// Size of `struct rxe_sge` in bytes.
pub const SGE_SIZE: usize = 16;
/// Offset of `addr` in `struct rxe_sge`.
pub const SGE_ADDR_OFFSET: usize = 0;
/// Offset of `length` in `struct rxe_sge`.
pub const SGE_LENGTH_OFFSET: usize = 8;
/// Offset of `lkey` in `struct rxe_sge`.
pub const SGE_LKEY_OFFSET: usize = 12;

/// Size of `struct rxe_dma_info` without its payload union, in bytes.
pub const DMA_INFO_SIZE: usize = 24;
/// Offset of `length` in `struct rxe_dma_info`.
pub const DMA_LENGTH_OFFSET: usize = 0;
/// Offset of `num_sge` in `struct rxe_dma_info`.
pub const DMA_NUM_SGE_OFFSET: usize = 12;

/// Size of `struct rxe_send_wr` in bytes.
pub const SEND_WR_SIZE: usize = 144;
/// Size of `struct rxe_send_wqe` without its payload, in bytes.
pub const SEND_WQE_SIZE: usize = 208;
/// Offset of `wr.wr_id` in `struct rxe_send_wqe`.
pub const SEND_WQE_WR_ID_OFFSET: usize = 0;
/// Offset of `wr.opcode`.
pub const SEND_WQE_OPCODE_OFFSET: usize = 12;
/// Offset of `wr.send_flags`.
pub const SEND_WQE_SEND_FLAGS_OFFSET: usize = 16;
/// Offset of `wr.ex` (`imm_data` and `invalidate_rkey`).
pub const SEND_WQE_EX_OFFSET: usize = 20;
/// Offset of the `wr.wr` union.
pub const SEND_WQE_WR_UNION_OFFSET: usize = 24;
/// Offset of `wr.wr.rdma.remote_addr` (also `atomic.remote_addr` and
/// `flush.remote_addr`).
pub const SEND_WQE_REMOTE_ADDR_OFFSET: usize = 24;
/// Offset of `wr.wr.rdma.rkey`.
pub const SEND_WQE_RDMA_RKEY_OFFSET: usize = 32;
/// Offset of `wr.wr.atomic.compare_add`.
pub const SEND_WQE_ATOMIC_COMPARE_ADD_OFFSET: usize = 32;
/// Offset of `wr.wr.atomic.swap`.
pub const SEND_WQE_ATOMIC_SWAP_OFFSET: usize = 40;
/// Offset of `wr.wr.atomic.rkey`.
pub const SEND_WQE_ATOMIC_RKEY_OFFSET: usize = 48;
/// Offset of `wr.wr.ud.remote_qpn`.
pub const SEND_WQE_UD_REMOTE_QPN_OFFSET: usize = 24;
/// Offset of `wr.wr.ud.remote_qkey`.
pub const SEND_WQE_UD_REMOTE_QKEY_OFFSET: usize = 28;
/// Offset of `wr.wr.ud.pkey_index`.
pub const SEND_WQE_UD_PKEY_INDEX_OFFSET: usize = 32;
/// Offset of `wr.wr.ud.ah_num`.
pub const SEND_WQE_UD_AH_NUM_OFFSET: usize = 36;
/// Offset of `wr.wr.ud.av`, the legacy address vector (not decoded).
pub const SEND_WQE_UD_AV_OFFSET: usize = 56;
/// Offset of `wr.wr.mw.addr`.
pub const SEND_WQE_MW_ADDR_OFFSET: usize = 24;
/// Offset of `wr.wr.mw.length`.
pub const SEND_WQE_MW_LENGTH_OFFSET: usize = 32;
/// Offset of `wr.wr.mw.mr_lkey`.
pub const SEND_WQE_MW_MR_LKEY_OFFSET: usize = 40;
/// Offset of `wr.wr.mw.mw_rkey`.
pub const SEND_WQE_MW_MW_RKEY_OFFSET: usize = 44;
/// Offset of `wr.wr.mw.rkey`.
pub const SEND_WQE_MW_RKEY_OFFSET: usize = 48;
/// Offset of `wr.wr.mw.access`.
pub const SEND_WQE_MW_ACCESS_OFFSET: usize = 52;
/// Offset of `wr.wr.flush.length`.
pub const SEND_WQE_FLUSH_LENGTH_OFFSET: usize = 32;
/// Offset of `wr.wr.flush.rkey`.
pub const SEND_WQE_FLUSH_RKEY_OFFSET: usize = 36;
/// Offset of `wr.wr.flush.type`.
pub const SEND_WQE_FLUSH_TYPE_OFFSET: usize = 40;
/// Offset of `wr.wr.flush.level`.
pub const SEND_WQE_FLUSH_LEVEL_OFFSET: usize = 41;
/// Offset of `wr.wr.reg.mr`: in the C driver a `struct ib_mr *`; rrxe
/// stores the region's key index (`lkey >> 8`) there instead, a number the
/// transport looks up like any other key. Only kernel WQEs carry it.
pub const SEND_WQE_REG_MR_OFFSET: usize = 24;
/// Offset of `wr.wr.reg.key`.
pub const SEND_WQE_REG_KEY_OFFSET: usize = 32;
/// Offset of `wr.wr.reg.access`.
pub const SEND_WQE_REG_ACCESS_OFFSET: usize = 36;
/// Offset of rrxe's `reg.iova`: the region's I/O virtual address as the
/// consumer left it in `ib_mr.iova` when it posted the WR (the C driver
/// reads it through the `struct ib_mr *` when the WQE executes). Kernel
/// WQEs only; the C layout has free room in the `wr.wr` union there.
pub const SEND_WQE_REG_IOVA_OFFSET: usize = 40;
/// Offset of rrxe's `reg.length`: `ib_mr.length` at posting, as above.
pub const SEND_WQE_REG_LENGTH_OFFSET: usize = 48;
/// Offset of `iova`.
pub const SEND_WQE_IOVA_OFFSET: usize = 152;
/// Offset of `dma`.
pub const SEND_WQE_DMA_OFFSET: usize = 184;
/// Offset of `dma.length`.
pub const SEND_WQE_DMA_LENGTH_OFFSET: usize = SEND_WQE_DMA_OFFSET + DMA_LENGTH_OFFSET;
/// Offset of `dma.num_sge`.
pub const SEND_WQE_DMA_NUM_SGE_OFFSET: usize = SEND_WQE_DMA_OFFSET + DMA_NUM_SGE_OFFSET;
/// Offset of the payload union: `dma.sge[0]`, `dma.inline_data` and
/// `dma.atomic_wr`.
pub const SEND_WQE_SGE_OFFSET: usize = SEND_WQE_DMA_OFFSET + DMA_INFO_SIZE;

/// Size of `struct rxe_recv_wqe` without its SGEs, in bytes.
pub const RECV_WQE_SIZE: usize = 40;
/// Offset of `wr_id` in `struct rxe_recv_wqe`.
pub const RECV_WQE_WR_ID_OFFSET: usize = 0;
/// Offset of `dma`.
pub const RECV_WQE_DMA_OFFSET: usize = 16;
/// Offset of `dma.length`.
pub const RECV_WQE_DMA_LENGTH_OFFSET: usize = RECV_WQE_DMA_OFFSET + DMA_LENGTH_OFFSET;
/// Offset of `dma.num_sge`.
pub const RECV_WQE_DMA_NUM_SGE_OFFSET: usize = RECV_WQE_DMA_OFFSET + DMA_NUM_SGE_OFFSET;
/// Offset of `dma.sge[0]`.
pub const RECV_WQE_SGE_OFFSET: usize = RECV_WQE_DMA_OFFSET + DMA_INFO_SIZE;

/// Size of the `ATOMIC_WRITE` value in `dma.atomic_wr`, in bytes.
pub const ATOMIC_WRITE_SIZE: usize = 8;

const _: () = assert!(SEND_WQE_SGE_OFFSET == SEND_WQE_SIZE);
const _: () = assert!(RECV_WQE_SGE_OFFSET == RECV_WQE_SIZE);
const _: () = assert!(SEND_WQE_UD_AV_OFFSET + 88 == SEND_WR_SIZE);

/// Reads `N` bytes at `off` of `slot`.
fn bytes<const N: usize>(slot: &[u8], off: usize) -> Result<[u8; N]> {
    let tail = slot.get(off..).ok_or(Error::Truncated)?;
    let (head, _) = tail.split_first_chunk::<N>().ok_or(Error::Truncated)?;
    Ok(*head)
}

fn ne_u16(slot: &[u8], off: usize) -> Result<u16> {
    Ok(u16::from_ne_bytes(bytes(slot, off)?))
}

fn ne_u32(slot: &[u8], off: usize) -> Result<u32> {
    Ok(u32::from_ne_bytes(bytes(slot, off)?))
}

fn ne_u64(slot: &[u8], off: usize) -> Result<u64> {
    Ok(u64::from_ne_bytes(bytes(slot, off)?))
}

/// Writes `v` at `off` of `slot`.
fn put_bytes<const N: usize>(slot: &mut [u8], off: usize, v: [u8; N]) -> Result {
    let tail = slot.get_mut(off..).ok_or(Error::Truncated)?;
    let (head, _) = tail.split_first_chunk_mut::<N>().ok_or(Error::Truncated)?;
    *head = v;
    Ok(())
}

fn put_u16(slot: &mut [u8], off: usize, v: u16) -> Result {
    put_bytes(slot, off, v.to_ne_bytes())
}

fn put_u32(slot: &mut [u8], off: usize, v: u32) -> Result {
    put_bytes(slot, off, v.to_ne_bytes())
}

fn put_u64(slot: &mut [u8], off: usize, v: u64) -> Result {
    put_bytes(slot, off, v.to_ne_bytes())
}

/// Clears the first `len` bytes of `slot`.
fn clear(slot: &mut [u8], len: usize) -> Result {
    slot.get_mut(..len).ok_or(Error::Truncated)?.fill(0);
    Ok(())
}

/// One scatter/gather element (`struct rxe_sge`, layout-identical to
/// `struct ib_sge` and `struct ibv_sge`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct Sge {
    /// Start address in the MR's address space (its iova).
    pub addr: u64,
    /// Length in bytes.
    pub length: u32,
    /// Local key of the MR.
    pub lkey: u32,
}

impl Sge {
    fn parse_at(slot: &[u8], off: usize) -> Result<Self> {
        Ok(Self {
            addr: ne_u64(slot, off + SGE_ADDR_OFFSET)?,
            length: ne_u32(slot, off + SGE_LENGTH_OFFSET)?,
            lkey: ne_u32(slot, off + SGE_LKEY_OFFSET)?,
        })
    }

    fn write_at(&self, slot: &mut [u8], off: usize) -> Result {
        put_u64(slot, off + SGE_ADDR_OFFSET, self.addr)?;
        put_u32(slot, off + SGE_LENGTH_OFFSET, self.length)?;
        put_u32(slot, off + SGE_LKEY_OFFSET, self.lkey)
    }
}

/// The `wr.wr.mw` member of a `BIND_MW` send WQE.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct BindMw {
    /// Start of the window, in the MR's address space.
    pub addr: u64,
    /// Length of the window in bytes.
    pub length: u64,
    /// lkey of the MR the window is bound to.
    pub mr_lkey: u32,
    /// rkey of the MW being bound.
    pub mw_rkey: u32,
    /// The rkey the MW gets (its key byte comes from the consumer).
    pub rkey: u32,
    /// `IB_ACCESS_*` flags of the window.
    pub access: u32,
}

/// The `wr.wr.reg` member of a kernel `REG_MR` send WQE.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct RegMr {
    /// Key index (`lkey >> 8`) of the region being registered (rrxe's
    /// stand-in for the C driver's `struct ib_mr *`).
    pub mr_index: u32,
    /// The new lkey and rkey (the consumer chose the key byte).
    pub key: u32,
    /// `IB_ACCESS_*` flags of the registration.
    pub access: u32,
    /// I/O virtual address of the region's first byte (`ib_mr.iova`).
    pub iova: u64,
    /// Length of the region in bytes (`ib_mr.length`).
    pub length: u64,
}

/// The fixed part of a send WQE, decoded from a queue slot.
///
/// Members of the `wr.wr` union that the opcode does not use are 0; see
/// [`SendWqe::parse`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct SendWqe {
    /// Consumer cookie returned in the completion.
    pub wr_id: u64,
    /// `IB_WR_*` opcode as user space wrote it; not checked here.
    pub opcode: u32,
    /// `IB_SEND_*` flags.
    pub send_flags: u32,
    /// `ex.imm_data`: the immediate data, the four bytes as stored (they are
    /// a `__be32`, already in wire order) read as a native `u32`;
    /// `imm_data.to_ne_bytes()` is the ImmDt. Same bytes as
    /// [`SendWqe::invalidate_rkey`].
    pub imm_data: u32,
    /// `ex.invalidate_rkey`: the rkey for `SEND_WITH_INV` and `LOCAL_INV`.
    pub invalidate_rkey: u32,
    /// Remote virtual address for RDMA, atomic and FLUSH opcodes.
    pub remote_addr: u64,
    /// R_Key for RDMA, atomic and FLUSH opcodes (from the member the opcode
    /// uses: `rdma.rkey`, `atomic.rkey` or `flush.rkey`).
    pub rkey: u32,
    /// Compare (CmpSwap) or add (FetchAdd) operand.
    pub compare_add: u64,
    /// Swap operand (CmpSwap).
    pub swap: u64,
    /// Destination QPN of a UD send.
    pub remote_qpn: u32,
    /// Q_Key of a UD send.
    pub remote_qkey: u32,
    /// P_Key index of a UD send (never written by the provider).
    pub pkey_index: u16,
    /// AH pool index of a UD send, as returned by `create_ah`; 0 means the
    /// legacy in-WQE address vector.
    pub ah_num: u32,
    /// The `BIND_MW` arguments.
    pub mw: BindMw,
    /// The `REG_MR` arguments (kernel WQEs only).
    pub reg: RegMr,
    /// FLUSH `wr.flush.length`; the C requester uses `dma.length`.
    pub flush_length: u32,
    /// FLUSH placement type (FETH PLT).
    pub flush_type: u8,
    /// FLUSH selectivity level (FETH SEL).
    pub flush_level: u8,
    /// `dma.length`: message length in bytes (sum of SGE lengths, or the
    /// inline byte count). Unchecked.
    pub length: u32,
    /// `dma.num_sge`: entries in `dma.sge[]`; meaningless for inline WQEs.
    pub num_sge: u32,
    /// `iova`: remote address the requester starts at.
    pub iova: u64,
}

impl SendWqe {
    /// Decodes the fixed part of the send WQE in `slot`.
    ///
    /// The `wr.wr` union is decoded through the member the opcode selects,
    /// the other fields are left 0:
    ///
    /// | opcode | fields |
    /// |---|---|
    /// | `RDMA_WRITE`, `RDMA_WRITE_WITH_IMM`, `RDMA_READ`, `RDMA_READ_WITH_INV`, `ATOMIC_WRITE` | `remote_addr`, `rkey` |
    /// | `ATOMIC_CMP_AND_SWP`, `ATOMIC_FETCH_AND_ADD` | `remote_addr`, `rkey`, `compare_add`, `swap` |
    /// | `SEND`, `SEND_WITH_IMM` | `remote_qpn`, `remote_qkey`, `pkey_index`, `ah_num` |
    /// | `BIND_MW` | `mw` |
    /// | `FLUSH` | `remote_addr`, `rkey`, `flush_length`, `flush_type`, `flush_level` |
    /// | `REG_MR` | `reg` |
    ///
    /// Any opcode is accepted, so that the caller can still complete a bad
    /// WQE with its `wr_id`.
    ///
    /// # Errors
    ///
    /// [`Error::Truncated`] if `slot` is shorter than [`SEND_WQE_SIZE`].
    pub fn parse(slot: &[u8]) -> Result<Self> {
        if slot.len() < SEND_WQE_SIZE {
            return Err(Error::Truncated);
        }
        let ex = ne_u32(slot, SEND_WQE_EX_OFFSET)?;
        let mut wqe = Self {
            wr_id: ne_u64(slot, SEND_WQE_WR_ID_OFFSET)?,
            opcode: ne_u32(slot, SEND_WQE_OPCODE_OFFSET)?,
            send_flags: ne_u32(slot, SEND_WQE_SEND_FLAGS_OFFSET)?,
            imm_data: ex,
            invalidate_rkey: ex,
            length: ne_u32(slot, SEND_WQE_DMA_LENGTH_OFFSET)?,
            num_sge: ne_u32(slot, SEND_WQE_DMA_NUM_SGE_OFFSET)?,
            iova: ne_u64(slot, SEND_WQE_IOVA_OFFSET)?,
            ..Self::default()
        };
        match wqe.opcode {
            IB_WR_RDMA_WRITE
            | IB_WR_RDMA_WRITE_WITH_IMM
            | IB_WR_RDMA_READ
            | IB_WR_RDMA_READ_WITH_INV
            | IB_WR_ATOMIC_WRITE => {
                wqe.remote_addr = ne_u64(slot, SEND_WQE_REMOTE_ADDR_OFFSET)?;
                wqe.rkey = ne_u32(slot, SEND_WQE_RDMA_RKEY_OFFSET)?;
            }
            IB_WR_ATOMIC_CMP_AND_SWP | IB_WR_ATOMIC_FETCH_AND_ADD => {
                wqe.remote_addr = ne_u64(slot, SEND_WQE_REMOTE_ADDR_OFFSET)?;
                wqe.compare_add = ne_u64(slot, SEND_WQE_ATOMIC_COMPARE_ADD_OFFSET)?;
                wqe.swap = ne_u64(slot, SEND_WQE_ATOMIC_SWAP_OFFSET)?;
                wqe.rkey = ne_u32(slot, SEND_WQE_ATOMIC_RKEY_OFFSET)?;
            }
            IB_WR_SEND | IB_WR_SEND_WITH_IMM => {
                wqe.remote_qpn = ne_u32(slot, SEND_WQE_UD_REMOTE_QPN_OFFSET)?;
                wqe.remote_qkey = ne_u32(slot, SEND_WQE_UD_REMOTE_QKEY_OFFSET)?;
                wqe.pkey_index = ne_u16(slot, SEND_WQE_UD_PKEY_INDEX_OFFSET)?;
                wqe.ah_num = ne_u32(slot, SEND_WQE_UD_AH_NUM_OFFSET)?;
            }
            IB_WR_BIND_MW => {
                wqe.mw = BindMw {
                    addr: ne_u64(slot, SEND_WQE_MW_ADDR_OFFSET)?,
                    length: ne_u64(slot, SEND_WQE_MW_LENGTH_OFFSET)?,
                    mr_lkey: ne_u32(slot, SEND_WQE_MW_MR_LKEY_OFFSET)?,
                    mw_rkey: ne_u32(slot, SEND_WQE_MW_MW_RKEY_OFFSET)?,
                    rkey: ne_u32(slot, SEND_WQE_MW_RKEY_OFFSET)?,
                    access: ne_u32(slot, SEND_WQE_MW_ACCESS_OFFSET)?,
                };
            }
            IB_WR_FLUSH => {
                wqe.remote_addr = ne_u64(slot, SEND_WQE_REMOTE_ADDR_OFFSET)?;
                wqe.flush_length = ne_u32(slot, SEND_WQE_FLUSH_LENGTH_OFFSET)?;
                wqe.rkey = ne_u32(slot, SEND_WQE_FLUSH_RKEY_OFFSET)?;
                let [flush_type, flush_level] = bytes(slot, SEND_WQE_FLUSH_TYPE_OFFSET)?;
                wqe.flush_type = flush_type;
                wqe.flush_level = flush_level;
            }
            IB_WR_REG_MR => {
                // The index is stored in the low half of the 8-byte field.
                let index = ne_u64(slot, SEND_WQE_REG_MR_OFFSET)?;
                wqe.reg = RegMr {
                    mr_index: u32::try_from(index).unwrap_or(u32::MAX),
                    key: ne_u32(slot, SEND_WQE_REG_KEY_OFFSET)?,
                    access: ne_u32(slot, SEND_WQE_REG_ACCESS_OFFSET)?,
                    iova: ne_u64(slot, SEND_WQE_REG_IOVA_OFFSET)?,
                    length: ne_u64(slot, SEND_WQE_REG_LENGTH_OFFSET)?,
                };
            }
            _ => {}
        }
        Ok(wqe)
    }

    /// Whether the payload is inline in the WQE (`IB_SEND_INLINE`); its size
    /// is then [`SendWqe::length`], see [`send_inline`].
    pub fn has_inline(&self) -> bool {
        self.send_flags & IB_SEND_INLINE != 0
    }

    /// Whether the consumer asked for a completion (`IB_SEND_SIGNALED`).
    pub fn is_signaled(&self) -> bool {
        self.send_flags & IB_SEND_SIGNALED != 0
    }

    /// Whether the message is solicited (`IB_SEND_SOLICITED`).
    pub fn is_solicited(&self) -> bool {
        self.send_flags & IB_SEND_SOLICITED != 0
    }

    /// Whether the WQE is fenced (`IB_SEND_FENCE`).
    pub fn is_fenced(&self) -> bool {
        self.send_flags & IB_SEND_FENCE != 0
    }

    /// The ImmDt that carries the immediate data (IBTA Vol 1 §9.3.7): the
    /// bytes of [`SendWqe::imm_data`] as stored, already in wire order.
    pub fn immdt(&self) -> ImmDt {
        ImmDt {
            imm_data: self.imm_data.to_ne_bytes(),
        }
    }

    /// Whether `ex` holds an rkey to invalidate rather than immediate data.
    fn ex_is_invalidate(opcode: u32) -> bool {
        matches!(
            opcode,
            IB_WR_SEND_WITH_INV | IB_WR_LOCAL_INV | IB_WR_RDMA_READ_WITH_INV
        )
    }

    /// Encodes the fixed part of the WQE into `slot`, the inverse of
    /// [`SendWqe::parse`]: the header ([`SEND_WQE_SIZE`] bytes) is cleared,
    /// then `wr_id`, `opcode`, `send_flags`, `ex`, the `wr.wr` member the
    /// opcode selects (see [`SendWqe::parse`]), `iova`, `dma.length` and
    /// `dma.num_sge` are written; the other members and the scratch fields
    /// stay 0. `ex` is [`SendWqe::invalidate_rkey`] for `SEND_WITH_INV`,
    /// `LOCAL_INV` and `RDMA_READ_WITH_INV`, else [`SendWqe::imm_data`].
    ///
    /// The payload (SGEs or inline data) is written separately with
    /// [`write_send_sge`] or [`write_send_inline`], before or after.
    ///
    /// # Errors
    ///
    /// [`Error::Truncated`] if `slot` is shorter than [`SEND_WQE_SIZE`].
    pub fn write(&self, slot: &mut [u8]) -> Result {
        clear(slot, SEND_WQE_SIZE)?;
        put_u64(slot, SEND_WQE_WR_ID_OFFSET, self.wr_id)?;
        put_u32(slot, SEND_WQE_OPCODE_OFFSET, self.opcode)?;
        put_u32(slot, SEND_WQE_SEND_FLAGS_OFFSET, self.send_flags)?;
        let ex = if Self::ex_is_invalidate(self.opcode) {
            self.invalidate_rkey
        } else {
            self.imm_data
        };
        put_u32(slot, SEND_WQE_EX_OFFSET, ex)?;
        match self.opcode {
            IB_WR_RDMA_WRITE
            | IB_WR_RDMA_WRITE_WITH_IMM
            | IB_WR_RDMA_READ
            | IB_WR_RDMA_READ_WITH_INV
            | IB_WR_ATOMIC_WRITE => {
                put_u64(slot, SEND_WQE_REMOTE_ADDR_OFFSET, self.remote_addr)?;
                put_u32(slot, SEND_WQE_RDMA_RKEY_OFFSET, self.rkey)?;
            }
            IB_WR_ATOMIC_CMP_AND_SWP | IB_WR_ATOMIC_FETCH_AND_ADD => {
                put_u64(slot, SEND_WQE_REMOTE_ADDR_OFFSET, self.remote_addr)?;
                put_u64(slot, SEND_WQE_ATOMIC_COMPARE_ADD_OFFSET, self.compare_add)?;
                put_u64(slot, SEND_WQE_ATOMIC_SWAP_OFFSET, self.swap)?;
                put_u32(slot, SEND_WQE_ATOMIC_RKEY_OFFSET, self.rkey)?;
            }
            IB_WR_SEND | IB_WR_SEND_WITH_IMM => {
                put_u32(slot, SEND_WQE_UD_REMOTE_QPN_OFFSET, self.remote_qpn)?;
                put_u32(slot, SEND_WQE_UD_REMOTE_QKEY_OFFSET, self.remote_qkey)?;
                put_u16(slot, SEND_WQE_UD_PKEY_INDEX_OFFSET, self.pkey_index)?;
                put_u32(slot, SEND_WQE_UD_AH_NUM_OFFSET, self.ah_num)?;
            }
            IB_WR_BIND_MW => {
                let mw = &self.mw;
                put_u64(slot, SEND_WQE_MW_ADDR_OFFSET, mw.addr)?;
                put_u64(slot, SEND_WQE_MW_LENGTH_OFFSET, mw.length)?;
                put_u32(slot, SEND_WQE_MW_MR_LKEY_OFFSET, mw.mr_lkey)?;
                put_u32(slot, SEND_WQE_MW_MW_RKEY_OFFSET, mw.mw_rkey)?;
                put_u32(slot, SEND_WQE_MW_RKEY_OFFSET, mw.rkey)?;
                put_u32(slot, SEND_WQE_MW_ACCESS_OFFSET, mw.access)?;
            }
            IB_WR_FLUSH => {
                put_u64(slot, SEND_WQE_REMOTE_ADDR_OFFSET, self.remote_addr)?;
                put_u32(slot, SEND_WQE_FLUSH_LENGTH_OFFSET, self.flush_length)?;
                put_u32(slot, SEND_WQE_FLUSH_RKEY_OFFSET, self.rkey)?;
                put_bytes(
                    slot,
                    SEND_WQE_FLUSH_TYPE_OFFSET,
                    [self.flush_type, self.flush_level],
                )?;
            }
            IB_WR_REG_MR => {
                put_u64(slot, SEND_WQE_REG_MR_OFFSET, u64::from(self.reg.mr_index))?;
                put_u32(slot, SEND_WQE_REG_KEY_OFFSET, self.reg.key)?;
                put_u32(slot, SEND_WQE_REG_ACCESS_OFFSET, self.reg.access)?;
                put_u64(slot, SEND_WQE_REG_IOVA_OFFSET, self.reg.iova)?;
                put_u64(slot, SEND_WQE_REG_LENGTH_OFFSET, self.reg.length)?;
            }
            _ => {}
        }
        put_u64(slot, SEND_WQE_IOVA_OFFSET, self.iova)?;
        put_u32(slot, SEND_WQE_DMA_LENGTH_OFFSET, self.length)?;
        put_u32(slot, SEND_WQE_DMA_NUM_SGE_OFFSET, self.num_sge)
    }
}

/// How many SGEs fit in a slot of `slot_len` bytes after `header` bytes.
fn sge_capacity(slot_len: usize, header: usize) -> u32 {
    let n = slot_len.saturating_sub(header) / SGE_SIZE;
    u32::try_from(n).unwrap_or(u32::MAX)
}

/// Reads SGE `i` of a WQE whose `dma.num_sge` is at `num_sge_off` and whose
/// SGE array starts at `base`.
fn sge_in(slot: &[u8], num_sge_off: usize, base: usize, i: u32) -> Result<Sge> {
    if slot.len() < base {
        return Err(Error::Truncated);
    }
    let num_sge = ne_u32(slot, num_sge_off)?;
    if num_sge > sge_capacity(slot.len(), base) {
        return Err(Error::WqeOverflow);
    }
    if i >= num_sge {
        return Err(Error::FieldOutOfRange);
    }
    // `i < num_sge <= capacity`, so the offset is inside the slot; the
    // checked arithmetic only keeps the lints honest.
    let off = (i as usize)
        .checked_mul(SGE_SIZE)
        .and_then(|o| o.checked_add(base))
        .ok_or(Error::WqeOverflow)?;
    Sge::parse_at(slot, off)
}

/// How many SGEs a send queue slot of `slot_len` bytes can hold.
pub fn send_sge_capacity(slot_len: usize) -> u32 {
    sge_capacity(slot_len, SEND_WQE_SGE_OFFSET)
}

/// How many SGEs a receive queue slot of `slot_len` bytes can hold.
pub fn recv_sge_capacity(slot_len: usize) -> u32 {
    sge_capacity(slot_len, RECV_WQE_SGE_OFFSET)
}

/// The i-th SGE of a send WQE slot (bounds-checked against the slot).
///
/// Not meaningful for inline WQEs, whose payload union holds data.
///
/// # Errors
///
/// [`Error::Truncated`] if `slot` is shorter than [`SEND_WQE_SIZE`],
/// [`Error::WqeOverflow`] if `dma.num_sge` exceeds what the slot holds,
/// [`Error::FieldOutOfRange`] if `i` is not below `dma.num_sge`.
pub fn send_sge(slot: &[u8], i: u32) -> Result<Sge> {
    sge_in(slot, SEND_WQE_DMA_NUM_SGE_OFFSET, SEND_WQE_SGE_OFFSET, i)
}

/// Writes SGE `i` of a WQE whose SGE array starts at `base`.
fn put_sge_in(slot: &mut [u8], base: usize, i: u32, sge: &Sge) -> Result {
    if slot.len() < base {
        return Err(Error::Truncated);
    }
    if i >= sge_capacity(slot.len(), base) {
        return Err(Error::WqeOverflow);
    }
    // `i < capacity`, so the offset is inside the slot.
    let off = (i as usize)
        .checked_mul(SGE_SIZE)
        .and_then(|o| o.checked_add(base))
        .ok_or(Error::WqeOverflow)?;
    sge.write_at(slot, off)
}

/// Writes SGE `i` of a send WQE slot; `dma.num_sge` is written by
/// [`SendWqe::write`].
///
/// # Errors
///
/// [`Error::Truncated`] if `slot` is shorter than [`SEND_WQE_SIZE`],
/// [`Error::WqeOverflow`] if the slot holds no SGE `i`.
pub fn write_send_sge(slot: &mut [u8], i: u32, sge: &Sge) -> Result {
    put_sge_in(slot, SEND_WQE_SGE_OFFSET, i, sge)
}

/// The first `len` bytes of a send WQE slot's payload union, for inline
/// data to be copied into; `dma.length` is written by [`SendWqe::write`].
///
/// # Errors
///
/// [`Error::Truncated`] if `slot` is shorter than [`SEND_WQE_SIZE`],
/// [`Error::WqeOverflow`] if the slot holds fewer than `len` inline bytes.
pub fn send_inline_mut(slot: &mut [u8], len: usize) -> Result<&mut [u8]> {
    let payload = slot
        .get_mut(SEND_WQE_SGE_OFFSET..)
        .ok_or(Error::Truncated)?;
    payload.get_mut(..len).ok_or(Error::WqeOverflow)
}

/// Copies `data` to the start of a send WQE slot's payload union (the
/// inline data of an `IB_SEND_INLINE` WQE, read back by [`send_inline`]).
///
/// # Errors
///
/// As [`send_inline_mut`] with `data.len()`.
pub fn write_send_inline(slot: &mut [u8], data: &[u8]) -> Result {
    send_inline_mut(slot, data.len())?.copy_from_slice(data);
    Ok(())
}

/// The inline data of a send WQE slot: `len` bytes at the start of dma's
/// union.
///
/// `len` is normally [`SendWqe::length`]; the caller bounds it by the QP's
/// `max_inline_data` first.
///
/// # Errors
///
/// [`Error::Truncated`] if `slot` is shorter than [`SEND_WQE_SIZE`],
/// [`Error::WqeOverflow`] if the slot holds fewer than `len` inline bytes.
pub fn send_inline(slot: &[u8], len: u32) -> Result<&[u8]> {
    let payload = slot.get(SEND_WQE_SGE_OFFSET..).ok_or(Error::Truncated)?;
    payload.get(..len as usize).ok_or(Error::WqeOverflow)
}

/// The 8-byte value of an `ATOMIC_WRITE` WQE (`dma.atomic_wr`), in wire
/// order.
///
/// # Errors
///
/// [`Error::Truncated`] if `slot` is shorter than [`SEND_WQE_SIZE`],
/// [`Error::WqeOverflow`] if it does not hold the value.
pub fn send_atomic_write_value(slot: &[u8]) -> Result<[u8; ATOMIC_WRITE_SIZE]> {
    let payload = slot.get(SEND_WQE_SGE_OFFSET..).ok_or(Error::Truncated)?;
    let (value, _) = payload
        .split_first_chunk::<ATOMIC_WRITE_SIZE>()
        .ok_or(Error::WqeOverflow)?;
    Ok(*value)
}

/// The fixed part of a receive WQE (RQ or SRQ), decoded from a queue slot.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct RecvWqe {
    /// Consumer cookie returned in the completion.
    pub wr_id: u64,
    /// `dma.length`: the sum of the SGE lengths as user space computed it.
    /// Unchecked.
    pub length: u32,
    /// `dma.num_sge`: entries in `dma.sge[]`; bound it by `max_recv_sge`.
    pub num_sge: u32,
}

impl RecvWqe {
    /// Decodes the fixed part of the receive WQE in `slot`.
    ///
    /// # Errors
    ///
    /// [`Error::Truncated`] if `slot` is shorter than [`RECV_WQE_SIZE`].
    pub fn parse(slot: &[u8]) -> Result<Self> {
        if slot.len() < RECV_WQE_SIZE {
            return Err(Error::Truncated);
        }
        Ok(Self {
            wr_id: ne_u64(slot, RECV_WQE_WR_ID_OFFSET)?,
            length: ne_u32(slot, RECV_WQE_DMA_LENGTH_OFFSET)?,
            num_sge: ne_u32(slot, RECV_WQE_DMA_NUM_SGE_OFFSET)?,
        })
    }

    /// Encodes the fixed part of the WQE into `slot`, the inverse of
    /// [`RecvWqe::parse`]: the header ([`RECV_WQE_SIZE`] bytes) is cleared,
    /// then `wr_id`, `dma.length` and `dma.num_sge` are written. The SGEs
    /// are written with [`write_recv_sge`].
    ///
    /// # Errors
    ///
    /// [`Error::Truncated`] if `slot` is shorter than [`RECV_WQE_SIZE`].
    pub fn write(&self, slot: &mut [u8]) -> Result {
        clear(slot, RECV_WQE_SIZE)?;
        put_u64(slot, RECV_WQE_WR_ID_OFFSET, self.wr_id)?;
        put_u32(slot, RECV_WQE_DMA_LENGTH_OFFSET, self.length)?;
        put_u32(slot, RECV_WQE_DMA_NUM_SGE_OFFSET, self.num_sge)
    }
}

/// The i-th SGE of a receive WQE slot (bounds-checked against the slot).
///
/// # Errors
///
/// [`Error::Truncated`] if `slot` is shorter than [`RECV_WQE_SIZE`],
/// [`Error::WqeOverflow`] if `dma.num_sge` exceeds what the slot holds,
/// [`Error::FieldOutOfRange`] if `i` is not below `dma.num_sge`.
pub fn recv_sge(slot: &[u8], i: u32) -> Result<Sge> {
    sge_in(slot, RECV_WQE_DMA_NUM_SGE_OFFSET, RECV_WQE_SGE_OFFSET, i)
}

/// Writes SGE `i` of a receive WQE slot; `dma.num_sge` is written by
/// [`RecvWqe::write`].
///
/// # Errors
///
/// [`Error::Truncated`] if `slot` is shorter than [`RECV_WQE_SIZE`],
/// [`Error::WqeOverflow`] if the slot holds no SGE `i`.
pub fn write_recv_sge(slot: &mut [u8], i: u32, sge: &Sge) -> Result {
    put_sge_in(slot, RECV_WQE_SGE_OFFSET, i, sge)
}

#[cfg(test)]
#[path = "wqe_tests.rs"]
mod tests;
