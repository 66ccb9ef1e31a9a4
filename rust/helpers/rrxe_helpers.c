// SPDX-License-Identifier: GPL-2.0
/*
 * C helpers for the rrxe abstractions: out-of-line wrappers of static inline
 * functions and macros that bindgen cannot see, and accessors for fields of
 * `struct net_device`, which the kernel crate's bindings only know as an
 * opaque type.
 *
 * Every helper is named `rrxe_helper_<c name>`; the build turns each into a
 * Rust declaration named `<c name>` with `#[link_name]`, as the kernel does
 * for its own `rust_helper_` functions.  The prefix keeps them apart from
 * those exported by vmlinux.
 */

#include <linux/etherdevice.h>
#include <linux/highmem.h>
#include <linux/hmm.h>
#include <linux/if_vlan.h>
#include <linux/ioport.h>
#include <linux/jiffies.h>
#include <linux/libnvdimm.h>
#include <linux/llist.h>
#include <linux/mm.h>
#include <linux/netdevice.h>
#include <linux/notifier.h>
#include <linux/ratelimit.h>
#include <linux/refcount.h>
#include <linux/skbuff.h>
#include <linux/slab.h>
#include <linux/spinlock.h>
#include <linux/timer.h>
#include <linux/udp.h>
#include <linux/vmalloc.h>
#include <linux/workqueue.h>
#include <linux/xarray.h>
#include <net/dst.h>
#include <net/ip.h>
#include <net/ip6_route.h>
#include <net/ipv6.h>
#include <net/net_namespace.h>
#include <net/netlink.h>
#include <net/route.h>
#include <net/netns/generic.h>
#include <net/sock.h>

#include "rrxe_trace.h"
#include <rdma/ib_cache.h>
#include <rdma/ib_umem.h>
#include <rdma/ib_umem_odp.h>
#include <rdma/ib_verbs.h>
#include <rdma/rdma_user_rxe.h>
#include <rdma/uverbs_ioctl.h>

/* include/linux/netdevice.h */

void rrxe_helper_dev_hold(struct net_device *dev)
{
	dev_hold(dev);
}

void rrxe_helper_dev_put(struct net_device *dev)
{
	dev_put(dev);
}

struct net_device *rrxe_helper_netdev_notifier_info_to_dev(void *info)
{
	return netdev_notifier_info_to_dev(info);
}

bool rrxe_helper_netif_running(const struct net_device *dev)
{
	return netif_running(dev);
}

bool rrxe_helper_netif_carrier_ok(const struct net_device *dev)
{
	return netif_carrier_ok(dev);
}

/* Field accessors: the fields change with config, bindings never see them. */

const char *rrxe_helper_netdev_name(const struct net_device *dev)
{
	return dev->name;
}

unsigned int rrxe_helper_netdev_mtu(const struct net_device *dev)
{
	return READ_ONCE(dev->mtu);
}

int rrxe_helper_netdev_ifindex(const struct net_device *dev)
{
	return dev->ifindex;
}

/*
 * Copies at most @len bytes of the hardware address to @addr and returns
 * the number copied.  Called with RTNL held or from a netdev notifier, so
 * the address cannot change underneath.
 */
unsigned int rrxe_helper_netdev_hw_addr(const struct net_device *dev,
					u8 *addr, unsigned int len)
{
	unsigned int n = min_t(unsigned int, dev->addr_len, len);

	memcpy(addr, dev->dev_addr, n);
	return n;
}

/* include/linux/if_vlan.h */

bool rrxe_helper_is_vlan_dev(const struct net_device *dev)
{
	return is_vlan_dev(dev);
}

struct net_device *rrxe_helper_vlan_dev_real_dev(const struct net_device *dev)
{
	return is_vlan_dev(dev) ? vlan_dev_real_dev(dev) : NULL;
}

/* The VLAN id of a VLAN device, or 0xffff for any other device. */
u16 rrxe_helper_vlan_dev_vlan_id(const struct net_device *dev)
{
	return is_vlan_dev(dev) ? vlan_dev_vlan_id(dev) : 0xffff;
}

/* include/rdma/ib_cache.h */

/*
 * The net device a GID entry belongs to (a VLAN device for the GIDs of a
 * VLAN's addresses), with a reference for the caller, or NULL: the entry's
 * device pointer is only stable under RCU.
 */
struct net_device *rrxe_helper_gid_attr_ndev_get(const struct ib_gid_attr *attr)
{
	struct net_device *ndev;

	rcu_read_lock();
	ndev = rdma_read_gid_attr_ndev_rcu(attr);
	if (IS_ERR(ndev))
		ndev = NULL;
	else
		dev_hold(ndev);
	rcu_read_unlock();
	return ndev;
}

/* include/linux/skbuff.h */

unsigned int rrxe_helper_skb_len(const struct sk_buff *skb)
{
	return skb->len;
}

unsigned int rrxe_helper_skb_headlen(const struct sk_buff *skb)
{
	return skb_headlen(skb);
}

const u8 *rrxe_helper_skb_data(const struct sk_buff *skb)
{
	return skb->data;
}

int rrxe_helper_skb_linearize(struct sk_buff *skb)
{
	return skb_linearize(skb);
}

/*
 * Returns the bytes from the network header up to skb->data, storing their
 * number in @len, or NULL if the network header is not set or does not lie
 * between skb->head and skb->data.
 */
const u8 *rrxe_helper_skb_network_to_data(const struct sk_buff *skb,
					  unsigned int *len)
{
	int off = skb_network_offset(skb);

	/* An unset network header (~0) lies far after skb->data. */
	if (off > 0 || -off > skb_headroom(skb))
		return NULL;
	*len = -off;
	return skb_network_header(skb);
}

u16 rrxe_helper_skb_protocol(const struct sk_buff *skb)
{
	return ntohs(skb->protocol);
}

struct net_device *rrxe_helper_skb_dev(const struct sk_buff *skb)
{
	return skb->dev;
}

void rrxe_helper_kfree_skb(struct sk_buff *skb)
{
	kfree_skb(skb);
}

/* include/net/net_namespace.h, include/net/netns/generic.h */

struct net *rrxe_helper_dev_net(const struct net_device *dev)
{
	return dev_net(dev);
}

void *rrxe_helper_net_generic(const struct net *net, unsigned int id)
{
	return net_generic(net, id);
}

struct net *rrxe_helper_maybe_get_net(struct net *net)
{
	return maybe_get_net(net);
}

struct net *rrxe_helper_get_net(struct net *net)
{
	return get_net(net);
}

void rrxe_helper_put_net(struct net *net)
{
	put_net(net);
}

/* include/net/route.h, include/net/ip6_route.h */

/* ip_route_output_key() for UDP from @saddr to @daddr out of @oif. */
struct rtable *rrxe_helper_ip_route_output_udp(struct net *net, int oif,
					       __be32 saddr, __be32 daddr)
{
	struct flowi4 fl = {
		.flowi4_oif = oif,
		.flowi4_proto = IPPROTO_UDP,
		.saddr = saddr,
		.daddr = daddr,
	};

	return ip_route_output_key(net, &fl);
}

void rrxe_helper_ip_rt_put(struct rtable *rt)
{
	ip_rt_put(rt);
}

/*
 * ip6_dst_lookup_flow() for UDP from @saddr to @daddr out of @oif; a route
 * with an error is released and its error returned.
 */
struct dst_entry *rrxe_helper_ip6_route_output_udp(struct net *net, int oif,
						   const u8 *saddr,
						   const u8 *daddr)
{
	struct flowi6 fl6 = {
		.flowi6_oif = oif,
		.flowi6_proto = IPPROTO_UDP,
	};
	struct dst_entry *dst;
	int err;

	memcpy(&fl6.saddr, saddr, sizeof(fl6.saddr));
	memcpy(&fl6.daddr, daddr, sizeof(fl6.daddr));
	dst = ip6_dst_lookup_flow(net, NULL, &fl6, NULL);
	if (IS_ERR(dst))
		return dst;
	err = dst->error;
	if (err) {
		dst_release(dst);
		return ERR_PTR(err);
	}
	return dst;
}

struct dst_entry *rrxe_helper_rtable_dst(struct rtable *rt)
{
	return &rt->dst;
}

void rrxe_helper_dst_hold(struct dst_entry *dst)
{
	dst_hold(dst);
}

/*
 * Whether a CQ overrun may be logged now: at most 10 messages in 5 s for
 * all CQs (user space can overrun its CQs at will; the C driver uses
 * ibdev_err_ratelimited).
 */
bool rrxe_helper_cq_overrun_ratelimit(void)
{
	static DEFINE_RATELIMIT_STATE(rs, 5 * HZ, 10);

	return __ratelimit(&rs);
}

/* The cookie ip6_dst_check() compares, taken when the route is looked up. */
u32 rrxe_helper_rt6_dst_cookie(struct dst_entry *dst)
{
	return rt6_get_cookie(dst_rt6_info(dst));
}

/*
 * Whether a cached route may still be used (dst_check(): an obsolete route
 * is asked, and says no once a route or address change made it stale).
 * dst_check() neither takes nor drops a reference.
 */
bool rrxe_helper_dst_still_valid(struct dst_entry *dst, u32 cookie)
{
	return dst_check(dst, cookie) != NULL;
}

/* The RoCEv2 transmit path: UDP/IP packets built by the driver itself. */

/*
 * Allocates an skb with @len zeroed bytes of data and enough headroom for
 * @hdr_len bytes of IP and UDP headers plus the link layer of both @dev and
 * the device of @dst (they differ e.g. for a route to a local address).
 * GFP_ATOMIC: the callers may hold spinlocks.
 */
struct sk_buff *rrxe_helper_alloc_skb_udp(struct net_device *dev,
					  struct dst_entry *dst,
					  unsigned int hdr_len,
					  unsigned int len)
{
	unsigned int ll = max_t(unsigned int, LL_RESERVED_SPACE(dev),
				LL_RESERVED_SPACE(dst_dev(dst)));
	struct sk_buff *skb = alloc_skb(ll + hdr_len + len, GFP_ATOMIC);

	if (!skb)
		return NULL;
	skb_reserve(skb, ll + hdr_len);
	skb_put_zero(skb, len);
	return skb;
}

/*
 * Makes the linear data of @skb writable (not shared with a clone) and
 * returns it, with its length in *@len; NULL if that needs memory there is
 * none of.
 */
u8 *rrxe_helper_skb_data_mut(struct sk_buff *skb, unsigned int *len)
{
	if (skb_unclone(skb, GFP_ATOMIC))
		return NULL;
	*len = skb_headlen(skb);
	return skb->data;
}

/*
 * Readies @skb to leave through ip_local_out()/ip6_local_out() over @dst,
 * as a locally generated packet of no socket: forgets what a previous life
 * left (route, conntrack, extensions, control block), takes a reference on
 * @dst for the skb, and pushes a UDP header (the transport header) and an
 * IP header of @l3_len bytes (the network header), both left for the caller
 * to fill in.  Returns the start of the IP header, or NULL if the headroom
 * could not be made private and large enough.
 */
u8 *rrxe_helper_skb_push_udp_ip(struct sk_buff *skb, struct dst_entry *dst,
				unsigned int l3_len, u16 ethertype)
{
	if (skb_cow_head(skb, l3_len + sizeof(struct udphdr)))
		return NULL;
	skb_scrub_packet(skb, false);
	skb_clear_hash(skb);
	memset(skb->cb, 0, sizeof(skb->cb));
	skb_dst_set(skb, dst_clone(dst));
	__skb_push(skb, sizeof(struct udphdr));
	skb_reset_transport_header(skb);
	__skb_push(skb, l3_len);
	skb_reset_network_header(skb);
	skb->protocol = htons(ethertype);
	return skb->data;
}

/*
 * Lets the IP stack fragment @skb, prepared by
 * rrxe_helper_skb_push_udp_ip() with its IP header written (in linear,
 * unshared data; -EINVAL for an IPv4 header of the wrong length), when it is
 * longer than the path MTU, instead of dropping it.  An IPv4 header loses
 * its DF bit (checksum updated): fragments are sent without it, and the
 * receiver's reassembly then rebuilds the header as it is now, which
 * matters because the RoCEv2 ICRC covers the flags.
 */
int rrxe_helper_skb_allow_fragments(struct sk_buff *skb)
{
	if (skb->protocol == htons(ETH_P_IP)) {
		struct iphdr *iph = ip_hdr(skb);

		if (skb_network_header_len(skb) < sizeof(*iph) ||
		    iph->ihl * 4 != skb_network_header_len(skb))
			return -EINVAL;
		iph->frag_off &= ~htons(IP_DF);
		ip_send_check(iph);
	}
	skb->ignore_df = 1;
	return 0;
}

/*
 * Completes the IPv4 header written at the network header of @skb: an
 * identification from the per-namespace generator of the route's device,
 * and the header checksum.
 */
void rrxe_helper_ip4_finish_hdr(struct sk_buff *skb)
{
	struct iphdr *iph = ip_hdr(skb);

	__ip_select_ident(dev_net(skb_dst_dev(skb)), iph,
			  skb_shinfo(skb)->gso_segs ?: 1);
	ip_send_check(iph);
}

/*
 * Returns the bytes of @skb from the network header to the end of the
 * linear data, made writable, with their number in *@len and the length of
 * the network header (up to the transport header) in *@l3_len.  NULL if the
 * data is not linear, the headers are not set in that order with room for a
 * UDP header, or the data could not be made private.
 */
u8 *rrxe_helper_skb_ip_udp(struct sk_buff *skb, unsigned int *l3_len,
			   unsigned int *len)
{
	unsigned int nh, th, end;

	if (skb_is_nonlinear(skb) || !skb_transport_header_was_set(skb))
		return NULL;
	if (skb_unclone(skb, GFP_ATOMIC))
		return NULL;
	nh = skb_network_header(skb) - skb->head;
	th = skb_transport_header(skb) - skb->head;
	end = skb_tail_pointer(skb) - skb->head;
	if (nh > th || th + sizeof(struct udphdr) > end)
		return NULL;
	*l3_len = th - nh;
	*len = end - nh;
	return skb_network_header(skb);
}

/*
 * Sends @skb, prepared by rrxe_helper_skb_push_udp_ip(), with no socket:
 * ip_local_out() or ip6_local_out() in @net.  Consumes @skb whatever
 * happens.  Anything else (no route, data not at the IP header, another
 * protocol) is dropped with -EINVAL instead of reaching the IP stack.
 * Returns 0 or a negative errno; a drop by the queueing discipline is
 * -ENOBUFS, congestion notification counts as sent.  Not with IRQs off:
 * the output path ends with local_bh_enable().
 */
int rrxe_helper_xmit_udp(struct net *net, struct sk_buff *skb)
{
	int err;

	if (WARN_ON_ONCE(irqs_disabled()) || !skb_dst(skb) ||
	    !skb_transport_header_was_set(skb) ||
	    skb->data != skb_network_header(skb)) {
		kfree_skb(skb);
		return -EINVAL;
	}
	if (skb->protocol == htons(ETH_P_IP)) {
		err = ip_local_out(net, NULL, skb);
	} else if (skb->protocol == htons(ETH_P_IPV6)) {
		err = ip6_local_out(net, NULL, skb);
	} else {
		kfree_skb(skb);
		return -EINVAL;
	}
	if (err > 0)
		err = net_xmit_errno(err);
	return err;
}

/* include/linux/skbuff.h: skb queues. */

void rrxe_helper_skb_queue_head_init(struct sk_buff_head *list)
{
	skb_queue_head_init(list);
}

unsigned int
rrxe_helper_skb_queue_len_lockless(const struct sk_buff_head *list)
{
	return skb_queue_len_lockless(list);
}

void rrxe_helper_skb_queue_purge(struct sk_buff_head *list)
{
	skb_queue_purge(list);
}

/* The loopback device of @net, for tests. */
struct net_device *rrxe_helper_net_loopback_dev(struct net *net)
{
	return net->loopback_dev;
}

/* include/linux/net.h */

struct sock *rrxe_helper_socket_sk(const struct socket *sock)
{
	return sock->sk;
}

/* include/linux/etherdevice.h */

void rrxe_helper_eth_random_addr(u8 *addr)
{
	eth_random_addr(addr);
}

/* include/rdma/ib_verbs.h */

/* The `struct device` sits in an anonymous union of `struct ib_device`. */
struct device *rrxe_helper_ib_device_dev(struct ib_device *ibdev)
{
	return &ibdev->dev;
}

enum ib_port_state rrxe_helper_ib_get_curr_port_state(struct net_device *dev)
{
	return ib_get_curr_port_state(dev);
}

enum rdma_network_type
rrxe_helper_rdma_gid_attr_network_type(const struct ib_gid_attr *attr)
{
	return rdma_gid_attr_network_type(attr);
}

/* include/rdma/ib_cache.h */

/*
 * Returns whether @gid is a RoCEv2 GID of @port bound to @ndev (the GID
 * table lookup of rdma_find_gid_by_port(), without keeping the entry).
 */
bool rrxe_helper_rdma_has_roce_v2_gid(struct ib_device *ibdev, const u8 *gid,
				       u32 port, struct net_device *ndev)
{
	const struct ib_gid_attr *attr;

	attr = rdma_find_gid_by_port(ibdev, (const union ib_gid *)gid,
				     IB_GID_TYPE_ROCE_UDP_ENCAP, port, ndev);
	if (IS_ERR(attr))
		return false;
	rdma_put_gid_attr(attr);
	return true;
}

/* include/rdma/uverbs_ioctl.h */

int rrxe_helper_ib_is_udata_in_empty(struct ib_udata *udata)
{
	return ib_is_udata_in_empty(udata);
}

int rrxe_helper_ib_respond_empty_udata(struct ib_udata *udata)
{
	return ib_respond_empty_udata(udata);
}

/* include/linux/spinlock.h: the irq-saving spinlock backend. */

unsigned long rrxe_helper_spin_lock_irqsave(spinlock_t *lock)
{
	unsigned long flags;

	spin_lock_irqsave(lock, flags);
	return flags;
}

bool rrxe_helper_spin_trylock_irqsave(spinlock_t *lock, unsigned long *flags)
{
	unsigned long f;

	if (!spin_trylock_irqsave(lock, f))
		return false;
	*flags = f;
	return true;
}

void rrxe_helper_spin_unlock_irqrestore(spinlock_t *lock, unsigned long flags)
{
	spin_unlock_irqrestore(lock, flags);
}

/* include/rdma/ib_verbs.h: udata copies and the user context of a command. */

int rrxe_helper_ib_copy_to_udata(struct ib_udata *udata, const void *src,
				 size_t len)
{
	return ib_copy_to_udata(udata, (void *)src, len);
}

int rrxe_helper_ib_copy_from_udata(void *dst, struct ib_udata *udata,
				   size_t len)
{
	return ib_copy_from_udata(dst, udata, len);
}

struct ib_udata *rrxe_helper_attrs_udata(struct uverbs_attr_bundle *attrs)
{
	return attrs ? &attrs->driver_udata : NULL;
}

struct ib_ucontext *rrxe_helper_udata_ucontext(struct ib_udata *udata)
{
	return udata ? rdma_udata_to_uverbs_attr_bundle(udata)->context : NULL;
}

/*
 * Queue buffers shared with user space: vmalloc_user() memory, mapped with
 * remap_vmalloc_range() through an rdma_user_mmap_entry.  The entry owns the
 * buffer once inserted: the object that created it drops its reference with
 * rrxe_helper_qbuf_remove(), each VMA holds one more, and the last put frees
 * the buffer (rrxe_helper_qbuf_mmap_free, the ib_device_ops.mmap_free op).
 */
struct rrxe_qbuf_entry {
	struct rdma_user_mmap_entry rdma_entry;
	void *buf;
};

void *rrxe_helper_vmalloc_user(size_t size)
{
	return vmalloc_user(size);
}

void rrxe_helper_vfree(void *buf)
{
	vfree(buf);
}

/*
 * Inserts an entry for @buf (@size bytes) into @uctx; on success the entry
 * owns @buf and *@offset is the mmap offset for user space.
 */
struct rdma_user_mmap_entry *rrxe_helper_qbuf_insert(struct ib_ucontext *uctx,
						     void *buf, size_t size,
						     u64 *offset)
{
	struct rrxe_qbuf_entry *e = kzalloc(sizeof(*e), GFP_KERNEL);
	int err;

	if (!e)
		return ERR_PTR(-ENOMEM);
	e->buf = buf;
	err = rdma_user_mmap_entry_insert(uctx, &e->rdma_entry, size);
	if (err) {
		kfree(e);
		return ERR_PTR(err);
	}
	*offset = rdma_user_mmap_get_offset(&e->rdma_entry);
	return &e->rdma_entry;
}

void rrxe_helper_qbuf_remove(struct rdma_user_mmap_entry *entry)
{
	rdma_user_mmap_entry_remove(entry);
}

void rrxe_helper_qbuf_mmap_free(struct rdma_user_mmap_entry *entry)
{
	struct rrxe_qbuf_entry *e =
		container_of(entry, struct rrxe_qbuf_entry, rdma_entry);

	vfree(e->buf);
	kfree(e);
}

/* rrxe_umap.c: registers @vma with the core, which zaps it on disassociate. */
int rrxe_umap_attach(struct vm_area_struct *vma,
		     struct rdma_user_mmap_entry *entry);

int rrxe_helper_qbuf_mmap(struct ib_ucontext *uctx, struct vm_area_struct *vma)
{
	struct rdma_user_mmap_entry *entry = rdma_user_mmap_entry_get(uctx, vma);
	struct rrxe_qbuf_entry *e;
	int err;

	if (!entry)
		return -EINVAL;
	e = container_of(entry, struct rrxe_qbuf_entry, rdma_entry);
	if (vma->vm_end - vma->vm_start > entry->npages << PAGE_SHIFT) {
		rdma_user_mmap_entry_put(entry);
		return -EINVAL;
	}
	err = remap_vmalloc_range(vma, e->buf, 0);
	if (err) {
		rdma_user_mmap_entry_put(entry);
		return err;
	}
	/*
	 * The VMA keeps the core's vm_ops (set by ib_uverbs_mmap()) and its own
	 * reference to the entry: the core drops it on munmap, or zaps the VMA
	 * and drops it when the device goes away under the application, so no
	 * code of this module runs for the mapping after that.
	 */
	err = rrxe_umap_attach(vma, entry);
	rdma_user_mmap_entry_put(entry);
	return err;
}

/* include/rdma/ib_umem.h: the page table of a user MR. */

struct ib_umem *rrxe_helper_ib_umem_get_va(struct ib_device *device,
					   unsigned long addr, size_t size,
					   int access)
{
	return ib_umem_get_va(device, addr, size, access);
}

size_t rrxe_helper_umem_num_pages(struct ib_umem *umem)
{
	return ib_umem_num_pages(umem);
}

size_t rrxe_helper_ib_umem_offset(struct ib_umem *umem)
{
	return ib_umem_offset(umem);
}

/* Fills @pages with at most @n pages of @umem in address order. */
size_t rrxe_helper_umem_fill_pages(struct ib_umem *umem, struct page **pages,
				   size_t n)
{
	struct sg_page_iter iter;
	size_t i = 0;

	for_each_sgtable_page(&umem->sgt_append.sgt, &iter, 0) {
		if (i == n)
			break;
		pages[i++] = sg_page_iter_page(&iter);
	}
	return i;
}

/*
 * include/rdma/ib_umem_odp.h: on-demand paging.  The umem's page list
 * (map.pfn_list) is written by hmm_range_fault() without umem_mutex, so it
 * is read only with umem_mutex held and after ib_umem_odp_map_dma_and_lock()
 * checked the notifier sequence: the Rust side copies what it needs into its
 * own table then, under its own spinlock, which the data path takes.
 */

#ifndef CONFIG_INFINIBAND_ON_DEMAND_PAGING
#error "rrxe needs CONFIG_INFINIBAND_ON_DEMAND_PAGING=y (as distribution kernels have it)"
#endif

struct ib_umem_odp *rrxe_helper_ib_umem_odp_get(
	struct ib_device *device, unsigned long addr, size_t size, int access,
	const struct mmu_interval_notifier_ops *ops)
{
	return ib_umem_odp_get(device, addr, size, access, ops);
}

void rrxe_helper_ib_umem_odp_release(struct ib_umem_odp *odp)
{
	ib_umem_odp_release(odp);
}

/* Sets the pointer the invalidation callback finds, under umem_mutex. */
void rrxe_helper_odp_set_private(struct ib_umem_odp *odp, void *private)
{
	mutex_lock(&odp->umem_mutex);
	odp->private = private;
	mutex_unlock(&odp->umem_mutex);
}

/* Offset of the first user byte from ib_umem_start(), in bytes. */
size_t rrxe_helper_odp_first(struct ib_umem_odp *odp)
{
	return odp->umem.address - ib_umem_start(odp);
}

/* Number of PAGE_SIZE pages from ib_umem_start() to ib_umem_end(). */
size_t rrxe_helper_odp_page_count(struct ib_umem_odp *odp)
{
	return (ib_umem_end(odp) - ib_umem_start(odp)) >> PAGE_SHIFT;
}

size_t rrxe_helper_odp_length(struct ib_umem_odp *odp)
{
	return odp->umem.length;
}

bool rrxe_helper_odp_writable(struct ib_umem_odp *odp)
{
	return odp->umem.writable;
}

/*
 * Maps [offset, offset + len) from the first user byte, faulting pages in
 * when @fault (may sleep).  On success (>= 0) umem_mutex is held: release it
 * with rrxe_helper_odp_unlock().
 */
int rrxe_helper_odp_map_and_lock(struct ib_umem_odp *odp, u64 offset, u64 len,
				 bool write, bool fault)
{
	return ib_umem_odp_map_dma_and_lock(odp, odp->umem.address + offset,
					    len, write ? HMM_PFN_WRITE : 0,
					    fault);
}

void rrxe_helper_odp_lock(struct ib_umem_odp *odp)
{
	mutex_lock(&odp->umem_mutex);
}

void rrxe_helper_odp_unlock(struct ib_umem_odp *odp)
{
	mutex_unlock(&odp->umem_mutex);
}

/* A page the device wrote, leaving the driver's table (process context). */
void rrxe_helper_odp_set_page_dirty(struct page *page)
{
	folio_mark_dirty(page_folio(page));
}

/*
 * The page at PAGE_SIZE index @index from ib_umem_start(), or NULL if it is
 * not mapped; *@writable tells whether it is mapped writable.  Called with
 * umem_mutex held after a successful rrxe_helper_odp_map_and_lock().
 */
struct page *rrxe_helper_odp_page(struct ib_umem_odp *odp, size_t index,
				  bool *writable)
{
	unsigned long pfn = odp->map.pfn_list[index];

	if (!(pfn & HMM_PFN_VALID) || (pfn & HMM_PFN_ERROR))
		return NULL;
	*writable = pfn & HMM_PFN_WRITE;
	return hmm_pfn_to_page(pfn);
}

/*
 * The first half of an invalidation: NULL if it may not sleep (the caller
 * then refuses it); otherwise umem_mutex is taken, the sequence moved on,
 * and [*@first, *@end) are the PAGE_SIZE indexes the range covers.
 */
struct ib_umem_odp *rrxe_helper_odp_invalidate_begin(
	struct mmu_interval_notifier *mni, const struct mmu_notifier_range *range,
	unsigned long cur_seq, size_t *first, size_t *end, void **private)
{
	struct ib_umem_odp *odp = container_of(mni, struct ib_umem_odp, notifier);
	unsigned long start = max(ib_umem_start(odp), range->start);
	unsigned long last = min(ib_umem_end(odp), range->end);

	if (!mmu_notifier_range_blockable(range))
		return NULL;
	mutex_lock(&odp->umem_mutex);
	mmu_interval_set_seq(mni, cur_seq);
	*first = 0;
	*end = 0;
	if (start < last) {
		*first = (start - ib_umem_start(odp)) >> PAGE_SHIFT;
		*end = (last - ib_umem_start(odp) + PAGE_SIZE - 1) >> PAGE_SHIFT;
	}
	*private = odp->private;
	return odp;
}

/* The second half: the core's mapping of the range goes, umem_mutex too. */
void rrxe_helper_odp_invalidate_end(struct ib_umem_odp *odp,
				    const struct mmu_notifier_range *range)
{
	ib_umem_odp_unmap_dma_pages(odp, range->start, range->end);
	mutex_unlock(&odp->umem_mutex);
}

/*
 * FLUSH to persistence (IBTA Vol 1 Annex A19): which pages are persistent
 * memory, and writing their cache lines back (as rdma_rxe's is_pmem_page
 * and flush_pmem).
 */

bool rrxe_helper_page_is_pmem(struct page *page)
{
	return region_intersects(page_to_phys(page), PAGE_SIZE, IORESOURCE_MEM,
				 IORES_DESC_PERSISTENT_MEMORY) ==
	       REGION_INTERSECTS;
}

void rrxe_helper_wb_cache_pmem_page(struct page *page, size_t offset,
				    size_t len)
{
	u8 *va = kmap_local_page(page);

	arch_wb_cache_pmem(va + offset, len);
	kunmap_local(va);
}

void rrxe_helper_wb_cache_pmem(void *addr, size_t len)
{
	arch_wb_cache_pmem(addr, len);
}

/* include/linux/highmem.h: data access to pinned user pages. */

void rrxe_helper_memcpy_to_page(struct page *page, size_t offset,
				const u8 *from, size_t len)
{
	memcpy_to_page(page, offset, (const char *)from, len);
}

void rrxe_helper_memcpy_from_page(u8 *to, struct page *page, size_t offset,
				  size_t len)
{
	memcpy_from_page((char *)to, page, offset, len);
}

/*
 * include/linux/xarray.h: tables of published objects (QPs by QPN, MRs by
 * key index).  Lookups run in softirq and with interrupts off, so the table
 * lock is irq-safe; stores and erasures come from process context.
 */

void rrxe_helper_xa_init_irq(struct xarray *xa)
{
	xa_init_flags(xa, XA_FLAGS_LOCK_IRQ);
}

int rrxe_helper_xa_insert_irq(struct xarray *xa, unsigned long index,
			      void *entry)
{
	return xa_insert_irq(xa, index, entry, GFP_KERNEL);
}

/* Erases the entry at @index only if it is @entry. */
void rrxe_helper_xa_erase_entry_irq(struct xarray *xa, unsigned long index,
				    void *entry)
{
	xa_cmpxchg_irq(xa, index, entry, NULL, GFP_KERNEL);
}

/*
 * The same two for callers that may not sleep (address handles are created
 * and destroyed in atomic context): the lock with interrupts saved, and no
 * allocation that sleeps.
 */
int rrxe_helper_xa_insert_atomic(struct xarray *xa, unsigned long index,
				 void *entry)
{
	unsigned long flags;
	int ret;

	xa_lock_irqsave(xa, flags);
	ret = __xa_insert(xa, index, entry, GFP_ATOMIC);
	xa_unlock_irqrestore(xa, flags);
	return ret;
}

void rrxe_helper_xa_erase_entry_atomic(struct xarray *xa, unsigned long index,
				       void *entry)
{
	unsigned long flags;

	xa_lock_irqsave(xa, flags);
	__xa_cmpxchg(xa, index, entry, NULL, GFP_ATOMIC);
	xa_unlock_irqrestore(xa, flags);
}

unsigned long rrxe_helper_xa_lock_irqsave(struct xarray *xa)
{
	unsigned long flags;

	xa_lock_irqsave(xa, flags);
	return flags;
}

void rrxe_helper_xa_unlock_irqrestore(struct xarray *xa, unsigned long flags)
{
	xa_unlock_irqrestore(xa, flags);
}

/* include/linux/refcount.h */

bool rrxe_helper_refcount_inc_not_zero(refcount_t *r)
{
	return refcount_inc_not_zero(r);
}

/*
 * include/linux/timer.h: the per-QP timers.  Their callbacks run in softirq
 * (no TIMER_IRQSAFE).
 */

void rrxe_helper_timer_setup(struct timer_list *timer,
			     void (*fn)(struct timer_list *))
{
	timer_setup(timer, fn, 0);
}

/* Arms @timer to expire after @usecs microseconds, at least one tick. */
void rrxe_helper_mod_timer_usecs(struct timer_list *timer, u64 usecs)
{
	unsigned long delta;

	if (usecs > UINT_MAX)
		delta = usecs_to_jiffies(UINT_MAX);
	else
		delta = usecs_to_jiffies((unsigned int)usecs);
	mod_timer(timer, jiffies + max(delta, 1UL));
}

/*
 * The tick clock (jiffies_64) in microseconds: no clock source is read
 * (on 64-bit a plain load), and it is as coarse as the timers above, for
 * comparing against what they were armed with.
 */
u64 rrxe_helper_tick_usecs(void)
{
	return div_u64(jiffies64_to_nsecs(get_jiffies_64()), NSEC_PER_USEC);
}

/*
 * include/linux/workqueue.h: the per-QP transmit kick, a work item on the
 * BH workqueue (it runs in softirq, with interrupts enabled, soon after it
 * is queued).
 */

void rrxe_helper_init_work(struct work_struct *work,
			   void (*fn)(struct work_struct *))
{
	INIT_WORK(work, fn);
}

bool rrxe_helper_queue_bh_work(struct work_struct *work)
{
	return queue_work(system_bh_wq, work);
}

/*
 * Work that may sleep for a while (faulting pages in): an unbound worker.
 * Initialised here, not by rrxe_helper_init_work(): INIT_WORK() gives each
 * call site its own lockdep class, and this work runs in process context
 * where the kick runs in softirq.
 */
void rrxe_helper_init_sleepable_work(struct work_struct *work,
				     void (*fn)(struct work_struct *))
{
	INIT_WORK(work, fn);
}

bool rrxe_helper_queue_unbound_work(struct work_struct *work)
{
	return queue_work(system_unbound_wq, work);
}

/* Link-layer multicast filter of a net device (UD multicast groups). */
int rrxe_helper_netdev_mc_add(struct net_device *dev, const unsigned char *addr)
{
	return dev_mc_add(dev, addr);
}

int rrxe_helper_netdev_mc_del(struct net_device *dev, const unsigned char *addr)
{
	return dev_mc_del(dev, addr);
}

/* Whether @skb's route goes out through a loopback device. */
bool rrxe_helper_skb_dst_is_loopback(struct sk_buff *skb)
{
	struct dst_entry *dst = skb_dst(skb);

	return dst && dst->dev && (dst->dev->flags & IFF_LOOPBACK);
}

void rrxe_helper_bh_disable(void)
{
	local_bh_disable();
}

void rrxe_helper_bh_enable(void)
{
	local_bh_enable();
}

bool rrxe_helper_irqs_disabled(void)
{
	return irqs_disabled();
}

/*
 * CQ callbacks of the consumer. rrxe calls them with no lock of its own
 * held, so that a handler may post to or poll the QP and the CQ; its QP,
 * CQ and SRQ locks disable interrupts, so lockdep checks that interrupts
 * are on here.
 */

void rrxe_helper_cq_comp_handler(struct ib_cq *cq)
{
	lockdep_assert_irqs_enabled();
	if (cq->comp_handler)
		cq->comp_handler(cq, cq->cq_context);
}

void rrxe_helper_cq_event(struct ib_cq *cq, enum ib_event_type type)
{
	struct ib_event ev = {
		.device = cq->device,
		.element.cq = cq,
		.event = type,
	};

	lockdep_assert_irqs_enabled();
	if (cq->event_handler)
		cq->event_handler(&ev, cq->cq_context);
}

/*
 * Layout probes: sizes and offsets as the C compiler sees them, compared
 * with the generated bindings by the `rrxe_rdma_layout` KUnit suite.
 */

#define RRXE_SIZEOF(t)						\
	size_t rrxe_helper_sizeof_##t(void)			\
	{							\
		return sizeof(struct t);			\
	}

#define RRXE_OFFSETOF(t, f)					\
	size_t rrxe_helper_offsetof_##t##_##f(void)		\
	{							\
		return offsetof(struct t, f);			\
	}

RRXE_SIZEOF(ib_device)
RRXE_SIZEOF(ib_device_ops)
RRXE_SIZEOF(ib_device_attr)
RRXE_SIZEOF(ib_port_attr)
RRXE_SIZEOF(ib_port_immutable)
RRXE_SIZEOF(ib_ucontext)
RRXE_SIZEOF(ib_pd)
RRXE_SIZEOF(ib_udata)
RRXE_SIZEOF(rdma_hw_stats)
RRXE_SIZEOF(rdma_stat_desc)
RRXE_SIZEOF(rdma_link_ops)

RRXE_OFFSETOF(ib_device, ops)
RRXE_OFFSETOF(ib_device, node_guid)
RRXE_OFFSETOF(ib_device, uverbs_cmd_mask)
RRXE_OFFSETOF(ib_device, phys_port_cnt)
RRXE_OFFSETOF(ib_device, name_assign_type)
RRXE_OFFSETOF(ib_device_ops, dealloc_driver)
RRXE_OFFSETOF(ib_device_ops, size_ib_pd)
RRXE_OFFSETOF(ib_device_ops, size_ib_ucontext)
RRXE_OFFSETOF(ib_ucontext, device)
RRXE_OFFSETOF(ib_pd, device)
RRXE_OFFSETOF(rdma_hw_stats, value)

/*
 * The rxe user ABI work queue entries, which the protocol core decodes from
 * raw queue slots (proto/wqe.rs); nested fields get a name of their own.
 */

#define RRXE_OFFSETOF_AS(name, t, f)				\
	size_t rrxe_helper_offsetof_##name(void)		\
	{							\
		return offsetof(struct t, f);			\
	}

RRXE_SIZEOF(rxe_sge)
RRXE_SIZEOF(rxe_send_wr)
RRXE_SIZEOF(rxe_send_wqe)
RRXE_SIZEOF(rxe_recv_wqe)

RRXE_OFFSETOF_AS(rxe_sge_addr, rxe_sge, addr)
RRXE_OFFSETOF_AS(rxe_sge_length, rxe_sge, length)
RRXE_OFFSETOF_AS(rxe_sge_lkey, rxe_sge, lkey)
RRXE_OFFSETOF_AS(rxe_dma_info_length, rxe_dma_info, length)
RRXE_OFFSETOF_AS(rxe_dma_info_num_sge, rxe_dma_info, num_sge)
RRXE_OFFSETOF_AS(rxe_dma_info_sge, rxe_dma_info, sge)
RRXE_OFFSETOF_AS(rxe_dma_info_inline_data, rxe_dma_info, inline_data)
RRXE_OFFSETOF_AS(rxe_dma_info_atomic_wr, rxe_dma_info, atomic_wr)
RRXE_OFFSETOF_AS(rxe_send_wqe_wr_id, rxe_send_wqe, wr.wr_id)
RRXE_OFFSETOF_AS(rxe_send_wqe_opcode, rxe_send_wqe, wr.opcode)
RRXE_OFFSETOF_AS(rxe_send_wqe_send_flags, rxe_send_wqe, wr.send_flags)
RRXE_OFFSETOF_AS(rxe_send_wqe_imm_data, rxe_send_wqe, wr.ex.imm_data)
RRXE_OFFSETOF_AS(rxe_send_wqe_invalidate_rkey, rxe_send_wqe, wr.ex.invalidate_rkey)
RRXE_OFFSETOF_AS(rxe_send_wqe_wr_union, rxe_send_wqe, wr.wr)
RRXE_OFFSETOF_AS(rxe_send_wqe_rdma_remote_addr, rxe_send_wqe, wr.wr.rdma.remote_addr)
RRXE_OFFSETOF_AS(rxe_send_wqe_rdma_rkey, rxe_send_wqe, wr.wr.rdma.rkey)
RRXE_OFFSETOF_AS(rxe_send_wqe_atomic_remote_addr, rxe_send_wqe, wr.wr.atomic.remote_addr)
RRXE_OFFSETOF_AS(rxe_send_wqe_atomic_compare_add, rxe_send_wqe, wr.wr.atomic.compare_add)
RRXE_OFFSETOF_AS(rxe_send_wqe_atomic_swap, rxe_send_wqe, wr.wr.atomic.swap)
RRXE_OFFSETOF_AS(rxe_send_wqe_atomic_rkey, rxe_send_wqe, wr.wr.atomic.rkey)
RRXE_OFFSETOF_AS(rxe_send_wqe_ud_remote_qpn, rxe_send_wqe, wr.wr.ud.remote_qpn)
RRXE_OFFSETOF_AS(rxe_send_wqe_ud_remote_qkey, rxe_send_wqe, wr.wr.ud.remote_qkey)
RRXE_OFFSETOF_AS(rxe_send_wqe_ud_pkey_index, rxe_send_wqe, wr.wr.ud.pkey_index)
RRXE_OFFSETOF_AS(rxe_send_wqe_ud_ah_num, rxe_send_wqe, wr.wr.ud.ah_num)
RRXE_OFFSETOF_AS(rxe_send_wqe_ud_av, rxe_send_wqe, wr.wr.ud.av)
RRXE_OFFSETOF_AS(rxe_send_wqe_mw_addr, rxe_send_wqe, wr.wr.mw.addr)
RRXE_OFFSETOF_AS(rxe_send_wqe_mw_length, rxe_send_wqe, wr.wr.mw.length)
RRXE_OFFSETOF_AS(rxe_send_wqe_mw_mr_lkey, rxe_send_wqe, wr.wr.mw.mr_lkey)
RRXE_OFFSETOF_AS(rxe_send_wqe_mw_mw_rkey, rxe_send_wqe, wr.wr.mw.mw_rkey)
RRXE_OFFSETOF_AS(rxe_send_wqe_mw_rkey, rxe_send_wqe, wr.wr.mw.rkey)
RRXE_OFFSETOF_AS(rxe_send_wqe_mw_access, rxe_send_wqe, wr.wr.mw.access)
RRXE_OFFSETOF_AS(rxe_send_wqe_flush_remote_addr, rxe_send_wqe, wr.wr.flush.remote_addr)
RRXE_OFFSETOF_AS(rxe_send_wqe_flush_length, rxe_send_wqe, wr.wr.flush.length)
RRXE_OFFSETOF_AS(rxe_send_wqe_flush_rkey, rxe_send_wqe, wr.wr.flush.rkey)
RRXE_OFFSETOF_AS(rxe_send_wqe_flush_type, rxe_send_wqe, wr.wr.flush.type)
RRXE_OFFSETOF_AS(rxe_send_wqe_flush_level, rxe_send_wqe, wr.wr.flush.level)
RRXE_OFFSETOF_AS(rxe_send_wqe_iova, rxe_send_wqe, iova)
RRXE_OFFSETOF_AS(rxe_send_wqe_dma, rxe_send_wqe, dma)
RRXE_OFFSETOF_AS(rxe_send_wqe_dma_sge, rxe_send_wqe, dma.sge)
RRXE_OFFSETOF_AS(rxe_recv_wqe_wr_id, rxe_recv_wqe, wr_id)
RRXE_OFFSETOF_AS(rxe_recv_wqe_dma, rxe_recv_wqe, dma)
RRXE_OFFSETOF_AS(rxe_recv_wqe_dma_sge, rxe_recv_wqe, dma.sge)

/*
 * Transmit credit (rust/kernel/net/skbuff.rs, TxCredit): an skb in flight
 * belongs to its credit's kernel socket, whose sk_user_data names the
 * credit's shared state (reference counted; each skb holds a reference).
 */

/* Names @owner (at least 8-byte aligned, no flag bits) in @sock's sk_user_data. */
void rrxe_helper_tx_sock_set_owner(struct socket *sock, void *owner)
{
	/* Warns if @owner has flag bits. */
	rcu_assign_sk_user_data(sock->sk, owner);
}

/*
 * Charges @skb (of no socket yet) to @sock: holds a reference to its
 * struct sock and installs @dtor, which must drop it.
 */
void rrxe_helper_skb_set_tx_owner(struct sk_buff *skb, struct socket *sock,
				  void (*dtor)(struct sk_buff *))
{
	skb_orphan(skb);
	sock_hold(sock->sk);
	skb->sk = sock->sk;
	skb->destructor = dtor;
}

/*
 * In the destructor of an skb charged by rrxe_helper_skb_set_tx_owner():
 * what its socket names. The skb's socket reference keeps the struct sock
 * alive, also after sock_release(); what it names is kept alive by the
 * caller's own reference, not by RCU.
 */
void *rrxe_helper_skb_tx_owner(struct sk_buff *skb)
{
	return (void *)((uintptr_t)rcu_access_pointer(skb->sk->sk_user_data) &
			SK_USER_DATA_PTRMASK);
}

/* Drops the socket reference of a charged skb, from its destructor. */
void rrxe_helper_skb_tx_sock_put(struct sk_buff *skb)
{
	sock_put(skb->sk);
}

void rrxe_helper_skb_dst_drop(struct sk_buff *skb)
{
	skb_dst_drop(skb);
}

/*
 * Creates the kernel socket of a transmit credit: an unbound datagram
 * socket of init_net that never carries traffic. Unlike rdma_rxe it keeps
 * the default lockdep class: a class of the module's own would make every
 * such socket hold a module reference (sk_owner_set), so that rrxe could
 * not be unloaded while a device (and its GSI QP) exists.
 */
int rrxe_helper_tx_sock_create(struct socket **res)
{
	return sock_create_kern(&init_net, AF_INET, SOCK_DGRAM, 0, res);
}

/* include/linux/notifier.h */

int rrxe_helper_notifier_from_errno(int err)
{
	return notifier_from_errno(err);
}

/* include/linux/llist.h: a driver's list of its devices. */

bool rrxe_helper_llist_add(struct llist_node *new, struct llist_head *head)
{
	return llist_add(new, head);
}

struct llist_node *rrxe_helper_llist_del_all(struct llist_head *head)
{
	return llist_del_all(head);
}

/* include/net/netlink.h: the nest of a driver's restrack details. */

struct nlattr *rrxe_helper_nla_nest_start(struct sk_buff *msg, int attrtype)
{
	return nla_nest_start(msg, attrtype);
}

void rrxe_helper_nla_nest_end(struct sk_buff *msg, struct nlattr *start)
{
	nla_nest_end(msg, start);
}

void rrxe_helper_nla_nest_cancel(struct sk_buff *msg, struct nlattr *start)
{
	nla_nest_cancel(msg, start);
}

/*
 * rrxe_trace.h: one call per event.  Each trace_*() tests its tracepoint's
 * static key first; the _enabled() helpers let the callers skip decoding a
 * packet nobody traces.
 */

void rrxe_helper_trace_qp_state(const struct ib_device *ibdev, u32 qpn,
				u32 old_state, u32 new_state)
{
	trace_rrxe_qp_state(ibdev, qpn, old_state, new_state);
}

/*
 * The events of class rrxe_pkt differ only in name, and so do their helpers:
 * rrxe_helper_trace_{send,recv}_pkt() and their _enabled() tests.
 */
#define RRXE_PKT_EVENT_HELPERS(event)					\
bool rrxe_helper_trace_##event##_enabled(void)				\
{									\
	return trace_rrxe_##event##_enabled();				\
}									\
									\
void rrxe_helper_trace_##event(const struct ib_device *ibdev, u32 qpn,	\
			       u32 dest_qpn, u32 psn, u8 opcode, u32 len, \
			       bool ackreq)				\
{									\
	trace_rrxe_##event(ibdev, qpn, dest_qpn, psn, opcode, len, ackreq); \
}

RRXE_PKT_EVENT_HELPERS(send_pkt)
RRXE_PKT_EVENT_HELPERS(recv_pkt)

void rrxe_helper_trace_retransmit(const struct ib_device *ibdev, u32 qpn,
				  u32 psn, u32 reason)
{
	trace_rrxe_retransmit(ibdev, qpn, psn, reason);
}

void rrxe_helper_trace_nak(const struct ib_device *ibdev, u32 qpn, u32 psn,
			   u8 syndrome, bool sent)
{
	trace_rrxe_nak(ibdev, qpn, psn, syndrome, sent);
}

void rrxe_helper_trace_wc_error(const struct ib_device *ibdev, u32 qpn,
				u64 wr_id, u32 status, u32 opcode)
{
	trace_rrxe_wc_error(ibdev, qpn, wr_id, status, opcode);
}
