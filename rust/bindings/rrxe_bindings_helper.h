/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Headers whose declarations bindgen turns into the module's bindings
 * (rust/bindings/rrxe_bindings_generated.rs, generated at build time).
 * What is generated is chosen by rust/bindgen_parameters.
 */

#include <linux/crc32.h>
#include <linux/netdevice.h>
#include <linux/skbuff.h>
#include <net/net_namespace.h>
#include <net/udp_tunnel.h>
#include <rdma/ib_cache.h>
#include <rdma/ib_mad.h>
#include <rdma/ib_umem.h>
#include <rdma/ib_verbs.h>
#include <rdma/rdma_netlink.h>
#include <rdma/uverbs_ioctl.h>
#include <rdma/rdma_user_rxe.h>

/* The provider's tracepoints: only their enumeration is allowlisted. */
#include "../helpers/rrxe_trace.h"
