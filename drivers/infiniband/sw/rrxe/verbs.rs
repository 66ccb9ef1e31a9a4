// SPDX-License-Identifier: GPL-2.0

#![forbid(unsafe_code)]

//! The device operations of rrxe.

use crate::proto::pma;
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
    device::{
        self,
        Device,
        Devices,
        Driver, //
    },
    eopnotsupp,
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
    pd::Pd as IbPd,
    port::{
        CoreCapFlags,
        LinkLayer,
        PhysState,
        PortAttr,
        PortImmutable,
        PortModify,
        PortState, //
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
    udata::Udata,
    wc::Wc,
    DriverId,
    Gid, //
};
use kernel::{
    prelude::*,
    ThisModule, //
};

use super::{
    ah::RrxeAh,
    cq::RrxeCq,
    device::RrxeDev,
    hw_counters::{
        self,
        Counter,
        QpCounter, //
    },
    mr::RrxeMr,
    mw::RrxeMw,
    param,
    qp::RrxeQp,
    srq::RrxeSrq, //
};

/// The rrxe provider.
pub(crate) struct Rrxe;

/// State of a user context (nothing yet: queues and mmaps come with CQs
/// and QPs).
pub(crate) struct Ucontext;

/// State of a protection domain (nothing yet: MRs, MWs and QPs refer to it).
pub(crate) struct Pd;

/// rrxe has one port.
const PORT: u32 = 1;

fn check_port(port: u32) -> Result {
    if port == PORT {
        Ok(())
    } else {
        Err(EINVAL)
    }
}

/// Every rrxe device, for unloading the module (see [`Devices`]).
static DEVICES: Devices<Rrxe> = Devices::new();

#[vtable]
impl Driver for Rrxe {
    type Data = RrxeDev;
    type UcontextData = Ucontext;
    type PdData = Pd;
    type CqData = RrxeCq;
    type MrData = RrxeMr;
    type QpData = RrxeQp;
    type SrqData = RrxeSrq;
    type AhData = RrxeAh;
    type MwData = RrxeMw;
    type CounterData = QpCounter;

    const DRIVER_ID: DriverId = DriverId::Rxe;
    const UVERBS_ABI_VER: u32 = param::UVERBS_ABI_VERSION;
    const OWNER: &'static ThisModule = &crate::THIS_MODULE;
    const SYSFS_PARENT: bool = true;

    fn devices() -> &'static Devices<Self> {
        &DEVICES
    }

    fn query_device(dev: &Device<Self>, udata: Option<&Udata>) -> Result<DeviceAttr> {
        // No driver data in either direction.
        if let Some(udata) = udata {
            udata.check_in_empty()?;
            udata.respond_empty()?;
        }
        let mut attr = dev.attr().clone();
        attr.sys_image_guid = dev.sys_image_guid();
        Ok(attr)
    }

    fn process_mad(
        dev: &Device<Self>,
        port: u32,
        mad: &[u8; MAD_SIZE],
        out: &mut [u8; MAD_SIZE],
    ) -> MadResult {
        if check_port(port).is_err() {
            return MadResult::Failure;
        }
        match pma::process(mad, || dev.counters.pma(), out) {
            pma::Outcome::Reply => MadResult::Reply,
            pma::Outcome::NotHandled => MadResult::Pass,
        }
    }

    fn modify_device(dev: &Device<Self>, modify: &DeviceModify) -> Result {
        // As the C driver: the system image GUID and the node description
        // can change, nothing else.
        if modify.other_mask != 0 {
            return Err(eopnotsupp());
        }
        if let Some(guid) = modify.sys_image_guid {
            dev.set_sys_image_guid(guid);
        }
        if let Some(desc) = &modify.node_desc {
            dev.store_node_desc(desc);
        }
        Ok(())
    }

    fn modify_port(dev: &Device<Self>, port: u32, modify: &PortModify) -> Result {
        check_port(port)?;
        // As the C driver: no shutdown or init type, only the capability
        // mask and the Q_Key violation counter's reset.
        if modify.other_mask != 0 {
            return Err(eopnotsupp());
        }
        dev.modify_port_cap_flags(modify.set_port_cap_mask, modify.clr_port_cap_mask);
        if modify.reset_qkey_cntr {
            dev.reset_qkey_viol_cntr();
        }
        Ok(())
    }

    fn query_port(dev: &Device<Self>, port: u32) -> Result<PortAttr> {
        check_port(port)?;
        let ndev = dev.netdev(PORT).ok_or(ENODEV)?;
        let mut attr = param::port_attr(dev.active_mtu());
        let (speed, width) = dev.eth_speed(port)?;
        attr.active_speed = speed;
        attr.active_width = width;
        // 16-bit counters that stop at their maximum (IBTA Vol 1 §14.2.5.6).
        attr.bad_pkey_cntr =
            u32::try_from(dev.counters.get(Counter::RcvdDropBadPkey).min(0xffff)).unwrap_or(0xffff);
        attr.qkey_viol_cntr = dev.qkey_viol_cntr();
        attr.port_cap_flags = dev.port_cap_flags();
        attr.state = device::port_state_of(&ndev);
        attr.phys_state = if attr.state == PortState::Active {
            PhysState::LinkUp
        } else if ndev.is_up() {
            PhysState::Polling
        } else {
            PhysState::Disabled
        };
        Ok(attr)
    }

    fn get_port_immutable(_dev: &Device<Self>, port: u32) -> Result<PortImmutable> {
        check_port(port)?;
        Ok(PortImmutable {
            pkey_tbl_len: param::PORT_PKEY_TBL_LEN.into(),
            gid_tbl_len: param::PORT_GID_TBL_LEN,
            core_cap_flags: CoreCapFlags::IBA_ROCE_UDP_ENCAP,
            max_mad_size: PortImmutable::MGMT_MAD_SIZE,
        })
    }

    fn get_link_layer(_dev: &Device<Self>, _port: u32) -> LinkLayer {
        LinkLayer::Ethernet
    }

    fn query_pkey(_dev: &Device<Self>, port: u32, index: u16) -> Result<u16> {
        check_port(port)?;
        if index != 0 {
            return Err(EINVAL);
        }
        Ok(param::DEFAULT_PKEY_FULL)
    }

    fn query_gid(dev: &Device<Self>, port: u32, _index: i32) -> Result<Gid> {
        check_port(port)?;
        Ok(dev.raw_gid())
    }

    fn enable_driver(dev: &Device<Self>) -> Result {
        let ndev = dev.netdev(PORT).ok_or(ENODEV)?;
        // Initial PORT_ACTIVE/PORT_ERR; the RDMA core reports later changes itself.
        dev.dispatch_port_state_event(&ndev);
        if device::port_state_of(&ndev) == PortState::Active {
            dev_info!(dev.as_dev(), "set active\n");
        } else {
            dev.count_link_down();
            dev_info!(dev.as_dev(), "set down\n");
        }
        dev_info!(dev.as_dev(), "added {}\n", ndev.name());
        Ok(())
    }

    // Nothing of rrxe's outlives the context's objects, which the core has
    // destroyed by now, and its queue mappings are the core's, zapped by
    // now too; having the op lets `rdma link delete`, a netdev's removal
    // and `rmmod rrxe` go on while applications keep the device open (the
    // C driver has none, and its removal waits for them).
    fn disassociate_ucontext(_uctx: &crate::rdma::ucontext::Ucontext<Self>) {}

    fn alloc_ucontext(
        _dev: &Device<Self>,
        _udata: Option<&Udata>,
    ) -> impl PinInit<Ucontext, Error> {
        try_init!(Ucontext {})
    }

    fn alloc_pd(_dev: &Device<Self>, _udata: Option<&Udata>) -> impl PinInit<Pd, Error> {
        try_init!(Pd {})
    }

    fn create_cq(
        dev: &Device<Self>,
        attr: &CqInitAttr,
        udata: Option<&Udata>,
    ) -> Result<(impl PinInit<RrxeCq, Error>, u32)> {
        RrxeCq::create(dev, attr, udata)
    }

    fn destroy_cq(cq: &Cq<Self>) -> Result {
        cq.check_destroy()
    }

    fn resize_cq(cq: &Cq<Self>, cqe: u32, udata: Option<&Udata>) -> Result {
        RrxeCq::resize(cq, cqe, udata)
    }

    fn poll_cq(cq: &Cq<Self>, max: usize, out: &mut dyn FnMut(&Wc)) {
        cq.poll(max, out)
    }

    fn peek_cq(cq: &Cq<Self>) -> u32 {
        cq.count()
    }

    fn req_notify_cq(cq: &Cq<Self>, flags: NotifyFlags) -> bool {
        cq.req_notify(flags)
    }

    fn get_dma_mr(
        pd: &IbPd<Self>,
        access: AccessFlags,
    ) -> Result<(impl PinInit<RrxeMr, Error>, MrKeys)> {
        RrxeMr::dma(pd, access)
    }

    fn reg_user_mr(
        pd: &IbPd<Self>,
        args: &UserMrArgs,
        udata: Option<&Udata>,
    ) -> Result<(impl PinInit<RrxeMr, Error>, MrKeys)> {
        RrxeMr::user(pd, args, udata)
    }

    fn rereg_user_mr(
        mr: &Mr<Self>,
        args: &ReregArgs,
        _pd: &IbPd<Self>,
        _udata: Option<&Udata>,
    ) -> Result {
        RrxeMr::rereg(mr, args)
    }

    fn advise_mr(
        dev: &Device<Self>,
        pd_id: usize,
        advice: u32,
        flags: u32,
        sges: &[AdviseSge],
    ) -> Result {
        super::odp::advise(dev, pd_id, advice, flags, sges)
    }

    fn begin_dereg_mr(mr: &Mr<Self>) -> Result {
        RrxeMr::begin_dereg(mr)
    }

    fn dereg_mr(mr: &Mr<Self>) -> Result {
        RrxeMr::dereg(mr)
    }

    fn alloc_mr(
        pd: &IbPd<Self>,
        mr_type: u32,
        max_num_sg: u32,
    ) -> Result<(impl PinInit<RrxeMr, Error>, MrKeys)> {
        RrxeMr::fast(pd, mr_type, max_num_sg)
    }

    fn map_mr_sg(mr: &Mr<Self>, sg: SgList<'_, Self>) -> Result<u32> {
        RrxeMr::map_sg(mr, sg)
    }

    fn alloc_mw(
        dev: &Device<Self>,
        ty: u32,
        pd_id: usize,
        _udata: Option<&Udata>,
    ) -> Result<(impl PinInit<RrxeMw, Error>, u32)> {
        RrxeMw::alloc(dev, ty, pd_id)
    }

    fn dealloc_mw(mw: &Mw<Self>) {
        RrxeMw::dealloc(mw)
    }

    fn create_qp(
        qp: &NewQp<Self>,
        attr: &mut QpInitAttr,
        udata: Option<&Udata>,
    ) -> Result<(impl PinInit<RrxeQp, Error>, u32)> {
        RrxeQp::create(qp, attr, udata)
    }

    fn modify_qp(qp: &Qp<Self>, attr: &QpAttr, mask: QpAttrMask, _udata: Option<&Udata>) -> Result {
        RrxeQp::modify(qp, attr, mask)
    }

    fn query_qp(qp: &Qp<Self>) -> Result<(QpAttr, bool)> {
        Ok(RrxeQp::query(qp))
    }

    fn counter_bind_qp(counter: &mut CounterGuard<'_, Self>, qp: &Qp<Self>) -> Result {
        let key = counter.key();
        counter.device().bound_qps.lock().bind(key, qp)
    }

    fn counter_unbind_qp(counter: &mut CounterGuard<'_, Self>, qp: &Qp<Self>) -> Result {
        let dev = counter.device();
        dev.bound_qps
            .lock()
            .unbind(dev, qp, &mut counter.data().retired);
        Ok(())
    }

    fn counter_update_stats(counter: &mut CounterGuard<'_, Self>, values: &mut [u64]) -> Result {
        let (dev, key) = (counter.device(), counter.key());
        let v = dev
            .bound_qps
            .lock()
            .counter_values(dev, key, &counter.data().retired);
        // Each value written once: the core reads them without the lock.
        for (o, n) in values.iter_mut().zip(v) {
            *o = n;
        }
        Ok(())
    }

    fn fill_res_qp_entry(qp: &Qp<Self>, out: &mut ResDetails<'_>) -> Result {
        qp.fill_res_entry(out)
    }

    fn destroy_qp(qp: &Qp<Self>) -> Result {
        RrxeQp::destroy(qp)
    }

    fn post_send(qp: &Qp<Self>, wr: Option<&SendWr<'_, Self>>) -> Result {
        RrxeQp::post_send(qp, wr)
    }

    fn qp_timer(qp: &Qp<Self>, t: QpTimer) {
        RrxeQp::timer(qp, t);
    }

    fn attach_mcast(qp: &Qp<Self>, mgid: &Gid) -> Result {
        super::mcast::attach(qp, mgid)
    }

    fn detach_mcast(qp: &Qp<Self>, mgid: &Gid) -> Result {
        super::mcast::detach(qp, mgid)
    }

    fn qp_kick(qp: &Qp<Self>) {
        RrxeQp::kick(qp);
    }

    fn qp_sleepable(qp: &Qp<Self>) {
        super::odp::run(qp);
        // A loopback stream that reached its bound in one call goes on here.
        super::tx::send_queued(qp);
        // So does a UD requester or a flush that reached its bound.
        RrxeQp::go_on_run(qp);
    }

    fn post_recv(qp: &Qp<Self>, wr: &RecvWr<'_>) -> Result {
        RrxeQp::post_recv(qp, wr)
    }

    fn create_srq(
        dev: &Device<Self>,
        attr: &mut SrqAttr,
        udata: Option<&Udata>,
    ) -> Result<impl PinInit<RrxeSrq, Error>> {
        RrxeSrq::create(dev, attr, udata)
    }

    fn modify_srq(srq: &Srq<Self>, attr: &SrqAttr, mask: u32, udata: Option<&Udata>) -> Result {
        RrxeSrq::modify(srq, attr, mask, udata)
    }

    fn query_srq(srq: &Srq<Self>) -> SrqAttr {
        srq.query()
    }

    fn post_srq_recv(srq: &Srq<Self>, wr: &RecvWr<'_>) -> Result {
        RrxeSrq::post(srq, wr)
    }

    fn destroy_srq(srq: &Srq<Self>) -> Result {
        RrxeSrq::destroy(srq)
    }

    fn create_ah(
        dev: &Device<Self>,
        attr: AhAttr,
        udata: Option<&Udata>,
    ) -> Result<(impl PinInit<RrxeAh, Error>, u32)> {
        RrxeAh::create(dev, attr, udata)
    }

    fn query_ah(ah: &Ah<Self>) -> AhAttr {
        RrxeAh::attr(ah)
    }

    fn modify_ah(ah: &Ah<Self>, attr: AhAttr) -> Result {
        RrxeAh::modify(ah, attr)
    }

    fn destroy_ah(ah: &Ah<Self>) -> Result {
        RrxeAh::destroy(ah)
    }

    fn alloc_hw_port_stats(_dev: &Device<Self>, port: u32) -> Result<&'static [StatDesc]> {
        check_port(port)?;
        Ok(hw_counters::DESCS)
    }

    fn get_hw_stats(dev: &Device<Self>, port: u32, values: &mut [u64]) -> Result<usize> {
        check_port(port)?;
        let share = dev.bound_qps.lock().bound_share(dev);
        Ok(dev.counters.read_less(&share, values))
    }
}
