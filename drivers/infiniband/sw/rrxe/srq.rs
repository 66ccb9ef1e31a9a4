// SPDX-License-Identifier: GPL-2.0

#![forbid(unsafe_code)]

//! Shared receive queues (basic type only).

use crate::{
    proto::qp_check,
    rdma::{
        device::Device,
        lock::SpinLockIrq,
        qp::RecvWr,
        queue,
        srq::{
            Srq,
            SrqAttr,
            SRQ_LIMIT,
            SRQ_MAX_WR, //
        },
        udata::Udata, //
    },
};
use kernel::{
    new_mutex,
    prelude::*,
    sync::{
        atomic::{
            Atomic,
            Relaxed, //
        },
        Mutex,
    },
    uaccess::{
        UserPtr,
        UserSlice, //
    }, //
};

use super::{
    param,
    qp::{
        write_recv_wqe,
        Resize,
        Wq, //
    },
    verbs::Rrxe, //
};

/// Most WQEs a resize copies with the SRQ's lock held (up to 128 KiB of
/// slots at the largest WQE).
const RESIZE_STEP_WQES: u32 = 256;

struct State {
    rq: Wq,
    max_sge: u32,
    /// Armed limit (0: not armed).
    limit: u32,
}

/// State of a shared receive queue.
#[pin_data]
pub(crate) struct RrxeSrq {
    #[pin]
    state: SpinLockIrq<State>,
    /// Held across `modify`: a resize drops `state` between its steps, and
    /// uverbs (a shared lock on the SRQ) and kernel callers may run two
    /// modifies at once.
    #[pin]
    modify: Mutex<()>,
    /// SRQ number.
    srq_num: u32,
    /// The armed limit was crossed and `IB_EVENT_SRQ_LIMIT_REACHED` is
    /// still to be reported, once no lock is held
    /// ([`RrxeSrq::report_limit`]).
    limit_event: Atomic<bool>,
}

fn check_max_wr(max_wr: u32) -> Result<u32> {
    if max_wr == 0 || max_wr > param::MAX_SRQ_WR {
        return Err(EINVAL);
    }
    Ok(max_wr)
}

impl RrxeSrq {
    /// Creates an SRQ (`rxe_create_srq`).
    pub(crate) fn create(
        dev: &Device<Rrxe>,
        attr: &mut SrqAttr,
        udata: Option<&Udata>,
    ) -> Result<impl PinInit<Self, Error>> {
        if let Some(udata) = udata {
            if udata.outlen() < queue::CREATE_SRQ_RESP_SIZE {
                return Err(EINVAL);
            }
        }
        let max_wr = check_max_wr(attr.max_wr)?;
        if attr.max_sge > param::MAX_SRQ_SGE {
            return Err(EINVAL);
        }
        let max_sge = attr.max_sge.max(1);
        let srq_num = dev.srq_pool.alloc()?;
        let made = (|| -> Result<Wq> {
            let (rq, mi) = Wq::new(max_wr, qp_check::recv_wqe_size(max_sge), udata)?;
            if let Some(udata) = udata {
                udata.copy_to(&queue::create_srq_resp(&mi, srq_num))?;
            }
            Ok(rq)
        })();
        let rq = match made {
            Ok(rq) => rq,
            Err(e) => {
                dev.srq_pool.free(srq_num);
                return Err(e);
            }
        };
        attr.max_wr = rq.geo.capacity();
        attr.max_sge = max_sge;
        let limit = attr.srq_limit;
        Ok(try_pin_init!(Self {
            state <- crate::rdma::lock::new_spinlock_irq!(
                State { rq, max_sge, limit },
                "RrxeSrq::state"
            ),
            modify <- new_mutex!((), "RrxeSrq::modify"),
            srq_num,
            limit_event: Atomic::new(false),
        }))
    }

    /// Resizes and/or arms the SRQ (`rxe_modify_srq`).
    pub(crate) fn modify(
        srq: &Srq<Rrxe>,
        attr: &SrqAttr,
        mask: u32,
        udata: Option<&Udata>,
    ) -> Result {
        let _modify = srq.modify.lock();
        let (capacity, limit, max_sge) = {
            let st = srq.state.lock();
            (st.rq.geo.capacity(), st.limit, st.max_sge)
        };
        if mask & SRQ_MAX_WR != 0 {
            let max_wr = check_max_wr(attr.max_wr)?;
            if limit != 0 && max_wr < limit {
                return Err(EINVAL);
            }
        }
        if mask & SRQ_LIMIT != 0
            && (attr.srq_limit > param::MAX_SRQ_WR || attr.srq_limit > capacity)
        {
            return Err(EINVAL);
        }
        if mask & SRQ_MAX_WR != 0 {
            // User space says where it wants the new `struct mminfo`.
            let mut addr = None;
            if let Some(udata) = udata {
                if udata.inlen() < queue::MODIFY_SRQ_CMD_SIZE {
                    return Err(EINVAL);
                }
                let mut cmd = [0u8; queue::MODIFY_SRQ_CMD_SIZE];
                udata.copy_from(&mut cmd)?;
                addr = Some(queue::modify_srq_cmd_mmap_info_addr(&cmd));
            }
            let (rq, mi) = Wq::new(attr.max_wr, qp_check::recv_wqe_size(max_sge), udata)?;
            if let Some(addr) = addr {
                let addr = usize::try_from(addr).map_err(|_| EINVAL)?;
                UserSlice::new(UserPtr::from_addr(addr), mi.len())
                    .writer()
                    .write_slice(&mi)?;
            }
            // The pending WQEs move in steps of RESIZE_STEP_WQES, each under
            // the lock (interrupts off), the lock dropped in between.
            let mut r = Resize::new(&srq.state.lock().rq, rq, RESIZE_STEP_WQES);
            let old = loop {
                let mut st = srq.state.lock();
                if st.rq.resize_step(&mut r)? {
                    break core::mem::replace(&mut st.rq, r.finish());
                }
            };
            // Releasing the old mmap entry takes a mutex: not under the lock.
            drop(old);
        }
        if mask & SRQ_LIMIT != 0 {
            srq.state.lock().limit = attr.srq_limit;
        }
        Ok(())
    }

    /// Reports the attributes.
    pub(crate) fn query(&self) -> SrqAttr {
        let st = self.state.lock();
        SrqAttr {
            max_wr: st.rq.geo.capacity(),
            max_sge: st.max_sge,
            srq_limit: st.limit,
        }
    }

    /// Posts a receive WR of a kernel consumer (`rxe_post_srq_recv`): it is
    /// encoded as an rxe receive WQE into the SRQ's kernel ring, from which
    /// [`RrxeSrq::take`] gives it to a QP's responder as it would one that
    /// user space wrote.
    ///
    /// The checks and their order are the C driver's: `ENOMEM` when the SRQ
    /// is full, then `EINVAL` for more SGEs than the SRQ was created with or
    /// a message longer than 2^31 bytes. A user SRQ, which only the uverbs
    /// `POST_SRQ_RECV` command can reach here (user space posts into its
    /// mmapped ring), is refused with `EINVAL`, as a user QP's `post_recv`.
    ///
    /// Posting never reports the SRQ limit: the limit is crossed only when
    /// a WQE is taken ([`RrxeSrq::take`]), and an armed limit stays armed.
    pub(crate) fn post(srq: &Srq<Rrxe>, wr: &RecvWr<'_>) -> Result {
        let mut st = srq.state.lock();
        let max_sge = st.max_sge;
        st.rq.post(|slot| {
            if wr.num_sge() > max_sge {
                return Err(EINVAL);
            }
            write_recv_wqe(wr, slot)
        })
    }

    /// Takes the next receive WQE: copies its slot into `buf` and consumes
    /// it. `false` when the SRQ is empty.
    ///
    /// When fewer WQEs than an armed limit are left afterwards, the limit
    /// is disarmed and `IB_EVENT_SRQ_LIMIT_REACHED` becomes pending (IBTA
    /// Vol 1 §10.2.9.4; only with an event handler, as `get_srq_wqe` in the
    /// C driver): the caller, which holds its QP's lock, reports it with
    /// [`RrxeSrq::report_limit`] once it dropped the lock.
    pub(crate) fn take(srq: &Srq<Rrxe>, buf: &mut [u8]) -> bool {
        Self::take_if(srq, buf, |_| true)
    }

    /// [`RrxeSrq::take`], if `accept` accepts the WQE read into `buf`
    /// (else it stays first in the SRQ): a UD datagram for on-demand
    /// memory not mapped yet leaves it for the next one.
    pub(crate) fn take_if(
        srq: &Srq<Rrxe>,
        buf: &mut [u8],
        accept: impl FnOnce(&[u8]) -> bool,
    ) -> bool {
        let mut st = srq.state.lock();
        let c = st.rq.consumer();
        if st.rq.geo.is_empty(st.rq.producer(), c) {
            return false;
        }
        if st.rq.read_slot(c, buf).is_err() || !accept(buf) {
            return false;
        }
        st.rq.advance();
        if st.limit != 0 && st.rq.count() < st.limit && srq.has_event_handler() {
            st.limit = 0;
            srq.limit_event.store(true, Relaxed);
        }
        true
    }

    /// Reports a pending `IB_EVENT_SRQ_LIMIT_REACHED` to the consumer, once.
    ///
    /// Called without locks: the consumer's handler may re-arm the limit
    /// (`ib_modify_srq`, which takes the SRQ's lock) or use its QPs.
    pub(crate) fn report_limit(srq: &Srq<Rrxe>) {
        if srq.limit_event.xchg(false, Relaxed) {
            srq.report_limit_reached();
        }
    }

    /// Frees the SRQ number.
    pub(crate) fn destroy(srq: &Srq<Rrxe>) -> Result {
        srq.device().srq_pool.free(srq.srq_num);
        Ok(())
    }
}
