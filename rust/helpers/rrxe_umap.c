// SPDX-License-Identifier: GPL-2.0
/*
 * A queue mapping registered with ib_core's mapping tracker, the one
 * rdma_user_mmap_io() uses for I/O pages: on disassociate the core zaps the
 * VMA and drops its entry reference, and its vm_ops (not this module's)
 * handle fork and munmap.  rdma_umap_priv_init() is exported for this, but
 * struct rdma_umap_priv is declared only in ib_core's private header, so
 * this file alone includes it (Kbuild adds drivers/infiniband/core of the
 * kernel source built against to its include path).
 */

#include <linux/mm.h>
#include <linux/slab.h>
#include <rdma/ib_verbs.h>

#include "core_priv.h"

int rrxe_umap_attach(struct vm_area_struct *vma,
		     struct rdma_user_mmap_entry *entry);

int rrxe_umap_attach(struct vm_area_struct *vma,
		     struct rdma_user_mmap_entry *entry)
{
	struct rdma_umap_priv *priv = kzalloc(sizeof(*priv), GFP_KERNEL);

	if (!priv)
		return -ENOMEM;
	/* Takes its own reference to @entry. */
	rdma_umap_priv_init(priv, vma, entry);
	return 0;
}
