// SPDX-License-Identifier: GPL-2.0
/*
 * advise-mr DEV [rxe]: ibv_advise_mr on an on-demand region, through the
 * uverbs ADVISE_MR method itself: the rdma-core of the guests (56.1) has
 * no ibv_advise_mr for rxe devices (its provider gained one in 59), but
 * the kernel method is the driver's. Each case prints what it saw and the
 * program exits non-zero on the first that is wrong:
 *
 * - a synchronous PREFETCH_WRITE of 16 pages of fresh anonymous memory
 *   makes them resident in the process (mincore), as a fault would;
 * - PREFETCH_NO_FAULT leaves fresh pages alone, and succeeds;
 * - an asynchronous PREFETCH returns 0 and the pages become resident;
 * - a bad lkey and a range past the region fail (EINVAL, EFAULT); an
 *   advice the kernel does not know fails with EOPNOTSUPP;
 * - a region that is not on-demand fails with EINVAL (not run with "rxe":
 *   rdma_rxe 7.2 treats any region's umem as on-demand there).
 */
#include <errno.h>
#include <infiniband/verbs.h>
#include <rdma/ib_user_ioctl_cmds.h>
#include <rdma/ib_user_ioctl_verbs.h>
#include <rdma/rdma_user_ioctl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#define PAGES 16

static long page;

static int advise(struct ibv_context *ctx, struct ibv_pd *pd, uint64_t advice,
		  uint32_t flags, struct ibv_sge *sge)
{
	struct {
		struct ib_uverbs_ioctl_hdr hdr;
		struct ib_uverbs_attr attrs[4];
	} req;
	struct ib_uverbs_sge s = {
		.addr = sge->addr, .length = sge->length, .lkey = sge->lkey
	};

	memset(&req, 0, sizeof(req));
	req.hdr.length = sizeof(req);
	req.hdr.object_id = UVERBS_OBJECT_MR;
	req.hdr.method_id = UVERBS_METHOD_ADVISE_MR;
	req.hdr.num_attrs = 4;
	req.hdr.driver_id = RDMA_DRIVER_RXE;
	req.attrs[0].attr_id = UVERBS_ATTR_ADVISE_MR_PD_HANDLE;
	req.attrs[0].flags = UVERBS_ATTR_F_MANDATORY;
	req.attrs[0].data = pd->handle;
	req.attrs[1].attr_id = UVERBS_ATTR_ADVISE_MR_ADVICE;
	req.attrs[1].flags = UVERBS_ATTR_F_MANDATORY;
	req.attrs[1].len = sizeof(uint64_t);
	req.attrs[1].data = advice;
	req.attrs[2].attr_id = UVERBS_ATTR_ADVISE_MR_FLAGS;
	req.attrs[2].flags = UVERBS_ATTR_F_MANDATORY;
	req.attrs[2].len = sizeof(uint32_t);
	req.attrs[2].data = flags;
	req.attrs[3].attr_id = UVERBS_ATTR_ADVISE_MR_SGE_LIST;
	req.attrs[3].flags = UVERBS_ATTR_F_MANDATORY;
	req.attrs[3].len = sizeof(s);
	req.attrs[3].data = (uintptr_t)&s;
	if (ioctl(ctx->cmd_fd, RDMA_VERBS_IOCTL, &req))
		return -errno;
	return 0;
}

/* Number of resident pages of the PAGES pages at @p. */
static int resident(void *p)
{
	unsigned char v[PAGES];
	int i, n = 0;

	if (mincore(p, PAGES * page, v))
		return -1;
	for (i = 0; i < PAGES; i++)
		n += v[i] & 1;
	return n;
}

/* A region with @access over PAGES fresh pages, at *@p; its SGE in *@sge. */
static struct ibv_mr *fresh_region(struct ibv_pd *pd, int access, void **p,
				   struct ibv_sge *sge)
{
	struct ibv_mr *mr;

	*p = mmap(NULL, PAGES * page, PROT_READ | PROT_WRITE,
		  MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (*p == MAP_FAILED) {
		perror("mmap");
		exit(1);
	}
	mr = ibv_reg_mr(pd, *p, PAGES * page, access);
	if (!mr) {
		perror("ibv_reg_mr");
		exit(1);
	}
	*sge = (struct ibv_sge){ (uintptr_t)*p, PAGES * page, mr->lkey };
	return mr;
}

static int expect(const char *what, int got, int want)
{
	printf("%s: %d (%s)\n", what, got, got < 0 ? strerror(-got) : "ok");
	if (got != want) {
		printf("  expected %d (%s)\n", want, want < 0 ? strerror(-want) : "ok");
		return 1;
	}
	return 0;
}

int main(int argc, char **argv)
{
	int access = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_ON_DEMAND;
	struct ibv_device **list;
	struct ibv_context *ctx = NULL;
	struct ibv_sge sge;
	struct ibv_mr *mr, *pinned;
	struct ibv_pd *pd;
	int i, n, bad = 0;
	void *p;

	page = sysconf(_SC_PAGESIZE);
	if (argc < 2)
		return 2;
	list = ibv_get_device_list(NULL);
	for (i = 0; list && list[i]; i++)
		if (!strcmp(ibv_get_device_name(list[i]), argv[1]))
			ctx = ibv_open_device(list[i]);
	if (!ctx || !(pd = ibv_alloc_pd(ctx))) {
		fprintf(stderr, "no device %s\n", argv[1]);
		return 1;
	}

	mr = fresh_region(pd, access, &p, &sge);
	printf("fresh region: %d of %d pages resident\n", resident(p), PAGES);
	bad |= expect("PREFETCH_NO_FAULT", advise(ctx, pd, IB_UVERBS_ADVISE_MR_ADVICE_PREFETCH_NO_FAULT,
						  IB_UVERBS_ADVISE_MR_FLAG_FLUSH, &sge), 0);
	bad |= expect("  pages resident after it", resident(p), 0);
	bad |= expect("PREFETCH_WRITE, synchronous", advise(ctx, pd, IB_UVERBS_ADVISE_MR_ADVICE_PREFETCH_WRITE,
							    IB_UVERBS_ADVISE_MR_FLAG_FLUSH, &sge), 0);
	bad |= expect("  pages resident after it", resident(p), PAGES);

	sge.lkey = mr->lkey ^ 0x80;
	bad |= expect("bad lkey", advise(ctx, pd, IB_UVERBS_ADVISE_MR_ADVICE_PREFETCH_WRITE,
					 IB_UVERBS_ADVISE_MR_FLAG_FLUSH, &sge), -EINVAL);
	sge.lkey = mr->lkey;
	sge.addr += page;
	bad |= expect("range past the region", advise(ctx, pd, IB_UVERBS_ADVISE_MR_ADVICE_PREFETCH_WRITE,
						      IB_UVERBS_ADVISE_MR_FLAG_FLUSH, &sge), -EFAULT);
	sge.addr -= page;
	bad |= expect("unknown advice 7", advise(ctx, pd, 7, IB_UVERBS_ADVISE_MR_FLAG_FLUSH, &sge),
		      -EOPNOTSUPP);
	ibv_dereg_mr(mr);
	munmap(p, PAGES * page);

	mr = fresh_region(pd, access, &p, &sge);
	bad |= expect("PREFETCH, asynchronous", advise(ctx, pd, IB_UVERBS_ADVISE_MR_ADVICE_PREFETCH, 0, &sge), 0);
	for (i = 0; i < 500 && (n = resident(p)) != PAGES; i++)
		usleep(10000);
	bad |= expect("  pages resident within 5 s", n, PAGES);
	ibv_dereg_mr(mr);
	munmap(p, PAGES * page);

	if (argc < 3 || strcmp(argv[2], "rxe")) {
		pinned = fresh_region(pd, IBV_ACCESS_LOCAL_WRITE, &p, &sge);
		bad |= expect("region not on demand", advise(ctx, pd, IB_UVERBS_ADVISE_MR_ADVICE_PREFETCH_WRITE,
							     IB_UVERBS_ADVISE_MR_FLAG_FLUSH, &sge), -EINVAL);
		ibv_dereg_mr(pinned);
		munmap(p, PAGES * page);
	}
	ibv_dealloc_pd(pd);
	ibv_close_device(ctx);
	ibv_free_device_list(list);
	return bad;
}
