/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Headers whose declarations bindgen turns into the module's bindings
 * (rust/bindings/rrxe_bindings_generated.rs, generated at build time).
 * What is generated is chosen by rust/bindgen_parameters.
 */

#include <linux/netdevice.h>
#include <rdma/ib_mad.h>
#include <rdma/ib_verbs.h>
#include <rdma/rdma_netlink.h>
#include <rdma/uverbs_ioctl.h>
