// SPDX-License-Identifier: GPL-2.0

//! Tests of [`super`]: the slot layouts against C's offsets, and what the
//! parsers and writers make of whole, truncated and hostile slots.

#![forbid(unsafe_code)]

use super::*;
use std::vec;
use std::vec::Vec;

// Offsets as gcc reports them for the 7.2 uapi header on x86-64; written
// out as numbers so that a wrong constant above cannot hide itself.
fn put<const N: usize>(slot: &mut [u8], off: usize, v: [u8; N]) {
    slot[off..off + N].copy_from_slice(&v);
}

fn put32(slot: &mut [u8], off: usize, v: u32) {
    put(slot, off, v.to_ne_bytes());
}

fn put64(slot: &mut [u8], off: usize, v: u64) {
    put(slot, off, v.to_ne_bytes());
}

/// A send slot with the scratch fields filled with junk, as a hostile or
/// careless user might leave them.
fn send_slot(len: usize, opcode: u32, flags: u32) -> Vec<u8> {
    let mut s = vec![0u8; len];
    put64(&mut s, 0, 0x1122_3344_5566_7788);
    put32(&mut s, 8, 0xdead_beef);
    put32(&mut s, 12, opcode);
    put32(&mut s, 16, flags);
    put(&mut s, 20, [0xde, 0xad, 0xbe, 0xef]);
    for off in (144..184).step_by(4) {
        put32(&mut s, off, 0xa5a5_a5a5);
    }
    put64(&mut s, 152, 0x7000_0000_1000);
    put32(&mut s, 184, 4096);
    put32(&mut s, 188, 0xffff_ffff);
    put32(&mut s, 192, 7);
    put32(&mut s, 204, 0x5a5a_5a5a);
    s
}

#[test]
fn offsets_match_c() {
    assert_eq!(SEND_WQE_OPCODE_OFFSET, 12);
    assert_eq!(SEND_WQE_ATOMIC_RKEY_OFFSET, 48);
    assert_eq!(SEND_WQE_UD_AH_NUM_OFFSET, 36);
    assert_eq!(SEND_WQE_FLUSH_LEVEL_OFFSET, 41);
    assert_eq!(SEND_WQE_IOVA_OFFSET, 152);
    assert_eq!(SEND_WQE_DMA_OFFSET, 184);
    assert_eq!(SEND_WQE_DMA_NUM_SGE_OFFSET, 196);
    assert_eq!(SEND_WQE_SGE_OFFSET, 208);
    assert_eq!(RECV_WQE_DMA_NUM_SGE_OFFSET, 28);
    assert_eq!(RECV_WQE_SGE_OFFSET, 40);
}

#[test]
fn rdma_write_round_trip() {
    let mut s = send_slot(
        256,
        IB_WR_RDMA_WRITE_WITH_IMM,
        IB_SEND_SIGNALED | IB_SEND_SOLICITED,
    );
    put64(&mut s, 24, 0x7000_0000_1000);
    put32(&mut s, 32, 0x1234);
    put32(&mut s, 196, 2);
    put64(&mut s, 208, 0xaaaa_0000);
    put32(&mut s, 216, 1000);
    put32(&mut s, 220, 0x100);
    put64(&mut s, 224, 0xbbbb_0000);
    put32(&mut s, 232, 3096);
    put32(&mut s, 236, 0x200);
    let w = SendWqe::parse(&s).unwrap();
    assert_eq!(w.wr_id, 0x1122_3344_5566_7788);
    assert_eq!(w.opcode, IB_WR_RDMA_WRITE_WITH_IMM);
    assert!(w.is_signaled() && w.is_solicited() && !w.is_fenced() && !w.has_inline());
    assert_eq!(w.immdt().imm_data, [0xde, 0xad, 0xbe, 0xef]);
    assert_eq!(
        (w.remote_addr, w.rkey, w.iova),
        (0x7000_0000_1000, 0x1234, 0x7000_0000_1000)
    );
    assert_eq!((w.length, w.num_sge), (4096, 2));
    // Members of other opcodes stay clear.
    assert_eq!(
        (w.compare_add, w.swap, w.remote_qpn, w.ah_num),
        (0, 0, 0, 0)
    );
    let sge = |i| send_sge(&s, i).unwrap();
    assert_eq!(
        sge(0),
        Sge {
            addr: 0xaaaa_0000,
            length: 1000,
            lkey: 0x100
        }
    );
    assert_eq!(
        sge(1),
        Sge {
            addr: 0xbbbb_0000,
            length: 3096,
            lkey: 0x200
        }
    );
    assert_eq!(send_sge(&s, 2), Err(Error::FieldOutOfRange));
}

#[test]
fn atomic_fields() {
    let mut s = send_slot(256, IB_WR_ATOMIC_CMP_AND_SWP, IB_SEND_FENCE);
    put64(&mut s, 24, 0x8000);
    put64(&mut s, 32, 5);
    put64(&mut s, 40, 9);
    put32(&mut s, 48, 0x77);
    let w = SendWqe::parse(&s).unwrap();
    assert!(w.is_fenced());
    assert_eq!(
        (w.remote_addr, w.compare_add, w.swap, w.rkey),
        (0x8000, 5, 9, 0x77)
    );

    put32(&mut s, 12, IB_WR_ATOMIC_WRITE);
    put32(&mut s, 32, 0x66);
    put(&mut s, 208, [1, 2, 3, 4, 5, 6, 7, 8]);
    let w = SendWqe::parse(&s).unwrap();
    assert_eq!((w.rkey, w.compare_add), (0x66, 0));
    assert_eq!(send_atomic_write_value(&s), Ok([1, 2, 3, 4, 5, 6, 7, 8]));
    assert_eq!(send_atomic_write_value(&s[..212]), Err(Error::WqeOverflow));
}

#[test]
fn ud_send_inline() {
    let mut s = send_slot(512, IB_WR_SEND, IB_SEND_INLINE);
    put32(&mut s, 24, 0x00ab_cdef);
    put32(&mut s, 28, 0x8001_0000);
    put(&mut s, 32, 3u16.to_ne_bytes());
    put32(&mut s, 36, 42);
    put32(&mut s, 184, 5);
    // ibv_post_send stores the number of source buffers here.
    put32(&mut s, 196, 3);
    put(&mut s, 208, *b"hello");
    let w = SendWqe::parse(&s).unwrap();
    assert!(w.has_inline());
    assert_eq!(
        (w.remote_qpn, w.remote_qkey, w.pkey_index, w.ah_num),
        (0x00ab_cdef, 0x8001_0000, 3, 42)
    );
    assert_eq!((w.remote_addr, w.rkey), (0, 0));
    assert_eq!(send_inline(&s, w.length), Ok(&b"hello"[..]));
    assert_eq!(send_inline(&s, 304).map(<[u8]>::len), Ok(304));
    assert_eq!(send_inline(&s, 305), Err(Error::WqeOverflow));
    assert_eq!(send_inline(&s, u32::MAX), Err(Error::WqeOverflow));
    assert_eq!(send_inline(&s[..100], 0), Err(Error::Truncated));
}

#[test]
fn send_with_inv_and_local_inv() {
    let mut s = send_slot(256, IB_WR_SEND_WITH_INV, 0);
    put32(&mut s, 20, 0x0102_0304);
    put64(&mut s, 24, u64::MAX);
    let w = SendWqe::parse(&s).unwrap();
    assert_eq!(w.invalidate_rkey, 0x0102_0304);
    assert_eq!((w.remote_addr, w.rkey, w.remote_qpn), (0, 0, 0));
    put32(&mut s, 12, IB_WR_LOCAL_INV);
    assert_eq!(SendWqe::parse(&s).unwrap().invalidate_rkey, 0x0102_0304);
}

#[test]
fn bind_mw_and_flush() {
    let mut s = send_slot(256, IB_WR_BIND_MW, IB_SEND_SIGNALED);
    put64(&mut s, 24, 0x4000);
    put64(&mut s, 32, 0x1_0000_0000);
    put32(&mut s, 40, 0x301);
    put32(&mut s, 44, 0x402);
    put32(&mut s, 48, 0x403);
    put32(&mut s, 52, 0xf);
    let w = SendWqe::parse(&s).unwrap();
    let mw = BindMw {
        addr: 0x4000,
        length: 0x1_0000_0000,
        mr_lkey: 0x301,
        mw_rkey: 0x402,
        rkey: 0x403,
        access: 0xf,
    };
    assert_eq!(w.mw, mw);
    assert_eq!((w.remote_addr, w.rkey), (0, 0));

    let mut s = send_slot(256, IB_WR_FLUSH, 0);
    put64(&mut s, 24, 0x9000);
    put32(&mut s, 32, 64);
    put32(&mut s, 36, 0x55);
    put(&mut s, 40, [2, 1]);
    let w = SendWqe::parse(&s).unwrap();
    assert_eq!((w.remote_addr, w.flush_length, w.rkey), (0x9000, 64, 0x55));
    assert_eq!((w.flush_type, w.flush_level), (2, 1));
}

#[test]
fn unknown_opcode_still_parses() {
    let s = send_slot(256, IB_WR_REG_MR, 0);
    let w = SendWqe::parse(&s).unwrap();
    assert_eq!((w.opcode, w.wr_id), (IB_WR_REG_MR, 0x1122_3344_5566_7788));
    let s = send_slot(256, u32::MAX, u32::MAX);
    assert!(SendWqe::parse(&s).unwrap().has_inline());
}

#[test]
fn truncated_slots() {
    let s = send_slot(256, IB_WR_SEND, 0);
    assert_eq!(SendWqe::parse(&s[..207]), Err(Error::Truncated));
    assert!(SendWqe::parse(&s[..208]).is_ok());
    assert_eq!(SendWqe::parse(&[]), Err(Error::Truncated));
    assert_eq!(send_sge(&s[..100], 0), Err(Error::Truncated));
    assert_eq!(RecvWqe::parse(&[0; 39]), Err(Error::Truncated));
    assert_eq!(recv_sge(&[0; 39], 0), Err(Error::Truncated));
    // A bare header holds no SGE.
    assert_eq!(send_sge(&s[..208], 0), Err(Error::FieldOutOfRange));
}

#[test]
fn num_sge_beyond_slot() {
    let mut s = send_slot(256, IB_WR_SEND, 0);
    assert_eq!(send_sge_capacity(256), 3);
    put32(&mut s, 196, 3);
    assert!(send_sge(&s, 2).is_ok());
    put32(&mut s, 196, 4);
    assert_eq!(send_sge(&s, 0), Err(Error::WqeOverflow));
    put32(&mut s, 196, u32::MAX);
    assert_eq!(send_sge(&s, 0), Err(Error::WqeOverflow));
    assert_eq!(send_sge(&s, u32::MAX), Err(Error::WqeOverflow));
}

#[test]
fn recv_round_trip() {
    let mut s = vec![0u8; 128];
    put64(&mut s, 0, 77);
    put32(&mut s, 16, 300);
    put32(&mut s, 20, 0xffff);
    put32(&mut s, 28, 2);
    put64(&mut s, 40, 0x1000);
    put32(&mut s, 48, 100);
    put32(&mut s, 52, 0x11);
    put64(&mut s, 56, 0x2000);
    put32(&mut s, 64, 200);
    put32(&mut s, 68, 0x22);
    assert_eq!(
        RecvWqe::parse(&s),
        Ok(RecvWqe {
            wr_id: 77,
            length: 300,
            num_sge: 2
        })
    );
    assert_eq!(
        recv_sge(&s, 0),
        Ok(Sge {
            addr: 0x1000,
            length: 100,
            lkey: 0x11
        })
    );
    assert_eq!(
        recv_sge(&s, 1),
        Ok(Sge {
            addr: 0x2000,
            length: 200,
            lkey: 0x22
        })
    );
    assert_eq!(recv_sge(&s, 2), Err(Error::FieldOutOfRange));
    assert_eq!(recv_sge_capacity(128), 5);
    put32(&mut s, 28, 6);
    assert_eq!(recv_sge(&s, 0), Err(Error::WqeOverflow));
    put32(&mut s, 28, 5);
    assert_eq!(recv_sge(&s, 4), Ok(Sge::default()));
    assert_eq!(recv_sge(&s[..119], 4), Err(Error::WqeOverflow));
}

/// `w` with the members its opcode does not encode cleared, as
/// [`SendWqe::parse`] returns them.
fn normalized(w: &SendWqe) -> SendWqe {
    let ex = if SendWqe::ex_is_invalidate(w.opcode) {
        w.invalidate_rkey
    } else {
        w.imm_data
    };
    let mut n = SendWqe {
        wr_id: w.wr_id,
        opcode: w.opcode,
        send_flags: w.send_flags,
        imm_data: ex,
        invalidate_rkey: ex,
        length: w.length,
        num_sge: w.num_sge,
        iova: w.iova,
        ..SendWqe::default()
    };
    match w.opcode {
        IB_WR_RDMA_WRITE
        | IB_WR_RDMA_WRITE_WITH_IMM
        | IB_WR_RDMA_READ
        | IB_WR_RDMA_READ_WITH_INV
        | IB_WR_ATOMIC_WRITE => {
            n.remote_addr = w.remote_addr;
            n.rkey = w.rkey;
        }
        IB_WR_ATOMIC_CMP_AND_SWP | IB_WR_ATOMIC_FETCH_AND_ADD => {
            n.remote_addr = w.remote_addr;
            n.rkey = w.rkey;
            n.compare_add = w.compare_add;
            n.swap = w.swap;
        }
        IB_WR_SEND | IB_WR_SEND_WITH_IMM => {
            n.remote_qpn = w.remote_qpn;
            n.remote_qkey = w.remote_qkey;
            n.pkey_index = w.pkey_index;
            n.ah_num = w.ah_num;
        }
        IB_WR_BIND_MW => n.mw = w.mw,
        IB_WR_FLUSH => {
            n.remote_addr = w.remote_addr;
            n.rkey = w.rkey;
            n.flush_length = w.flush_length;
            n.flush_type = w.flush_type;
            n.flush_level = w.flush_level;
        }
        IB_WR_REG_MR => n.reg = w.reg,
        _ => {}
    }
    n
}

/// Every field set, so that a member leaking into another shows.
fn full(opcode: u32) -> SendWqe {
    SendWqe {
        wr_id: 0x0102_0304_0506_0708,
        opcode,
        send_flags: IB_SEND_SIGNALED | IB_SEND_FENCE,
        imm_data: 0x1111_2222,
        invalidate_rkey: 0x3333_4444,
        remote_addr: 0x7000_0000_2000,
        rkey: 0x55,
        compare_add: 0x66,
        swap: 0x77,
        remote_qpn: 0x88,
        remote_qkey: 0x8001_0000,
        pkey_index: 2,
        ah_num: 9,
        mw: BindMw {
            addr: 1,
            length: 2,
            mr_lkey: 3,
            mw_rkey: 4,
            rkey: 5,
            access: 6,
        },
        reg: RegMr {
            mr_index: 0x12,
            key: 0x1234,
            access: 7,
            iova: 0x9000_0000_0100,
            length: 0x2_0000,
        },
        flush_length: 64,
        flush_type: 1,
        flush_level: 2,
        length: 4096,
        num_sge: 2,
        iova: 0x7000_0000_2000,
    }
}

#[test]
fn send_write_round_trips() {
    for opcode in (IB_WR_RDMA_WRITE..=IB_WR_ATOMIC_WRITE).chain([IB_WR_REG_MR, 0x77]) {
        let w = full(opcode);
        // Junk everywhere, as a reused slot has.
        let mut s = vec![0xa5u8; 256];
        w.write(&mut s).unwrap();
        assert_eq!(
            SendWqe::parse(&s).unwrap(),
            normalized(&w),
            "opcode {opcode}"
        );
        // The scratch fields are cleared.
        assert!(s[144..152].iter().all(|&b| b == 0));
        assert!(s[160..184].iter().all(|&b| b == 0));
        // The payload is left alone.
        assert!(s[208..].iter().all(|&b| b == 0xa5));
    }
    // The ex union follows the opcode.
    let mut s = vec![0u8; 256];
    full(IB_WR_SEND_WITH_INV).write(&mut s).unwrap();
    assert_eq!(SendWqe::parse(&s).unwrap().invalidate_rkey, 0x3333_4444);
    full(IB_WR_SEND_WITH_IMM).write(&mut s).unwrap();
    assert_eq!(SendWqe::parse(&s).unwrap().imm_data, 0x1111_2222);
    // Offsets as the decoder's tests spell them.
    full(IB_WR_ATOMIC_CMP_AND_SWP).write(&mut s).unwrap();
    assert_eq!(s[48..52], 0x55u32.to_ne_bytes());
    full(IB_WR_SEND).write(&mut s).unwrap();
    assert_eq!(s[36..40], 9u32.to_ne_bytes());
    assert_eq!(s[196..200], 2u32.to_ne_bytes());
    full(IB_WR_REG_MR).write(&mut s).unwrap();
    assert_eq!(s[24..32], 0x12u64.to_ne_bytes());
    assert_eq!(s[32..36], 0x1234u32.to_ne_bytes());
    assert_eq!(s[36..40], 7u32.to_ne_bytes());
    assert_eq!(full(IB_WR_SEND).write(&mut s[..207]), Err(Error::Truncated));
}

#[test]
fn send_sge_and_inline_writers() {
    let mut s = vec![0xffu8; 256];
    let w = SendWqe {
        opcode: IB_WR_SEND,
        length: 300,
        num_sge: 3,
        ..SendWqe::default()
    };
    w.write(&mut s).unwrap();
    let sges = [
        Sge {
            addr: 0xffff_8880_0000_1000,
            length: 100,
            lkey: 0x101,
        },
        Sge {
            addr: 2,
            length: 150,
            lkey: 0x202,
        },
        Sge {
            addr: 3,
            length: 50,
            lkey: 0x303,
        },
    ];
    for (i, sge) in (0..).zip(&sges) {
        write_send_sge(&mut s, i, sge).unwrap();
    }
    for (i, sge) in (0..).zip(&sges) {
        assert_eq!(send_sge(&s, i), Ok(*sge));
    }
    assert_eq!(write_send_sge(&mut s, 3, &sges[0]), Err(Error::WqeOverflow));
    assert_eq!(
        write_send_sge(&mut s, u32::MAX, &sges[0]),
        Err(Error::WqeOverflow)
    );
    assert_eq!(
        write_send_sge(&mut s[..100], 0, &sges[0]),
        Err(Error::Truncated)
    );

    let w = SendWqe {
        opcode: IB_WR_SEND,
        send_flags: IB_SEND_INLINE,
        length: 5,
        ..SendWqe::default()
    };
    w.write(&mut s).unwrap();
    write_send_inline(&mut s, b"hello").unwrap();
    let p = SendWqe::parse(&s).unwrap();
    assert!(p.has_inline());
    assert_eq!(send_inline(&s, p.length), Ok(&b"hello"[..]));
    assert!(write_send_inline(&mut s, &[0; 48]).is_ok());
    assert_eq!(write_send_inline(&mut s, &[0; 49]), Err(Error::WqeOverflow));
    assert_eq!(send_inline_mut(&mut s, 48).map(|b| b.len()), Ok(48));
    assert_eq!(write_send_inline(&mut s[..200], b""), Err(Error::Truncated));
}

#[test]
fn recv_writers_round_trip() {
    let mut s = vec![0xeeu8; 128];
    let r = RecvWqe {
        wr_id: 0xabcd,
        length: 300,
        num_sge: 2,
    };
    r.write(&mut s).unwrap();
    let a = Sge {
        addr: 0x1000,
        length: 100,
        lkey: 0x11,
    };
    let b = Sge {
        addr: 0x2000,
        length: 200,
        lkey: 0x22,
    };
    write_recv_sge(&mut s, 0, &a).unwrap();
    write_recv_sge(&mut s, 1, &b).unwrap();
    assert_eq!(RecvWqe::parse(&s), Ok(r));
    assert_eq!((recv_sge(&s, 0), recv_sge(&s, 1)), (Ok(a), Ok(b)));
    assert!(s[8..16].iter().all(|&x| x == 0));
    assert!(s[20..28].iter().all(|&x| x == 0));
    assert_eq!(write_recv_sge(&mut s, 5, &a), Err(Error::WqeOverflow));
    assert_eq!(r.write(&mut s[..39]), Err(Error::Truncated));
    assert_eq!(write_recv_sge(&mut s[..39], 0, &a), Err(Error::Truncated));
}

mod prop {
    use super::super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn never_panics(slot in proptest::collection::vec(any::<u8>(), 0..600), i in any::<u32>(), len in any::<u32>()) {
            let _ = SendWqe::parse(&slot);
            let _ = send_sge(&slot, i);
            let _ = send_inline(&slot, len);
            let _ = send_atomic_write_value(&slot);
            let _ = RecvWqe::parse(&slot);
            let _ = recv_sge(&slot, i);
        }

        #[test]
        fn send_encode_decode(
            wr_id in any::<u64>(), opcode in 0u32..0x40, flags in any::<u32>(),
            ex in any::<u32>(), a in any::<u64>(), b in any::<u64>(), c in any::<u64>(),
            k in any::<u32>(), q in any::<u32>(), pk in any::<u16>(), len in any::<u32>(),
            n in any::<u32>(),
        ) {
            let w = SendWqe {
                wr_id, opcode, send_flags: flags, imm_data: ex, invalidate_rkey: ex,
                remote_addr: a, rkey: k, compare_add: b, swap: c, remote_qpn: q,
                remote_qkey: k, pkey_index: pk, ah_num: q,
                mw: BindMw { addr: a, length: b, mr_lkey: k, mw_rkey: q, rkey: k, access: q },
                reg: RegMr { mr_index: q, key: k, access: n, iova: a, length: b },
                flush_length: q, flush_type: 3, flush_level: 1,
                length: len, num_sge: n, iova: c,
            };
            let mut s = std::vec![0x5au8; 240];
            w.write(&mut s).unwrap();
            prop_assert_eq!(SendWqe::parse(&s).unwrap(), super::normalized(&w));
        }

        #[test]
        fn recv_encode_decode(wr_id in any::<u64>(), len in any::<u32>(), n in 0u32..4,
                              addr in any::<u64>(), l in any::<u32>(), key in any::<u32>()) {
            let mut s = std::vec![0x5au8; 104];
            let r = RecvWqe { wr_id, length: len, num_sge: n };
            r.write(&mut s).unwrap();
            let sge = Sge { addr, length: l, lkey: key };
            for i in 0..n {
                write_recv_sge(&mut s, i, &sge).unwrap();
            }
            prop_assert_eq!(RecvWqe::parse(&s), Ok(r));
            for i in 0..n {
                prop_assert_eq!(recv_sge(&s, i), Ok(sge));
            }
        }
    }
}
