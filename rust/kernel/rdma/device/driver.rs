// SPDX-License-Identifier: GPL-2.0

//! The provider trait: the device operations and the types of the state a
//! driver keeps in objects the RDMA core allocates.

use super::{
    Device,
    Devices, //
};
use crate::rdma::{
    access::AccessFlags,
    ah::{
        Ah,
        AhAttr, //
    },
    attr::{
        DeviceAttr,
        DeviceModify, //
    },
    counter::CounterGuard,
    cq::{
        Cq,
        CqInitAttr,
        NotifyFlags, //
    },
    hw_counters::StatDesc,
    mad::{
        MadResult,
        MAD_SIZE, //
    },
    mr::{
        AdviseSge,
        Mr,
        MrKeys,
        ReregArgs,
        SgList,
        UserMrArgs, //
    },
    mw::Mw,
    pd::Pd,
    port::{
        LinkLayer,
        PortAttr,
        PortImmutable,
        PortModify, //
    },
    qp::{
        NewQp,
        Qp,
        QpAttr,
        QpAttrMask,
        QpInitAttr,
        QpTimer,
        RecvWr,
        ResDetails,
        SendWr, //
    },
    srq::{
        Srq,
        SrqAttr, //
    },
    ucontext::Ucontext,
    udata::Udata,
    wc::Wc,
    DriverId,
    Gid, //
};
use kernel::{
    error::VTABLE_DEFAULT_ERROR,
    prelude::*,
    ThisModule, //
};

/// The body of a default method that returns an initialiser of `D` with a
/// `K`: `build_error!` fails the build if the default is ever used, and
/// `Result<D>` gives the initialiser a concrete type.
fn default_init<D, K>() -> Result<(Result<D>, K)> {
    build_error!(VTABLE_DEFAULT_ERROR)
}

/// A provider driver: the device operations and the types of the state it
/// keeps in objects the RDMA core allocates.
///
/// Every method receives the device it is called for. Optional methods that a
/// driver does not implement leave the corresponding `ib_device_ops` entry
/// NULL, and the RDMA core treats the operation as unsupported.
#[vtable]
pub trait Driver: Sized + 'static {
    /// Per-device state, stored in the `struct ib_device` allocation.
    type Data: Send + Sync;
    /// Per-user-context state, stored in the `struct ib_ucontext` allocation.
    type UcontextData: Send + Sync;
    /// Per-protection-domain state, stored in the `struct ib_pd` allocation.
    type PdData: Send + Sync;

    /// Per-completion-queue state, stored in the `struct ib_cq` allocation.
    type CqData: Send + Sync;

    /// Per-memory-region state.
    type MrData: Send + Sync;

    /// Per-QP state, stored in the `struct ib_qp` allocation.
    type QpData: Send + Sync;

    /// Per-SRQ state, stored in the `struct ib_srq` allocation.
    type SrqData: Send + Sync;

    /// Per-address-handle state, stored in the `struct ib_ah` allocation.
    type AhData: Send + Sync;

    /// Per-memory-window state, stored in the `struct ib_mw` allocation.
    type MwData: Send + Sync;

    /// Per-QP-counter state, stored in the `struct rdma_counter` allocation
    /// ([`Counter`](crate::rdma::counter::Counter)); starts as its default.
    type CounterData: Default + Send;

    /// The driver id user space matches its provider on.
    const DRIVER_ID: DriverId;
    /// Version of the driver's uverbs ABI (the provider library checks it).
    const UVERBS_ABI_VER: u32;
    /// The module that implements the driver (`THIS_MODULE`).
    const OWNER: &'static ThisModule;
    /// Whether the device has the sysfs attribute `parent`, the name of the
    /// net device of port 1, as the C software drivers (`rdma_rxe`, `siw`).
    const SYSFS_PARENT: bool = false;

    /// The list of the driver's devices: a `static` of the driver.
    fn devices() -> &'static Devices<Self>;

    /// Reports the device attributes.
    ///
    /// `udata` is `None` for kernel callers.
    fn query_device(dev: &Device<Self>, udata: Option<&Udata>) -> Result<DeviceAttr>;

    /// Reports the attributes of port `port` (numbered from 1).
    fn query_port(dev: &Device<Self>, port: u32) -> Result<PortAttr>;

    /// Reports the immutable attributes of port `port`.
    fn get_port_immutable(dev: &Device<Self>, port: u32) -> Result<PortImmutable>;

    /// Returns the link layer of port `port`.
    fn get_link_layer(_dev: &Device<Self>, _port: u32) -> LinkLayer {
        build_error!(VTABLE_DEFAULT_ERROR)
    }

    /// Returns entry `index` of the P_Key table of port `port`.
    fn query_pkey(_dev: &Device<Self>, _port: u32, _index: u16) -> Result<u16> {
        build_error!(VTABLE_DEFAULT_ERROR)
    }

    /// Returns entry `index` of the GID table of port `port`.
    fn query_gid(_dev: &Device<Self>, _port: u32, _index: i32) -> Result<Gid> {
        build_error!(VTABLE_DEFAULT_ERROR)
    }

    /// Changes device attributes (`ib_modify_device`).
    fn modify_device(_dev: &Device<Self>, _modify: &DeviceModify) -> Result {
        build_error!(VTABLE_DEFAULT_ERROR)
    }

    /// Changes attributes of port `port` (`ib_modify_port`).
    fn modify_port(_dev: &Device<Self>, _port: u32, _modify: &PortModify) -> Result {
        build_error!(VTABLE_DEFAULT_ERROR)
    }

    /// Offers a MAD to the device for port `port` (`process_mad`): the RDMA
    /// core's sysfs `counters` ask the port's performance management agent
    /// this way, and the MAD layer offers it every MAD the GSI QP receives
    /// before its own agents. A response goes into `out`.
    fn process_mad(
        _dev: &Device<Self>,
        _port: u32,
        _mad: &[u8; MAD_SIZE],
        _out: &mut [u8; MAD_SIZE],
    ) -> MadResult {
        build_error!(VTABLE_DEFAULT_ERROR)
    }

    /// Called once the device is registered and visible to clients.
    fn enable_driver(_dev: &Device<Self>) -> Result {
        build_error!(VTABLE_DEFAULT_ERROR)
    }

    /// Called when the device goes away while user contexts remain
    /// (`disassociate_ucontext`), after the RDMA core destroyed the
    /// context's objects and zapped its mappings. Implementing it tells the
    /// core that removal need not wait for applications to close the
    /// device (they get `IBV_EVENT_DEVICE_FATAL` and `EIO` from then on),
    /// and that an open device does not pin the driver's module. The
    /// driver's queue mappings must then be the core's (see
    /// [`super::queue`]).
    fn disassociate_ucontext(_uctx: &Ucontext<Self>) {
        build_error!(VTABLE_DEFAULT_ERROR)
    }

    /// Creates the state of a new user context.
    fn alloc_ucontext(
        dev: &Device<Self>,
        udata: Option<&Udata>,
    ) -> impl PinInit<Self::UcontextData, Error>;

    /// Creates the state of a new protection domain.
    ///
    /// `udata` is `None` for kernel callers.
    fn alloc_pd(dev: &Device<Self>, udata: Option<&Udata>) -> impl PinInit<Self::PdData, Error>;

    /// Creates the state of a new completion queue and returns it with the
    /// number of entries the CQ actually holds.
    ///
    /// `udata` is `None` for kernel callers.
    fn create_cq(
        dev: &Device<Self>,
        attr: &CqInitAttr,
        udata: Option<&Udata>,
    ) -> Result<(impl PinInit<Self::CqData, Error>, u32)>;

    /// Checks that `cq` may be destroyed; its state is dropped afterwards.
    fn destroy_cq(cq: &Cq<Self>) -> Result;

    /// Resizes `cq` to hold at least `cqe` entries, keeping pending ones.
    fn resize_cq(cq: &Cq<Self>, cqe: u32, udata: Option<&Udata>) -> Result;

    /// Gives at most `max` completions of a kernel CQ to `out`, oldest first.
    fn poll_cq(cq: &Cq<Self>, max: usize, out: &mut dyn FnMut(&Wc));

    /// Number of completions waiting in `cq`.
    fn peek_cq(cq: &Cq<Self>) -> u32;

    /// Arms `cq`; returns whether completions are already waiting when
    /// `IB_CQ_REPORT_MISSED_EVENTS` is set.
    fn req_notify_cq(cq: &Cq<Self>, flags: NotifyFlags) -> bool;

    /// Creates a DMA memory region (all of memory, for kernel consumers).
    fn get_dma_mr(
        pd: &Pd<Self>,
        access: AccessFlags,
    ) -> Result<(impl PinInit<Self::MrData, Error>, MrKeys)>;

    /// Registers user memory.
    fn reg_user_mr(
        pd: &Pd<Self>,
        args: &UserMrArgs,
        udata: Option<&Udata>,
    ) -> Result<(impl PinInit<Self::MrData, Error>, MrKeys)>;

    /// Refuses the deregistration of `mr` while it is still published (and
    /// in use), or marks it as going: called first, before anything is
    /// undone, so that a refusal leaves the region untouched.
    fn begin_dereg_mr(_mr: &Mr<Self>) -> Result {
        Ok(())
    }

    /// Checks that `mr` may be deregistered and releases its key index; it
    /// is freed afterwards.
    ///
    /// Called after the MR was unpublished ([`Device::lookup_mr`] no longer
    /// finds it, so its index may be reused) but before waiting for the
    /// references others hold. On error the MR is published again and stays
    /// registered. Once it succeeded, the abstraction waits for every
    /// reference to be dropped and then frees the MR.
    fn dereg_mr(mr: &Mr<Self>) -> Result;

    /// Changes a user memory region in place (`ibv_rereg_mr`): the parts
    /// `args.flags` names. `pd` is the PD the region moves to with
    /// [`crate::rdma::mr::rereg::PD`] (else its current PD); the RDMA core
    /// updates the region's PD after success. Unsupported changes return
    /// `EOPNOTSUPP`.
    fn rereg_user_mr(
        _mr: &Mr<Self>,
        _args: &ReregArgs,
        _pd: &Pd<Self>,
        _udata: Option<&Udata>,
    ) -> Result {
        build_error!(VTABLE_DEFAULT_ERROR)
    }

    /// Faults in, for later access, the on-demand memory `sges` name
    /// (`ibv_advise_mr`): `advice` is one of [`crate::rdma::mr::advise`],
    /// `flags` may ask for it to be done before the call returns
    /// ([`crate::rdma::mr::advise::FLAG_FLUSH`]); `pd_id` is the PD the
    /// regions must belong to. Process context: may sleep.
    fn advise_mr(
        _dev: &Device<Self>,
        _pd_id: usize,
        _advice: u32,
        _flags: u32,
        _sges: &[AdviseSge],
    ) -> Result {
        build_error!(VTABLE_DEFAULT_ERROR)
    }

    /// Attaches UD QP `qp` to the multicast group `mgid`
    /// (`ibv_attach_mcast`); attaching twice is not an error.
    fn attach_mcast(_qp: &Qp<Self>, _mgid: &Gid) -> Result {
        build_error!(VTABLE_DEFAULT_ERROR)
    }

    /// Detaches `qp` from the multicast group `mgid`.
    fn detach_mcast(_qp: &Qp<Self>, _mgid: &Gid) -> Result {
        build_error!(VTABLE_DEFAULT_ERROR)
    }

    /// Allocates a memory region of type `mr_type` ([`crate::rdma::mr::mr_type`])
    /// for kernel consumers (`ib_alloc_mr`) that can map up to `max_num_sg`
    /// pages; for fast-register regions the consumer maps them with
    /// [`Driver::map_mr_sg`] and registers them with an `IB_WR_REG_MR` work
    /// request.
    fn alloc_mr(
        _pd: &Pd<Self>,
        _mr_type: u32,
        _max_num_sg: u32,
    ) -> Result<(impl PinInit<Self::MrData, Error>, MrKeys)> {
        default_init::<Self::MrData, MrKeys>()
    }

    /// Maps a kernel consumer's scatterlist onto `mr` (`ib_map_mr_sg`),
    /// usually through [`SgList::map_to`], and returns the number of
    /// scatterlist entries mapped. May be called in atomic context.
    fn map_mr_sg(_mr: &Mr<Self>, _sg: SgList<'_, Self>) -> Result<u32> {
        build_error!(VTABLE_DEFAULT_ERROR)
    }

    /// Creates the state of a new QP and returns it with the QP number; the
    /// driver updates `attr.cap` to what it allocated. Nothing fails after
    /// this returns `Ok` except the returned initialiser, and then
    /// [`Driver::destroy_qp`] is not called: a driver whose initialiser can
    /// fail must not have taken resources (a QPN, CQ counts) by then. A
    /// driver refuses an `attr.qp_type` of `None`.
    fn create_qp(
        qp: &NewQp<Self>,
        attr: &mut QpInitAttr,
        udata: Option<&Udata>,
    ) -> Result<(impl PinInit<Self::QpData, Error>, u32)>;

    /// Modifies the attributes selected by `mask` (`IB_QP_*`).
    fn modify_qp(qp: &Qp<Self>, attr: &QpAttr, mask: QpAttrMask, udata: Option<&Udata>) -> Result;

    /// Reports the attributes and whether every send WR is signaled.
    fn query_qp(qp: &Qp<Self>) -> Result<(QpAttr, bool)>;

    /// Checks that `qp` may be destroyed and releases its number; its state
    /// is dropped afterwards.
    ///
    /// Called after the QP was unpublished ([`Device::lookup_qp`] no longer
    /// finds it, so its QPN may be reused) and its timers were shut down,
    /// but before waiting for the references others hold: the receive path
    /// may still be using the QP. On error the QP is published again and
    /// stays alive (its timers are idle). Once it succeeded, the abstraction
    /// waits for every reference to be dropped and then drops the state.
    fn destroy_qp(qp: &Qp<Self>) -> Result;

    /// A timer of `qp` ([`Qp::arm_timer`]) expired. Runs in softirq; the QP
    /// is alive for the call.
    fn qp_timer(_qp: &Qp<Self>, _t: QpTimer) {}

    /// The kick of `qp` ([`Qp::kick`]) runs: in softirq, with interrupts
    /// enabled; the QP is alive for the call.
    fn qp_kick(_qp: &Qp<Self>) {}

    /// The sleepable work of `qp` ([`Qp::queue_sleepable`]) runs: in
    /// process context, where it may sleep; the QP is alive for the call.
    fn qp_sleepable(_qp: &Qp<Self>) {}

    /// Posts a send WR of a kernel consumer, or rings the doorbell of a user
    /// QP (`None`).
    ///
    /// A [`SendWr`] is only ever given for kernel QPs: a work request list
    /// that reaches a user QP (through the uverbs `POST_SEND` command) is
    /// treated as its doorbell, as the C driver does. The driver reads all it
    /// needs of the WR before it queues the WQE and nothing after: from then
    /// on the WR may complete and its consumer free it (the same holds for
    /// the receive WRs of `post_recv` and `post_srq_recv`).
    fn post_send(qp: &Qp<Self>, wr: Option<&SendWr<'_, Self>>) -> Result;

    /// Posts a receive WR (of a kernel consumer, or of the uverbs
    /// `POST_RECV` command for a user QP).
    fn post_recv(qp: &Qp<Self>, wr: &RecvWr<'_>) -> Result;

    /// Creates the state of a new basic SRQ; updates `attr` to what it
    /// allocated.
    fn create_srq(
        dev: &Device<Self>,
        attr: &mut SrqAttr,
        udata: Option<&Udata>,
    ) -> Result<impl PinInit<Self::SrqData, Error>>;

    /// Modifies `max_wr` (resize) and/or `srq_limit` (arming), per `mask`.
    fn modify_srq(srq: &Srq<Self>, attr: &SrqAttr, mask: u32, udata: Option<&Udata>) -> Result;

    /// Reports the attributes.
    fn query_srq(srq: &Srq<Self>) -> SrqAttr;

    /// Posts a receive WR to `srq`: called for each WR of the list a kernel
    /// consumer gave `ib_post_srq_recv` (or the uverbs `POST_SRQ_RECV`
    /// command, for a user SRQ), in list order, until one fails; that WR is
    /// reported back as the bad one. May be called in atomic context (from
    /// a completion handler): must not sleep.
    fn post_srq_recv(_srq: &Srq<Self>, _wr: &RecvWr<'_>) -> Result {
        build_error!(VTABLE_DEFAULT_ERROR)
    }

    /// Checks that `srq` may be destroyed; its state is dropped afterwards.
    fn destroy_srq(srq: &Srq<Self>) -> Result;

    /// Creates the state of a new address handle and returns it with the
    /// handle's number, under which [`Device::lookup_ah`] finds it.
    ///
    /// May be called in atomic context (kernel callers without
    /// `RDMA_CREATE_AH_SLEEPABLE`): must not sleep.
    fn create_ah(
        dev: &Device<Self>,
        attr: AhAttr,
        udata: Option<&Udata>,
    ) -> Result<(impl PinInit<Self::AhData, Error>, u32)>;

    /// Reports the address vector.
    fn query_ah(ah: &Ah<Self>) -> AhAttr;

    /// Replaces the address vector (`rdma_modify_ah`, which kernel callers
    /// alone reach; the core has checked the port and the source GID).
    ///
    /// May be called in atomic context (hfi1 calls it under RCU): must not
    /// sleep.
    fn modify_ah(ah: &Ah<Self>, attr: AhAttr) -> Result;

    /// Releases what the address handle holds (its number); its state is
    /// dropped afterwards.
    ///
    /// Called after the handle was unpublished ([`Device::lookup_ah`] no
    /// longer finds it), before waiting for the references others hold.
    /// May be called in atomic context: must not sleep.
    fn destroy_ah(ah: &Ah<Self>) -> Result;

    /// Creates the state of a new memory window of type `ty`
    /// ([`crate::rdma::mw::TYPE_1`] or [`crate::rdma::mw::TYPE_2`]) in the
    /// PD `pd_id`, and returns it with the window's initial R_Key, whose
    /// index part ([`Device::lookup_mw`]) must stay the same for its life.
    /// The initialiser must not fail once resources are taken: on its error
    /// [`Driver::dealloc_mw`] is not called.
    fn alloc_mw(
        _dev: &Device<Self>,
        _ty: u32,
        _pd_id: usize,
        _udata: Option<&Udata>,
    ) -> Result<(impl PinInit<Self::MwData, Error>, u32)> {
        default_init::<Self::MwData, u32>()
    }

    /// Releases what the window holds (its index); its state is dropped
    /// afterwards. Called in process context once the window is unpublished
    /// ([`Device::lookup_mw`] no longer finds it) and every reference taken
    /// by a lookup is gone.
    fn dealloc_mw(_mw: &Mw<Self>) {
        build_error!(VTABLE_DEFAULT_ERROR)
    }

    /// Binds `qp` to `counter` (`rdma statistic qp`): from now on the QP's
    /// events count in the counter, and no longer in the port's own
    /// values (the core shows a port's values as its own plus those of
    /// its counters). The counter's other ops follow from this one.
    fn counter_bind_qp(_counter: &mut CounterGuard<'_, Self>, _qp: &Qp<Self>) -> Result {
        build_error!(VTABLE_DEFAULT_ERROR)
    }

    /// Unbinds `qp` from `counter`, which keeps what the QP counted.
    fn counter_unbind_qp(_counter: &mut CounterGuard<'_, Self>, _qp: &Qp<Self>) -> Result {
        build_error!(VTABLE_DEFAULT_ERROR)
    }

    /// Fills `values` (one per counter of [`Driver::alloc_hw_port_stats`])
    /// with what the QPs bound to `counter` counted since they were bound.
    fn counter_update_stats(_counter: &mut CounterGuard<'_, Self>, _values: &mut [u64]) -> Result {
        build_error!(VTABLE_DEFAULT_ERROR)
    }

    /// Adds the driver's own details of `qp` to a resource-tracking netlink
    /// answer (`rdma res show qp -dd` prints them), through `out`.
    fn fill_res_qp_entry(_qp: &Qp<Self>, _out: &mut ResDetails<'_>) -> Result {
        build_error!(VTABLE_DEFAULT_ERROR)
    }

    /// Returns the descriptions of the hardware counters of port `port`.
    ///
    /// The RDMA core reads their values with [`Driver::get_hw_stats`].
    fn alloc_hw_port_stats(_dev: &Device<Self>, _port: u32) -> Result<&'static [StatDesc]> {
        build_error!(VTABLE_DEFAULT_ERROR)
    }

    /// Fills `values` (one per counter of [`Driver::alloc_hw_port_stats`]) and
    /// returns how many were filled.
    fn get_hw_stats(_dev: &Device<Self>, _port: u32, _values: &mut [u64]) -> Result<usize> {
        build_error!(VTABLE_DEFAULT_ERROR)
    }
}
