// SPDX-License-Identifier: GPL-2.0

//! Queue pairs (`struct ib_qp`).
//!
//! C header: [`include/rdma/ib_verbs.h`](srctree/include/rdma/ib_verbs.h)

use crate::{
    bindings,
    net::{
        skbuff::{
            xmit_udp_charged,
            TxCredit,
            TxOwner, //
        },
        Namespace,
        SkBuff, //
    },
    rdma::{
        cq::Cq,
        device::{
            Device,
            Driver, //
        },
        object::rdma_object,
        srq::Srq,
        table::Liveness,
        timer::Timer,
        udata::Udata,
        Gid, //
    },
};
use core::marker::PhantomData;
use kernel::{
    error::{
        from_result,
        to_result, //
    },
    prelude::*,
    sync::atomic::{
        Atomic,
        Relaxed, //
    },
    types::Opaque, //
};

pub use crate::rdma::ah::Av;

mod attr;
mod wr;

pub use attr::{
    modify_is_ok,
    QpAttr,
    QpAttrBit,
    QpAttrMask,
    QpCap,
    QpInitAttr,
    QpState,
    QpType, //
};
pub(crate) use wr::post_recv_list;
pub use wr::{
    flush,
    wr_opcode,
    AtomicArgs,
    RdmaArgs,
    RecvWr,
    RegArgs,
    SendFlag,
    SendFlags,
    SendWr,
    Sge,
    UdArgs,
    QKEY_USE_QP, //
};

/// An asynchronous event of a QP (`enum ib_event_type`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u32)]
pub enum QpEvent {
    /// `IB_EVENT_QP_LAST_WQE_REACHED`: a QP that receives from an SRQ
    /// entered the error state and takes no more WQEs from it (IBTA Vol 1
    /// §10.3.1, §11.6.3).
    LastWqeReached = bindings::ib_event_type_IB_EVENT_QP_LAST_WQE_REACHED,
    /// `IB_EVENT_SQ_DRAINED`: a QP moved to SQD has no message of its send
    /// queue in progress any more (§10.3.1, §11.6.3).
    SqDrained = bindings::ib_event_type_IB_EVENT_SQ_DRAINED,
    /// `IB_EVENT_QP_ACCESS_ERR`: the responder met an access violation it
    /// cannot report in a receive completion (§11.6.3, C9-222.1).
    AccessErr = bindings::ib_event_type_IB_EVENT_QP_ACCESS_ERR,
}

/// The timers of a QP ([`Qp::arm_timer`]).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum QpTimer {
    /// The requester's transport timer (local ACK timeout, IBTA Vol 1
    /// §9.7.6.1.3).
    Retransmit,
    /// The requester's wait after an RNR NAK (IBTA Vol 1 §9.7.5.2.8).
    Rnr,
}

/// A queue pair of a device of driver `T`, with the driver's state in place.
///
/// The RDMA core allocates it (`size_ib_qp`, zeroed); the abstraction adds
/// a reference count, so that [`Device::lookup_qp`] can hand out
/// `ARef<Qp<T>>`, and two timers.
///
/// # Invariants
///
/// - `ib` is at offset 0 and is a valid `struct ib_qp` of a device of driver
///   `T` while a reference to `Self` exists.
/// - `live` and the timers are initialised and `data` is initialised while a
///   reference to `Self` exists; the timers are shut down before `data` is
///   dropped.
/// - The memory is not freed before the count of `live` reached zero.
#[repr(C)]
pub struct Qp<T: Driver> {
    ib: Opaque<bindings::ib_qp>,
    live: Liveness,
    /// Set when destruction begins.
    dying: Atomic<bool>,
    retransmit_timer: Timer,
    rnr_timer: Timer,
    /// The kick ([`Qp::kick`]); while queued it owns a reference.
    kick_work: Opaque<bindings::work_struct>,
    /// Work that may sleep ([`Qp::queue_sleepable`]); while queued it owns
    /// a reference.
    sleep_work: Opaque<bindings::work_struct>,
    /// Transmit credit of the QP's packets ([`Qp::xmit`]).
    tx_credit: TxCredit,
    data: T::QpData,
}

// SAFETY: The C part is synchronised by the RDMA core; the data is `Send`.
unsafe impl<T: Driver> Send for Qp<T> {}
// SAFETY: The data is `Sync`; the C fields read through `&self` are constant after creation.
unsafe impl<T: Driver> Sync for Qp<T> {}

rdma_object!(Qp: ib_qp => QpData, in_place, from_raw, counted);

/// The QP being created, before its driver state exists.
pub struct NewQp<T: Driver>(*mut bindings::ib_qp, core::marker::PhantomData<T>);

impl<T: Driver> NewQp<T> {
    /// The device.
    pub fn device(&self) -> &Device<T> {
        // SAFETY: `device` is set by the RDMA core before `create_qp`.
        unsafe { Device::from_raw((*self.0).device) }
    }

    /// The send CQ.
    pub fn send_cq(&self) -> Option<&Cq<T>> {
        // SAFETY: Set by the RDMA core from the init attributes; a CQ of our device, alive while
        // the QP holds its use count.
        unsafe {
            (*self.0)
                .send_cq
                .as_ref()
                .map(|c| Cq::from_raw(core::ptr::from_ref(c).cast_mut()))
        }
    }

    /// The receive CQ.
    pub fn recv_cq(&self) -> Option<&Cq<T>> {
        // SAFETY: As for `send_cq`.
        unsafe {
            (*self.0)
                .recv_cq
                .as_ref()
                .map(|c| Cq::from_raw(core::ptr::from_ref(c).cast_mut()))
        }
    }
}

impl<T: Driver> Qp<T> {
    /// The QP number.
    pub fn qp_num(&self) -> u32 {
        // SAFETY: Constant after creation.
        unsafe { (*self.ib.get()).qp_num }
    }

    /// The QP type.
    pub fn qp_type(&self) -> QpType {
        // The fallback is never taken: a driver refuses to create a QP
        // whose type `QpType` does not name (`QpInitAttr::qp_type`). What
        // memory safety rests on reads the C value instead
        // (`SendWr::is_datagram`).
        QpType::from_raw(self.raw_qp_type()).unwrap_or(QpType::Ud)
    }

    /// `enum ib_qp_type` as the RDMA core holds it.
    fn raw_qp_type(&self) -> u32 {
        // SAFETY: Constant after creation.
        unsafe { (*self.ib.get()).qp_type }
    }

    /// Whether the QP belongs to user space.
    pub fn is_user(&self) -> bool {
        // SAFETY: Constant after creation.
        unsafe { !(*self.ib.get()).uobject.is_null() }
    }

    /// Address of the C QP, for kernel work completions.
    pub fn wc_qp(&self) -> usize {
        self.ib.get() as usize
    }

    /// The send CQ.
    pub fn send_cq(&self) -> &Cq<T> {
        // SAFETY: A QP always has a send CQ of our device (checked at creation); it outlives the
        // QP (the core holds a use count).
        unsafe { Cq::from_raw((*self.ib.get()).send_cq) }
    }

    /// The receive CQ.
    pub fn recv_cq(&self) -> &Cq<T> {
        // SAFETY: As for `send_cq`.
        unsafe { Cq::from_raw((*self.ib.get()).recv_cq) }
    }

    /// Identity of the PD, to compare with a memory region's
    /// ([`crate::rdma::mr::Mr::pd_id`]).
    pub fn pd_id(&self) -> usize {
        // SAFETY: Set by the RDMA core before `create_qp`; constant afterwards.
        unsafe { (*self.ib.get()).pd as usize }
    }

    /// Whether the QP receives from an SRQ.
    pub fn has_srq(&self) -> bool {
        // SAFETY: Set by the RDMA core before `create_qp`; constant afterwards.
        unsafe { !(*self.ib.get()).srq.is_null() }
    }

    /// The SRQ the QP receives from, if any.
    pub fn srq(&self) -> Option<&Srq<T>> {
        // SAFETY: Constant after creation.
        let srq = unsafe { (*self.ib.get()).srq };
        if srq.is_null() {
            return None;
        }
        // SAFETY: An SRQ of our device; the RDMA core keeps it alive while the QP exists (it
        // holds a use count).
        Some(unsafe { Srq::from_raw(srq) })
    }

    /// Reports an asynchronous event of the QP to its event handler. The
    /// RDMA core's handler passes it on to the consumer's (uverbs queues it
    /// for user space; `ib_drain_qp` waits for Last WQE Reached).
    ///
    /// The handler runs in the caller's context, which may be softirq, so
    /// it must be called without any lock that the QP's verbs take.
    pub fn report_event(&self, event: QpEvent) {
        let ib = self.ib.get();
        // SAFETY: The RDMA core sets `event_handler` (its own, for every QP it creates) and
        // `qp_context` before `create_qp`, and neither changes afterwards.
        let (handler, context) = unsafe { ((*ib).event_handler, (*ib).qp_context) };
        let Some(handler) = handler else {
            return;
        };
        let mut ev = bindings::ib_event {
            // SAFETY: `device` is set by the RDMA core before `create_qp` and constant.
            device: unsafe { (*ib).device },
            element: bindings::ib_event__bindgen_ty_1::default(),
            event: event as bindings::ib_event_type,
        };
        // SAFETY: Writing a pointer member of a union the event owns.
        unsafe { *ev.element.qp.as_mut() = ib };
        // SAFETY: The handler is the RDMA core's and `context` the one it was set up with, for
        // events of this QP, which the caller's reference keeps alive for the call; `ev` is
        // valid for the call.
        unsafe { handler(&mut ev, context) };
    }

    /// Whether destruction has begun: the QP is no longer found by
    /// [`Device::lookup_qp`] and its timers no longer fire. Work that
    /// requeues itself should stop.
    pub fn is_dying(&self) -> bool {
        self.dying.load(Relaxed)
    }

    fn timer(&self, t: QpTimer) -> &Timer {
        match t {
            QpTimer::Retransmit => &self.retransmit_timer,
            QpTimer::Rnr => &self.rnr_timer,
        }
    }

    /// (Re)arms `t` to fire once after `usecs` microseconds (at least the
    /// next tick); [`Driver::qp_timer`] is then called in softirq. Any
    /// context. A no-op once destruction began.
    pub fn arm_timer(&self, t: QpTimer, usecs: u64) {
        self.timer(t).arm_usecs(usecs);
    }

    /// Disarms `t`; a callback already running is not waited for. Any
    /// context.
    pub fn cancel_timer(&self, t: QpTimer) {
        self.timer(t).cancel();
    }

    /// Has [`Driver::qp_kick`] called soon in softirq (on the BH
    /// workqueue), e.g. to transmit what was built in a context that cannot
    /// (interrupts disabled). Queued at most once at a time. Any context.
    /// A no-op once destruction began.
    pub fn kick(&self) {
        // SAFETY: `kick_work` was initialised by `setup_timers`.
        unsafe { self.queue_owning(&self.kick_work, bindings::queue_bh_work) };
    }

    /// Queues `work` with `queue` unless destruction began; while queued,
    /// the work owns a reference to the QP, which its callback drops.
    ///
    /// # Safety
    ///
    /// `work` is a work item of `self` initialised by `setup_timers`, whose
    /// callback drops the reference.
    unsafe fn queue_owning(
        &self,
        work: &Opaque<bindings::work_struct>,
        queue: unsafe extern "C" fn(*mut bindings::work_struct) -> bool,
    ) {
        if self.is_dying() {
            return;
        }
        // The queued work owns a reference: destruction waits for it. The caller's `&self`
        // comes with a reference, so the count is not zero.
        self.live.get();
        // SAFETY: `work` is initialised by the safety requirements.
        if !unsafe { queue(work.get()) } {
            // Already queued, with its own reference.
            // SAFETY: We own the reference taken above; the caller's keeps `self` alive.
            unsafe { Liveness::put(&raw const self.live) };
        }
    }

    /// Has [`Driver::qp_sleepable`] called soon in process context (on an
    /// unbound workqueue), for what may sleep, e.g. faulting in the pages
    /// of on-demand memory. Queued at most once at a time. Any context. A
    /// no-op once destruction began.
    pub fn queue_sleepable(&self) {
        // SAFETY: `sleep_work` was initialised by `setup_timers`.
        unsafe { self.queue_owning(&self.sleep_work, bindings::queue_unbound_work) };
    }

    /// The QP's transmit credit: how many of its packets are in the IP
    /// stack ([`TxCredit::in_flight`]), and whether a producer may build
    /// more ([`TxCredit::may_send`]).
    pub fn tx_credit(&self) -> &TxCredit {
        &self.tx_credit
    }

    /// Hands `skb` to the IP stack in `net`, charged to the QP's transmit
    /// credit until the stack frees it ([`xmit_udp_charged`]). When credit
    /// comes back after [`TxCredit::may_send`] refused, the QP is kicked
    /// ([`Qp::kick`]).
    ///
    /// # Errors
    ///
    /// As [`xmit_udp_charged`].
    pub fn xmit(&self, net: &Namespace, skb: SkBuff) -> Result {
        xmit_udp_charged(net, skb, self)
    }

    /// Sets up the timers.
    ///
    /// # Safety
    ///
    /// `this` is a QP whose timers are not set up or were shut down; it does
    /// not move until they are shut down again.
    unsafe fn setup_timers(this: *mut Self) {
        // SAFETY: By the safety requirements; the callbacks find the QP from the timers.
        unsafe {
            Timer::setup(&raw mut (*this).retransmit_timer, Self::retransmit_callback);
            Timer::setup(&raw mut (*this).rnr_timer, Self::rnr_callback);
            bindings::init_work(
                Opaque::cast_into(&raw const (*this).kick_work),
                Some(Self::kick_callback),
            );
            bindings::init_sleepable_work(
                Opaque::cast_into(&raw const (*this).sleep_work),
                Some(Self::sleep_callback),
            );
        }
    }

    /// Shuts the timers down and waits for running callbacks; arming them
    /// is a no-op afterwards. Sleeps.
    fn shutdown_timers(&self) {
        self.retransmit_timer.shutdown_sync();
        self.rnr_timer.shutdown_sync();
        // `dying` is set: no new kick is queued. A cancelled kick drops the reference it owned.
        // SAFETY: `kick_work` was initialised by `setup_timers`.
        if unsafe { bindings::cancel_work_sync(self.kick_work.get()) } {
            // SAFETY: The cancelled work owned this reference; ours keeps `self` alive.
            unsafe { Liveness::put(&raw const self.live) };
        }
        // SAFETY: `sleep_work` was initialised by `setup_timers`.
        if unsafe { bindings::cancel_work_sync(self.sleep_work.get()) } {
            // SAFETY: As for the kick.
            unsafe { Liveness::put(&raw const self.live) };
        }
    }

    /// Expiry of the retransmit timer.
    ///
    /// # Safety
    ///
    /// Called by the timer core with the `retransmit_timer` of a `Qp<T>`, set
    /// up by `setup_timers` and not yet shut down.
    unsafe extern "C" fn retransmit_callback(t: *mut bindings::timer_list) {
        // CAST: `Timer` is a transparent wrapper of `timer_list`.
        // SAFETY: `t` is the `retransmit_timer` of a `Qp<T>` by the safety requirements; its
        // data is initialised and it stays alive until the timers are shut down, which waits
        // for this callback.
        let qp = unsafe { &*kernel::container_of!(t.cast::<Timer>(), Self, retransmit_timer) };
        T::qp_timer(qp, QpTimer::Retransmit);
    }

    /// Expiry of the RNR timer.
    ///
    /// # Safety
    ///
    /// As for `retransmit_callback`, with the `rnr_timer`.
    unsafe extern "C" fn rnr_callback(t: *mut bindings::timer_list) {
        // CAST: `Timer` is a transparent wrapper of `timer_list`.
        // SAFETY: As in `retransmit_callback`.
        let qp = unsafe { &*kernel::container_of!(t.cast::<Timer>(), Self, rnr_timer) };
        T::qp_timer(qp, QpTimer::Rnr);
    }

    /// `attach_mcast` callback.
    ///
    /// # Safety
    ///
    /// Called by `ib_core` for a live QP with a valid GID.
    pub(crate) unsafe extern "C" fn attach_mcast_callback(
        ptr: *mut bindings::ib_qp,
        gid: *mut bindings::ib_gid,
        _lid: u16,
    ) -> c_int {
        from_result(|| {
            // SAFETY: By the safety requirements.
            let qp = unsafe { Self::from_raw(ptr) };
            // SAFETY: `gid` is valid for the call; every bit pattern is a valid `[u8; 16]`.
            let mgid = Gid(unsafe { *(*gid).raw.as_ref() });
            T::attach_mcast(qp, &mgid)?;
            Ok(0)
        })
    }

    /// `detach_mcast` callback.
    ///
    /// # Safety
    ///
    /// As for `attach_mcast_callback`.
    pub(crate) unsafe extern "C" fn detach_mcast_callback(
        ptr: *mut bindings::ib_qp,
        gid: *mut bindings::ib_gid,
        _lid: u16,
    ) -> c_int {
        from_result(|| {
            // SAFETY: By the safety requirements.
            let qp = unsafe { Self::from_raw(ptr) };
            // SAFETY: As in `attach_mcast_callback`.
            let mgid = Gid(unsafe { *(*gid).raw.as_ref() });
            T::detach_mcast(qp, &mgid)?;
            Ok(0)
        })
    }

    /// The kick work ran.
    ///
    /// # Safety
    ///
    /// Called by the workqueue with the `kick_work` of a `Qp<T>` queued by
    /// [`Qp::kick`], which owns a reference.
    unsafe extern "C" fn kick_callback(w: *mut bindings::work_struct) {
        // SAFETY: `w` is the `kick_work` of a `Qp<T>`, kept alive by the work's reference.
        let qp = unsafe { &*kernel::container_of!(Opaque::cast_from(w), Self, kick_work) };
        T::qp_kick(qp);
        // SAFETY: The work owned this reference; `qp` is not used afterwards.
        unsafe { Liveness::put(&raw const qp.live) };
    }

    /// The sleepable work ran.
    ///
    /// # Safety
    ///
    /// Called by the workqueue with the `sleep_work` of a `Qp<T>` queued by
    /// [`Qp::queue_sleepable`], which owns a reference.
    unsafe extern "C" fn sleep_callback(w: *mut bindings::work_struct) {
        // SAFETY: `w` is the `sleep_work` of a `Qp<T>`, kept alive by the work's reference.
        let qp = unsafe { &*kernel::container_of!(Opaque::cast_from(w), Self, sleep_work) };
        T::qp_sleepable(qp);
        // SAFETY: The work owned this reference; `qp` is not used afterwards.
        unsafe { Liveness::put(&raw const qp.live) };
    }

    /// Unpublishes the QP and shuts its timers down: the first steps of
    /// destruction.
    fn unpublish(&self) {
        self.dying.store(true, Relaxed);
        self.device().qps.remove(self.qp_num(), self);
        self.shutdown_timers();
    }

    /// Undoes `unpublish` after the driver refused the destruction.
    ///
    /// # Safety
    ///
    /// `this` is a live QP after `unpublish`, still holding its initial
    /// reference.
    unsafe fn republish(this: *mut Self) {
        // SAFETY: The timers were shut down by `unpublish`; the QP does not move.
        unsafe { Self::setup_timers(this) };
        // SAFETY: Valid by the safety requirements.
        let qp = unsafe { &*this };
        qp.dying.store(false, Relaxed);
        // SAFETY: The QP holds its initial reference and is removed again before it is dropped.
        if unsafe { qp.device().qps.insert(qp.qp_num(), this) }.is_err() {
            pr_warn!(
                "rdma: QP {} stays unreachable after a failed destroy\n",
                qp.qp_num()
            );
        }
        // `unpublish` may have cancelled a queued kick (a UD WQE waiting for
        // its route, a bounded run's continuation), and the timers were shut
        // down whether armed or not: one kick lets the driver look at the
        // QP again and re-arm what it still needs (review suspicion S3).
        qp.kick();
    }

    /// The last steps of destruction, after the driver's: waits for the
    /// other references and drops the driver's state.
    ///
    /// # Safety
    ///
    /// `this` is a QP after `unpublish` and a successful `T::destroy_qp`;
    /// nothing uses it afterwards except the RDMA core, which frees it.
    unsafe fn finish_destroy(this: *mut Self) {
        // Packets still in the IP stack hold the credit's shared state, not the QP: from here
        // their destructors wake nobody, so the wait below is not for them (a qdisc may hold
        // them for seconds). The initial reference is still held, so a wake that was under way
        // has taken the kick's reference, which the wait covers.
        // SAFETY: The QP is valid for the call.
        unsafe { (*this).tx_credit.detach() };
        // SAFETY: We own the initial reference; the QP stays valid for the call.
        unsafe { (*this).live.put_initial_and_wait() };
        // SAFETY: No reference is left and the timers are shut down; dropped only here. The
        // credit no longer names the QP, and its drop leaves the shared state and the socket's
        // `struct sock` to the packets in flight.
        unsafe {
            Self::drop_data(this);
            core::ptr::drop_in_place(&raw mut (*this).tx_credit);
        }
    }

    /// `create_qp` callback.
    ///
    /// # Safety
    ///
    /// Called by `ib_core` with a fresh, zeroed QP of a device of driver `T`.
    pub(crate) unsafe extern "C" fn create_callback(
        ptr: *mut bindings::ib_qp,
        init: *mut bindings::ib_qp_init_attr,
        udata: *mut bindings::ib_udata,
    ) -> c_int {
        from_result(|| {
            // SAFETY: `init` is valid for the call.
            let ia = unsafe { &mut *init };
            let mut attr = QpInitAttr {
                qp_type: QpType::from_raw(ia.qp_type),
                cap: QpCap::from_raw(&ia.cap),
                sq_sig_all: ia.sq_sig_type == bindings::ib_sig_type_IB_SIGNAL_ALL_WR,
                create_flags: ia.create_flags,
                port_num: ia.port_num,
                has_cqs: !ia.send_cq.is_null() && !ia.recv_cq.is_null(),
                has_srq: !ia.srq.is_null(),
            };
            let new = NewQp::<T>(ptr, core::marker::PhantomData);
            // SAFETY: `udata` is NULL or valid for the call.
            let udata = unsafe { Udata::from_raw(udata) };
            // Allocated before the driver's `create_qp`, whose side effects (a QPN, counts
            // on the CQs) only its `destroy_qp` undoes: nothing after it may fail but its
            // own initialiser.
            let credit = TxCredit::new()?;
            let (dinit, qp_num) = T::create_qp(&new, &mut attr, udata)?;
            let this = Self::container(ptr);
            // SAFETY: `live`, `dying` and the timers are zeroed memory inside the allocation,
            // which does not move until `ib_core` frees it. Nothing of these needs undoing if a
            // later step fails: the count is only waited on by `destroy_callback` and the timers
            // are not armed before the QP is handed out.
            unsafe {
                let Ok(()) = Liveness::new().__pinned_init(&raw mut (*this).live);
                (&raw mut (*this).dying).write(Atomic::new(false));
                Self::setup_timers(this);
            }
            // SAFETY: `tx_credit` is uninitialised memory inside the allocation.
            unsafe { (&raw mut (*this).tx_credit).write(credit) };
            // SAFETY: `data` is uninitialised memory inside the allocation; on error `ib_core`
            // frees it without calling `destroy_callback`, so the credit is dropped here.
            if let Err(e) = unsafe { dinit.__pinned_init(&raw mut (*this).data) } {
                // SAFETY: Written above; nothing else refers to it.
                unsafe { core::ptr::drop_in_place(&raw mut (*this).tx_credit) };
                return Err(e);
            }
            // SAFETY: No one else uses the new QP yet.
            unsafe { (*ptr).qp_num = qp_num };
            attr.cap.write_raw(&mut ia.cap);
            // SAFETY: The QP is fully initialised.
            let qp = unsafe { Self::from_raw(ptr) };
            // INVARIANT: A fresh credit binds (only) to its QP, before any packet is sent.
            // SAFETY: The QP does not move (`ib_core` allocated it) and stays valid, its kick
            // callable, until `finish_destroy` detaches the credit, or the error paths below
            // drop it, before the memory goes.
            if let Err(e) = unsafe { qp.tx_credit.bind(qp) } {
                // Cannot happen for a fresh credit; undone as a failed creation.
                // SAFETY: Initialised above, not published; dropped once, here.
                unsafe {
                    Self::drop_data(this);
                    core::ptr::drop_in_place(&raw mut (*this).tx_credit);
                }
                return Err(e);
            }
            // SAFETY: The QP holds its initial reference; `destroy_callback` removes it before
            // dropping that reference, and `ib_core` frees the memory only after that.
            if let Err(e) = unsafe { qp.device().qps.insert(qp_num, this) } {
                // Another QP with this number (a driver bug) or no memory: undo as a destroy.
                qp.unpublish();
                if T::destroy_qp(qp).is_err() {
                    pr_warn!("rdma: destroying an unpublished QP {} failed\n", qp_num);
                }
                // SAFETY: Destroyed above; `ib_core` frees the memory without another callback.
                unsafe { Self::finish_destroy(this) };
                return Err(e);
            }
            Ok(0)
        })
    }

    /// `modify_qp` callback.
    ///
    /// # Safety
    ///
    /// Called by `ib_core` for a live QP.
    pub(crate) unsafe extern "C" fn modify_callback(
        ptr: *mut bindings::ib_qp,
        attr: *mut bindings::ib_qp_attr,
        m: c_int,
        udata: *mut bindings::ib_udata,
    ) -> c_int {
        from_result(|| {
            // SAFETY: By the safety requirements.
            let qp = unsafe { Self::from_raw(ptr) };
            // SAFETY: `attr` is valid for the call.
            let a = QpAttr::from_raw(unsafe { &*attr });
            // SAFETY: `udata` is NULL or valid for the call.
            let udata = unsafe { Udata::from_raw(udata) };
            T::modify_qp(qp, &a, QpAttrMask::from_raw(m as u32), udata)?;
            Ok(0)
        })
    }

    /// `query_qp` callback.
    ///
    /// # Safety
    ///
    /// Called by `ib_core` for a live QP with valid output structs.
    pub(crate) unsafe extern "C" fn query_callback(
        ptr: *mut bindings::ib_qp,
        attr: *mut bindings::ib_qp_attr,
        _m: c_int,
        init: *mut bindings::ib_qp_init_attr,
    ) -> c_int {
        from_result(|| {
            // SAFETY: By the safety requirements.
            let qp = unsafe { Self::from_raw(ptr) };
            let (a, sq_sig_all) = T::query_qp(qp)?;
            // SAFETY: `attr` and `init` are valid for writes for the call; the init attributes
            // were zeroed by the caller.
            unsafe {
                core::ptr::write(attr, a.to_raw());
                let ia = &mut *init;
                ia.send_cq = (*ptr).send_cq;
                ia.recv_cq = (*ptr).recv_cq;
                ia.srq = (*ptr).srq;
                ia.qp_type = (*ptr).qp_type;
                ia.cap = core::ptr::read(&(*attr).cap);
                ia.sq_sig_type = if sq_sig_all {
                    bindings::ib_sig_type_IB_SIGNAL_ALL_WR
                } else {
                    bindings::ib_sig_type_IB_SIGNAL_REQ_WR
                };
            }
            Ok(0)
        })
    }

    /// `fill_res_qp_entry` callback.
    ///
    /// # Safety
    ///
    /// Called by `ib_core`'s netlink code, in process context, for a live QP
    /// and a message being built.
    pub(crate) unsafe extern "C" fn fill_res_entry_callback(
        msg: *mut bindings::sk_buff,
        ptr: *mut bindings::ib_qp,
    ) -> c_int {
        from_result(|| {
            // SAFETY: By the safety requirements.
            let qp = unsafe { Self::from_raw(ptr) };
            // The details go in one `RDMA_NLDEV_ATTR_DRIVER` nest.
            // SAFETY: `msg` is the message being built, valid for the call.
            let nest = unsafe {
                bindings::nla_nest_start(
                    msg,
                    bindings::rdma_nldev_attr_RDMA_NLDEV_ATTR_DRIVER as c_int,
                )
            };
            if nest.is_null() {
                return Err(EMSGSIZE);
            }
            let mut out = ResDetails {
                msg,
                _p: PhantomData,
            };
            let r = T::fill_res_qp_entry(qp, &mut out);
            // SAFETY: `nest` was opened in `msg` above and nothing after it
            // was closed.
            unsafe {
                match r {
                    Ok(()) => bindings::nla_nest_end(msg, nest),
                    Err(_) => bindings::nla_nest_cancel(msg, nest),
                }
            }
            r?;
            Ok(0)
        })
    }

    /// `destroy_qp` callback.
    ///
    /// # Safety
    ///
    /// Called by `ib_core` once for a QP whose creation succeeded.
    pub(crate) unsafe extern "C" fn destroy_callback(
        ptr: *mut bindings::ib_qp,
        _udata: *mut bindings::ib_udata,
    ) -> c_int {
        from_result(|| {
            let this = Self::container(ptr);
            // SAFETY: By the safety requirements.
            let qp = unsafe { Self::from_raw(ptr) };
            // Order: no new lookups and no timers, then the driver (which may refuse and frees
            // the QPN), then wait for references held elsewhere, then drop the state.
            qp.unpublish();
            if let Err(e) = T::destroy_qp(qp) {
                // SAFETY: After `unpublish`, with the initial reference.
                unsafe { Self::republish(this) };
                return Err(e);
            }
            // SAFETY: Destroyed above; `ib_core` frees the QP after we return.
            unsafe { Self::finish_destroy(this) };
            Ok(0)
        })
    }

    /// `post_send` callback.
    ///
    /// # Safety
    ///
    /// Called by `ib_core` for a live QP; `wr` is NULL (user doorbell) or a
    /// valid list; `bad` is valid for writes when `wr` is not NULL.
    pub(crate) unsafe extern "C" fn post_send_callback(
        ptr: *mut bindings::ib_qp,
        wr: *const bindings::ib_send_wr,
        bad: *mut *const bindings::ib_send_wr,
    ) -> c_int {
        // SAFETY: By the safety requirements.
        let qp = unsafe { Self::from_raw(ptr) };
        let mut cur = wr;
        // A list for a user QP comes from the uverbs `POST_SEND` command with addresses user
        // space chose: never act on it, ring the doorbell instead (as `rxe_post_send` does).
        if cur.is_null() || qp.is_user() {
            return from_result(|| T::post_send(qp, None).map(|()| 0));
        }
        // Read from the C value, not `qp_type()`'s fallback: whether `ud()`
        // may read the WR as an `ib_ud_wr` must not rest on a driver.
        let datagram = QpType::from_raw(qp.raw_qp_type()).is_some_and(QpType::is_datagram);
        let dev = qp.device();
        while !cur.is_null() {
            // SAFETY: A valid element of the list, not posted yet.
            let w = unsafe { &*cur };
            // Once `w` is posted its completion may run, on another CPU or in an interrupt on
            // this one, before `post_send` returns, and the consumer may free the WR with its
            // container there (SMB Direct frees its send I/O in its completion handler): the
            // link to the next WR is read before, and `w` not touched after.
            let next = w.next;
            // INVARIANT: A kernel consumer posted `w` to this kernel QP; the consumer keeps it,
            // its container and its SGEs valid at least until it is queued.
            let s = SendWr {
                wr: w,
                datagram,
                dev,
            };
            if let Err(e) = T::post_send(qp, Some(&s)) {
                if !bad.is_null() {
                    // SAFETY: `bad` is valid for writes.
                    unsafe { *bad = cur };
                }
                return e.to_errno();
            }
            cur = next;
        }
        0
    }

    /// `post_recv` callback.
    ///
    /// # Safety
    ///
    /// Called by `ib_core` for a live QP with a valid list; `bad` is valid
    /// for writes.
    pub(crate) unsafe extern "C" fn post_recv_callback(
        ptr: *mut bindings::ib_qp,
        wr: *const bindings::ib_recv_wr,
        bad: *mut *const bindings::ib_recv_wr,
    ) -> c_int {
        // SAFETY: By the safety requirements.
        let qp = unsafe { Self::from_raw(ptr) };
        // SAFETY: The RDMA core passes a valid list and a `bad` valid for writes.
        unsafe { post_recv_list(wr, bad, |r| T::post_recv(qp, r)) }
    }
}

impl<T: Driver> TxOwner for Qp<T> {
    fn tx_credit(&self) -> &TxCredit {
        &self.tx_credit
    }

    fn tx_wake(&self) {
        // Queues work holding its own reference (a no-op once destruction began): any context.
        // Called only before `finish_destroy` detached the credit, so the initial reference is
        // still held and the count is not zero.
        self.kick();
    }
}

/// The driver-specific attributes of a resource-tracking netlink answer
/// (`RDMA_NLDEV_ATTR_DRIVER`), which `rdma res show ... -dd` prints as
/// `name value` pairs.
pub struct ResDetails<'a> {
    msg: *mut bindings::sk_buff,
    _p: PhantomData<&'a mut bindings::sk_buff>,
}

impl ResDetails<'_> {
    /// Adds `name` with the decimal value `v`.
    pub fn put_u32(&mut self, name: &CStr, v: u32) -> Result {
        // SAFETY: `msg` is the message being built for the call that made
        // `self`; `name` is a NUL-terminated string.
        to_result(unsafe { bindings::rdma_nl_put_driver_u32(self.msg, name.as_char_ptr(), v) })
    }

    /// Adds `name` with the value `v`, shown in hexadecimal.
    pub fn put_u32_hex(&mut self, name: &CStr, v: u32) -> Result {
        // SAFETY: As in `put_u32`.
        to_result(unsafe { bindings::rdma_nl_put_driver_u32_hex(self.msg, name.as_char_ptr(), v) })
    }

    /// Adds `name` with the decimal value `v`.
    pub fn put_u64(&mut self, name: &CStr, v: u64) -> Result {
        // SAFETY: As in `put_u32`.
        to_result(unsafe { bindings::rdma_nl_put_driver_u64(self.msg, name.as_char_ptr(), v) })
    }
}
