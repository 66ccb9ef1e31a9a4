// SPDX-License-Identifier: GPL-2.0

//! RDMA devices (`struct ib_device`) of a Rust provider.
//!
//! A provider implements [`Driver`]. Its ops table ([`Driver`]'s `#[vtable]`
//! turned into a `const struct ib_device_ops`) is built at compile time, and
//! its per-device state ([`Driver::Data`]) lives in the same allocation as
//! the `struct ib_device`, right after it.
//!
//! Life cycle:
//!
//! 1. [`UnregisteredDevice::new`] allocates the device and initialises the
//!    driver's state in place; dropping it frees both.
//! 2. [`UnregisteredDevice::register`] binds a net device to a port and
//!    registers the device; from then on the RDMA core owns it.
//! 3. Any unregistration (`rdma link delete`, [`RegisteredDevice::unregister_queued`],
//!    [`DriverRegistration`] going away at module unload) drops the driver's
//!    state from `dealloc_driver` and frees the device.
//!
//! The driver's [`Devices`] list keeps every device it registered until its
//! `dealloc_driver` has returned, so that module unload unregisters the
//! driver's own devices, one by one, and waits for those already on their
//! way out. Other drivers with the same driver id (`rdma_rxe` and rrxe share
//! `RDMA_DRIVER_RXE`) are never touched.
//!
//! C header: [`include/rdma/ib_verbs.h`](srctree/include/rdma/ib_verbs.h)

use crate::{
    bindings, net,
    rdma::{
        ah::{
            Ah,
            AhAttr, //
        },
        attr::{
            DeviceAttr,
            DeviceModify,
            NODE_DESC_LEN, //
        },
        counter::{
            Counter,
            CounterGuard, //
        },
        cq::{
            Cq,
            CqInitAttr,
            NotifyFlags, //
        },
        hw_counters::{
            self,
            StatDesc, //
        },
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
            PortModify,
            PortState, //
        },
        qp::{
            NewQp,
            Qp,
            QpAttr,
            QpInitAttr,
            QpTimer,
            RecvWr,
            ResDetails,
            SendWr, //
        },
        queue,
        srq::{
            Srq,
            SrqAttr, //
        },
        table::Table,
        ucontext::Ucontext,
        udata::Udata,
        wc::Wc,
        DriverId,
        Gid,
        Guid, //
    },
};
use core::{
    marker::PhantomData,
    ops::Deref,
    ptr::{
        self,
        NonNull, //
    },
};
use kernel::{
    error::{
        from_err_ptr,
        from_result,
        to_result,
        VTABLE_DEFAULT_ERROR, //
    },
    prelude::*,
    sync::{
        aref::ARef,
        atomic::{
            Acquire,
            Atomic,
            Release, //
        }, //
    },
    types::Opaque,
    ThisModule, //
};

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
    /// ([`Counter`]); starts as its default.
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
        access: i32,
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
    #[expect(
        unreachable_code,
        reason = "the default only names a concrete initialiser type"
    )]
    fn alloc_mr(
        _pd: &Pd<Self>,
        _mr_type: u32,
        _max_num_sg: u32,
    ) -> Result<(impl PinInit<Self::MrData, Error>, MrKeys)> {
        // `build_error!` fails the build if this default is ever used; `Err` only gives the
        // returned initialiser a concrete type.
        Err::<(Result<Self::MrData>, MrKeys), _>(build_error!(VTABLE_DEFAULT_ERROR))
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
    /// fail must not have taken resources (a QPN, CQ counts) by then.
    fn create_qp(
        qp: &NewQp<Self>,
        attr: &mut QpInitAttr,
        udata: Option<&Udata>,
    ) -> Result<(impl PinInit<Self::QpData, Error>, u32)>;

    /// Modifies the attributes selected by `mask` (`IB_QP_*`).
    fn modify_qp(qp: &Qp<Self>, attr: &QpAttr, mask: u32, udata: Option<&Udata>) -> Result;

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
    #[expect(
        unreachable_code,
        reason = "the default only names a concrete initialiser type"
    )]
    fn alloc_mw(
        _dev: &Device<Self>,
        _ty: u32,
        _pd_id: usize,
        _udata: Option<&Udata>,
    ) -> Result<(impl PinInit<Self::MwData, Error>, u32)> {
        // As in `alloc_mr`.
        Err::<(Result<Self::MwData>, u32), _>(build_error!(VTABLE_DEFAULT_ERROR))
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

/// A device of driver `T`: the C `struct ib_device` followed by the driver's
/// state.
///
/// # Invariants
///
/// - `ib` is at offset 0 and is a valid `struct ib_device` allocated by
///   `_ib_alloc_device` with `size_of::<Self>()` bytes.
/// - `qps`, `mrs` and `ahs` are initialised before the ops are installed and
///   destroyed in `dealloc_driver`, after the data.
/// - `owned` and `released` are initialised before the ops are installed and
///   stay valid until the memory is freed; `released` is set once, at the end
///   of `dealloc_driver`.
/// - `data` is initialised for as long as a reference to `Self` exists; it is
///   dropped in `dealloc_driver`, which the RDMA core calls last.
#[repr(C)]
pub struct Device<T: Driver> {
    ib: Opaque<bindings::ib_device>,
    /// Published QPs by QPN.
    pub(crate) qps: Table<Qp<T>>,
    /// Published memory regions by key index (`lkey >> 8`).
    pub(crate) mrs: Table<Mr<T>>,
    /// Published address handles by AH number.
    pub(crate) ahs: Table<Ah<T>>,
    /// Published memory windows by R_Key index (`rkey >> 8`).
    pub(crate) mws: Table<Mw<T>>,
    /// Link in the driver's [`Devices`] list.
    owned: Opaque<bindings::llist_node>,
    /// Whether `dealloc_driver` has dropped the data.
    released: Atomic<bool>,
    data: T::Data,
}

// SAFETY: The C part is synchronised by the RDMA core, and `T::Data` is `Send`.
unsafe impl<T: Driver> Send for Device<T> {}

// SAFETY: The C part is synchronised by the RDMA core, and `T::Data` is `Sync`.
unsafe impl<T: Driver> Sync for Device<T> {}

impl<T: Driver> Device<T> {
    /// Size of the allocation, checked against the allocator's guarantees.
    const SIZE: usize = {
        assert!(core::mem::offset_of!(Self, ib) == 0);
        assert!(core::mem::align_of::<Self>() <= bindings::ARCH_KMALLOC_MINALIGN);
        core::mem::size_of::<Self>()
    };

    /// Returns a reference to the device that contains `ptr`.
    ///
    /// # Safety
    ///
    /// `ptr` must point to the `ib_device` of a `Device<T>` whose data is
    /// initialised, and the device must stay valid for `'a`.
    pub(crate) unsafe fn from_raw<'a>(ptr: *mut bindings::ib_device) -> &'a Self {
        // CAST: `ib` is the first field of the `#[repr(C)]` struct `Self`.
        // SAFETY: Valid for `'a` by the safety requirements.
        unsafe { &*ptr.cast::<Self>() }
    }

    /// Returns the C device.
    pub(crate) fn as_raw(&self) -> *mut bindings::ib_device {
        self.ib.get()
    }

    /// Returns whether `ptr` is a device of driver `T`.
    ///
    /// # Safety
    ///
    /// `ptr` must point to a valid `struct ib_device`.
    unsafe fn is_ours(ptr: *mut bindings::ib_device) -> bool {
        // SAFETY: `ptr` is valid by the safety requirements; the ops are not changed after
        // registration.
        let dealloc = unsafe { (*ptr).ops.dealloc_driver };
        let ours: unsafe extern "C" fn(*mut bindings::ib_device) =
            OpsTable::<T>::dealloc_driver_callback;
        dealloc.is_some_and(|f| ptr::fn_addr_eq(f, ours))
    }

    /// Returns the embedded `struct device`, for `dev_*!` printing.
    pub fn as_dev(&self) -> &kernel::device::Device {
        // SAFETY: `dev` is initialised by `_ib_alloc_device` and lives as long as `self`.
        unsafe { kernel::device::Device::from_raw(bindings::ib_device_dev(self.as_raw())) }
    }

    /// Returns the net device bound to port `port`, if any.
    pub fn netdev(&self, port: u32) -> Option<ARef<net::Device>> {
        // SAFETY: `self.ib` is valid by the type invariant.
        let ndev = unsafe { bindings::ib_device_get_netdev(self.as_raw(), port) };
        // SAFETY: `ib_device_get_netdev` returns NULL or a net device with a reference taken
        // for the caller, which the `ARef` now owns.
        NonNull::new(ndev).map(|p| unsafe { ARef::from_raw(p.cast::<net::Device>()) })
    }

    /// Returns the speed and width of Ethernet port `port`, as
    /// `(enum ib_port_speed, enum ib_port_width)`.
    ///
    /// Takes the RTNL lock.
    pub fn eth_speed(&self, port: u32) -> Result<(u16, u8)> {
        let mut speed = 0u16;
        let mut width = 0u8;
        // SAFETY: `self.ib` is valid; the out pointers are valid for writes.
        to_result(unsafe {
            bindings::ib_get_eth_speed(self.as_raw(), port, &mut speed, &mut width)
        })?;
        Ok((speed, width))
    }

    /// The QP numbered `qpn` (QPN 1 is the GSI QP) with a reference, unless
    /// it does not exist or its destruction has begun. Any context
    /// (softirq, interrupts off).
    pub fn lookup_qp(&self, qpn: u32) -> Option<ARef<Qp<T>>> {
        self.qps.get(qpn)
    }

    /// The memory region whose keys have index `index` (`lkey >> 8`; the
    /// low byte is the rolling key, which the caller compares), with a
    /// reference, unless there is none or its deregistration has begun.
    /// Any context.
    pub fn lookup_mr(&self, index: u32) -> Option<ARef<Mr<T>>> {
        self.mrs.get(index)
    }

    /// The address handle numbered `ah_num` (the number
    /// [`Driver::create_ah`] returned, which user and kernel UD WQEs carry)
    /// with a reference, unless there is none or its destruction has begun.
    /// Any context.
    ///
    /// The reference must not be held across sleeping: destruction in
    /// atomic context busy-waits for it.
    pub fn lookup_ah(&self, ah_num: u32) -> Option<ARef<Ah<T>>> {
        self.ahs.get(ah_num)
    }

    /// The memory window whose R_Key has index `index` (`rkey >> 8`; the
    /// low byte is the key the caller compares), with a reference, unless
    /// there is none or its deallocation has begun. Any context.
    pub fn lookup_mw(&self, index: u32) -> Option<ARef<Mw<T>>> {
        self.mws.get(index)
    }

    /// The GID at `index` of port `port` in the RDMA core's GID table
    /// (`rdma_get_gid_attr`), in network byte order. `EINVAL` for a bad port
    /// or index, `ENODATA` for an empty entry. Any context.
    pub fn gid_at(&self, port: u32, index: u32) -> Result<[u8; 16]> {
        let index = c_int::try_from(index).map_err(|_| EINVAL)?;
        // SAFETY: The device is valid; the call checks `port` and `index` itself.
        let attr = unsafe { bindings::rdma_get_gid_attr(self.as_raw(), port, index) };
        let attr = from_err_ptr(attr.cast_mut())?;
        // SAFETY: `attr` is a valid GID entry on which we hold a reference; every bit pattern
        // is a valid `[u8; 16]`.
        let gid = unsafe { *(*attr).gid.raw.as_ref() };
        // SAFETY: Drops the reference taken by `rdma_get_gid_attr`.
        unsafe { bindings::rdma_put_gid_attr(attr) };
        Ok(gid)
    }

    /// Returns the GID at `index` of port `port` and the net device it
    /// belongs to, with a reference: a VLAN device for the GIDs of a VLAN's
    /// addresses (the RDMA core adds those to the real device's table), the
    /// port's own net device otherwise. `None` for an entry without one.
    pub fn gid_with_netdev(
        &self,
        port: u32,
        index: u32,
    ) -> Result<([u8; 16], Option<ARef<net::Device>>)> {
        let index = c_int::try_from(index).map_err(|_| EINVAL)?;
        // SAFETY: The device is valid; the call checks `port` and `index` itself.
        let attr = unsafe { bindings::rdma_get_gid_attr(self.as_raw(), port, index) };
        let attr = from_err_ptr(attr.cast_mut())?;
        // SAFETY: `attr` is a valid GID entry on which we hold a reference; every bit pattern
        // is a valid `[u8; 16]`.
        let gid = unsafe { *(*attr).gid.raw.as_ref() };
        // SAFETY: `attr` is valid for the call.
        let ndev = unsafe { bindings::gid_attr_ndev_get(attr) };
        // SAFETY: The helper returned NULL or a net device with a reference taken for the
        // caller, which the `ARef` now owns.
        let ndev = NonNull::new(ndev).map(|p| unsafe { ARef::from_raw(p.cast::<net::Device>()) });
        // SAFETY: Drops the reference taken by `rdma_get_gid_attr`.
        unsafe { bindings::rdma_put_gid_attr(attr) };
        Ok((gid, ndev))
    }

    /// The network namespace of the net device bound to port `port`, with a
    /// reference, for transmitting; `None` without a net device or while
    /// the namespace is being dismantled. Any context.
    pub fn netdev_net(&self, port: u32) -> Option<ARef<net::namespace::Namespace>> {
        let ndev = self.netdev(port)?;
        // SAFETY: `ndev` is held, so its namespace's `struct net` is allocated; `maybe_get_net`
        // only takes a reference if the namespace is alive.
        let net = unsafe { bindings::maybe_get_net(bindings::dev_net(ndev.as_raw())) };
        // SAFETY: `maybe_get_net` returned NULL or took a reference, which the `ARef` owns.
        NonNull::new(net).map(|p| unsafe { ARef::from_raw(p.cast()) })
    }

    /// Replaces the node description of a registered device (sysfs
    /// `node_desc`, the NodeDescription SMP attribute).
    pub fn store_node_desc(&self, desc: &[u8; NODE_DESC_LEN]) {
        let nd = self.as_raw();
        for (i, b) in desc.iter().enumerate() {
            // SAFETY: `nd` is a valid `ib_device` (type invariant), `i` within its `node_desc`;
            // its reader (sysfs) takes no lock, as with the C drivers' `memcpy`: one marked byte
            // store each, so a reader may see old and new bytes mixed, never a torn one.
            unsafe { ptr::write_volatile((&raw mut (*nd).node_desc).cast::<u8>().add(i), *b) };
        }
    }

    /// Reports the state of `netdev`'s port to the RDMA core's clients as a
    /// `PORT_ACTIVE` or `PORT_ERR` event, unless the last event reported the
    /// same state.
    pub fn dispatch_port_state_event(&self, netdev: &net::Device) {
        // SAFETY: Both pointers are valid by the type invariants.
        unsafe { bindings::ib_dispatch_port_state_event(self.as_raw(), netdev.as_raw()) };
    }
}

impl<T: Driver> Deref for Device<T> {
    type Target = T::Data;

    fn deref(&self) -> &T::Data {
        &self.data
    }
}

/// The current state of a port bound to `netdev`: active when the net device
/// is running and has carrier (`ib_get_curr_port_state`).
pub fn port_state_of(netdev: &net::Device) -> PortState {
    // SAFETY: `netdev` is valid by its type invariant.
    PortState::from_raw(unsafe { bindings::ib_get_curr_port_state(netdev.as_raw()) })
}

/// Commands of the legacy uverbs `write()` interface a device can enable on
/// top of the RDMA core's default set.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum UverbsCmd {
    /// `IB_USER_VERBS_CMD_POST_SEND` (rdma-core's rxe provider rings its send
    /// doorbell with it).
    PostSend,
    /// `IB_USER_VERBS_CMD_REQ_NOTIFY_CQ`.
    ReqNotifyCq,
}

impl UverbsCmd {
    const fn bit(self) -> u64 {
        let cmd = match self {
            Self::PostSend => bindings::ib_uverbs_write_cmds_IB_USER_VERBS_CMD_POST_SEND,
            Self::ReqNotifyCq => bindings::ib_uverbs_write_cmds_IB_USER_VERBS_CMD_REQ_NOTIFY_CQ,
        };
        1u64 << cmd
    }
}

/// A device of driver `T` that is allocated but not registered.
///
/// Dropping it frees the device and the driver's state.
///
/// # Invariants
///
/// `ptr` points to a valid `Device<T>` with initialised data, owned by `self`
/// (the reference from `_ib_alloc_device`), not registered, whose ops are
/// those of [`OpsTable<T>`]. `net` is the namespace the device was
/// allocated in, which the RDMA core records without a reference and needs
/// until registration.
pub struct UnregisteredDevice<T: Driver> {
    ptr: NonNull<Device<T>>,
    net: ARef<net::namespace::Namespace>,
}

impl<T: Driver> UnregisteredDevice<T> {
    /// Allocates a device in network namespace `net` and initialises the
    /// driver's state in place. The RDMA core puts it in `init_net` instead
    /// unless the RDMA subsystem is in exclusive mode (`rdma system set
    /// netns exclusive`).
    pub fn new(
        net: &net::namespace::Namespace,
        data: impl PinInit<T::Data, Error>,
    ) -> Result<Self> {
        // SAFETY: `net` is alive for the call, and `Self` keeps a reference to it until the
        // device is registered, as `_ib_alloc_device` requires. `SIZE` is at least the size of
        // `struct ib_device` (the C struct is the first field).
        let raw = unsafe { bindings::_ib_alloc_device(Device::<T>::SIZE, net.as_raw()) };
        let raw = NonNull::new(raw).ok_or(ENOMEM)?;
        // CAST: `ib` is the first field of the `#[repr(C)]` struct `Device<T>`.
        let dev = raw.cast::<Device<T>>();

        // SAFETY: The tables are uninitialised memory inside the allocation, which does not move
        // until it is freed. Empty tables hold no memory, so the error path below need not
        // destroy them.
        let Ok(()) = unsafe { Table::new().__pinned_init(&raw mut (*dev.as_ptr()).qps) };
        // SAFETY: As above.
        let Ok(()) = unsafe { Table::new().__pinned_init(&raw mut (*dev.as_ptr()).mrs) };
        // SAFETY: As above.
        let Ok(()) = unsafe { Table::new().__pinned_init(&raw mut (*dev.as_ptr()).ahs) };
        // SAFETY: As above.
        let Ok(()) = unsafe { Table::new().__pinned_init(&raw mut (*dev.as_ptr()).mws) };
        // SAFETY: Both fields are uninitialised memory inside the allocation; neither needs
        // dropping.
        unsafe {
            (&raw mut (*dev.as_ptr()).owned).write(Opaque::new(bindings::llist_node {
                next: ptr::null_mut(),
            }));
            (&raw mut (*dev.as_ptr()).released).write(Atomic::new(false));
        }

        // SAFETY: `data` is uninitialised memory inside the allocation, which does not move
        // until it is freed.
        if let Err(e) = unsafe { data.__pinned_init(&raw mut (*dev.as_ptr()).data) } {
            // SAFETY: `raw` came from `_ib_alloc_device` and has no ops yet, so
            // `ib_dealloc_device` does not call `dealloc_driver` on the uninitialised data.
            unsafe { bindings::ib_dealloc_device(raw.as_ptr()) };
            return Err(e);
        }

        // The ops table is copied by `ib_set_device_ops`; only the owner and the sysfs group
        // are not constants.
        let mut ops = OpsTable::<T>::VTABLE;
        ops.owner = T::OWNER.as_ptr();
        if T::SYSFS_PARENT {
            ops.device_group = super::sysfs::parent_group();
        }
        // SAFETY: `raw` is valid and not registered. From here on `ib_dealloc_device` drops the
        // data through `dealloc_driver`, which is correct as the data is initialised.
        unsafe { bindings::ib_set_device_ops(raw.as_ptr(), &ops) };

        // INVARIANT: The device is valid, initialised, unregistered and owned by `Self`.
        Ok(Self {
            ptr: dev,
            net: net.into(),
        })
    }

    fn ib(&mut self) -> &mut bindings::ib_device {
        // SAFETY: The device is valid by the type invariant, and nobody else accesses it before
        // registration.
        unsafe { &mut *Opaque::cast_into(&raw const (*self.ptr.as_ptr()).ib) }
    }

    /// Sets the node description (at most 63 bytes are kept).
    pub fn set_node_desc(&mut self, desc: &CStr) {
        let ib = self.ib();
        let bytes = desc.to_bytes();
        let n = bytes.len().min(ib.node_desc.len() - 1);
        ib.node_desc.fill(0);
        for (d, s) in ib.node_desc.iter_mut().zip(&bytes[..n]) {
            // CAST: a byte of a C string.
            *d = *s as c_char;
        }
    }

    /// Sets the node GUID.
    pub fn set_node_guid(&mut self, guid: Guid) {
        self.ib().node_guid = guid.to_be64_raw();
    }

    /// Makes the device a channel adapter (`RDMA_NODE_IB_CA`) with `ports`
    /// ports.
    pub fn set_ca_ports(&mut self, ports: u32) {
        let ib = self.ib();
        // CAST: `node_type` is a `u8` holding small enum values.
        ib.node_type = bindings::RDMA_NODE_IB_CA as u8;
        ib.phys_port_cnt = ports;
    }

    /// Sets the number of completion vectors.
    pub fn set_num_comp_vectors(&mut self, n: u32) {
        self.ib().num_comp_vectors = i32::try_from(n).unwrap_or(i32::MAX);
    }

    /// Sets the lkey that gives kernel consumers access to all memory.
    pub fn set_local_dma_lkey(&mut self, lkey: u32) {
        self.ib().local_dma_lkey = lkey;
    }

    /// Enables a legacy uverbs command.
    pub fn enable_uverbs_cmd(&mut self, cmd: UverbsCmd) {
        self.ib().uverbs_cmd_mask |= cmd.bit();
    }

    /// Records that the device name was chosen by the user (as with
    /// `rdma link add NAME`), so that it is not renamed.
    pub fn mark_name_assigned_by_user(&mut self) {
        self.ib().name_assign_type = bindings::rdma_nl_name_assign_type_RDMA_NAME_ASSIGN_TYPE_USER;
    }

    /// Binds `netdev` to port `port` and registers the device as `name`.
    ///
    /// On success the RDMA core owns the device; it can be found again with
    /// [`RegisteredDevice::get_by_netdev`], and the driver's [`Devices`] list
    /// holds it until its module unloads or the device is gone.  On failure the
    /// device is freed.
    pub fn register(self, name: &CStr, netdev: &net::Device, port: u32) -> Result {
        let dev = self.ptr;
        let raw = dev.as_ptr().cast::<bindings::ib_device>();
        // Devices unregistered since the last registration leave the list first.
        T::devices().reap();
        // SAFETY: The device is valid and unregistered; `netdev` is valid. The RDMA core takes
        // its own reference on the net device.
        to_result(unsafe { bindings::ib_device_set_netdev(raw, netdev.as_raw(), port) })?;
        // SAFETY: The device is valid (its `struct device` is initialised by
        // `_ib_alloc_device`). This reference is the list's: taken now, while the device is
        // surely alive, as it may be unregistered and freed as soon as it is registered.
        unsafe { bindings::get_device(bindings::ib_device_dev(raw)) };
        // SAFETY: The device is valid and unregistered; `name` is a valid C string. Passing no
        // DMA device makes the core use the virtual-address DMA mapping (software device).
        let ret = unsafe { bindings::ib_register_device(raw, name.as_char_ptr(), ptr::null_mut()) };
        if let Err(e) = to_result(ret) {
            // SAFETY: Drops the reference taken above; `self` still owns the allocation's own.
            unsafe { bindings::put_device(bindings::ib_device_dev(raw)) };
            return Err(e);
        }
        // The RDMA core owns the device now: do not free it, but drop the
        // namespace reference, which registration no longer needs.
        let this = core::mem::ManuallyDrop::new(self);
        // SAFETY: `this.net` is read once and `this` is never dropped, so the reference is
        // released exactly once.
        drop(unsafe { ptr::read(&this.net) });
        // SAFETY: `dev` is registered and was never linked, and the reference taken above goes
        // to the list.
        unsafe { T::devices().push(dev) };
        Ok(())
    }
}

impl<T: Driver> Deref for UnregisteredDevice<T> {
    type Target = Device<T>;

    fn deref(&self) -> &Device<T> {
        // SAFETY: The device is valid by the type invariant.
        unsafe { self.ptr.as_ref() }
    }
}

impl<T: Driver> Drop for UnregisteredDevice<T> {
    fn drop(&mut self) {
        // SAFETY: We own the unregistered device; `dealloc_driver` drops the data, then the
        // memory is released.
        unsafe { bindings::ib_dealloc_device(self.ptr.as_ptr().cast()) };
    }
}

/// A registered device of driver `T`, held with a registration reference
/// (`ib_device_try_get`): while it exists the device stays registered or in
/// the middle of unregistering, and its driver state stays valid.
///
/// # Invariants
///
/// `ptr` points to a `Device<T>` on which `self` holds a registration
/// reference.
pub struct RegisteredDevice<T: Driver> {
    ptr: NonNull<Device<T>>,
}

// SAFETY: The reference can be dropped (`ib_device_put`) from any thread.
unsafe impl<T: Driver> Send for RegisteredDevice<T> {}

// SAFETY: Only shared access to `Device<T>`, which is `Sync`.
unsafe impl<T: Driver> Sync for RegisteredDevice<T> {}

impl<T: Driver> RegisteredDevice<T> {
    /// Returns the registered device of driver `T` bound to `netdev`.
    pub fn get_by_netdev(netdev: &net::Device) -> Option<Self> {
        // SAFETY: `netdev` is valid by its type invariant.
        let raw =
            unsafe { bindings::ib_device_get_by_netdev(netdev.as_raw(), T::DRIVER_ID.as_raw()) };
        let raw = NonNull::new(raw)?;
        // SAFETY: `ib_device_get_by_netdev` returned a device with a registration reference.
        if !unsafe { Device::<T>::is_ours(raw.as_ptr()) } {
            // Same driver id, other driver (the C `rdma_rxe`).
            // SAFETY: We hold the registration reference taken above.
            unsafe { bindings::ib_device_put(raw.as_ptr()) };
            return None;
        }
        // INVARIANT: The device is ours and we hold a registration reference.
        Some(Self { ptr: raw.cast() })
    }

    /// Unregisters the device from a workqueue (safe under RTNL, e.g. from a
    /// netdev notifier).
    ///
    /// Pending unregistrations complete before [`DriverRegistration`] is
    /// dropped.
    pub fn unregister_queued(self) {
        // SAFETY: We hold a registration reference, as `ib_unregister_device_queued` requires;
        // the device uses `dealloc_driver`.
        unsafe { bindings::ib_unregister_device_queued(self.ptr.as_ptr().cast()) };
        // `self` drops the registration reference.
    }
}

impl<T: Driver> Deref for RegisteredDevice<T> {
    type Target = Device<T>;

    fn deref(&self) -> &Device<T> {
        // SAFETY: The registration reference keeps the device and its data valid.
        unsafe { self.ptr.as_ref() }
    }
}

impl<T: Driver> Drop for RegisteredDevice<T> {
    fn drop(&mut self) {
        // SAFETY: We hold a registration reference by the type invariant.
        unsafe { bindings::ib_device_put(self.ptr.as_ptr().cast()) };
    }
}

/// Owns all devices of driver `T`: dropping it unregisters every device in
/// `T`'s [`Devices`] list that is still registered, and waits for the
/// unregistrations already under way, so that no callback of `T` runs
/// afterwards.
///
/// Only `T`'s own devices are touched: unlike `ib_unregister_driver`, which
/// unregisters every device with `T`'s driver id, whichever driver it belongs
/// to.
///
/// A module that registers devices keeps one of these in its state, so that
/// no device outlives the module's code.
pub struct DriverRegistration<T: Driver>(PhantomData<T>);

impl<T: Driver> DriverRegistration<T> {
    /// Creates the owner of the driver's devices.
    pub fn new() -> Self {
        Self(PhantomData)
    }
}

impl<T: Driver> Default for DriverRegistration<T> {
    fn default() -> Self {
        Self::new()
    }
}

impl<T: Driver> Drop for DriverRegistration<T> {
    fn drop(&mut self) {
        T::devices().unregister_all();
    }
}

/// The devices a driver registered: a `static` of the driver, returned by
/// [`Driver::devices`].
///
/// [`UnregisteredDevice::register`] links each device here with a reference
/// on its `struct device`, which keeps the `struct ib_device` (not the
/// driver's state) allocated. A device stays linked after its unregistration
/// until it is reaped: at the next registration, or at module unload by
/// [`DriverRegistration`]. Reaping waits until the device's
/// `dealloc_driver` has returned: the RDMA core calls it, last of all ops,
/// under the device's unregistration lock, which `ib_unregister_device`
/// takes as well. That is the fence `ib_unregister_driver` gives, without
/// its side effect on other drivers of the same driver id.
///
/// # Invariants
///
/// `head` is a lock-less list (`struct llist_head`) of the `owned` links of
/// registered (or formerly registered) `Device<T>`s, each holding one
/// `struct device` reference that the list owns.
pub struct Devices<T: Driver> {
    head: Opaque<bindings::llist_head>,
    _t: PhantomData<T>,
}

// SAFETY: The list is only changed with the lock-less list's atomic operations
// (`llist_add`, `llist_del_all`), and the devices it links are owned by the
// list, not by a thread.
unsafe impl<T: Driver> Sync for Devices<T> {}

impl<T: Driver> Devices<T> {
    /// Creates an empty list.
    pub const fn new() -> Self {
        // INVARIANT: The list is empty.
        Self {
            head: Opaque::new(bindings::llist_head {
                first: ptr::null_mut(),
            }),
            _t: PhantomData,
        }
    }

    /// Links `dev`.
    ///
    /// # Safety
    ///
    /// `dev` must be a registered device that is not linked, and the caller
    /// gives the list a reference on its `struct device`.
    unsafe fn push(&self, dev: NonNull<Device<T>>) {
        // SAFETY: The device is valid (the list's reference keeps it allocated), and its link is
        // in no list. `llist_add` is safe against concurrent adds and removals.
        // INVARIANT: The link of a `Device<T>`, with a reference for the list.
        unsafe {
            bindings::llist_add(
                Opaque::cast_into(&raw const (*dev.as_ptr()).owned),
                self.head.get(),
            )
        };
    }

    /// Unlinks every device and calls `f` on each, with the list's
    /// reference, which `f` drops or gives back with [`Devices::push`].
    fn take_each(&self, mut f: impl FnMut(NonNull<Device<T>>)) {
        // SAFETY: `head` is a valid list head; `llist_del_all` is atomic.
        let mut node = unsafe { bindings::llist_del_all(self.head.get()) };
        while let Some(n) = NonNull::new(node) {
            // SAFETY: `n` is the `owned` link of a valid `Device<T>` by the type invariant, now
            // out of the list; the next link is read before `f` may link `n` again.
            let (dev, next) = unsafe {
                let dev = kernel::container_of!(Opaque::cast_from(n.as_ptr()), Device<T>, owned);
                (NonNull::new_unchecked(dev.cast_mut()), (*n.as_ptr()).next)
            };
            node = next;
            f(dev);
        }
    }

    /// Unregisters `dev` if it is still registered, or waits until the
    /// unregistration under way has returned from `dealloc_driver`, then
    /// drops the list's reference, which the caller took out of the list.
    fn release(dev: NonNull<Device<T>>) {
        let raw = dev.as_ptr().cast::<bindings::ib_device>();
        // SAFETY: The list's reference keeps the `struct ib_device` allocated. The device was
        // registered and uses `dealloc_driver`. `ib_unregister_device` takes the device's
        // unregistration lock, which a concurrent unregistration holds until `dealloc_driver`
        // has returned; on a device already unregistered it does nothing else.
        unsafe { bindings::ib_unregister_device(raw) };
        // SAFETY: Drops the list's reference.
        unsafe { bindings::put_device(bindings::ib_device_dev(raw)) };
    }

    /// Drops the devices whose `dealloc_driver` has run, once it has
    /// returned. Process context.
    fn reap(&self) {
        self.take_each(|dev| {
            // SAFETY: The list's reference keeps the device allocated, and `released` with it.
            if unsafe { (*dev.as_ptr()).released.load(Acquire) } {
                Self::release(dev);
            } else {
                // SAFETY: `dev` is not linked; it was registered when it was linked first, and
                // its reference goes back to the list.
                unsafe { self.push(dev) };
            }
        });
    }

    /// Unregisters every device still registered and waits for those on
    /// their way out. Process context; no device may be registered
    /// concurrently.
    fn unregister_all(&self) {
        self.take_each(Self::release);
    }
}

impl<T: Driver> Default for Devices<T> {
    fn default() -> Self {
        Self::new()
    }
}

/// The `ib_device_ops` table of driver `T`, built at compile time.
///
/// # Callback contract
///
/// The RDMA core calls the ops of a device only while the device is valid, and only devices
/// allocated by [`UnregisteredDevice::new`] carry this table; their data is initialised before
/// the table is installed and dropped by `dealloc_driver`, the last op called. Hence every
/// `ib_device` pointer passed to a callback is the `ib` field of a valid `Device<T>` with
/// initialised data, and the other pointers are valid for the duration of the call as the C
/// prototypes in `struct ib_device_ops` document.
pub(crate) struct OpsTable<T: Driver>(PhantomData<T>);

impl<T: Driver> OpsTable<T> {
    /// The ops; `owner` is filled in at allocation.
    pub(crate) const VTABLE: bindings::ib_device_ops = bindings::ib_device_ops {
        driver_id: T::DRIVER_ID.as_raw(),
        uverbs_abi_ver: T::UVERBS_ABI_VER,
        query_device: Some(Self::query_device_callback),
        query_port: Some(Self::query_port_callback),
        get_port_immutable: Some(Self::get_port_immutable_callback),
        get_link_layer: if T::HAS_GET_LINK_LAYER {
            Some(Self::get_link_layer_callback)
        } else {
            None
        },
        query_pkey: if T::HAS_QUERY_PKEY {
            Some(Self::query_pkey_callback)
        } else {
            None
        },
        query_gid: if T::HAS_QUERY_GID {
            Some(Self::query_gid_callback)
        } else {
            None
        },
        modify_device: if T::HAS_MODIFY_DEVICE {
            Some(Self::modify_device_callback)
        } else {
            None
        },
        modify_port: if T::HAS_MODIFY_PORT {
            Some(Self::modify_port_callback)
        } else {
            None
        },
        process_mad: if T::HAS_PROCESS_MAD {
            Some(Self::process_mad_callback)
        } else {
            None
        },
        enable_driver: if T::HAS_ENABLE_DRIVER {
            Some(Self::enable_driver_callback)
        } else {
            None
        },
        dealloc_driver: Some(Self::dealloc_driver_callback),
        alloc_ucontext: Some(Ucontext::<T>::alloc_callback),
        dealloc_ucontext: Some(Ucontext::<T>::dealloc_callback),
        disassociate_ucontext: if T::HAS_DISASSOCIATE_UCONTEXT {
            Some(Ucontext::<T>::disassociate_callback)
        } else {
            None
        },
        alloc_pd: Some(Pd::<T>::alloc_callback),
        dealloc_pd: Some(Pd::<T>::dealloc_callback),
        alloc_hw_port_stats: if T::HAS_ALLOC_HW_PORT_STATS {
            Some(Self::alloc_hw_port_stats_callback)
        } else {
            None
        },
        get_hw_stats: if T::HAS_GET_HW_STATS {
            Some(Self::get_hw_stats_callback)
        } else {
            None
        },
        create_cq: Some(Cq::<T>::create_callback),
        destroy_cq: Some(Cq::<T>::destroy_callback),
        resize_user_cq: Some(Cq::<T>::resize_callback),
        poll_cq: Some(Cq::<T>::poll_callback),
        peek_cq: Some(Cq::<T>::peek_callback),
        req_notify_cq: Some(Cq::<T>::req_notify_callback),
        get_dma_mr: Some(Mr::<T>::get_dma_callback),
        reg_user_mr: Some(Mr::<T>::reg_user_callback),
        rereg_user_mr: if T::HAS_REREG_USER_MR {
            Some(Mr::<T>::rereg_user_callback)
        } else {
            None
        },
        dereg_mr: Some(Mr::<T>::dereg_callback),
        advise_mr: if T::HAS_ADVISE_MR {
            Some(Mr::<T>::advise_callback)
        } else {
            None
        },
        attach_mcast: if T::HAS_ATTACH_MCAST {
            Some(Qp::<T>::attach_mcast_callback)
        } else {
            None
        },
        detach_mcast: if T::HAS_DETACH_MCAST {
            Some(Qp::<T>::detach_mcast_callback)
        } else {
            None
        },
        alloc_mr: if T::HAS_ALLOC_MR {
            Some(Mr::<T>::alloc_callback)
        } else {
            None
        },
        map_mr_sg: if T::HAS_MAP_MR_SG {
            Some(Mr::<T>::map_sg_callback)
        } else {
            None
        },
        create_qp: Some(Qp::<T>::create_callback),
        modify_qp: Some(Qp::<T>::modify_callback),
        query_qp: Some(Qp::<T>::query_callback),
        destroy_qp: Some(Qp::<T>::destroy_callback),
        post_send: Some(Qp::<T>::post_send_callback),
        post_recv: Some(Qp::<T>::post_recv_callback),
        size_ib_qp: Qp::<T>::SIZE,
        create_srq: Some(Srq::<T>::create_callback),
        modify_srq: Some(Srq::<T>::modify_callback),
        query_srq: Some(Srq::<T>::query_callback),
        destroy_srq: Some(Srq::<T>::destroy_callback),
        post_srq_recv: if T::HAS_POST_SRQ_RECV {
            Some(Srq::<T>::post_recv_callback)
        } else {
            None
        },
        size_ib_srq: Srq::<T>::SIZE,
        create_ah: Some(Ah::<T>::create_callback),
        create_user_ah: Some(Ah::<T>::create_callback),
        query_ah: Some(Ah::<T>::query_callback),
        modify_ah: Some(Ah::<T>::modify_callback),
        destroy_ah: Some(Ah::<T>::destroy_callback),
        size_ib_ah: Ah::<T>::SIZE,
        alloc_mw: if T::HAS_ALLOC_MW {
            Some(Mw::<T>::alloc_callback)
        } else {
            None
        },
        dealloc_mw: if T::HAS_ALLOC_MW {
            Some(Mw::<T>::dealloc_callback)
        } else {
            None
        },
        size_ib_mw: Mw::<T>::SIZE,
        counter_bind_qp: if T::HAS_COUNTER_BIND_QP {
            Some(Counter::<T>::bind_qp_callback)
        } else {
            None
        },
        counter_unbind_qp: if T::HAS_COUNTER_BIND_QP {
            Some(Counter::<T>::unbind_qp_callback)
        } else {
            None
        },
        counter_dealloc: if T::HAS_COUNTER_BIND_QP {
            Some(Counter::<T>::dealloc_callback)
        } else {
            None
        },
        counter_alloc_stats: if T::HAS_COUNTER_BIND_QP {
            Some(Counter::<T>::alloc_stats_callback)
        } else {
            None
        },
        counter_update_stats: if T::HAS_COUNTER_BIND_QP {
            Some(Counter::<T>::update_stats_callback)
        } else {
            None
        },
        counter_init: if T::HAS_COUNTER_BIND_QP {
            Some(Counter::<T>::init_callback)
        } else {
            None
        },
        size_rdma_counter: Counter::<T>::SIZE,
        fill_res_qp_entry: if T::HAS_FILL_RES_QP_ENTRY {
            Some(Qp::<T>::fill_res_entry_callback)
        } else {
            None
        },
        mmap: Some(queue::mmap_callback),
        mmap_free: Some(queue::mmap_free_callback),
        size_ib_cq: Cq::<T>::SIZE,
        size_ib_ucontext: Ucontext::<T>::SIZE,
        size_ib_pd: Pd::<T>::SIZE,
        // SAFETY: All other fields are pointers, optional callbacks, integers and bitfields,
        // for which all-zero is valid and means "not provided".
        ..unsafe { core::mem::MaybeUninit::<bindings::ib_device_ops>::zeroed().assume_init() }
    };

    /// `query_device` callback.
    ///
    /// # Safety
    ///
    /// Only called by the RDMA core, as described in the callback contract of [`OpsTable`].
    unsafe extern "C" fn query_device_callback(
        ib: *mut bindings::ib_device,
        attr: *mut bindings::ib_device_attr,
        udata: *mut bindings::ib_udata,
    ) -> c_int {
        from_result(|| {
            // SAFETY: By the callback contract of `OpsTable`.
            let dev = unsafe { Device::<T>::from_raw(ib) };
            // SAFETY: `udata` is NULL or valid for the call.
            let udata = unsafe { Udata::from_raw(udata) };
            let a = T::query_device(dev, udata)?;
            // SAFETY: `attr` is valid for writes for the call.
            a.write_raw(unsafe { &mut *attr });
            Ok(0)
        })
    }

    /// `query_port` callback.
    ///
    /// # Safety
    ///
    /// Only called by the RDMA core, as described in the callback contract of [`OpsTable`].
    unsafe extern "C" fn query_port_callback(
        ib: *mut bindings::ib_device,
        port: u32,
        attr: *mut bindings::ib_port_attr,
    ) -> c_int {
        from_result(|| {
            // SAFETY: By the callback contract of `OpsTable`.
            let dev = unsafe { Device::<T>::from_raw(ib) };
            let a = T::query_port(dev, port)?;
            // SAFETY: `attr` is valid for writes for the call.
            a.write_raw(unsafe { &mut *attr });
            Ok(0)
        })
    }

    /// `get_port_immutable` callback.
    ///
    /// # Safety
    ///
    /// Only called by the RDMA core, as described in the callback contract of [`OpsTable`].
    unsafe extern "C" fn get_port_immutable_callback(
        ib: *mut bindings::ib_device,
        port: u32,
        imm: *mut bindings::ib_port_immutable,
    ) -> c_int {
        from_result(|| {
            // SAFETY: By the callback contract of `OpsTable`.
            let dev = unsafe { Device::<T>::from_raw(ib) };
            let a = T::get_port_immutable(dev, port)?;
            // SAFETY: `imm` is valid for writes for the call.
            a.write_raw(unsafe { &mut *imm });
            Ok(0)
        })
    }

    /// `get_link_layer` callback.
    ///
    /// # Safety
    ///
    /// Only called by the RDMA core, as described in the callback contract of [`OpsTable`].
    unsafe extern "C" fn get_link_layer_callback(
        ib: *mut bindings::ib_device,
        port: u32,
    ) -> bindings::rdma_link_layer {
        // SAFETY: By the callback contract of `OpsTable`.
        let dev = unsafe { Device::<T>::from_raw(ib) };
        T::get_link_layer(dev, port).as_raw()
    }

    /// `query_pkey` callback.
    ///
    /// # Safety
    ///
    /// Only called by the RDMA core, as described in the callback contract of [`OpsTable`].
    unsafe extern "C" fn query_pkey_callback(
        ib: *mut bindings::ib_device,
        port: u32,
        index: u16,
        pkey: *mut u16,
    ) -> c_int {
        from_result(|| {
            // SAFETY: By the callback contract of `OpsTable`.
            let dev = unsafe { Device::<T>::from_raw(ib) };
            let v = T::query_pkey(dev, port, index)?;
            // SAFETY: `pkey` is valid for writes for the call.
            unsafe { pkey.write(v) };
            Ok(0)
        })
    }

    /// `query_gid` callback.
    ///
    /// # Safety
    ///
    /// Only called by the RDMA core, as described in the callback contract of [`OpsTable`].
    unsafe extern "C" fn query_gid_callback(
        ib: *mut bindings::ib_device,
        port: u32,
        index: c_int,
        gid: *mut bindings::ib_gid,
    ) -> c_int {
        from_result(|| {
            // SAFETY: By the callback contract of `OpsTable`.
            let dev = unsafe { Device::<T>::from_raw(ib) };
            let v = T::query_gid(dev, port, index)?;
            // SAFETY: `gid` is valid for writes for the call; `raw` covers the whole union.
            unsafe { *(*gid).raw.as_mut() = v.0 };
            Ok(0)
        })
    }

    /// `enable_driver` callback.
    ///
    /// # Safety
    ///
    /// Only called by the RDMA core, as described in the callback contract of [`OpsTable`].
    unsafe extern "C" fn enable_driver_callback(ib: *mut bindings::ib_device) -> c_int {
        from_result(|| {
            // SAFETY: By the callback contract of `OpsTable`.
            let dev = unsafe { Device::<T>::from_raw(ib) };
            T::enable_driver(dev)?;
            Ok(0)
        })
    }

    /// `modify_device` callback.
    ///
    /// # Safety
    ///
    /// Only called by the RDMA core, as described in the callback contract of [`OpsTable`].
    unsafe extern "C" fn modify_device_callback(
        ib: *mut bindings::ib_device,
        mask: c_int,
        attr: *mut bindings::ib_device_modify,
    ) -> c_int {
        from_result(|| {
            // SAFETY: By the callback contract of `OpsTable`.
            let dev = unsafe { Device::<T>::from_raw(ib) };
            // CAST: a mask of flag bits.
            // SAFETY: By the callback contract of `OpsTable`, `attr` is valid for the call.
            let modify = unsafe { DeviceModify::from_raw(mask as u32, attr) };
            T::modify_device(dev, &modify)?;
            Ok(0)
        })
    }

    /// `modify_port` callback.
    ///
    /// # Safety
    ///
    /// Only called by the RDMA core, as described in the callback contract of [`OpsTable`].
    unsafe extern "C" fn modify_port_callback(
        ib: *mut bindings::ib_device,
        port: u32,
        mask: c_int,
        attr: *mut bindings::ib_port_modify,
    ) -> c_int {
        from_result(|| {
            // SAFETY: By the callback contract of `OpsTable`.
            let dev = unsafe { Device::<T>::from_raw(ib) };
            // CAST: a mask of flag bits.
            // SAFETY: By the callback contract of `OpsTable`, `attr` is valid for the call.
            let modify = unsafe { PortModify::from_raw(mask as u32, attr) };
            T::modify_port(dev, port, &modify)?;
            Ok(0)
        })
    }

    /// `process_mad` callback.
    ///
    /// # Safety
    ///
    /// Only called by the RDMA core, as described in the callback contract of [`OpsTable`]; its
    /// callers (sysfs `get_perf_mad`, the MAD layer's receive path and its local directed-route
    /// SMPs) pass two distinct buffers of at least `sizeof(struct ib_mad)` bytes.
    #[allow(clippy::too_many_arguments)]
    unsafe extern "C" fn process_mad_callback(
        ib: *mut bindings::ib_device,
        _flags: c_int,
        port: u32,
        _in_wc: *const bindings::ib_wc,
        _in_grh: *const bindings::ib_grh,
        in_mad: *const bindings::ib_mad,
        out_mad: *mut bindings::ib_mad,
        _out_mad_size: *mut usize,
        _out_mad_pkey_index: *mut u16,
    ) -> c_int {
        // SAFETY: By the callback contract of `OpsTable`.
        let dev = unsafe { Device::<T>::from_raw(ib) };
        // SAFETY: `in_mad` is valid for reading `MAD_SIZE` bytes (its size, asserted in `mad`)
        // for the call and not written meanwhile; a MAD is plain bytes.
        let mad = unsafe { &*in_mad.cast::<[u8; MAD_SIZE]>() };
        // SAFETY: `out_mad` is valid for writing `MAD_SIZE` bytes for the call and is not
        // `in_mad`.
        let out = unsafe { &mut *out_mad.cast::<[u8; MAD_SIZE]>() };
        // CAST: `enum ib_mad_result` values, 0 to 7.
        T::process_mad(dev, port, mad, out).as_raw() as c_int
    }

    /// `dealloc_driver` callback.
    ///
    /// # Safety
    ///
    /// Only called by the RDMA core, as described in the callback contract of [`OpsTable`].
    unsafe extern "C" fn dealloc_driver_callback(ib: *mut bindings::ib_device) {
        // CAST: `ib` is the first field of the `#[repr(C)]` struct `Device<T>`.
        let dev = ib.cast::<Device<T>>();
        // SAFETY: By the callback contract of `OpsTable`; this is the last op, called once, and
        // nothing reads the data afterwards.
        unsafe { ptr::drop_in_place(&raw mut (*dev).data) };
        // SAFETY: Every QP, MR, AH and MW was destroyed before (the RDMA core destroys all objects
        // before `dealloc_driver`), so the tables are empty and unused.
        unsafe {
            (*dev).qps.destroy();
            (*dev).mrs.destroy();
            (*dev).ahs.destroy();
            (*dev).mws.destroy();
        }
        // SAFETY: `released` is valid until the memory is freed, which happens after this call.
        unsafe { (*dev).released.store(true, Release) };
    }

    /// `alloc_hw_port_stats` callback.
    ///
    /// # Safety
    ///
    /// Only called by the RDMA core, as described in the callback contract of [`OpsTable`].
    unsafe extern "C" fn alloc_hw_port_stats_callback(
        ib: *mut bindings::ib_device,
        port: u32,
    ) -> *mut bindings::rdma_hw_stats {
        // SAFETY: By the callback contract of `OpsTable`.
        let dev = unsafe { Device::<T>::from_raw(ib) };
        match T::alloc_hw_port_stats(dev, port) {
            Ok(descs) => hw_counters::alloc_stats(descs),
            Err(_) => ptr::null_mut(),
        }
    }

    /// `get_hw_stats` callback.
    ///
    /// # Safety
    ///
    /// Only called by the RDMA core, as described in the callback contract of [`OpsTable`].
    unsafe extern "C" fn get_hw_stats_callback(
        ib: *mut bindings::ib_device,
        stats: *mut bindings::rdma_hw_stats,
        port: u32,
        _index: c_int,
    ) -> c_int {
        from_result(|| {
            // SAFETY: By the callback contract of `OpsTable`.
            let dev = unsafe { Device::<T>::from_raw(ib) };
            if stats.is_null() {
                return Err(EINVAL);
            }
            // SAFETY: `stats` was allocated by `alloc_hw_port_stats_callback`; the RDMA core
            // holds its lock for the call.
            let values = unsafe { hw_counters::values(stats) };
            let n = T::get_hw_stats(dev, port, values)?;
            Ok(c_int::try_from(n)?)
        })
    }
}
