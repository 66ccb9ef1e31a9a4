// SPDX-License-Identifier: GPL-2.0

//! Socket buffers (`struct sk_buff`).
//!
//! C header: [`include/linux/skbuff.h`](srctree/include/linux/skbuff.h)

use crate::{
    bindings,
    net::{
        route::{
            ipv4_mapped,
            Route, //
        },
        Device,
        Namespace, //
    },
    rdma::lock::{
        new_spinlock_irq,
        SpinLockIrq, //
    },
};
use core::ptr::NonNull;
use kernel::{
    error::to_result,
    prelude::*,
    sync::{
        atomic::{
            Acquire,
            Atomic,
            Full,
            Relaxed,
            Release, //
        },
        rcu,
        Arc, //
    },
    types::Opaque, //
};

/// EtherType of IPv4 (`ETH_P_IP`), host byte order.
pub const ETH_P_IP: u16 = 0x0800;
/// EtherType of IPv6 (`ETH_P_IPV6`), host byte order.
pub const ETH_P_IPV6: u16 = 0x86dd;

/// Length of an IPv4 header without options (`struct iphdr`), in bytes.
pub const IPV4_HLEN: usize = 20;
/// Length of the fixed IPv6 header (`struct ipv6hdr`), in bytes.
pub const IPV6_HLEN: usize = 40;
/// Length of the UDP header (`struct udphdr`), in bytes.
pub const UDP_HLEN: usize = 8;

/// IP protocol number of UDP (`IPPROTO_UDP`).
const IPPROTO_UDP: u8 = 17;
/// "Don't fragment" in the IPv4 flags and fragment offset (`IP_DF`).
const IP_DF: u16 = 0x4000;
/// The IPv6 flow label is the low 20 bits of the first header word.
const IPV6_FLOWLABEL_MASK: u32 = 0xf_ffff;

/// An owned socket buffer.
///
/// Whoever holds an `SkBuff` owns the packet: dropping it frees it
/// (`kfree_skb`, which counts as a drop for the drop monitor), and functions
/// that hand the packet on (transmit, queueing) take it by value.
///
/// # Invariants
///
/// `ptr` is a valid `struct sk_buff` of which `self` owns one reference, and
/// no one else accesses its data or length while `self` exists.
pub struct SkBuff {
    ptr: NonNull<bindings::sk_buff>,
}

// SAFETY: An skb may be handed from one context to another (e.g. from softirq to a workqueue);
// the owner has exclusive access.
unsafe impl Send for SkBuff {}

// SAFETY: `&SkBuff` only gives read access to the packet, which no one else modifies.
unsafe impl Sync for SkBuff {}

impl SkBuff {
    /// Takes ownership of `ptr`.
    ///
    /// # Safety
    ///
    /// `ptr` must be a valid skb whose reference the caller gives to the
    /// returned object, and no one else may access the skb afterwards.
    pub(crate) unsafe fn from_raw(ptr: NonNull<bindings::sk_buff>) -> Self {
        // INVARIANT: By the safety requirements.
        Self { ptr }
    }

    /// Gives up ownership and returns the C pointer (for functions that
    /// consume the skb).
    pub(crate) fn into_raw(self) -> NonNull<bindings::sk_buff> {
        let ptr = self.ptr;
        core::mem::forget(self);
        ptr
    }

    fn as_raw(&self) -> *mut bindings::sk_buff {
        self.ptr.as_ptr()
    }

    /// Returns the C pointer, for abstractions that read fields.
    pub(crate) fn as_raw_ptr(&self) -> *mut bindings::sk_buff {
        self.as_raw()
    }

    /// Length of the data from `data` on, linear and paged, in bytes.
    pub fn len(&self) -> usize {
        // SAFETY: `self.ptr` is valid by the type invariant.
        let len = unsafe { bindings::skb_len(self.as_raw()) };
        // CAST: `u32` to `usize` is lossless on the supported architectures.
        len as usize
    }

    /// Returns whether there is no data.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The linear part of the data (`skb_headlen` bytes from `data`); the
    /// whole data after [`SkBuff::linearize`].
    pub fn data(&self) -> &[u8] {
        // SAFETY: `self.ptr` is valid by the type invariant.
        let (p, n) = unsafe {
            (
                bindings::skb_data(self.as_raw()),
                bindings::skb_headlen(self.as_raw()),
            )
        };
        if p.is_null() || n == 0 {
            return &[];
        }
        // SAFETY: The linear part is `skb_headlen` readable bytes at `data`, which no one
        // modifies while `self` is borrowed (type invariant).
        // CAST: `u32` to `usize` is lossless.
        unsafe { core::slice::from_raw_parts(p, n as usize) }
    }

    /// The bytes from the network header up to `data`: at a UDP tunnel's
    /// receive hook, the IP header (with any IPv6 extension headers).
    ///
    /// `None` if the network header is not set or lies after `data`.
    pub fn network_to_data(&self) -> Option<&[u8]> {
        let mut n = 0u32;
        // SAFETY: `self.ptr` is valid by the type invariant; `n` is valid for writes.
        let p = unsafe { bindings::skb_network_to_data(self.as_raw(), &mut n) };
        if p.is_null() {
            return None;
        }
        // SAFETY: The network header lies in the linear buffer at or before `data`, so the `n`
        // bytes up to `data` are readable; no one modifies them while `self` is borrowed.
        // CAST: `u32` to `usize` is lossless.
        Some(unsafe { core::slice::from_raw_parts(p, n as usize) })
    }

    /// The link-layer protocol (`skb->protocol`), as a host-order EtherType
    /// such as [`ETH_P_IP`] or [`ETH_P_IPV6`].
    pub fn protocol(&self) -> u16 {
        // SAFETY: `self.ptr` is valid by the type invariant.
        unsafe { bindings::skb_protocol(self.as_raw()) }
    }

    /// Makes all data linear (`skb_linearize`), so that [`SkBuff::data`]
    /// covers [`SkBuff::len`] bytes.
    ///
    /// # Errors
    ///
    /// `ENOMEM` if the data could not be copied.
    pub fn linearize(&mut self) -> Result {
        // SAFETY: `self.ptr` is valid and exclusively owned by the type invariant.
        to_result(unsafe { bindings::skb_linearize(self.as_raw()) })
    }

    /// Removes `n` bytes from the start of the data (`skb_pull`).
    ///
    /// # Errors
    ///
    /// `EINVAL` if the linear part is shorter than `n` bytes; nothing is
    /// removed then.
    pub fn pull(&mut self, n: usize) -> Result {
        if n > self.data().len() {
            return Err(EINVAL);
        }
        // CAST: `n` is at most `skb_headlen`, a `u32`.
        // SAFETY: `self.ptr` is valid and exclusively owned; `n` is within the linear part.
        unsafe { bindings::skb_pull(self.as_raw(), n as u32) };
        Ok(())
    }

    /// Drops the skb's route (`skb_dst_drop`), e.g. before keeping a
    /// received packet past the softirq that received it: its route may
    /// be held without a reference (`SKB_DST_NOREF`), valid only there.
    pub fn drop_dst(&mut self) {
        // SAFETY: `self.ptr` is valid and exclusively owned by the type invariant.
        unsafe { bindings::skb_dst_drop(self.as_raw()) };
    }

    /// Whether the skb's route leaves through a loopback device, i.e. its
    /// destination is an address of this host.
    pub fn dst_is_loopback(&self) -> bool {
        // SAFETY: `self.ptr` is valid by the type invariant.
        unsafe { bindings::skb_dst_is_loopback(self.as_raw()) }
    }

    /// Allocates an skb for a UDP payload of `len` bytes to be sent over
    /// `route` out of `dev`, with the payload zeroed and put: the data is
    /// the payload, to be filled through [`SkBuff::data_mut`] before
    /// [`SkBuff::push_udp_ip`].
    ///
    /// The headroom holds the IP header of the route's family, the UDP
    /// header, and the link-layer header (`LL_RESERVED_SPACE`) of `dev` and
    /// of the route's device. Allocates with `GFP_ATOMIC`, so it may be
    /// called in softirq or with a spinlock held (IRQs off too).
    ///
    /// # Errors
    ///
    /// `EMSGSIZE` if the UDP/IP lengths of such a packet do not fit their
    /// 16-bit fields; `ENOMEM` if there is no memory.
    pub fn alloc_udp(dev: &Device, route: &Route, len: usize) -> Result<SkBuff> {
        let l3_len = l3_hlen(route);
        if len > max_udp_payload(route) {
            return Err(EMSGSIZE);
        }
        // CAST: both are below 64 KiB, checked above.
        let (hdr_len, len) = ((l3_len + UDP_HLEN) as u32, len as u32);
        // SAFETY: `dev` and the route are valid for the call; the route is used only to read its
        // device.
        let skb = unsafe { bindings::alloc_skb_udp(dev.as_raw(), route.dst(), hdr_len, len) };
        let skb = NonNull::new(skb).ok_or(ENOMEM)?;
        // SAFETY: The skb was just allocated; its only reference is ours.
        Ok(unsafe { SkBuff::from_raw(skb) })
    }

    /// The linear part of the data, writable (`skb_headlen` bytes from
    /// `data`): for an skb from [`SkBuff::alloc_udp`], the whole UDP
    /// payload.
    ///
    /// If the data is shared with a clone (a received packet that a packet
    /// socket also holds), it is first copied (`skb_unclone`); if that
    /// copy fails for want of memory, the slice is empty.
    pub fn data_mut(&mut self) -> &mut [u8] {
        let mut n = 0u32;
        // SAFETY: `self.ptr` is valid and exclusively owned; `n` is valid for writes.
        let p = unsafe { bindings::skb_data_mut(self.as_raw(), &mut n) };
        if p.is_null() || n == 0 {
            return &mut [];
        }
        // SAFETY: The helper returned the `n` bytes of the linear data, no longer shared with any
        // clone; `&mut self` keeps everyone else away from them for the borrow.
        // CAST: `u32` to `usize` is lossless.
        unsafe { core::slice::from_raw_parts_mut(p, n as usize) }
    }

    /// Pushes the UDP and IP headers of a RoCEv2 packet in front of the
    /// data and readies the skb for [`xmit_udp`] over `route`.
    ///
    /// What it writes, as `prepare4`/`prepare6` of the C driver:
    ///
    /// - UDP: `h.sport`, `h.dport`, the length, and checksum 0. On IPv6
    ///   too: the C driver sends zero UDP checksums over IPv6 (RFC 6935
    ///   allows it for tunnels) and both its and our tunnel sockets accept
    ///   them (`use_udp6_rx_checksums` unset); the ICRC protects the
    ///   payload.
    /// - IPv4 (the GIDs must be IPv4-mapped): version 4, IHL 5, `h.tos`,
    ///   total length, DF set, the identification from the namespace's
    ///   generator (`__ip_select_ident`), `h.ttl`, UDP, the header checksum,
    ///   and the addresses of the GIDs.
    /// - IPv6: version 6, traffic class `h.tos`, flow label (low 20 bits of
    ///   `h.flow_label`; the C driver always sends 0), payload length, next
    ///   header UDP, hop limit `h.ttl`, and the GIDs as addresses.
    ///
    /// It also sets `skb->protocol`, the network and transport headers,
    /// attaches the route (`skb_dst_set` with a new reference: `route`
    /// stays the caller's), clears the control block and hash and scrubs
    /// what an earlier life of the skb left (`skb_scrub_packet`). Like the C
    /// driver it leaves `ignore_df` clear, so an IPv4 packet larger than
    /// the path MTU is dropped by the IP stack rather than fragmented
    /// (unless [`SkBuff::allow_fragments`] is called).
    ///
    /// # Errors
    ///
    /// `EINVAL` if the route is IPv4 and a GID is not IPv4-mapped;
    /// `EMSGSIZE` if a length does not fit its 16-bit field; `ENOMEM` if
    /// the headroom had to be grown or copied and there is no memory. The
    /// skb is unchanged on error.
    pub fn push_udp_ip(&mut self, route: &Route, h: &UdpIpHdr) -> Result {
        let udp_len = u16::try_from(self.len() + UDP_HLEN).map_err(|_| EMSGSIZE)?;
        let v4 = match route {
            Route::V4(_) => {
                let saddr = ipv4_mapped(&h.sgid).ok_or(EINVAL)?;
                let daddr = ipv4_mapped(&h.dgid).ok_or(EINVAL)?;
                let tot_len = udp_len.checked_add(IPV4_HLEN as u16).ok_or(EMSGSIZE)?;
                Some((saddr, daddr, tot_len))
            }
            Route::V6(_) => None,
        };
        let (l3_len, ethertype) = match v4 {
            Some(_) => (IPV4_HLEN, ETH_P_IP),
            None => (IPV6_HLEN, ETH_P_IPV6),
        };

        // SAFETY: `self.ptr` is valid and exclusively owned; the route is valid and the helper
        // takes its own reference for the skb.
        // CAST: `l3_len` is 20 or 40.
        let p = unsafe {
            bindings::skb_push_udp_ip(self.as_raw(), route.dst(), l3_len as u32, ethertype)
        };
        if p.is_null() {
            return Err(ENOMEM);
        }
        // SAFETY: The helper pushed `l3_len + UDP_HLEN` bytes at `p`, in the linear part of the
        // skb and not shared with a clone (`skb_cow_head`); `&mut self` makes them ours.
        let hdrs = unsafe { core::slice::from_raw_parts_mut(p, l3_len + UDP_HLEN) };
        let (ip, udp) = hdrs.split_at_mut_checked(l3_len).ok_or(EINVAL)?;
        put(udp, udp_header(h, udp_len))?;
        match v4 {
            Some((saddr, daddr, tot_len)) => {
                put(ip, ipv4_header(h, tot_len, saddr, daddr))?;
                // SAFETY: The network header is a complete IPv4 header and the route is attached,
                // which is what the helper reads.
                unsafe { bindings::ip4_finish_hdr(self.as_raw()) };
            }
            None => put(ip, ipv6_header(h, udp_len))?,
        }
        Ok(())
    }

    /// After [`SkBuff::push_udp_ip`]: lets the IP stack fragment the packet
    /// if it is longer than the path MTU, instead of dropping it
    /// (`skb->ignore_df`). An IPv4 header loses its DF bit, as the
    /// fragments and the receiver's reassembled packet will have it, so
    /// anything computed over the header (the RoCEv2 ICRC) must come after.
    ///
    /// # Errors
    ///
    /// `EINVAL` if the IP and UDP headers have not been pushed.
    pub fn allow_fragments(&mut self) -> Result {
        if self.ip_udp_payload().is_none() {
            return Err(EINVAL);
        }
        // SAFETY: `self.ptr` is valid and exclusively owned; its network and transport headers
        // are set, in the linear data and not shared with a clone (`ip_udp_payload` checked
        // that and made them private), and the helper checks the IPv4 header's length.
        to_result(unsafe { bindings::skb_allow_fragments(self.as_raw()) })
    }

    /// After [`SkBuff::push_udp_ip`]: the IP header, the UDP header and the
    /// UDP payload (to the end of the data, writable), e.g. to compute the
    /// ICRC over them and store it in the payload's last 4 bytes.
    ///
    /// `None` if the headers are not set, the data is not linear, or it was
    /// shared with a clone and could not be copied.
    pub fn ip_udp_payload(&mut self) -> Option<(&[u8], &[u8], &mut [u8])> {
        let (mut l3_len, mut len) = (0u32, 0u32);
        // SAFETY: `self.ptr` is valid and exclusively owned; the lengths are valid for writes.
        let p = unsafe { bindings::skb_ip_udp(self.as_raw(), &mut l3_len, &mut len) };
        if p.is_null() {
            return None;
        }
        // SAFETY: The helper returned `len` bytes of the linear buffer from the network header on,
        // no longer shared with any clone; `&mut self` keeps everyone else away from them.
        // CAST: `u32` to `usize` is lossless.
        let all = unsafe { core::slice::from_raw_parts_mut(p, len as usize) };
        // CAST: `u32` to `usize` is lossless.
        let (ip, rest) = all.split_at_mut_checked(l3_len as usize)?;
        let (udp, payload) = rest.split_at_mut_checked(UDP_HLEN)?;
        Some((ip, udp, payload))
    }
}

impl Drop for SkBuff {
    fn drop(&mut self) {
        // SAFETY: We own one reference by the type invariant.
        unsafe { bindings::kfree_skb(self.as_raw()) };
    }
}

/// Parameters of the UDP and IP headers of one RoCEv2 packet, for
/// [`SkBuff::push_udp_ip`].
///
/// GIDs and addresses are in network byte order (as on the wire); ports
/// and the flow label are host numbers.
#[derive(Clone, Copy, Debug)]
pub struct UdpIpHdr {
    /// Source GID: an IPv4-mapped address (`::ffff:a.b.c.d`) for IPv4.
    pub sgid: [u8; 16],
    /// Destination GID, like `sgid`.
    pub dgid: [u8; 16],
    /// UDP source port.
    pub sport: u16,
    /// UDP destination port (4791 for RoCEv2).
    pub dport: u16,
    /// IPv4 TOS or IPv6 traffic class (DSCP and ECN).
    pub tos: u8,
    /// IPv4 TTL or IPv6 hop limit.
    pub ttl: u8,
    /// IPv6 flow label (low 20 bits); unused for IPv4.
    pub flow_label: u32,
}

/// Length of the IP header of packets over `route`, in bytes.
fn l3_hlen(route: &Route) -> usize {
    match route {
        Route::V4(_) => IPV4_HLEN,
        Route::V6(_) => IPV6_HLEN,
    }
}

/// Largest UDP payload over `route` whose lengths fit the 16-bit UDP
/// length and IPv4 total length or IPv6 payload length, in bytes.
fn max_udp_payload(route: &Route) -> usize {
    let l3 = match route {
        Route::V4(_) => IPV4_HLEN,
        // The IPv6 payload length does not count the fixed header.
        Route::V6(_) => 0,
    };
    usize::from(u16::MAX) - UDP_HLEN - l3
}

/// Copies header `bytes` into `dst`, which must be exactly as long.
fn put<const N: usize>(dst: &mut [u8], bytes: [u8; N]) -> Result {
    let dst: &mut [u8; N] = dst.try_into().map_err(|_| EINVAL)?;
    *dst = bytes;
    Ok(())
}

/// The UDP header (RFC 768) with a zero checksum.
fn udp_header(h: &UdpIpHdr, udp_len: u16) -> [u8; UDP_HLEN] {
    let [s0, s1] = h.sport.to_be_bytes();
    let [d0, d1] = h.dport.to_be_bytes();
    let [l0, l1] = udp_len.to_be_bytes();
    [s0, s1, d0, d1, l0, l1, 0, 0]
}

/// The IPv4 header (RFC 791) without options, with the identification and
/// the checksum left 0.
fn ipv4_header(h: &UdpIpHdr, tot_len: u16, saddr: [u8; 4], daddr: [u8; 4]) -> [u8; IPV4_HLEN] {
    let mut hdr = [0u8; IPV4_HLEN];
    // Version 4, IHL 5 (32-bit words); TOS; total length.
    hdr[0] = 0x45;
    hdr[1] = h.tos;
    [hdr[2], hdr[3]] = tot_len.to_be_bytes();
    // Identification in bytes 4-5; flags (DF) and fragment offset 0.
    [hdr[6], hdr[7]] = IP_DF.to_be_bytes();
    // TTL; protocol; header checksum in bytes 10-11.
    hdr[8] = h.ttl;
    hdr[9] = IPPROTO_UDP;
    [hdr[12], hdr[13], hdr[14], hdr[15]] = saddr;
    [hdr[16], hdr[17], hdr[18], hdr[19]] = daddr;
    hdr
}

/// The fixed IPv6 header (RFC 8200), next header UDP.
fn ipv6_header(h: &UdpIpHdr, payload_len: u16) -> [u8; IPV6_HLEN] {
    let word0 = (6u32 << 28) | (u32::from(h.tos) << 20) | (h.flow_label & IPV6_FLOWLABEL_MASK);
    let [w0, w1, w2, w3] = word0.to_be_bytes();
    let [p0, p1] = payload_len.to_be_bytes();
    // Version, traffic class, flow label; payload length; next header; hop limit.
    let fixed = [w0, w1, w2, w3, p0, p1, IPPROTO_UDP, h.ttl];
    // `Iterator::` spelled out: the prelude's `Init` has a `chain` too.
    let addrs = Iterator::chain(h.sgid.iter(), h.dgid.iter());
    let mut hdr = [0u8; IPV6_HLEN];
    for (d, s) in hdr.iter_mut().zip(Iterator::chain(fixed.iter(), addrs)) {
        *d = *s;
    }
    hdr
}

/// Hands a packet prepared with [`SkBuff::push_udp_ip`] to the IP stack
/// (`ip_local_out` or `ip6_local_out` in `net`, which should be the
/// namespace of the route), as a packet of no socket. The skb is consumed
/// whatever happens.
///
/// Callable in process context and in softirq, with or without spinlocks
/// held, but not with IRQs disabled (the stack enables bottom halves on
/// its way out): a call with IRQs off warns once and drops the packet.
///
/// # Errors
///
/// `ENOBUFS` if the queueing discipline dropped the packet, `EINVAL` if
/// the skb was not prepared by `push_udp_ip` or IRQs are off, and the
/// errors of the IP stack (e.g. `EMSGSIZE` over the path MTU,
/// `EHOSTUNREACH` when the neighbour cannot be resolved) otherwise.
pub fn xmit_udp(net: &Namespace, skb: SkBuff) -> Result {
    let skb = skb.into_raw();
    // SAFETY: `net` is alive; the helper takes over our reference to the skb on every path.
    to_result(unsafe { bindings::xmit_udp(net.as_raw(), skb.as_ptr()) })
}

/// Hands `skb`, prepared with [`SkBuff::push_udp_ip`], to the IP stack as
/// [`xmit_udp`] does, charged to `owner`'s transmit credit: the skb counts
/// in [`TxCredit::in_flight`] until the stack frees it (transmitted,
/// dropped by a queueing discipline, or refused), whichever way and in
/// whatever context that happens. The release runs exactly once, from the
/// skb's destructor.
///
/// The skb holds a reference to the credit's shared state, not to `owner`:
/// the owner may be destroyed, and its credit dropped, while its packets
/// are still queued (e.g. held by a qdisc or an unresolved neighbour); the
/// destructor then only counts them back, waking nobody.
///
/// The skb is owned by the credit's kernel socket while it is in the stack
/// (`skb->sk`, with a socket reference of its own), as the C driver does;
/// the socket only identifies the credit and is never bound, so the packet
/// is otherwise treated as one of no socket (`ip_local_out` gets no socket).
///
/// # Errors
///
/// As [`xmit_udp`]; `EBUSY` if the credit is not bound to `owner`
/// ([`TxCredit::bind`]): the skb is dropped and nothing is charged.
pub fn xmit_udp_charged<T: TxOwner>(net: &Namespace, skb: SkBuff, owner: &T) -> Result {
    let credit = owner.tx_credit();
    let me = core::ptr::from_ref(owner) as usize;
    // Bound to `owner` by `TxCredit::bind`: only its owner charges a credit.
    if credit.owner.load(Acquire) != me {
        return Err(EBUSY);
    }
    credit.shared.in_flight.fetch_add(1, Full);
    // The reference the skb owns, given back by `tx_destructor`, which finds the state through
    // the socket's `sk_user_data` (the same address).
    let _ = Arc::into_raw(credit.shared.clone());
    // SAFETY: `skb` is ours (type invariant); the helper orphans it (it has no socket, being
    // freshly built), takes a socket reference and installs the destructor, which undoes both
    // charges above when the skb is freed. The socket's `sk_user_data` is the shared state
    // (type invariant of `TxCredit`).
    unsafe { bindings::skb_set_tx_owner(skb.as_raw(), credit.sock.as_ptr(), Some(tx_destructor)) };
    xmit_udp(net, skb)
}

/// Credits' shared states not yet freed, in the whole module: what
/// [`TxCreditFence`] waits for.
static LIVE_STATES: Atomic<usize> = Atomic::new(0);

/// Destructor of an skb charged by [`xmit_udp_charged`].
///
/// Runs inside an RCU read-side critical section, so that the module's
/// [`TxCreditFence`], which waits for [`LIVE_STATES`] to reach zero and
/// then for an RCU grace period, also waits until the destructor that
/// freed the last state has left this code (but for its return).
///
/// # Safety
///
/// Called by the networking core once, when `skb` is freed (or orphaned),
/// for an skb charged by `xmit_udp_charged`: `skb->sk` is the credit's
/// socket, on which the skb holds a reference, and whose `sk_user_data` is
/// the credit's shared state, on which the skb holds an `Arc` reference.
unsafe extern "C" fn tx_destructor(skb: *mut bindings::sk_buff) {
    let _rcu = rcu::read_lock();
    // SAFETY: `skb->sk` is the credit's socket, kept alive by the skb's reference.
    let state = unsafe { bindings::skb_tx_owner(skb) }.cast::<CreditState>();
    // SAFETY: The skb owns this reference, made by `Arc::into_raw` in `xmit_udp_charged`.
    let state = unsafe { Arc::from_raw(state) };
    let left = state.in_flight.fetch_sub(1, Full).wrapping_sub(1);
    if left < TxCredit::LOW_WATER && state.blocked.load(Relaxed) && state.blocked.xchg(false, Full)
    {
        // Under the lock: `TxCredit::detach` waits for it, so the owner is alive while named.
        let owner = state.owner.lock();
        if let Some(w) = *owner {
            // SAFETY: `w` was made by `TxCredit::bind` for its owner, which is alive until
            // `detach` clears it (the safety requirement of `bind`), and `detach` takes this lock.
            unsafe { (w.wake)(w.owner) };
        }
    }
    // The skb's reference; possibly the last one (then the state is freed: `kfree` only).
    drop(state);
    // SAFETY: The skb owned this socket reference (taken by `skb_set_tx_owner`).
    unsafe { bindings::skb_tx_sock_put(skb) };
}

/// An owner of a [`TxCredit`]: the object transmit credit is charged to and
/// woken through (an RDMA QP).
///
/// The skbs in flight do not hold the owner: it is named to them only
/// between [`TxCredit::bind`] and [`TxCredit::detach`], so it may go away
/// (after `detach`) while its packets are still queued.
pub trait TxOwner: Send + Sync {
    /// The owner's credit. Must return the same credit every time; a
    /// credit charged by one owner refuses every other.
    fn tx_credit(&self) -> &TxCredit;

    /// Called when the in-flight count fell below
    /// [`TxCredit::LOW_WATER`] after [`TxCredit::may_send`] refused: the
    /// owner should resume producing packets. Called from an skb
    /// destructor: any context, with the credit's irq-safe lock held
    /// (interrupts disabled), so it must only queue work, and that work
    /// must hold its own reference to the owner.
    fn tx_wake(&self);
}

/// How a credit's shared state wakes its owner: the owner's address and a
/// function that calls its [`TxOwner::tx_wake`].
#[derive(Clone, Copy)]
struct Waker {
    owner: *const (),
    wake: unsafe fn(*const ()),
}

// SAFETY: `owner` is a `TxOwner`, which is `Sync`, and `wake` only calls its `tx_wake` through a
// shared reference: the pair may be used from any thread.
unsafe impl Send for Waker {}

/// Calls `tx_wake` of the `T` at `owner`.
///
/// # Safety
///
/// `owner` points to a live `T`.
unsafe fn wake_owner<T: TxOwner>(owner: *const ()) {
    // SAFETY: By the safety requirements.
    unsafe { &*owner.cast::<T>() }.tx_wake();
}

/// What a credit shares with the skbs charged to it: reference counted
/// (an [`Arc`]: the credit holds one reference, each skb in flight
/// another), so it outlives the credit and its owner until the last of
/// their packets is freed. Freeing it is a `kfree`: legal in any context.
#[pin_data(PinnedDrop)]
struct CreditState {
    /// Skbs in the IP stack.
    in_flight: Atomic<u32>,
    /// A producer stopped for want of credit and waits to be woken.
    blocked: Atomic<bool>,
    /// The owner to wake, from [`TxCredit::bind`] until [`TxCredit::detach`].
    #[pin]
    owner: SpinLockIrq<Option<Waker>>,
}

#[pinned_drop]
impl PinnedDrop for CreditState {
    fn drop(self: Pin<&mut Self>) {
        LIVE_STATES.fetch_sub(1, Release);
    }
}

/// Per-owner transmit flow control: counts the owner's skbs that are in
/// the IP stack (handed over by [`xmit_udp_charged`] and not freed yet).
///
/// Producers ask [`TxCredit::may_send`] before building more packets and
/// stop above [`TxCredit::HIGH_WATER`]; the owner is woken
/// ([`TxOwner::tx_wake`]) once fewer than [`TxCredit::LOW_WATER`] are
/// left, so that a sender never floods the device's queue (whose overflow
/// drops packets the transport must then retransmit).
///
/// Dropping the credit detaches its owner and releases its socket (it
/// sleeps), but does not wait for the packets in flight: they keep the
/// shared state and the socket's `struct sock` alive by their own
/// references.
///
/// # Invariants
///
/// `sock` is a kernel socket created by [`TxCredit::new`] and released
/// only by `drop`; its `sk_user_data` is the address of `shared` (the
/// `Arc`'s data) for its whole life. `owner` is 0, `BINDING`, or the
/// address of the owner the credit was bound to, which never changes
/// again.
pub struct TxCredit {
    sock: NonNull<bindings::socket>,
    shared: Arc<CreditState>,
    /// Address of the owner the credit is bound to, 0 before: which owner may charge it.
    owner: Atomic<usize>,
}

// SAFETY: The socket is used only through its reference count, which is safe to reach from any
// thread, and released by `drop`; the rest is atomic, locked or an `Arc` of a `Sync` state.
unsafe impl Send for TxCredit {}

// SAFETY: As for `Send`: every `&self` access is atomic, under the state's lock, or takes a
// socket reference.
unsafe impl Sync for TxCredit {}

impl TxCredit {
    /// Above this many skbs in flight, producers stop (C: `RXE_INFLIGHT_SKBS_PER_QP_HIGH`).
    pub const HIGH_WATER: u32 = 64;
    /// Below this many, a stopped producer is woken (C: `RXE_INFLIGHT_SKBS_PER_QP_LOW`).
    pub const LOW_WATER: u32 = 16;

    /// Creates a credit with its kernel socket (an unbound datagram socket of
    /// the initial namespace, which never carries traffic) and its shared
    /// state. Sleeps.
    ///
    /// # Errors
    ///
    /// `ENOMEM`, and the errors of `sock_create_kern`.
    pub fn new() -> Result<Self> {
        LIVE_STATES.fetch_add(1, Relaxed);
        // Counted before it exists: its drop (here too, on failure) takes the count back.
        let shared = Arc::pin_init(
            pin_init!(CreditState {
                in_flight: Atomic::new(0),
                blocked: Atomic::new(false),
                owner <- new_spinlock_irq!(None, "TxCredit::owner"),
            }),
            GFP_KERNEL,
        )
        .inspect_err(|_| {
            LIVE_STATES.fetch_sub(1, Release);
        })?;
        let mut sock = core::ptr::null_mut();
        // SAFETY: `sock` is valid for writes.
        to_result(unsafe { bindings::tx_sock_create(&mut sock) })?;
        let sock = NonNull::new(sock).ok_or(ENOMEM)?;
        // INVARIANT: The socket names the state from now on, before any skb is charged.
        // SAFETY: `sock` is a fresh live socket; the state's address is stable (in an `Arc`) and
        // outlives every skb that reads it, each of which holds a reference to it.
        unsafe {
            bindings::tx_sock_set_owner(sock.as_ptr(), Arc::as_ptr(&shared).cast_mut().cast())
        };
        Ok(Self {
            sock,
            shared,
            owner: Atomic::new(0),
        })
    }

    /// Binds the credit to `owner`, once for its whole life, before any
    /// charge: only `owner` may charge it afterwards, and it is woken
    /// ([`TxOwner::tx_wake`]) until [`TxCredit::detach`].
    ///
    /// # Errors
    ///
    /// `EBUSY` if it is bound (or being bound) already.
    ///
    /// # Safety
    ///
    /// `owner` stays valid at its address, and its `tx_wake` callable,
    /// until [`TxCredit::detach`] returns or the credit is dropped,
    /// whichever comes first.
    pub unsafe fn bind<T: TxOwner>(&self, owner: &T) -> Result {
        let me = core::ptr::from_ref(owner) as usize;
        self.owner
            .cmpxchg(0, Self::BINDING, Full)
            .map_err(|_| EBUSY)?;
        *self.shared.owner.lock() = Some(Waker {
            owner: core::ptr::from_ref(owner).cast(),
            wake: wake_owner::<T>,
        });
        // INVARIANT: The owner's address, set once.
        self.owner.store(me, Release);
        Ok(())
    }

    /// `owner` while [`TxCredit::bind`] runs (never an object's address).
    const BINDING: usize = 1;

    /// Stops waking the owner: once this returns, no skb destructor calls
    /// or will call its [`TxOwner::tx_wake`], and the owner may go. The
    /// owner may still charge the credit; those packets are counted and
    /// released, waking nobody. Any context but hard-irq.
    pub fn detach(&self) {
        *self.shared.owner.lock() = None;
    }

    /// Skbs charged and not yet freed.
    pub fn in_flight(&self) -> u32 {
        self.shared.in_flight.load(Relaxed)
    }

    /// Whether a producer may build more packets, `queued` being those
    /// built and not yet handed to the stack: fewer than
    /// [`TxCredit::HIGH_WATER`] in all. On `false` the owner is woken once
    /// credit comes back (or [`TxCredit::take_wake`] says so).
    pub fn may_send(&self, queued: usize) -> bool {
        // CAST: a queue length; saturates far above the marks.
        let queued = u32::try_from(queued).unwrap_or(u32::MAX);
        if self.in_flight().saturating_add(queued) < Self::HIGH_WATER {
            return true;
        }
        // Full barrier between setting the flag and reading the count, as between the count's
        // decrement and reading the flag in the destructor: one of the two sees the other.
        self.shared.blocked.xchg(true, Full);
        // A destructor that ran before the flag was set did not wake us: look again.
        self.shared.in_flight.load(Relaxed).saturating_add(queued) < Self::HIGH_WATER
    }

    /// For a sender that just handed its queue over: whether a stopped
    /// producer should be woken now because fewer than
    /// [`TxCredit::LOW_WATER`] skbs are in flight (e.g. the packets went to
    /// a local receiver without being charged, so no destructor will).
    /// Clears the request.
    pub fn take_wake(&self) -> bool {
        let s = &self.shared;
        s.blocked.load(Relaxed)
            && s.in_flight.load(Relaxed) < Self::LOW_WATER
            && s.blocked.xchg(false, Full)
    }
}

impl Drop for TxCredit {
    /// Detaches the owner and releases the socket. Sleeps. The packets
    /// still in flight keep the shared state (this drop only gives back
    /// the credit's reference) and the `struct sock` (each holds a socket
    /// reference, which `sock_release` leaves them).
    fn drop(&mut self) {
        self.detach();
        // SAFETY: The socket is ours (type invariant) and released only here; its `sk_user_data`
        // stays as it is, and the skbs' own references keep the `struct sock` alive.
        unsafe { bindings::sock_release(self.sock.as_ptr()) };
    }
}

/// Keeps a module whose skbs are charged to transmit credits
/// ([`xmit_udp_charged`]) loaded until their destructor, which is the
/// module's code, has run for the last of them.
///
/// A credit no longer waits for its packets when dropped, so after every
/// owner is gone (at unload, once the devices are unregistered) skbs may
/// still sit in a qdisc. Dropping the fence waits until every credit's
/// shared state has been freed (each skb holds one, so this is after the
/// last destructor gave its reference back), then for an RCU grace period,
/// which the destructor's read-side section spans: the unload then
/// returns only once no CPU runs the destructor any more but for its
/// return. The wait lasts as long as a qdisc holds the packets; freeing
/// them (e.g. `tc qdisc del`) ends it. Chosen over a module reference per
/// packet in flight, which would make `rmmod` fail instead of wait, and
/// over the device's reference, which would tie a net abstraction to RDMA.
///
/// A module keeps one in its state, dropped after everything that
/// creates credits.
pub struct TxCreditFence(());

impl TxCreditFence {
    /// Creates the fence.
    pub fn new() -> Self {
        Self(())
    }
}

impl Default for TxCreditFence {
    fn default() -> Self {
        Self::new()
    }
}

impl Drop for TxCreditFence {
    /// Waits for the credits' shared states. Sleeps.
    fn drop(&mut self) {
        let mut waited = 0u32;
        while LIVE_STATES.load(Acquire) != 0 {
            // Once, after 5 s: say what the unload waits for (a qdisc may hold packets for as
            // long as it likes; deleting it frees them).
            if waited == 500 {
                pr_info!(
                    "rdma: unload waits for packets still queued in the IP stack (a qdisc?)\n"
                );
            }
            waited = waited.saturating_add(1);
            // SAFETY: Module teardown runs in process context; sleeping is fine.
            unsafe { bindings::msleep(10) };
        }
        // SAFETY: As above; waits for the destructors' RCU read-side sections.
        unsafe { bindings::synchronize_rcu() };
    }
}

/// Whether [`xmit_udp`] may be called here: not with interrupts disabled.
pub fn xmit_allowed() -> bool {
    // SAFETY: Reads the CPU's interrupt state.
    !unsafe { bindings::irqs_disabled() }
}

/// Bottom halves disabled on this CPU while the guard lives
/// (`local_bh_disable`/`local_bh_enable`): no softirq runs here and the task
/// is not preempted. Only where interrupts are enabled ([`xmit_allowed`]).
pub struct BhDisabled(core::marker::PhantomData<*mut ()>);

impl BhDisabled {
    /// Disables bottom halves until the guard is dropped.
    pub fn new() -> Self {
        // SAFETY: Balanced by `Drop`; the guard is not `Send`, so it is dropped on this CPU.
        unsafe { bindings::bh_disable() };
        Self(core::marker::PhantomData)
    }
}

impl Default for BhDisabled {
    fn default() -> Self {
        Self::new()
    }
}

impl Drop for BhDisabled {
    fn drop(&mut self) {
        // SAFETY: Bottom halves were disabled by `new` on this CPU.
        unsafe { bindings::bh_enable() };
    }
}

/// A FIFO of skbs (`struct sk_buff_head`) with its own IRQ-safe lock: any
/// context may push and pop.
///
/// Dropping the queue frees the skbs still in it.
///
/// # Invariants
///
/// `head` is an initialised `sk_buff_head` whose skbs the queue owns.
#[pin_data(PinnedDrop)]
pub struct SkbQueue {
    #[pin]
    head: Opaque<bindings::sk_buff_head>,
}

// SAFETY: The skbs in the queue may be freed on any thread, and the C lock protects the list.
unsafe impl Send for SkbQueue {}

// SAFETY: All `&self` methods take the queue's lock (or read its length atomically).
unsafe impl Sync for SkbQueue {}

impl SkbQueue {
    /// Creates an empty queue (`skb_queue_head_init`).
    pub fn new() -> impl PinInit<Self> {
        // INVARIANT: The head is initialised before anyone can use the queue.
        pin_init!(Self {
            // SAFETY: `p` points to memory for a `sk_buff_head` that stays pinned.
            head <- Opaque::ffi_init(|p| unsafe { bindings::skb_queue_head_init(p) }),
        })
    }

    /// Appends `skb` (`skb_queue_tail`).
    pub fn push_back(&self, skb: SkBuff) {
        // SAFETY: The head is initialised by the type invariant; the queue takes over our
        // reference to the skb.
        unsafe { bindings::skb_queue_tail(self.head.get(), skb.into_raw().as_ptr()) };
    }

    /// Puts `skb` first (`skb_queue_head`).
    pub fn push_front(&self, skb: SkBuff) {
        // SAFETY: The head is initialised by the type invariant; the queue takes over our
        // reference to the skb.
        unsafe { bindings::skb_queue_head(self.head.get(), skb.into_raw().as_ptr()) };
    }

    /// Removes and returns the first skb (`skb_dequeue`), if any.
    pub fn pop_front(&self) -> Option<SkBuff> {
        // SAFETY: The head is initialised by the type invariant.
        let skb = NonNull::new(unsafe { bindings::skb_dequeue(self.head.get()) })?;
        // SAFETY: The queue owned the skb and gave it up by unlinking it.
        Some(unsafe { SkBuff::from_raw(skb) })
    }

    /// Number of skbs queued; it may change as soon as it is read.
    pub fn len(&self) -> usize {
        // SAFETY: The head is initialised by the type invariant; the length is read atomically.
        let n = unsafe { bindings::skb_queue_len_lockless(self.head.get()) };
        // CAST: `u32` to `usize` is lossless.
        n as usize
    }

    /// Returns whether the queue is empty (at the time of the call).
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Frees every skb in the queue (`skb_queue_purge`).
    pub fn purge(&self) {
        // SAFETY: The head is initialised by the type invariant.
        unsafe { bindings::skb_queue_purge(self.head.get()) };
    }
}

#[pinned_drop]
impl PinnedDrop for SkbQueue {
    fn drop(self: Pin<&mut Self>) {
        self.purge();
    }
}

#[kunit_tests(rrxe_net_udp_tx)]
mod tests {
    use super::*;

    /// Sum of the 16-bit big-endian words of `b`, folded: 0xffff over a
    /// header with a correct Internet checksum (RFC 1071).
    fn csum_fold(b: &[u8]) -> u16 {
        let mut sum: u32 = b
            .chunks(2)
            .map(|w| u32::from(w[0]) << 8 | u32::from(*w.get(1).unwrap_or(&0)))
            .sum();
        while sum > 0xffff {
            sum = (sum & 0xffff) + (sum >> 16);
        }
        // CAST: folded to 16 bits above.
        sum as u16
    }

    /// The initial namespace and its loopback device.
    fn init_net_lo() -> (&'static Namespace, &'static Device) {
        // SAFETY: `init_net` is never dismantled; its loopback device lives as long.
        unsafe {
            let net = Namespace::from_raw(&raw mut bindings::init_net);
            (
                net,
                Device::from_raw(bindings::net_loopback_dev(net.as_raw())),
            )
        }
    }

    fn hdr(sgid: [u8; 16], dgid: [u8; 16]) -> UdpIpHdr {
        UdpIpHdr {
            sgid,
            dgid,
            sport: 0xc000,
            // The discard port: no one in the test kernel listens on it.
            dport: 9,
            tos: 0x02,
            ttl: 64,
            flow_label: 0x1_2345,
        }
    }

    fn mapped(a: [u8; 4]) -> [u8; 16] {
        let mut g = [0u8; 16];
        g[10] = 0xff;
        g[11] = 0xff;
        g[12..].copy_from_slice(&a);
        g
    }

    #[test]
    fn header_bytes() {
        let mut v6 = [0u8; 16];
        v6[15] = 1;
        let h = hdr(mapped([10, 0, 0, 1]), mapped([10, 0, 0, 2]));
        assert_eq!(udp_header(&h, 40), [0xc0, 0, 0, 9, 0, 40, 0, 0]);
        let ip = ipv4_header(&h, 60, [10, 0, 0, 1], [10, 0, 0, 2]);
        assert_eq!(&ip[..12], &[0x45, 2, 0, 60, 0, 0, 0x40, 0, 64, 17, 0, 0]);
        assert_eq!(&ip[12..], &[10, 0, 0, 1, 10, 0, 0, 2]);

        let h = hdr(v6, v6);
        let ip = ipv6_header(&h, 40);
        assert_eq!(&ip[..8], &[0x60, 0x21, 0x23, 0x45, 0, 40, 17, 64]);
        assert_eq!(&ip[8..24], &v6);
        assert_eq!(&ip[24..], &v6);
    }

    /// A packet to 127.0.0.1 out of `lo` of the initial namespace: header
    /// lengths, checksum, queueing, and a trip through `ip_local_out`.
    #[test]
    fn loopback_ipv4() -> Result {
        let (net, lo) = init_net_lo();
        let gid = mapped([127, 0, 0, 1]);
        let Ok(route) = Route::output(net, lo, &gid, &gid) else {
            // `lo` is down: nothing to test against.
            return Ok(());
        };
        assert!(!route.is_ipv6());
        assert_eq!(
            SkBuff::alloc_udp(lo, &route, 65535 - 28 + 1).err(),
            Some(EMSGSIZE)
        );

        let mut skb = SkBuff::alloc_udp(lo, &route.clone(), 32)?;
        assert_eq!(skb.data_mut().len(), 32);
        skb.data_mut().fill(0xab);
        skb.push_udp_ip(&route, &hdr(gid, gid))?;
        assert_eq!(skb.len(), 20 + 8 + 32);
        assert_eq!(skb.protocol(), ETH_P_IP);
        let (ip, udp, payload) = skb.ip_udp_payload().ok_or(EINVAL)?;
        assert_eq!((ip.len(), udp.len(), payload.len()), (20, 8, 32));
        assert_eq!(&ip[..4], &[0x45, 2, 0, 60]);
        assert_eq!(csum_fold(ip), 0xffff);
        assert_eq!(&udp[4..], &[0, 40, 0, 0]);
        assert!(payload.iter().all(|&b| b == 0xab));

        let q = KBox::pin_init(SkbQueue::new(), GFP_KERNEL)?;
        q.push_back(skb);
        q.push_back(SkBuff::alloc_udp(lo, &route, 0)?);
        assert_eq!(q.len(), 2);
        let skb = q.pop_front().ok_or(EINVAL)?;
        assert_eq!(q.len(), 1);
        // The second skb is freed with the queue.
        xmit_udp(net, skb)?;

        // An skb that was not prepared never reaches the IP stack.
        let raw = SkBuff::alloc_udp(lo, &route, 8)?;
        assert_eq!(xmit_udp(net, raw).err(), Some(EINVAL));
        Ok(())
    }

    /// An owner for the credit tests: counts its wakes.
    struct TestOwner {
        wakes: Atomic<u32>,
        credit: TxCredit,
    }

    impl TxOwner for TestOwner {
        fn tx_credit(&self) -> &TxCredit {
            &self.credit
        }

        fn tx_wake(&self) {
            self.wakes.fetch_add(1, Full);
        }
    }

    /// Waits (up to a second) until none of `o`'s packets is in flight.
    fn drained(o: &TestOwner) -> bool {
        for _ in 0..100 {
            if o.credit.in_flight() == 0 {
                return true;
            }
            // SAFETY: Sleeping is fine in a KUnit test.
            unsafe { bindings::msleep(10) };
        }
        o.credit.in_flight() == 0
    }

    /// Packets charged to an owner over `lo` are released when the stack
    /// frees them (`lo` orphans them on transmit); a producer stopped by
    /// the high-water mark is woken by the destructor until the owner is
    /// detached, and not after; an unbound or foreign owner is refused.
    #[test]
    fn charged_loopback() -> Result {
        let (net, lo) = init_net_lo();
        let gid = mapped([127, 0, 0, 1]);
        let Ok(route) = Route::output(net, lo, &gid, &gid) else {
            return Ok(());
        };
        let new_owner = || -> Result<KBox<TestOwner>> {
            Ok(KBox::new(
                TestOwner {
                    wakes: Atomic::new(0),
                    credit: TxCredit::new()?,
                },
                GFP_KERNEL,
            )?)
        };
        let (a, b) = (new_owner()?, new_owner()?);
        let packet = || -> Result<SkBuff> {
            let mut skb = SkBuff::alloc_udp(lo, &route, 16)?;
            skb.push_udp_ip(&route, &hdr(gid, gid))?;
            Ok(skb)
        };
        // Not bound yet: refused, nothing charged.
        assert_eq!(xmit_udp_charged(net, packet()?, &*a).err(), Some(EBUSY));
        assert_eq!(a.credit.in_flight(), 0);
        // SAFETY: `a` and `b` live (boxed, not moved) until the end, and their credits, which
        // detach on drop, are dropped with them.
        unsafe {
            a.credit.bind(&*a)?;
            assert_eq!(a.credit.bind(&*b).err(), Some(EBUSY));
            // Another owner cannot charge `a`'s credit through its accessor.
            b.credit.bind(&*b)?;
        }
        assert!(a.credit.may_send(0));
        for _ in 0..3 {
            xmit_udp_charged(net, packet()?, &*a)?;
        }
        // Freed already, or soon: the test waits, as a destroyed owner would not.
        assert!(drained(&a));
        assert_eq!(a.wakes.load(Acquire), 0);
        // Above the high-water mark a producer stops, and is woken once.
        assert!(!a.credit.may_send(TxCredit::HIGH_WATER as usize));
        assert!(a.credit.take_wake());
        assert!(!a.credit.take_wake());
        // Stopped again: the destructor of the next packet wakes the owner.
        assert!(!a.credit.may_send(TxCredit::HIGH_WATER as usize));
        xmit_udp_charged(net, packet()?, &*a)?;
        assert!(drained(&a));
        assert_eq!(a.wakes.load(Acquire), 1);
        // Detached: still charged and released, but nobody is woken.
        a.credit.detach();
        assert!(!a.credit.may_send(TxCredit::HIGH_WATER as usize));
        xmit_udp_charged(net, packet()?, &*a)?;
        assert!(drained(&a));
        assert_eq!(a.wakes.load(Acquire), 1);
        assert_eq!(b.wakes.load(Acquire), 0);
        assert_eq!(b.credit.in_flight(), 0);
        Ok(())
    }

    /// The same over IPv6 to ::1, if `lo` has it.
    #[test]
    fn loopback_ipv6() -> Result {
        let (net, lo) = init_net_lo();
        let mut gid = [0u8; 16];
        gid[15] = 1;
        let Ok(route) = Route::output(net, lo, &gid, &gid) else {
            return Ok(());
        };
        assert!(route.is_ipv6());
        let mut skb = SkBuff::alloc_udp(lo, &route, 16)?;
        skb.push_udp_ip(&route, &hdr(gid, gid))?;
        assert_eq!(skb.protocol(), ETH_P_IPV6);
        let (ip, udp, payload) = skb.ip_udp_payload().ok_or(EINVAL)?;
        assert_eq!((ip.len(), udp.len(), payload.len()), (40, 8, 16));
        assert_eq!(&ip[..8], &[0x60, 0x21, 0x23, 0x45, 0, 24, 17, 64]);
        assert_eq!(&udp[4..], &[0, 24, 0, 0]);
        // An IPv4 route wants IPv4-mapped GIDs.
        let v4 = mapped([127, 0, 0, 1]);
        if let Ok(r4) = Route::output(net, lo, &v4, &v4) {
            assert_eq!(skb.push_udp_ip(&r4, &hdr(gid, gid)).err(), Some(EINVAL));
        }
        xmit_udp(net, skb)
    }
}
