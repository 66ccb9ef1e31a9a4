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
#include <linux/if_vlan.h>
#include <linux/netdevice.h>
#include <rdma/ib_verbs.h>
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

/* include/rdma/uverbs_ioctl.h */

int rrxe_helper_ib_is_udata_in_empty(struct ib_udata *udata)
{
	return ib_is_udata_in_empty(udata);
}

int rrxe_helper_ib_respond_empty_udata(struct ib_udata *udata)
{
	return ib_respond_empty_udata(udata);
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
