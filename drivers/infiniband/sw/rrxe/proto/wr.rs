// SPDX-License-Identifier: GPL-2.0

//! Work request opcodes and what rxe does with each: one table, as the C
//! driver's `rxe_wr_opcode_info[]` (which QP types take an opcode and how),
//! with its `wr_to_wc_opcode()` and the requester's `next_opcode()` folded
//! in.
//!
//! The opcodes are `enum ib_wr_opcode`, numerically the `IBV_WR_*` user
//! space writes into its send queue (rdma-core keeps them equal); the
//! module checks them against the kernel's bindings at compile time
//! (`qp::wr`). Completion opcodes are named, not numbered ([`WcKind`]).

#![forbid(unsafe_code)]

use super::opcode::MessageKind;

/// `IB_WR_RDMA_WRITE`.
pub const IB_WR_RDMA_WRITE: u32 = 0;
/// `IB_WR_RDMA_WRITE_WITH_IMM`.
pub const IB_WR_RDMA_WRITE_WITH_IMM: u32 = 1;
/// `IB_WR_SEND`.
pub const IB_WR_SEND: u32 = 2;
/// `IB_WR_SEND_WITH_IMM`.
pub const IB_WR_SEND_WITH_IMM: u32 = 3;
/// `IB_WR_RDMA_READ`.
pub const IB_WR_RDMA_READ: u32 = 4;
/// `IB_WR_ATOMIC_CMP_AND_SWP`.
pub const IB_WR_ATOMIC_CMP_AND_SWP: u32 = 5;
/// `IB_WR_ATOMIC_FETCH_AND_ADD`.
pub const IB_WR_ATOMIC_FETCH_AND_ADD: u32 = 6;
/// `IB_WR_LOCAL_INV`.
pub const IB_WR_LOCAL_INV: u32 = 7;
/// `IB_WR_BIND_MW`.
pub const IB_WR_BIND_MW: u32 = 8;
/// `IB_WR_SEND_WITH_INV`.
pub const IB_WR_SEND_WITH_INV: u32 = 9;
/// `IB_WR_LSO` (`IBV_WR_TSO`); rxe does not support it.
pub const IB_WR_LSO: u32 = 10;
/// `IB_WR_RDMA_READ_WITH_INV`; kernel consumers only.
pub const IB_WR_RDMA_READ_WITH_INV: u32 = 11;
/// `IB_WR_MASKED_ATOMIC_CMP_AND_SWP`; rxe does not support it.
pub const IB_WR_MASKED_ATOMIC_CMP_AND_SWP: u32 = 12;
/// `IB_WR_MASKED_ATOMIC_FETCH_AND_ADD`; rxe does not support it.
pub const IB_WR_MASKED_ATOMIC_FETCH_AND_ADD: u32 = 13;
/// `IB_WR_FLUSH` (IBTA Vol 1 Annex A19).
pub const IB_WR_FLUSH: u32 = 14;
/// `IB_WR_ATOMIC_WRITE` (IBTA Vol 1 Annex A19).
pub const IB_WR_ATOMIC_WRITE: u32 = 15;
/// `IB_WR_REG_MR`: kernel consumers only. Its `wr.reg` member holds a kernel
/// pointer, so a user WQE carrying this opcode must be rejected.
pub const IB_WR_REG_MR: u32 = 0x20;

/// The completion opcode of a send WQE (`enum ib_wc_opcode`'s send-side
/// members), by name only: the kernel glue maps each to the kernel's
/// value, so no number is typed here twice.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum WcKind {
    /// `IB_WC_SEND`; the default, as `IB_WC_SEND` is 0.
    #[default]
    Send,
    /// `IB_WC_RDMA_WRITE`.
    RdmaWrite,
    /// `IB_WC_RDMA_READ`.
    RdmaRead,
    /// `IB_WC_COMP_SWAP`.
    CompSwap,
    /// `IB_WC_FETCH_ADD`.
    FetchAdd,
    /// `IB_WC_BIND_MW`.
    BindMw,
    /// `IB_WC_LOCAL_INV`.
    LocalInv,
    /// `IB_WC_ATOMIC_WRITE`.
    AtomicWrite,
    /// `IB_WC_REG_MR`.
    RegMr,
    /// `IB_WC_FLUSH`.
    Flush,
}

/// The QP types a table entry names; GSI counts as UD.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Service {
    /// Reliable connection.
    Rc,
    /// Unreliable connection.
    Uc,
    /// Unreliable datagram (and the GSI QP).
    Ud,
}

/// A set of [`Service`]s.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Services(u8);

impl Services {
    /// No QP type.
    pub const NONE: Self = Self(0);
    /// RC only.
    pub const RC: Self = Self(1);
    /// RC and UC.
    pub const CONNECTED: Self = Self(1 | 2);
    /// RC, UC and UD.
    pub const ALL: Self = Self(1 | 2 | 4);

    /// Whether the set holds `s`.
    pub const fn has(self, s: Service) -> bool {
        let bit = match s {
            Service::Rc => 1,
            Service::Uc => 2,
            Service::Ud => 4,
        };
        self.0 & bit != 0
    }
}

/// What the requester does for a WQE.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Work {
    /// A message of packets carrying the data.
    Msg(MessageKind),
    /// One READ request; the data comes back in READ responses.
    Read,
    /// One atomic request; the original value comes back in the atomic
    /// acknowledge.
    Atomic,
    /// One ATOMIC WRITE request carrying the 8-byte value; it is answered
    /// by a READ response without data (as `rdma_rxe`).
    AtomicWrite,
    /// One FLUSH request (FETH and RETH, no payload), answered likewise.
    Flush,
    /// A local operation on a memory region or window, run by the
    /// requester when reached in order; nothing is sent.
    Local,
}

/// One work request opcode.
#[derive(Clone, Copy, Debug)]
pub struct WrOpcodeInfo {
    /// The `IB_WR_*` value.
    pub opcode: u32,
    /// The QP types a kernel consumer may post it on (`ib_post_send`
    /// fails with `EINVAL` elsewhere), as the C driver's table, except
    /// that SEND with invalidate is not taken on UD: the C driver's
    /// `init_send_wr` refuses it there.
    pub posted_on: Services,
    /// The QP types whose requester executes it; on the others, and for
    /// an opcode without [`Self::work`], the WQE completes with
    /// `IB_WC_LOC_QP_OP_ERR` (a user WQE is not checked when posted). On
    /// UC there is no READ, atomic, FLUSH or SEND with invalidate; local
    /// operations run there as on RC.
    pub executed_on: Services,
    /// What the requester does; `None` for an opcode it takes but cannot
    /// execute (as the C requester's `next_opcode()` fails).
    pub work: Option<Work>,
    /// The completion opcode (`wr_to_wc_opcode()`).
    pub wc_opcode: WcKind,
    /// May carry inline data (`WR_INLINE_MASK`).
    pub inline: bool,
    /// Addresses remote memory through the WR's `rdma` member
    /// (`WR_READ_MASK`, `WR_WRITE_MASK`).
    pub rdma: bool,
    /// An atomic on one aligned 8-byte word, through the `atomic` member
    /// (`WR_ATOMIC_MASK`).
    pub atomic: bool,
}

impl WrOpcodeInfo {
    /// Whether this is a local operation (`WR_LOCAL_OP_MASK`): no data
    /// and no message.
    pub const fn is_local(&self) -> bool {
        matches!(self.work, Some(Work::Local))
    }

    /// Whether a kernel consumer may post it on a QP of service `s`.
    pub const fn posted_on(&self, s: Service) -> bool {
        self.posted_on.has(s)
    }

    /// What the requester of a QP of service `s` does for it, if it can.
    pub const fn work_on(&self, s: Service) -> Option<Work> {
        if self.executed_on.has(s) {
            self.work
        } else {
            None
        }
    }
}

const fn entry(
    opcode: u32,
    posted_on: Services,
    executed_on: Services,
    work: Option<Work>,
    wc_opcode: WcKind,
) -> WrOpcodeInfo {
    WrOpcodeInfo {
        opcode,
        posted_on,
        executed_on,
        work,
        wc_opcode,
        inline: false,
        rdma: false,
        atomic: false,
    }
}

const fn inline(mut e: WrOpcodeInfo) -> WrOpcodeInfo {
    e.inline = true;
    e
}

const fn rdma(mut e: WrOpcodeInfo) -> WrOpcodeInfo {
    e.rdma = true;
    e
}

const fn atomic(mut e: WrOpcodeInfo) -> WrOpcodeInfo {
    e.atomic = true;
    e
}

/// Every opcode rxe knows (`IB_WR_LSO` and the masked atomics are not
/// taken anywhere, so they are left out).
static TABLE: [WrOpcodeInfo; 14] = {
    use Services as S;
    [
        inline(rdma(entry(
            IB_WR_RDMA_WRITE,
            S::CONNECTED,
            S::CONNECTED,
            Some(Work::Msg(MessageKind::RdmaWrite)),
            WcKind::RdmaWrite,
        ))),
        inline(rdma(entry(
            IB_WR_RDMA_WRITE_WITH_IMM,
            S::CONNECTED,
            S::CONNECTED,
            Some(Work::Msg(MessageKind::RdmaWriteWithImm)),
            WcKind::RdmaWrite,
        ))),
        inline(entry(
            IB_WR_SEND,
            S::ALL,
            S::ALL,
            Some(Work::Msg(MessageKind::Send)),
            WcKind::Send,
        )),
        inline(entry(
            IB_WR_SEND_WITH_IMM,
            S::ALL,
            S::ALL,
            Some(Work::Msg(MessageKind::SendWithImm)),
            WcKind::Send,
        )),
        inline(entry(
            IB_WR_SEND_WITH_INV,
            S::CONNECTED,
            S::RC,
            Some(Work::Msg(MessageKind::SendWithInv)),
            WcKind::Send,
        )),
        rdma(entry(
            IB_WR_RDMA_READ,
            S::RC,
            S::RC,
            Some(Work::Read),
            WcKind::RdmaRead,
        )),
        // Taken from kernel consumers as the C driver's table does, but its
        // requester has no packet for it (`next_opcode()`), nor has rrxe's.
        rdma(entry(
            IB_WR_RDMA_READ_WITH_INV,
            S::RC,
            S::NONE,
            None,
            WcKind::RdmaRead,
        )),
        atomic(entry(
            IB_WR_ATOMIC_CMP_AND_SWP,
            S::RC,
            S::RC,
            Some(Work::Atomic),
            WcKind::CompSwap,
        )),
        atomic(entry(
            IB_WR_ATOMIC_FETCH_AND_ADD,
            S::RC,
            S::RC,
            Some(Work::Atomic),
            WcKind::FetchAdd,
        )),
        entry(
            IB_WR_ATOMIC_WRITE,
            S::RC,
            S::RC,
            Some(Work::AtomicWrite),
            WcKind::AtomicWrite,
        ),
        entry(IB_WR_FLUSH, S::RC, S::RC, Some(Work::Flush), WcKind::Flush),
        entry(
            IB_WR_LOCAL_INV,
            S::RC,
            S::CONNECTED,
            Some(Work::Local),
            WcKind::LocalInv,
        ),
        entry(
            IB_WR_REG_MR,
            S::RC,
            S::CONNECTED,
            Some(Work::Local),
            WcKind::RegMr,
        ),
        entry(
            IB_WR_BIND_MW,
            S::CONNECTED,
            S::CONNECTED,
            Some(Work::Local),
            WcKind::BindMw,
        ),
    ]
};

/// The table entry of `opcode`, or `None` for an opcode rxe does not take
/// on any QP.
pub fn info(opcode: u32) -> Option<&'static WrOpcodeInfo> {
    TABLE.iter().find(|e| e.opcode == opcode)
}

/// Every entry, for checks against other definitions of the opcodes.
pub fn all() -> &'static [WrOpcodeInfo] {
    &TABLE
}

#[cfg(test)]
mod tests {
    use super::*;

    const SERVICES: [Service; 3] = [Service::Rc, Service::Uc, Service::Ud];

    fn posted(op: u32) -> [bool; 3] {
        let e = info(op);
        SERVICES.map(|s| e.is_some_and(|e| e.posted_on(s)))
    }

    fn executed(op: u32) -> [bool; 3] {
        let e = info(op);
        SERVICES.map(|s| e.and_then(|e| e.work_on(s)).is_some())
    }

    #[test]
    fn one_entry_per_opcode() {
        for (i, a) in TABLE.iter().enumerate() {
            for b in TABLE.iter().skip(i + 1) {
                assert_ne!(a.opcode, b.opcode);
            }
            assert!(core::ptr::eq(info(a.opcode).unwrap(), a));
        }
    }

    /// `rxe_wr_opcode_info[]`'s masks, column by column (RC, UC, UD/GSI).
    #[test]
    fn posted_as_the_c_table() {
        let t = [true; 3];
        let conn = [true, true, false];
        let rc = [true, false, false];
        let none = [false; 3];
        assert_eq!(posted(IB_WR_RDMA_WRITE), conn);
        assert_eq!(posted(IB_WR_RDMA_WRITE_WITH_IMM), conn);
        assert_eq!(posted(IB_WR_SEND), t);
        assert_eq!(posted(IB_WR_SEND_WITH_IMM), t);
        assert_eq!(posted(IB_WR_RDMA_READ), rc);
        assert_eq!(posted(IB_WR_ATOMIC_CMP_AND_SWP), rc);
        assert_eq!(posted(IB_WR_ATOMIC_FETCH_AND_ADD), rc);
        assert_eq!(posted(IB_WR_LSO), none);
        // The C table says RC, UC and UD; `init_send_wr` refuses UD.
        assert_eq!(posted(IB_WR_SEND_WITH_INV), conn);
        assert_eq!(posted(IB_WR_RDMA_READ_WITH_INV), rc);
        assert_eq!(posted(IB_WR_LOCAL_INV), rc);
        assert_eq!(posted(IB_WR_REG_MR), rc);
        assert_eq!(posted(IB_WR_BIND_MW), conn);
        assert_eq!(posted(IB_WR_FLUSH), rc);
        assert_eq!(posted(IB_WR_ATOMIC_WRITE), rc);
        assert_eq!(posted(IB_WR_MASKED_ATOMIC_CMP_AND_SWP), none);
        assert_eq!(posted(IB_WR_MASKED_ATOMIC_FETCH_AND_ADD), none);
        assert_eq!(posted(99), none);
    }

    #[test]
    fn executed_by_the_requesters() {
        let conn = [true, true, false];
        let rc = [true, false, false];
        assert_eq!(executed(IB_WR_SEND), [true; 3]);
        assert_eq!(executed(IB_WR_SEND_WITH_IMM), [true; 3]);
        assert_eq!(executed(IB_WR_RDMA_WRITE), conn);
        assert_eq!(executed(IB_WR_RDMA_WRITE_WITH_IMM), conn);
        // UC has no IETH (IBTA Vol 1 §9.2, Table 38).
        assert_eq!(executed(IB_WR_SEND_WITH_INV), rc);
        assert_eq!(executed(IB_WR_RDMA_READ), rc);
        assert_eq!(executed(IB_WR_RDMA_READ_WITH_INV), [false; 3]);
        for op in [IB_WR_LOCAL_INV, IB_WR_REG_MR, IB_WR_BIND_MW] {
            assert_eq!(executed(op), conn);
            assert!(info(op).unwrap().is_local());
        }
        for op in [
            IB_WR_ATOMIC_CMP_AND_SWP,
            IB_WR_ATOMIC_FETCH_AND_ADD,
            IB_WR_ATOMIC_WRITE,
            IB_WR_FLUSH,
        ] {
            assert_eq!(executed(op), rc);
        }
        // Whatever a requester executes, a kernel consumer may post on RC.
        for e in all() {
            if e.work_on(Service::Rc).is_some() {
                assert!(e.posted_on(Service::Rc));
            }
        }
    }

    /// `wr_to_wc_opcode()` and the requester's work, per opcode.
    #[test]
    fn completion_opcodes_and_work() {
        let expect = [
            (IB_WR_RDMA_WRITE, WcKind::RdmaWrite),
            (IB_WR_RDMA_WRITE_WITH_IMM, WcKind::RdmaWrite),
            (IB_WR_SEND, WcKind::Send),
            (IB_WR_SEND_WITH_IMM, WcKind::Send),
            (IB_WR_SEND_WITH_INV, WcKind::Send),
            (IB_WR_RDMA_READ, WcKind::RdmaRead),
            (IB_WR_RDMA_READ_WITH_INV, WcKind::RdmaRead),
            (IB_WR_ATOMIC_CMP_AND_SWP, WcKind::CompSwap),
            (IB_WR_ATOMIC_FETCH_AND_ADD, WcKind::FetchAdd),
            (IB_WR_ATOMIC_WRITE, WcKind::AtomicWrite),
            (IB_WR_FLUSH, WcKind::Flush),
            (IB_WR_LOCAL_INV, WcKind::LocalInv),
            (IB_WR_REG_MR, WcKind::RegMr),
            (IB_WR_BIND_MW, WcKind::BindMw),
        ];
        assert_eq!(expect.len(), all().len());
        for (op, wc) in expect {
            assert_eq!(info(op).unwrap().wc_opcode, wc, "opcode {op}");
        }
        let work = |op| info(op).unwrap().work;
        assert_eq!(work(IB_WR_SEND), Some(Work::Msg(MessageKind::Send)));
        assert_eq!(
            work(IB_WR_SEND_WITH_INV),
            Some(Work::Msg(MessageKind::SendWithInv))
        );
        assert_eq!(
            work(IB_WR_RDMA_WRITE_WITH_IMM),
            Some(Work::Msg(MessageKind::RdmaWriteWithImm))
        );
        assert_eq!(work(IB_WR_ATOMIC_FETCH_AND_ADD), Some(Work::Atomic));
    }

    /// The WR members each opcode fills (`WR_INLINE_MASK`, the `rdma` and
    /// `atomic` members).
    #[test]
    fn members() {
        for e in all() {
            // (inline, rdma, atomic)
            let expect = match e.opcode {
                IB_WR_RDMA_WRITE | IB_WR_RDMA_WRITE_WITH_IMM => (true, true, false),
                IB_WR_SEND | IB_WR_SEND_WITH_IMM | IB_WR_SEND_WITH_INV => (true, false, false),
                IB_WR_RDMA_READ | IB_WR_RDMA_READ_WITH_INV => (false, true, false),
                IB_WR_ATOMIC_CMP_AND_SWP | IB_WR_ATOMIC_FETCH_AND_ADD => (false, false, true),
                _ => (false, false, false),
            };
            assert_eq!((e.inline, e.rdma, e.atomic), expect, "opcode {}", e.opcode);
        }
    }
}
